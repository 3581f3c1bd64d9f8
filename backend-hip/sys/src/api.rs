//! The HIP function table: one list of every HIP function devipc calls, and the
//! [`HipApi`] struct of function pointers generated from it.
//!
//! The list lives in the [`for_each_hip_fn!`](crate::for_each_hip_fn) callback macro so
//! that every consumer is generated from the same prototypes:
//! - this crate builds [`HipApi`] and its `libloading` loader from it;
//! - [`hip_api_from_module!`](crate::hip_api_from_module) fills a [`HipApi`] from Rust
//!   functions of the same names (the in-process emulator);
//! - [`hip_export_c_abi!`](crate::hip_export_c_abi) emits `#[unsafe(no_mangle)]` C
//!   wrappers (the emulator's cdylib, loaded like the real `libamdhip64`);
//! - feature `link` declares the functions in an `extern "C"` block linked against
//!   `libamdhip64` and checks each prototype against `hip-sys` at compile time.
//!
//! The code above (the `devipc-hip` backend) sees one [`HipApi`] type and does not know
//! which way it was filled; [`HipApi::source`] says.

use std::fmt;
use std::path::{Path, PathBuf};

use devipc_core::{BackendKind, Error, LibrarySource, LoadAttempt, Result};
use libloading::Library;

use crate::discovery::{self, Candidate};
#[allow(unused_imports)] // every name is used by the generated code of at least one cfg
use crate::types::*;

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

/// Builds a [`HipApi`] whose functions are the Rust functions of the same names in a
/// module, with [`LibrarySource::Emulated`]: `hip_api_from_module!(some::path)` takes
/// `some::path::hipInit`, `some::path::hipRuntimeGetVersion`, ... for every function in
/// [`for_each_hip_fn!`](crate::for_each_hip_fn) (optional ones too, wrapped in `Some`).
///
/// Each function must have exactly the table's signature, e.g.
/// `pub unsafe extern "C" fn hipInit(flags: c_uint) -> hipError_t` with the types of
/// [`devipc_hip_sys::types`](crate::types); a mismatch does not compile. Plain Rust
/// functions (no `#[no_mangle]`) keep the vendor names out of the process's dynamic
/// symbol table.
///
/// The expansion calls an `unsafe` constructor, so it must sit in an `unsafe` block whose
/// `SAFETY:` comment states that the functions implement the HIP C API contract the
/// table's users rely on (pointer out-parameters written on success, and so on):
///
/// ```text
/// // SAFETY: devipc_emulator::hip implements the HIP runtime C API over host memory.
/// let api = unsafe { devipc_hip_sys::hip_api_from_module!(devipc_emulator::hip) };
/// assert!(api.source().is_emulated());
/// ```
#[macro_export]
macro_rules! hip_api_from_module {
    ($module:path) => {
        $crate::for_each_hip_fn!(
            $crate::__hip_api_from_fns;
            $crate::__private::LibrarySource::Emulated; $module
        )
    };
}

/// Emits, in the calling module, one `#[unsafe(no_mangle)] pub unsafe extern "C" fn` per
/// function of [`for_each_hip_fn!`](crate::for_each_hip_fn), with the C name and
/// signature, forwarding to the Rust function of the same name in the given module:
/// `hip_export_c_abi!(devipc_emulator::hip);` gives
///
/// ```text
/// #[unsafe(no_mangle)]
/// pub unsafe extern "C" fn hipInit(flags: c_uint) -> hipError_t {
///     unsafe { devipc_emulator::hip::hipInit(flags) }
/// }
/// // ... and so on for every function
/// ```
///
/// For a `cdylib` that stands in for `libamdhip64.so` (point `DEVIPC_HIP_LIB` at it). The
/// wrappers sit in an anonymous `const` block, so they add no names to the module; they
/// are exported all the same. Never expand this in a process that also links or loads
/// the real runtime globally: the names would interpose.
#[macro_export]
macro_rules! hip_export_c_abi {
    ($module:path) => {
        $crate::for_each_hip_fn!($crate::__hip_export_c_abi; $module);
    };
}

/// Callback of [`hip_api_from_module!`] and `HipApi::linked`: `[source; module]`.
#[doc(hidden)]
#[macro_export]
macro_rules! __hip_api_from_fns {
    (
        [$source:expr; $module:path]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {{
        use $module as __hip_fns;
        $crate::HipApi::__from_fns(
            $source,
            $( __hip_fns::$rname, )*
            $( ::core::option::Option::Some(__hip_fns::$oname), )*
        )
    }};
}

/// Callback of [`hip_export_c_abi!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __hip_export_c_abi {
    (
        [$module:path]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::types::*;
            use $module as __hip_impl;
            $(
                $(#[$rdoc])*
                #[allow(non_snake_case, unused_unsafe, clippy::missing_safety_doc)]
                #[unsafe(no_mangle)]
                pub unsafe extern "C" fn $rname($($rarg: $rty),*) -> $rret {
                    // SAFETY: the caller upholds the C function's contract, which is the
                    // contract of the Rust function it forwards to.
                    unsafe { __hip_impl::$rname($($rarg),*) }
                }
            )*
            $(
                $(#[$odoc])*
                #[allow(non_snake_case, unused_unsafe, clippy::missing_safety_doc)]
                #[unsafe(no_mangle)]
                pub unsafe extern "C" fn $oname($($oarg: $oty),*) -> $oret {
                    // SAFETY: as above.
                    unsafe { __hip_impl::$oname($($oarg),*) }
                }
            )*
        };
    };
}

/// Generates a function-table struct, its symbol lists, its `libloading` loader and its
/// positional constructor from a list shaped like `for_each_hip_fn!`'s, with the struct's
/// attributes and name as the extra tokens.
macro_rules! define_fn_table {
    (
        [$(#[$smeta:meta])* $vis:vis struct $Table:ident]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        $(#[$smeta])*
        #[allow(non_snake_case)]
        $vis struct $Table {
            source: LibrarySource,
            /// Keeps the loaded library mapped as long as the pointers below exist.
            library: Option<Library>,
            $(
                $(#[$rdoc])*
                pub $rname: unsafe extern "C" fn($($rarg: $rty),*) -> $rret,
            )*
            $(
                $(#[$odoc])*
                ///
                /// Optional: `None` when the runtime lacks it.
                pub $oname: Option<unsafe extern "C" fn($($oarg: $oty),*) -> $oret>,
            )*
        }

        #[allow(non_snake_case, dead_code)]
        impl $Table {
            /// Every required symbol, in table order. A library lacking one does not load.
            pub const REQUIRED_SYMBOLS: &'static [&'static str] = &[$(stringify!($rname)),*];
            /// Every optional symbol, in table order.
            pub const OPTIONAL_SYMBOLS: &'static [&'static str] = &[$(stringify!($oname)),*];

            /// Resolves every symbol in `library`, loaded from `path`.
            ///
            /// # Safety
            /// `library` must be a HIP runtime: each symbol found under a HIP name must be
            /// the C function of that name with the table's prototype.
            unsafe fn from_library(library: Library, path: PathBuf) -> Result<Self> {
                $(
                    // SAFETY: the requested type is the symbol's C prototype (HIP headers,
                    // api-facts B.3); the caller guarantees the library is a HIP runtime.
                    let $rname = match unsafe {
                        library.get::<unsafe extern "C" fn($($rty),*) -> $rret>(
                            concat!(stringify!($rname), "\0").as_bytes(),
                        )
                    } {
                        Ok(symbol) => *symbol,
                        Err(_) => {
                            return Err(Error::MissingSymbol {
                                library: path,
                                symbol: stringify!($rname),
                            });
                        }
                    };
                )*
                $(
                    // SAFETY: as for the required symbols above.
                    let $oname = unsafe {
                        library.get::<unsafe extern "C" fn($($oty),*) -> $oret>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                    }
                    .ok()
                    .map(|symbol| *symbol);
                )*
                Ok($Table {
                    source: LibrarySource::Loaded(path),
                    library: Some(library),
                    $($rname,)*
                    $($oname,)*
                })
            }

            /// Builds a table from functions given in table order; used by
            /// `hip_api_from_module!` and `HipApi::linked`.
            ///
            /// # Safety
            /// Each function must implement the HIP C function of its parameter's name.
            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn __from_fns(
                source: LibrarySource,
                $( $rname: unsafe extern "C" fn($($rty),*) -> $rret, )*
                $( $oname: Option<unsafe extern "C" fn($($oty),*) -> $oret>, )*
            ) -> Self {
                $Table {
                    source,
                    library: None,
                    $($rname,)*
                    $($oname,)*
                }
            }
        }
    };
}

for_each_hip_fn!(
    define_fn_table;
    /// The HIP runtime functions devipc calls, as one table of C function pointers.
    ///
    /// Filled one of three ways, always this one type (see [`source`](Self::source)):
    /// - [`HipApi::discover`] / [`HipApi::load`]: `libloading` from `libamdhip64.so`;
    /// - `HipApi::linked` (feature `link`): linked at build time;
    /// - [`hip_api_from_module!`](crate::hip_api_from_module): Rust functions of an
    ///   in-process emulator.
    ///
    /// Every field is the vendor function of the same name with its exact C prototype
    /// (api-facts B.3). Calling one is `unsafe`: the caller upholds that function's C
    /// contract. A loaded table owns its [`Library`]; a pointer copied out of it is valid
    /// only while the table is alive.
    ///
    /// `HipApi` is `Send + Sync`: it holds only function pointers, the `Library` handle
    /// (itself `Send + Sync`) and the source. The HIP runtime API is thread-safe; it
    /// keeps per-thread state (the current device) that callers must manage, but nothing
    /// in the table is tied to the thread that loaded it.
    pub struct HipApi
);

// `HipApi` is `Send + Sync` without an `unsafe impl`: every field is a function pointer,
// `Option<Library>` or `LibrarySource`, all `Send + Sync`. That is also sound, not just
// accepted by the compiler: the HIP runtime API may be called from any thread, and nothing
// in the table is tied to the thread that loaded it. Keep it that way; this fails to
// compile if a field ever stops being `Send + Sync`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HipApi>();
};

impl HipApi {
    /// Where the functions come from: a loaded library's path, [`LibrarySource::Linked`]
    /// or [`LibrarySource::Emulated`].
    pub fn source(&self) -> &LibrarySource {
        &self.source
    }

    /// Loads the HIP runtime from one file (a path with a directory) or soname (searched
    /// by the dynamic loader).
    ///
    /// Fails with [`Error::LibraryNotFound`] (one attempt, with the loader's message) when
    /// the loader cannot open it, and with [`Error::MissingSymbol`] when it opens but is
    /// not a HIP runtime or lacks a [required](Self::REQUIRED_SYMBOLS) function.
    ///
    /// # Safety
    /// Loading runs the library's initialisers, and every function found under a HIP name
    /// is trusted to be that HIP function: `path` must be a HIP runtime (or a faithful
    /// emulation), not an arbitrary library that happens to export these names.
    pub unsafe fn load(path: impl AsRef<Path>) -> Result<Self> {
        let candidate = Candidate {
            path: path.as_ref().to_owned(),
            origin: "HipApi::load",
        };
        // SAFETY: forwarded to our caller.
        unsafe { Self::load_first(std::slice::from_ref(&candidate)) }
    }

    /// Tries the candidates in order and returns the table of the first one the dynamic
    /// loader opens.
    ///
    /// The first library that opens decides: if it lacks a required function the result is
    /// [`Error::MissingSymbol`] and later candidates are not tried. When none opens, the
    /// result is [`Error::LibraryNotFound`] listing every candidate with its loader error.
    ///
    /// # Safety
    /// As for [`HipApi::load`], for every candidate.
    pub unsafe fn load_first(candidates: &[Candidate]) -> Result<Self> {
        let mut tried = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            // SAFETY: the caller vouches that each candidate is a HIP runtime, so its
            // initialisers are the vendor's.
            match unsafe { Library::new(&candidate.path) } {
                Ok(library) => {
                    // SAFETY: as above; the library is a HIP runtime.
                    return unsafe { Self::from_library(library, candidate.path.clone()) };
                }
                Err(e) => tried.push(LoadAttempt {
                    path: candidate.path.clone(),
                    origin: candidate.origin.to_owned(),
                    error: e.to_string(),
                }),
            }
        }
        Err(Error::LibraryNotFound {
            backend: BackendKind::Hip,
            tried,
        })
    }

    /// Finds and loads the HIP runtime in the order of DESIGN section 8 (see
    /// [`discovery`]): `DEVIPC_HIP_LIB` alone if set, else
    /// `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`, then `libamdhip64.so`, `.so.6`,
    /// `.so.5` on the loader path.
    ///
    /// Errors as [`HipApi::load_first`]. This function is safe on the same terms as
    /// linking against `libamdhip64`: the candidates are the vendor's install locations and
    /// sonames, or the file the user named in `DEVIPC_HIP_LIB`; both are trusted to be a
    /// HIP runtime. Use [`HipApi::load`] for a path that did not come from the user.
    pub fn discover() -> Result<Self> {
        let candidates = discovery::candidates_from_process_env();
        // SAFETY: the candidates are the vendor's library names and install directories
        // or the user's explicit `DEVIPC_HIP_LIB`; all are trusted to be HIP runtimes, as
        // the documentation above states.
        unsafe { Self::load_first(&candidates) }
    }

    /// The table of the HIP runtime linked into this binary at build time, with
    /// [`LibrarySource::Linked`].
    ///
    /// Needs feature `link`, which links against `libamdhip64` through the `hip-sys` crate
    /// and checks every prototype of the list against `hip-sys`'s declarations at compile
    /// time.
    #[cfg(feature = "link")]
    pub fn linked() -> Self {
        for_each_hip_fn!(self::linked::fill)
    }
}

impl fmt::Debug for HipApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipApi")
            .field("source", &self.source)
            .field("owns_library", &self.library.is_some())
            .finish_non_exhaustive()
    }
}

/// `extern "C"` declarations of every listed function, resolved by the linker against
/// `libamdhip64` (feature `link`).
///
/// Declared here with this crate's types rather than taken from `hip-sys`: `hip-sys`
/// returns `hipError_t` as a Rust enum generated from the HIP 5.4 headers, and a runtime
/// returning a code that enum lacks (ROCm 6.x/7.x added several) would be undefined
/// behaviour. `link_abi_check` proves these declarations match `hip-sys`'s.
#[cfg(feature = "link")]
mod linked {
    #[allow(unused_imports)]
    use crate::types::*;

    macro_rules! declare_linked {
        (
            []
            required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
            optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            // `hip-sys`'s build script also emits `-l amdhip64` and the search path
            // (`$HIP_PATH/lib`); naming the library here keeps the dependency explicit.
            // Only the required functions are declared: an optional one may be missing
            // from the linked runtime (hipGetProcAddress from ROCm 5.2), and a declared
            // but undefined symbol would fail the link. `fill` finds those at run time.
            #[link(name = "amdhip64")]
            unsafe extern "C" {
                $( pub(crate) fn $rname($($rarg: $rty),*) -> $rret; )*
            }
        };
    }

    for_each_hip_fn!(declare_linked);

    /// Callback building the linked table: the required functions from the `extern`
    /// block, the optional ones looked up in the process (where the linked libamdhip64
    /// is loaded for the life of the process), `None` when the runtime lacks them.
    macro_rules! fill {
        (
            []
            required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
            optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {{
            #![allow(non_snake_case)] // the optional functions' C names
            let this = libloading::os::unix::Library::this();
            $(
                // SAFETY: the requested type is the symbol's C prototype (HIP headers); the
                // process links the HIP runtime, which is never unloaded, so the pointer
                // outlives `this`.
                let $oname = unsafe {
                    this.get::<unsafe extern "C" fn($($oty),*) -> $oret>(
                        concat!(stringify!($oname), "\0").as_bytes(),
                    )
                }
                .ok()
                .map(|symbol| *symbol);
            )*
            // SAFETY: `linked` holds `extern "C"` declarations of the real HIP functions
            // with their exact prototypes (checked against hip-sys in `link_abi_check`),
            // resolved by the linker against libamdhip64; the optional ones were found
            // under their HIP names in the same process.
            unsafe {
                crate::HipApi::__from_fns(
                    crate::__private::LibrarySource::Linked,
                    $( self::linked::$rname, )*
                    $( $oname, )*
                )
            }
        }};
    }
    pub(crate) use fill;
}

/// Compile-time ABI check of the list against `hip-sys` (feature `link`).
///
/// The list is expanded a second time with the names it uses bound to `hip-sys`'s types
/// (`hipError_t`, `hipMemcpyKind`, `hipStream_t`, `hipEvent_t`, `hipDeviceptr_t`,
/// `hipIpcMemHandle_t`, `hipIpcEventHandle_t` from `hip_sys::hiprt`; `c_int`, `c_uint`,
/// `c_char`, `c_void` and `usize` are the same Rust types in both crates), and each
/// `hip_sys::hiprt::<name>` is assigned to a function pointer of the resulting type
/// without any cast. A different parameter count, order, pointer level, constness or type
/// does not compile. What remains is that each same-named type pair is the same C type,
/// asserted below: identical layouts for the structs and pointers, and for the two C
/// enums (a `#[repr(u32)]` Rust enum in `hip-sys`, `c_int` here) the same size and
/// alignment, which the C ABI passes and returns identically.
#[cfg(feature = "link")]
mod link_abi_check {
    #![allow(unused_imports)]
    use core::ffi::{c_char, c_int, c_uint, c_void};
    use hip_sys::hiprt::{
        hipCtx_t, hipDevice_t, hipDeviceptr_t, hipError_t, hipEvent_t, hipIpcEventHandle_t,
        hipIpcMemHandle_t, hipMemcpyKind, hipPointerAttribute_t, hipStream_t,
    };

    macro_rules! check_against_hip_sys {
        (
            []
            required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
            optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            $( const _: unsafe extern "C" fn($($rty),*) -> $rret = hip_sys::hiprt::$rname; )*
            // The optional functions are newer than hip-sys's HIP 5.4 headers
            // (hipGetProcAddress: ROCm 6.2), so hip-sys has nothing to check them against;
            // their prototypes come from the 6.2 header (clr hip_device_runtime.cpp).
        };
    }

    for_each_hip_fn!(check_against_hip_sys);

    /// Same size and alignment.
    const fn same_layout<A, B>() -> bool {
        size_of::<A>() == size_of::<B>() && align_of::<A>() == align_of::<B>()
    }

    const _: () = {
        use crate::types as ours;
        assert!(same_layout::<hipError_t, ours::hipError_t>());
        assert!(same_layout::<hipMemcpyKind, ours::hipMemcpyKind>());
        assert!(same_layout::<hipStream_t, ours::hipStream_t>());
        assert!(same_layout::<hipEvent_t, ours::hipEvent_t>());
        assert!(same_layout::<hipIpcMemHandle_t, ours::hipIpcMemHandle_t>());
        assert!(same_layout::<hipIpcEventHandle_t, ours::hipIpcEventHandle_t>());
        assert!(same_layout::<hipCtx_t, ours::hipCtx_t>());
        assert!(same_layout::<hipDevice_t, ours::hipDevice_t>());
        // hip-sys's 5.4 struct: `memoryType` (a 4-byte C enum) where ours has `type`; the
        // other fields and the size are the same (a 32-byte struct either way).
        assert!(same_layout::<
            hipPointerAttribute_t,
            ours::hipPointerAttribute_t,
        >());
        assert!(
            core::mem::offset_of!(hipPointerAttribute_t, allocationFlags)
                == core::mem::offset_of!(ours::hipPointerAttribute_t, allocationFlags)
        );
        assert!(size_of::<hipIpcMemHandle_t>() == ours::HIP_IPC_HANDLE_SIZE);
        assert!(size_of::<hipIpcEventHandle_t>() == ours::HIP_IPC_HANDLE_SIZE);
        // `hipDeviceptr_t` is `*mut c_void` in both: the same Rust type.
        let _: fn(hipDeviceptr_t) -> ours::hipDeviceptr_t = |p| p;
    };

    /// Asserts that each named constant has the same value in `hip-sys` and here.
    macro_rules! same_values {
        ($( $prefix:ident :: $name:ident ),* $(,)?) => {
            const _: () = {
                $( assert!(same_values!(@value $prefix :: $name) == crate::consts::$name as i64); )*
            };
        };
        (@value hipError_t :: $name:ident) => { hip_sys::hiprt::hipError_t::$name as i64 };
        (@value hipMemcpyKind :: $name:ident) => { hip_sys::hiprt::hipMemcpyKind::$name as i64 };
        (@value hiprt :: $name:ident) => { hip_sys::hiprt::$name as i64 };
    }

    // Every error code hip-sys (HIP 5.4 headers) knows; it lacks 911-916, and its 1054 is
    // the `hipErrorTbd` marker, which this crate deliberately does not define.
    same_values!(
        hipError_t::hipSuccess,
        hipError_t::hipErrorInvalidValue,
        hipError_t::hipErrorOutOfMemory,
        hipError_t::hipErrorNotInitialized,
        hipError_t::hipErrorDeinitialized,
        hipError_t::hipErrorProfilerDisabled,
        hipError_t::hipErrorProfilerNotInitialized,
        hipError_t::hipErrorProfilerAlreadyStarted,
        hipError_t::hipErrorProfilerAlreadyStopped,
        hipError_t::hipErrorInvalidConfiguration,
        hipError_t::hipErrorInvalidPitchValue,
        hipError_t::hipErrorInvalidSymbol,
        hipError_t::hipErrorInvalidDevicePointer,
        hipError_t::hipErrorInvalidMemcpyDirection,
        hipError_t::hipErrorInsufficientDriver,
        hipError_t::hipErrorMissingConfiguration,
        hipError_t::hipErrorPriorLaunchFailure,
        hipError_t::hipErrorInvalidDeviceFunction,
        hipError_t::hipErrorNoDevice,
        hipError_t::hipErrorInvalidDevice,
        hipError_t::hipErrorInvalidImage,
        hipError_t::hipErrorInvalidContext,
        hipError_t::hipErrorContextAlreadyCurrent,
        hipError_t::hipErrorMapFailed,
        hipError_t::hipErrorUnmapFailed,
        hipError_t::hipErrorArrayIsMapped,
        hipError_t::hipErrorAlreadyMapped,
        hipError_t::hipErrorNoBinaryForGpu,
        hipError_t::hipErrorAlreadyAcquired,
        hipError_t::hipErrorNotMapped,
        hipError_t::hipErrorNotMappedAsArray,
        hipError_t::hipErrorNotMappedAsPointer,
        hipError_t::hipErrorECCNotCorrectable,
        hipError_t::hipErrorUnsupportedLimit,
        hipError_t::hipErrorContextAlreadyInUse,
        hipError_t::hipErrorPeerAccessUnsupported,
        hipError_t::hipErrorInvalidKernelFile,
        hipError_t::hipErrorInvalidGraphicsContext,
        hipError_t::hipErrorInvalidSource,
        hipError_t::hipErrorFileNotFound,
        hipError_t::hipErrorSharedObjectSymbolNotFound,
        hipError_t::hipErrorSharedObjectInitFailed,
        hipError_t::hipErrorOperatingSystem,
        hipError_t::hipErrorInvalidHandle,
        hipError_t::hipErrorIllegalState,
        hipError_t::hipErrorNotFound,
        hipError_t::hipErrorNotReady,
        hipError_t::hipErrorIllegalAddress,
        hipError_t::hipErrorLaunchOutOfResources,
        hipError_t::hipErrorLaunchTimeOut,
        hipError_t::hipErrorPeerAccessAlreadyEnabled,
        hipError_t::hipErrorPeerAccessNotEnabled,
        hipError_t::hipErrorSetOnActiveProcess,
        hipError_t::hipErrorContextIsDestroyed,
        hipError_t::hipErrorAssert,
        hipError_t::hipErrorHostMemoryAlreadyRegistered,
        hipError_t::hipErrorHostMemoryNotRegistered,
        hipError_t::hipErrorLaunchFailure,
        hipError_t::hipErrorCooperativeLaunchTooLarge,
        hipError_t::hipErrorNotSupported,
        hipError_t::hipErrorStreamCaptureUnsupported,
        hipError_t::hipErrorStreamCaptureInvalidated,
        hipError_t::hipErrorStreamCaptureMerge,
        hipError_t::hipErrorStreamCaptureUnmatched,
        hipError_t::hipErrorStreamCaptureUnjoined,
        hipError_t::hipErrorStreamCaptureIsolation,
        hipError_t::hipErrorStreamCaptureImplicit,
        hipError_t::hipErrorCapturedEvent,
        hipError_t::hipErrorStreamCaptureWrongThread,
        hipError_t::hipErrorGraphExecUpdateFailure,
        hipError_t::hipErrorUnknown,
        hipError_t::hipErrorRuntimeMemory,
        hipError_t::hipErrorRuntimeOther,
        hipError_t::hipErrorMemoryAllocation,
        hipError_t::hipErrorInitializationError,
        hipError_t::hipErrorMapBufferObjectFailed,
        hipError_t::hipErrorInvalidResourceHandle,
        hipMemcpyKind::hipMemcpyHostToHost,
        hipMemcpyKind::hipMemcpyHostToDevice,
        hipMemcpyKind::hipMemcpyDeviceToHost,
        hipMemcpyKind::hipMemcpyDeviceToDevice,
        hipMemcpyKind::hipMemcpyDefault,
        hiprt::hipEventDefault,
        hiprt::hipEventBlockingSync,
        hiprt::hipEventDisableTiming,
        hiprt::hipEventInterprocess,
        hiprt::hipEventReleaseToDevice,
        hiprt::hipEventReleaseToSystem,
        hiprt::hipStreamDefault,
        hiprt::hipStreamNonBlocking,
    );

    const _: () = {
        assert!(hip_sys::hiprt::HIP_IPC_HANDLE_SIZE as usize == crate::types::HIP_IPC_HANDLE_SIZE);
        // hip-sys was generated from HIP 5.4 headers (`HIP_VERSION` 50422804), where the
        // flag is 0; the version-based choice must agree with the header of that version.
        assert!(hip_sys::hiprt::HIP_VERSION_MAJOR == 5);
        assert!(
            hip_sys::hiprt::hipIpcMemLazyEnablePeerAccess
                == crate::consts::ipc_mem_lazy_enable_peer_access(
                    hip_sys::hiprt::HIP_VERSION as i32
                )
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, OsString};

    /// The functions the brief for this crate asks for, in no particular order.
    const EXPECTED: [&str; 37] = [
        "hipInit",
        "hipRuntimeGetVersion",
        "hipDriverGetVersion",
        "hipGetDeviceCount",
        "hipSetDevice",
        "hipGetDevice",
        "hipDeviceSynchronize",
        "hipMalloc",
        "hipFree",
        "hipMemcpy",
        "hipMemset",
        "hipMemGetAddressRange",
        "hipStreamCreate",
        "hipStreamDestroy",
        "hipStreamSynchronize",
        "hipIpcGetMemHandle",
        "hipIpcOpenMemHandle",
        "hipIpcCloseMemHandle",
        "hipEventCreateWithFlags",
        "hipEventDestroy",
        "hipEventRecord",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipStreamWaitEvent",
        "hipIpcGetEventHandle",
        "hipIpcOpenEventHandle",
        "hipDeviceCanAccessPeer",
        "hipDeviceEnablePeerAccess",
        "hipGetErrorName",
        "hipGetErrorString",
        "hipEventCreate",
        "hipEventElapsedTime",
        "hipMemcpyAsync",
        "hipPointerGetAttributes",
        "hipCtxCreate",
        "hipHostMalloc",
        "hipHostFree",
    ];

    #[test]
    fn table_lists_every_function_once_all_required() {
        let mut listed: Vec<&str> = HipApi::REQUIRED_SYMBOLS.to_vec();
        listed.sort_unstable();
        let mut expected = EXPECTED.to_vec();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        assert_eq!(HipApi::OPTIONAL_SYMBOLS, ["hipGetProcAddress"]);
    }

    // --- The generated loader, exercised on libc with a list of libc functions. ---

    define_fn_table! {
        [pub struct LibcTable]
        required {
            fn getpid() -> c_int;
        }
        optional {
            fn devipc_test_no_such_optional_fn() -> c_int;
            fn getppid() -> c_int;
        }
    }

    define_fn_table! {
        [#[allow(dead_code)] pub struct MissingTable]
        required {
            fn getpid() -> c_int;
            fn devipc_test_no_such_required_fn() -> c_int;
        }
        optional {}
    }

    fn libc() -> Library {
        // SAFETY: the C library is already loaded into every process; opening it again
        // runs no new initialisers.
        unsafe { Library::new("libc.so.6") }.expect("libc.so.6 loads")
    }

    #[test]
    fn loader_resolves_required_and_optional_symbols() {
        // SAFETY: getpid and getppid in libc have the declared prototypes.
        let table = unsafe { LibcTable::from_library(libc(), "libc.so.6".into()) }.unwrap();
        assert_eq!(table.source, LibrarySource::Loaded("libc.so.6".into()));
        assert!(table.library.is_some());
        // SAFETY: getpid has no preconditions.
        assert_eq!(unsafe { (table.getpid)() } as u32, std::process::id());
        assert!(table.devipc_test_no_such_optional_fn.is_none());
        assert!(table.getppid.is_some());
        assert_eq!(LibcTable::REQUIRED_SYMBOLS, ["getpid"]);
        assert_eq!(
            LibcTable::OPTIONAL_SYMBOLS,
            ["devipc_test_no_such_optional_fn", "getppid"]
        );
    }

    #[test]
    fn loader_reports_the_first_missing_required_symbol() {
        // SAFETY: as above; the second symbol does not exist.
        let err = unsafe { MissingTable::from_library(libc(), "/lib/libc-test.so".into()) }
            .map(|_| ())
            .unwrap_err();
        match err {
            Error::MissingSymbol { library, symbol } => {
                assert_eq!(library, PathBuf::from("/lib/libc-test.so"));
                assert_eq!(symbol, "devipc_test_no_such_required_fn");
            }
            other => panic!("expected MissingSymbol, got {other:?}"),
        }
    }

    // --- Loading and discovery against libraries that are not HIP. ---

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn devipc_hip_lib_pointing_at_libc_is_a_missing_symbol() {
        let candidates = discovery::candidates(env_of(&[("DEVIPC_HIP_LIB", "libc.so.6")]));
        // SAFETY: libc is not HIP, but it exports none of the HIP names, so no function is
        // ever called; loading it runs no new initialisers.
        let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
        match err {
            Error::MissingSymbol { library, symbol } => {
                assert_eq!(library, PathBuf::from("libc.so.6"));
                assert_eq!(symbol, "hipInit");
            }
            other => panic!("expected MissingSymbol, got {other:?}"),
        }
        // SAFETY: as above.
        let err = unsafe { HipApi::load("libc.so.6") }.unwrap_err();
        assert!(
            matches!(
                err,
                Error::MissingSymbol {
                    symbol: "hipInit",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn nothing_loadable_is_library_not_found_listing_every_candidate() {
        let candidates = vec![
            Candidate {
                path: "/nonexistent/devipc-a/libamdhip64.so".into(),
                origin: "$ROCM_PATH/lib",
            },
            Candidate {
                path: "/nonexistent/devipc-b/libamdhip64.so.6".into(),
                origin: "/opt/rocm/lib",
            },
            Candidate {
                path: "libdevipc-test-no-such-library.so.5".into(),
                origin: discovery::ORIGIN_LOADER_PATH,
            },
        ];
        // SAFETY: none of the candidates exists, nothing is loaded.
        let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
        let text = err.to_string();
        match err {
            Error::LibraryNotFound { backend, tried } => {
                assert_eq!(backend, BackendKind::Hip);
                assert_eq!(tried.len(), candidates.len());
                for (attempt, candidate) in tried.iter().zip(&candidates) {
                    assert_eq!(attempt.path, candidate.path);
                    assert_eq!(attempt.origin, candidate.origin);
                    assert!(!attempt.error.is_empty());
                    assert!(text.contains(&*candidate.path.to_string_lossy()), "{text}");
                }
                assert!(
                    tried[0].error.contains("No such file"),
                    "{}",
                    tried[0].error
                );
            }
            other => panic!("expected LibraryNotFound, got {other:?}"),
        }
        assert!(text.contains("DEVIPC_HIP_LIB"), "{text}");
    }

    #[test]
    fn explicit_missing_file_is_not_found_without_falling_back() {
        let candidates = discovery::candidates(env_of(&[
            ("DEVIPC_HIP_LIB", "/nonexistent/devipc/libamdhip64.so"),
            ("ROCM_PATH", "/usr"),
        ]));
        // SAFETY: the only candidate does not exist.
        let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
        match err {
            Error::LibraryNotFound { tried, .. } => {
                assert_eq!(tried.len(), 1, "{tried:?}");
                assert_eq!(
                    tried[0].path,
                    PathBuf::from("/nonexistent/devipc/libamdhip64.so")
                );
                assert_eq!(tried[0].origin, "DEVIPC_HIP_LIB");
            }
            other => panic!("expected LibraryNotFound, got {other:?}"),
        }
        // SAFETY: does not exist.
        let err = unsafe { HipApi::load("/nonexistent/devipc/libamdhip64.so") }.unwrap_err();
        assert!(
            matches!(&err, Error::LibraryNotFound { tried, .. } if tried.len() == 1 && tried[0].origin == "HipApi::load"),
            "{err:?}"
        );
    }

    // --- hip_api_from_module!: every field calls the module function of its name. ---

    /// Rust functions with the table's signatures that record which one was called.
    #[allow(non_snake_case)]
    mod recording {
        use crate::types::*;
        use std::cell::Cell;

        thread_local! {
            pub static LAST: Cell<&'static str> = const { Cell::new("") };
        }

        /// Distinct code per function: 1000 + its index in the table.
        pub fn code_of(name: &str) -> hipError_t {
            let index = crate::HipApi::REQUIRED_SYMBOLS
                .iter()
                .chain(crate::HipApi::OPTIONAL_SYMBOLS)
                .position(|n| *n == name)
                .expect("listed");
            1000 + index as hipError_t
        }

        pub trait Ret {
            fn make(name: &'static str, c_name: &'static CStr) -> Self;
        }
        impl Ret for hipError_t {
            fn make(name: &'static str, _: &'static CStr) -> Self {
                code_of(name)
            }
        }
        impl Ret for *const c_char {
            fn make(_: &'static str, c_name: &'static CStr) -> Self {
                c_name.as_ptr()
            }
        }
        use std::ffi::CStr;

        macro_rules! recording_fns {
            (
                []
                required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
                optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
            ) => {
                $(
                    pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                        $( let _ = $arg; )*
                        LAST.with(|l| l.set(stringify!($name)));
                        <$ret as Ret>::make(
                            stringify!($name),
                            // SAFETY: the literal ends in exactly one NUL.
                            unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                        )
                    }
                )*
                $(
                    pub unsafe extern "C" fn $oname($($oarg: $oty),*) -> $oret {
                        $( let _ = $oarg; )*
                        LAST.with(|l| l.set(stringify!($oname)));
                        <$oret as Ret>::make(
                            stringify!($oname),
                            // SAFETY: the literal ends in exactly one NUL.
                            unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($oname), "\0").as_bytes()) },
                        )
                    }
                )*
            };
        }
        for_each_hip_fn!(recording_fns);
    }

    trait CheckRet {
        fn check(self, name: &str);
    }
    impl CheckRet for hipError_t {
        fn check(self, name: &str) {
            assert_eq!(self, recording::code_of(name), "{name}");
        }
    }
    impl CheckRet for *const c_char {
        fn check(self, name: &str) {
            // SAFETY: the recording functions return a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(self) };
            assert_eq!(s.to_str().unwrap(), name);
        }
    }

    macro_rules! call_every_field {
        (
            [$api:ident]
            required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
            optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            $(
                recording::LAST.with(|l| l.set(""));
                // SAFETY: the recording functions ignore their arguments; all-zero bytes
                // are valid for every argument type (integers, raw pointers, handles).
                let ret: $ret = unsafe { ($api.$name)($(core::mem::zeroed::<$ty>()),*) };
                assert_eq!(recording::LAST.with(|l| l.get()), stringify!($name));
                ret.check(stringify!($name));
            )*
            $(
                recording::LAST.with(|l| l.set(""));
                let f = $api.$oname.expect(concat!(stringify!($oname), " is Some"));
                // SAFETY: as above.
                let ret: $oret = unsafe { f($(core::mem::zeroed::<$oty>()),*) };
                assert_eq!(recording::LAST.with(|l| l.get()), stringify!($oname));
                ret.check(stringify!($oname));
            )*
        };
    }

    #[test]
    fn from_module_wires_every_field_to_the_function_of_its_name() {
        // SAFETY: test only; the recording functions dereference nothing.
        let api = unsafe { crate::hip_api_from_module!(self::recording) };
        assert_eq!(api.source(), &LibrarySource::Emulated);
        assert!(api.library.is_none());
        for_each_hip_fn!(call_every_field; api);
        let debug = format!("{api:?}");
        assert!(debug.contains("Emulated"), "{debug}");
    }
}
