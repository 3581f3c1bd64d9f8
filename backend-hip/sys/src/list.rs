//! The one list of every HIP function devipc calls: [`for_each_hip_fn!`](crate::for_each_hip_fn).
//!
//! The list is a callback macro so that every consumer is generated from the same
//! prototypes:
//! - [`table`](crate::table) builds [`HipApi`](crate::HipApi) and its `libloading` loader
//!   from it (through `devipc_sys_common::define_fn_table!`);
//! - [`hip_api_from_module!`](crate::hip_api_from_module) fills a `HipApi` from Rust
//!   functions of the same names (the in-process emulator);
//! - [`hip_export_c_abi!`](crate::hip_export_c_abi) emits `#[unsafe(no_mangle)]` C
//!   wrappers (the emulator's cdylib, loaded like the real `libamdhip64`);
//! - `linked` (feature `link`) declares the functions in an `extern "C"` block linked
//!   against `libamdhip64` and checks each prototype against `hip-sys` at compile time.

/// Calls `$callback! { [extra tokens] required { ... } optional { ... } }` with the list
/// of every HIP function devipc calls, so other code can be generated from one list.
///
/// # Shape
///
/// ```text
/// for_each_hip_fn!(path::to::callback);
/// for_each_hip_fn!(path::to::callback; any extra tokens);
/// ```
/// expands to
/// ```text
/// path::to::callback! {
///     [any extra tokens]
///     required {
///         /// docs
///         fn hipInit(flags: c_uint) -> hipError_t;
///         /// docs
///         fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> hipError_t;
///         ...
///     }
///     optional {
///         ...
///     }
/// }
/// ```
/// A callback matches the entries with
/// `$( $(#[$doc:meta])* fn $name:ident( $($arg:ident: $ty:ty),* ) -> $ret:ty; )*`.
///
/// The types are written without paths (`c_int`, `hipError_t`, `hipIpcMemHandle_t`, ...)
/// and resolve where the callback's output lands: put `use devipc_hip_sys::types::*;` in
/// scope there (the callbacks this crate exports do it themselves). Feature `link` relies
/// on this to re-read the same list with `hip-sys`'s types in scope.
///
/// # Contents
///
/// `required` holds the prototypes of api-facts B.3, copied from the HIP 5.2 headers and
/// identical in ROCm 6.x and 7.x. Every one is exported as `@@hip_4.2` by the ROCm 5.2
/// library (checked with `nm -D` on Debian's `libamdhip64.so.5.2.21153`) and stays in
/// that version node in 6.x (api-facts B.1), so every runtime devipc supports (ROCm >=
/// 4.2) has them all and they are all required: a library lacking one fails to load with
/// `Error::MissingSymbol`. `optional` is for functions an older supported runtime lacks
/// (`hipGetProcAddress`, ROCm 6.2+); those become `Option` fields.
#[macro_export]
macro_rules! for_each_hip_fn {
    ($($callback:ident)::+ $(; $($extra:tt)*)?) => {
        $($callback)::+! {
            [$($($extra)*)?]
            required {
                /// `hipError_t hipInit(unsigned int flags)`: initialise the runtime.
                /// `flags != 0` gives `hipErrorInvalidValue`; ROCm 5.2 without a GPU gives
                /// `hipErrorInvalidDevice`.
                fn hipInit(flags: c_uint) -> hipError_t;
                /// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)`: writes
                /// `HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch`; works
                /// without a device. NULL gives `hipErrorInvalidValue`.
                fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> hipError_t;
                /// `hipError_t hipDriverGetVersion(int* driverVersion)`: same encoding as
                /// `hipRuntimeGetVersion`.
                fn hipDriverGetVersion(driver_version: *mut c_int) -> hipError_t;
                /// `hipError_t hipGetDeviceCount(int* count)`: without a device, writes 0
                /// and returns `hipErrorNoDevice`.
                fn hipGetDeviceCount(count: *mut c_int) -> hipError_t;
                /// `hipError_t hipSetDevice(int deviceId)`: binds the calling thread to a
                /// device.
                fn hipSetDevice(device_id: c_int) -> hipError_t;
                /// `hipError_t hipGetDevice(int* deviceId)`: the calling thread's device.
                fn hipGetDevice(device_id: *mut c_int) -> hipError_t;
                /// `hipError_t hipDeviceSynchronize(void)`: waits for all work on the
                /// current device.
                fn hipDeviceSynchronize() -> hipError_t;
                /// `hipError_t hipMalloc(void** ptr, size_t size)`: device memory that can
                /// be exported with `hipIpcGetMemHandle`.
                fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t;
                /// `hipError_t hipFree(void* ptr)`.
                fn hipFree(ptr: *mut c_void) -> hipError_t;
                /// `hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes,
                /// hipMemcpyKind kind)`.
                fn hipMemcpy(
                    dst: *mut c_void,
                    src: *const c_void,
                    size_bytes: usize,
                    kind: hipMemcpyKind
                ) -> hipError_t;
                /// `hipError_t hipMemset(void* dst, int value, size_t sizeBytes)`.
                fn hipMemset(dst: *mut c_void, value: c_int, size_bytes: usize) -> hipError_t;
                /// `hipError_t hipMemGetAddressRange(hipDeviceptr_t* pbase, size_t* psize,
                /// hipDeviceptr_t dptr)`: base and size of the allocation holding `dptr`.
                /// The first parameter is `hipDeviceptr_t*` (`void**`). Neither out pointer
                /// may be NULL (unlike CUDA); an unknown pointer gives `hipErrorNotFound`
                /// (api-facts B.3).
                fn hipMemGetAddressRange(
                    pbase: *mut hipDeviceptr_t,
                    psize: *mut usize,
                    dptr: hipDeviceptr_t
                ) -> hipError_t;
                /// `hipError_t hipStreamCreate(hipStream_t* stream)`.
                fn hipStreamCreate(stream: *mut hipStream_t) -> hipError_t;
                /// `hipError_t hipStreamDestroy(hipStream_t stream)`.
                fn hipStreamDestroy(stream: hipStream_t) -> hipError_t;
                /// `hipError_t hipStreamSynchronize(hipStream_t stream)`.
                fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t;
                /// `hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr)`:
                /// the handle names the whole allocation even for an interior pointer
                /// (api-facts C.1).
                fn hipIpcGetMemHandle(handle: *mut hipIpcMemHandle_t, dev_ptr: *mut c_void)
                    -> hipError_t;
                /// `hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle,
                /// unsigned int flags)`: takes the 64-byte handle **by value**; writes the
                /// allocation's base. `flags` must equal the runtime's
                /// `hipIpcMemLazyEnablePeerAccess`, see
                /// [`ipc_mem_lazy_enable_peer_access`](crate::consts::ipc_mem_lazy_enable_peer_access).
                fn hipIpcOpenMemHandle(
                    dev_ptr: *mut *mut c_void,
                    handle: hipIpcMemHandle_t,
                    flags: c_uint
                ) -> hipError_t;
                /// `hipError_t hipIpcCloseMemHandle(void* devPtr)`.
                fn hipIpcCloseMemHandle(dev_ptr: *mut c_void) -> hipError_t;
                /// `hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags)`:
                /// IPC events need `hipEventInterprocess | hipEventDisableTiming`.
                fn hipEventCreateWithFlags(event: *mut hipEvent_t, flags: c_uint) -> hipError_t;
                /// `hipError_t hipEventDestroy(hipEvent_t event)`.
                fn hipEventDestroy(event: hipEvent_t) -> hipError_t;
                /// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)`.
                fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t;
                /// `hipError_t hipEventSynchronize(hipEvent_t event)`: returns at once for
                /// an event never recorded.
                fn hipEventSynchronize(event: hipEvent_t) -> hipError_t;
                /// `hipError_t hipEventQuery(hipEvent_t event)`: `hipErrorNotReady` while
                /// pending.
                fn hipEventQuery(event: hipEvent_t) -> hipError_t;
                /// `hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event,
                /// unsigned int flags)`: `flags` must be 0.
                fn hipStreamWaitEvent(stream: hipStream_t, event: hipEvent_t, flags: c_uint)
                    -> hipError_t;
                /// `hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t
                /// event)`: an event without `hipEventInterprocess` gives
                /// `hipErrorInvalidConfiguration`.
                fn hipIpcGetEventHandle(handle: *mut hipIpcEventHandle_t, event: hipEvent_t)
                    -> hipError_t;
                /// `hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t
                /// handle)`: handle by value; in the exporting process gives
                /// `hipErrorInvalidContext`.
                fn hipIpcOpenEventHandle(event: *mut hipEvent_t, handle: hipIpcEventHandle_t)
                    -> hipError_t;
                /// `hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int
                /// peerDeviceId)`: writes 0 when `deviceId == peerDeviceId`.
                fn hipDeviceCanAccessPeer(
                    can_access_peer: *mut c_int,
                    device_id: c_int,
                    peer_device_id: c_int
                ) -> hipError_t;
                /// `hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int
                /// flags)`: `flags` must be 0; already enabled gives
                /// `hipErrorPeerAccessAlreadyEnabled`.
                fn hipDeviceEnablePeerAccess(peer_device_id: c_int, flags: c_uint) -> hipError_t;
                /// `const char* hipGetErrorName(hipError_t hip_error)`: static string,
                /// `hipErrorUnknown` for codes the runtime does not know.
                fn hipGetErrorName(hip_error: hipError_t) -> *const c_char;
                /// `const char* hipGetErrorString(hipError_t hipError)`: static string (ROCm
                /// 5.2 returns the name again).
                fn hipGetErrorString(hip_error: hipError_t) -> *const c_char;
                /// `hipError_t hipEventCreate(hipEvent_t* event)`: an event with flags 0
                /// (timing enabled).
                fn hipEventCreate(event: *mut hipEvent_t) -> hipError_t;
                /// `hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t
                /// stop)`: milliseconds between two completed records; an event never
                /// recorded or created with `hipEventDisableTiming` gives
                /// `hipErrorInvalidHandle`, one still pending `hipErrorNotReady`.
                fn hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t)
                    -> hipError_t;
                /// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes,
                /// hipMemcpyKind kind, hipStream_t stream)`: ordered on `stream`; host
                /// buffers must stay valid until the stream reaches the copy.
                fn hipMemcpyAsync(
                    dst: *mut c_void,
                    src: *const c_void,
                    size_bytes: usize,
                    kind: hipMemcpyKind,
                    stream: hipStream_t
                ) -> hipError_t;
                /// `hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes,
                /// const void* ptr)`: memory type, device and addresses of `ptr`. The
                /// memory-type values and the answer for unknown pointers changed in ROCm
                /// 6.0 (see [`hipPointerAttribute_t`](crate::types::hipPointerAttribute_t)).
                fn hipPointerGetAttributes(
                    attributes: *mut hipPointerAttribute_t,
                    ptr: *const c_void
                ) -> hipError_t;
                /// `hipError_t hipCtxCreate(hipCtx_t* ctx, unsigned int flags, hipDevice_t
                /// device)` (deprecated context API): the device's primary context, pushed
                /// on the calling thread's context stack; a device out of range gives
                /// `hipErrorInvalidValue` (CLR `hip_context.cpp`).
                fn hipCtxCreate(ctx: *mut hipCtx_t, flags: c_uint, device: hipDevice_t)
                    -> hipError_t;
                /// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`:
                /// page-locked host memory visible to the devices.
                fn hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint)
                    -> hipError_t;
                /// `hipError_t hipHostFree(void* ptr)`: frees `hipHostMalloc` memory (NULL is
                /// a no-op).
                fn hipHostFree(ptr: *mut c_void) -> hipError_t;
            }
            optional {
                /// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int
                /// hipVersion, uint64_t flags, hipDriverProcAddressQueryResult*
                /// symbolStatus)`: the runtime's function of that name. First shipped in
                /// ROCm 6.2 (clr CHANGELOG "HIP 6.2": "Added new HIP APIs
                /// `hipGetProcAddress`"), so optional: ROCm 5.2 lacks the symbol.
                fn hipGetProcAddress(
                    symbol: *const c_char,
                    pfn: *mut *mut c_void,
                    hip_version: c_int,
                    flags: u64,
                    symbol_status: *mut hipDriverProcAddressQueryResult
                ) -> hipError_t;
            }
        }
    };
}
