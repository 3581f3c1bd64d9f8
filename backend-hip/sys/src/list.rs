//! The one list of the HIP functions devipc uses: [`for_each_hip_fn!`](crate::for_each_hip_fn).
//! Most are called by devipc; twelve are not called by devipc yet and are there for
//! emulator fidelity (see the macro's "Not called by devipc yet").
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
/// of the HIP functions devipc uses, so other code can be generated from one list.
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
/// (`hipGetProcAddress`, ROCm 6.2+) and for the VMM family and `hipPointerGetAttribute`
/// (issue 15: `@@hip_5.1` / `@@hip_5.0` in ROCm 5.2, so newer than the 4.2 baseline, and
/// a runtime or emulator may lack them), and `hipDeviceGetUuid` (issue 16, `@@hip_5.1`);
/// those become `Option` fields. `hipDeviceGetPCIBusId` and `hipDeviceGetByPCIBusId`
/// (issue 16) are `@@hip_4.2` in ROCm 5.2 and therefore required. The four functions
/// appended last (`hipDeviceGet`, `hipDeviceGetAttribute`, `hipMemcpyHtoD`,
/// `hipMemcpyDtoH`, issue 25) are `@@hip_4.2` too but optional: devipc does not need them,
/// the emulator exports them because AMD's VMM tests call them first. `hipMemcpyBatchAsync`
/// (issue 25) comes last: new in HIP 7.1. The VMM family is the
/// optional entries named `hipMem` followed by a capital letter (`hipMemCreate`, ...;
/// [`VMM_FUNCTIONS`](crate::consts::VMM_FUNCTIONS) is derived from that), which leaves out
/// the copies (`hipMemcpy*`): an optional `hipMem<Capital>*` function outside the family
/// needs that constant changed too.
///
/// # Not called by devipc yet
///
/// Twelve entries are called by no devipc crate today, only by the emulator (which
/// implements every entry) and its tests: `hipDeviceSynchronize`, `hipMemset`,
/// `hipEventCreate`, `hipEventElapsedTime`, `hipCtxCreate`, `hipHostMalloc`,
/// `hipHostFree` (required) and `hipGetProcAddress`, `hipDeviceGet`,
/// `hipDeviceGetAttribute`, `hipMemcpyHtoD`, `hipMemcpyDtoH` (optional). They stay for
/// emulator fidelity (AMD's tests and frameworks call them). The data plane (issue 25)
/// calls the stream functions and `hipMemcpyAsync` (backend-hip `stream.rs`, the batch
/// fallback in `result/batch.rs`). Each one's docs end with "Not called by devipc yet". They are
/// not moved into a group of their own: the order of the list is the order of the
/// generated table's fields and of `REQUIRED_SYMBOLS` / `OPTIONAL_SYMBOLS`.
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
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
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
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
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
                ///
                /// Called by the data plane (backend-hip `stream.rs`).
                fn hipStreamCreate(stream: *mut hipStream_t) -> hipError_t;
                /// `hipError_t hipStreamDestroy(hipStream_t stream)`.
                ///
                /// Called by the data plane (backend-hip `stream.rs`).
                fn hipStreamDestroy(stream: hipStream_t) -> hipError_t;
                /// `hipError_t hipStreamSynchronize(hipStream_t stream)`.
                ///
                /// Called by the data plane (backend-hip `stream.rs`).
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
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipEventCreate(event: *mut hipEvent_t) -> hipError_t;
                /// `hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t
                /// stop)`: milliseconds between two completed records; an event never
                /// recorded or created with `hipEventDisableTiming` gives
                /// `hipErrorInvalidHandle`, one still pending `hipErrorNotReady`.
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t)
                    -> hipError_t;
                /// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes,
                /// hipMemcpyKind kind, hipStream_t stream)`: ordered on `stream`; host
                /// buffers must stay valid until the stream reaches the copy.
                ///
                /// Called by the data plane (backend-hip `stream.rs`).
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
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipCtxCreate(ctx: *mut hipCtx_t, flags: c_uint, device: hipDevice_t)
                    -> hipError_t;
                /// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`:
                /// page-locked host memory visible to the devices.
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint)
                    -> hipError_t;
                /// `hipError_t hipHostFree(void* ptr)`: frees `hipHostMalloc` memory (NULL is
                /// a no-op).
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipHostFree(ptr: *mut c_void) -> hipError_t;
                /// `hipError_t hipDeviceGetPCIBusId(char* pciBusId, int len, int device)`:
                /// writes `"%04x:%02x:%02x.0"` (domain, bus, device; the function is always
                /// printed as 0) with `snprintf(pciBusId, len, ...)`. CLR
                /// (`hip_device_runtime.cpp`): no device at all gives `hipErrorNoDevice`, an
                /// ordinal outside this process's visible devices `hipErrorInvalidDevice`,
                /// then a NULL `pciBusId` `hipErrorInvalidValue`; a `len` of 12 or less
                /// writes what fits and returns `hipErrorInvalidValue` (13 bytes hold the
                /// id and its NUL). Issue 16: the bus id names the physical device whatever
                /// the visibility masks.
                fn hipDeviceGetPCIBusId(pci_bus_id: *mut c_char, len: c_int, device: c_int)
                    -> hipError_t;
                /// `hipError_t hipDeviceGetByPCIBusId(int* device, const char* pciBusId)`:
                /// this process's ordinal of the device at that bus id. CLR reads the text
                /// with `sscanf("%04x:%02x:%02x")` (domain, bus, device; the function and
                /// anything after are ignored) and compares with every visible device; NULL
                /// arguments, text that does not scan and a bus id of no visible device
                /// (hidden by a mask, or absent) all give `hipErrorInvalidValue`.
                fn hipDeviceGetByPCIBusId(device: *mut c_int, pci_bus_id: *const c_char)
                    -> hipError_t;
            }
            optional {
                /// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int
                /// hipVersion, uint64_t flags, hipDriverProcAddressQueryResult*
                /// symbolStatus)`: the runtime's function of that name. First shipped in
                /// ROCm 6.2 (clr CHANGELOG "HIP 6.2": "Added new HIP APIs
                /// `hipGetProcAddress`"), so optional: ROCm 5.2 lacks the symbol.
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipGetProcAddress(
                    symbol: *const c_char,
                    pfn: *mut *mut c_void,
                    hip_version: c_int,
                    flags: u64,
                    symbol_status: *mut hipDriverProcAddressQueryResult
                ) -> hipError_t;
                /// `hipError_t hipMemGetAllocationGranularity(size_t* granularity, const
                /// hipMemAllocationProp* prop, hipMemAllocationGranularity_flags option)`:
                /// the size and address granularity of VMM allocations with `prop`
                /// (Pinned, Device-located). VMM functions are `@@hip_5.1` in ROCm 5.2's
                /// library; optional because devipc supports runtimes back to 4.2 and the
                /// emulator may hide them. See the layout rule on
                /// [`hipMemAllocationProp`](crate::types::hipMemAllocationProp).
                fn hipMemGetAllocationGranularity(
                    granularity: *mut usize,
                    prop: *const hipMemAllocationProp,
                    option: hipMemAllocationGranularity_flags
                ) -> hipError_t;
                /// `hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t
                /// size, const hipMemAllocationProp* prop, unsigned long long flags)`: a
                /// physical allocation; `flags` must be 0, `size` a multiple of the
                /// granularity, `prop` Pinned + Device, `requestedHandleType` None or
                /// PosixFileDescriptor (else `hipErrorNotSupported`; api-facts B.4).
                fn hipMemCreate(
                    handle: *mut hipMemGenericAllocationHandle_t,
                    size: usize,
                    prop: *const hipMemAllocationProp,
                    flags: c_ulonglong
                ) -> hipError_t;
                /// `hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)`: drops
                /// the handle; the memory lives on while mapped.
                fn hipMemRelease(handle: hipMemGenericAllocationHandle_t) -> hipError_t;
                /// `hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t
                /// alignment, void* addr, unsigned long long flags)`: reserves a virtual
                /// address range (`addr` is a hint; `flags` must be 0).
                fn hipMemAddressReserve(
                    ptr: *mut *mut c_void,
                    size: usize,
                    alignment: usize,
                    addr: *mut c_void,
                    flags: c_ulonglong
                ) -> hipError_t;
                /// `hipError_t hipMemAddressFree(void* devPtr, size_t size)`: frees a
                /// reservation.
                fn hipMemAddressFree(dev_ptr: *mut c_void, size: usize) -> hipError_t;
                /// `hipError_t hipMemMap(void* ptr, size_t size, size_t offset,
                /// hipMemGenericAllocationHandle_t handle, unsigned long long flags)`: maps
                /// a physical allocation into a reservation; `offset` and `flags` must be
                /// 0. The range is not accessible until `hipMemSetAccess`.
                fn hipMemMap(
                    ptr: *mut c_void,
                    size: usize,
                    offset: usize,
                    handle: hipMemGenericAllocationHandle_t,
                    flags: c_ulonglong
                ) -> hipError_t;
                /// `hipError_t hipMemUnmap(void* ptr, size_t size)`: unmaps whole mappings.
                fn hipMemUnmap(ptr: *mut c_void, size: usize) -> hipError_t;
                /// `hipError_t hipMemSetAccess(void* ptr, size_t size, const
                /// hipMemAccessDesc* desc, size_t count)`: grants devices access to whole
                /// mappings.
                fn hipMemSetAccess(
                    ptr: *mut c_void,
                    size: usize,
                    desc: *const hipMemAccessDesc,
                    count: usize
                ) -> hipError_t;
                /// `hipError_t hipMemGetAccess(unsigned long long* flags, const
                /// hipMemLocation* location, void* ptr)`: the access `location` has at
                /// `ptr`.
                fn hipMemGetAccess(
                    flags: *mut c_ulonglong,
                    location: *const hipMemLocation,
                    ptr: *mut c_void
                ) -> hipError_t;
                /// `hipError_t hipMemExportToShareableHandle(void* shareableHandle,
                /// hipMemGenericAllocationHandle_t handle, hipMemAllocationHandleType
                /// handleType, unsigned long long flags)`: for
                /// `hipMemHandleTypePosixFileDescriptor`, writes a new `int` fd (a dma-buf)
                /// to `*(int*)shareableHandle`. `handleType` must equal the allocation's
                /// `requestedHandleType` and `flags` 0 (`hipErrorInvalidValue`); before
                /// ROCm 6.2 the call validates and then returns `hipErrorNotSupported`
                /// (api-facts B.4).
                fn hipMemExportToShareableHandle(
                    shareable_handle: *mut c_void,
                    handle: hipMemGenericAllocationHandle_t,
                    handle_type: hipMemAllocationHandleType,
                    flags: c_ulonglong
                ) -> hipError_t;
                /// `hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t*
                /// handle, void* osHandle, hipMemAllocationHandleType shHandleType)`: a
                /// handle to memory another process exported.
                ///
                /// **ABI switch in ROCm 7.1.0** (field notes 2026-11; MoRI
                /// `hip_compat.hpp`, rocm-systems PR #759): the prototype is the same, but
                /// what the pointer-sized `osHandle` carries is not. ROCm 6.2 .. 7.0.x
                /// read `*(int*)osHandle`: pass a **pointer to** the `int` fd. ROCm 7.1.0
                /// and later read `(int)(uintptr_t)osHandle`: pass the **fd value** cast
                /// to `void*` (CUDA's convention). Choose with
                /// [`import_takes_fd_by_value`](crate::consts::import_takes_fd_by_value)
                /// and the runtime version; the wrong one fails (`hipErrorInvalidValue`)
                /// or, on 7.0, dereferences a small integer. The fd is process-local: it
                /// reaches the importer through `SCM_RIGHTS` or `pidfd_getfd`.
                fn hipMemImportFromShareableHandle(
                    handle: *mut hipMemGenericAllocationHandle_t,
                    os_handle: *mut c_void,
                    sh_handle_type: hipMemAllocationHandleType
                ) -> hipError_t;
                /// `hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t*
                /// handle, void* addr)`: the allocation mapped at `addr`. CLR
                /// (`hip_vm.cpp`) takes NO reference, unlike CUDA's retain: do not
                /// `hipMemRelease` the result, which would drop the creator's reference.
                /// Memory not mapped with `hipMemMap` (e.g. `hipMalloc`) gives
                /// `hipErrorInvalidValue` there; some ROCm 7.x releases are reported to
                /// crash instead (RCCL asks `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE`
                /// first), so ask about legacy memory before calling it.
                fn hipMemRetainAllocationHandle(
                    handle: *mut hipMemGenericAllocationHandle_t,
                    addr: *mut c_void
                ) -> hipError_t;
                /// `hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp*
                /// prop, hipMemGenericAllocationHandle_t handle)`: the allocation's
                /// properties (in the runtime's layout, see
                /// [`hipMemAllocationProp`](crate::types::hipMemAllocationProp)).
                fn hipMemGetAllocationPropertiesFromHandle(
                    prop: *mut hipMemAllocationProp,
                    handle: hipMemGenericAllocationHandle_t
                ) -> hipError_t;
                /// `hipError_t hipPointerGetAttribute(void* data, hipPointer_attribute
                /// attribute, hipDeviceptr_t ptr)`: one attribute of `ptr`, e.g.
                /// `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE` (an `int`). Exported
                /// as `@@hip_5.0` by ROCm 5.2.
                fn hipPointerGetAttribute(
                    data: *mut c_void,
                    attribute: hipPointer_attribute,
                    ptr: hipDeviceptr_t
                ) -> hipError_t;
                /// `hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device)`: the 16
                /// bytes of [`hipUUID`](crate::types::hipUUID) of a visible device. CLR
                /// (`hip_device.cpp`) checks the ordinal first (`hipErrorInvalidDevice`),
                /// then `uuid` (NULL: `hipErrorInvalidValue`). Exported as `@@hip_5.1` by
                /// ROCm 5.2, so optional like the VMM family.
                fn hipDeviceGetUuid(uuid: *mut hipUUID, device: hipDevice_t) -> hipError_t;
                /// `hipError_t hipDeviceGet(hipDevice_t* device, int ordinal)`: the device
                /// handle of an ordinal, which on HIP is the ordinal itself. CLR
                /// (`hip_device.cpp`, `ihipDeviceGet`): NULL `device` gives
                /// `hipErrorInvalidValue`, an ordinal outside this process's visible devices
                /// `hipErrorInvalidDevice`. Exported as `@@hip_4.2` by every runtime devipc
                /// supports; optional only because devipc does not need it (AMD's VMM tests
                /// call it first).
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipDeviceGet(device: *mut hipDevice_t, ordinal: c_int) -> hipError_t;
                /// `hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int
                /// deviceId)`: one integer attribute of a device, e.g.
                /// [`hipDeviceAttributeVirtualMemoryManagementSupported`](crate::consts::hipDeviceAttributeVirtualMemoryManagementSupported),
                /// which AMD's VMM tests query before any `hipMem*` call (ROCm 5.3+; 5.2
                /// answers `hipErrorInvalidValue`, its enum lacks it). CLR
                /// (`hip_device_runtime.cpp`): NULL `pi` gives `hipErrorInvalidValue`, a
                /// device outside this process's visible devices `hipErrorInvalidDevice`,
                /// an attribute its switch lacks `hipErrorInvalidValue`.
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipDeviceGetAttribute(pi: *mut c_int, attr: hipDeviceAttribute_t, device_id: c_int)
                    -> hipError_t;
                /// `hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t
                /// sizeBytes)`: the driver-style host-to-device copy, in CLR
                /// (`hip_memory.cpp`) `hipMemcpy(dst, src, sizeBytes,
                /// hipMemcpyHostToDevice)` on the current device's null stream. `src` is
                /// `void*` in the HIP 5.x headers (`const void*` later: the same C ABI).
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipMemcpyHtoD(dst: hipDeviceptr_t, src: *mut c_void, size_bytes: usize)
                    -> hipError_t;
                /// `hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t
                /// sizeBytes)`: the driver-style device-to-host copy, in CLR
                /// (`hip_memory.cpp`) `hipMemcpy(dst, src, sizeBytes,
                /// hipMemcpyDeviceToHost)` on the current device's null stream.
                ///
                /// Not called by devipc yet (emulator fidelity, the data plane).
                fn hipMemcpyDtoH(dst: *mut c_void, src: hipDeviceptr_t, size_bytes: usize)
                    -> hipError_t;
                /// `hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes,
                /// size_t count, hipMemcpyAttributes* attrs, size_t* attrsIdxs, size_t
                /// numAttrs, size_t* failIdx, hipStream_t stream)`: `count` copies
                /// `srcs[i] -> dsts[i]` of `sizes[i]` bytes, enqueued on `stream` in order.
                /// New in HIP 7.1 (CHANGELOG), so optional. CLR (`hip_memory.cpp`): an invalid
                /// stream is `hipErrorInvalidHandle` (the null stream is accepted); NULL
                /// `dsts` / `srcs` / `sizes` / `failIdx` or `count == 0` is
                /// `hipErrorInvalidValue`; `numAttrs > 0` is `hipErrorNotSupported`
                /// (`attrs` / `attrsIdxs` are not read otherwise); then `*failIdx =
                /// SIZE_MAX` and each descriptor is enqueued as a `hipMemcpyDefault` async
                /// copy until one fails (a zero size fails too): `*failIdx` is its index, and
                /// the copies before it stay enqueued. Called by the result layer's batch
                /// (issue 25), which loops over `hipMemcpyAsync` where it is missing.
                fn hipMemcpyBatchAsync(
                    dsts: *mut *mut c_void,
                    srcs: *mut *mut c_void,
                    sizes: *mut usize,
                    count: usize,
                    attrs: *mut hipMemcpyAttributes,
                    attrs_idxs: *mut usize,
                    num_attrs: usize,
                    fail_idx: *mut usize,
                    stream: hipStream_t
                ) -> hipError_t;
            }
        }
    };
}
