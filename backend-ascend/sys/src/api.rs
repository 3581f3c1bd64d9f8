//! The ACL function table: one list of every ACL function devipc calls, and the
//! [`AclApi`] struct generated from it.
//!
//! [`for_each_acl_fn!`](crate::for_each_acl_fn) holds the list, written once, as a
//! callback macro: this module generates [`AclApi`] (one field per function) and its
//! `libloading` loader from it; [`acl_api_from_module!`](crate::acl_api_from_module)
//! fills the same table from a Rust module (the in-process emulator);
//! [`acl_export_c_abi!`](crate::acl_export_c_abi) generates `#[unsafe(no_mangle)]`
//! `extern "C"` wrappers with the vendor names (the emulator's cdylib); and
//! [`abi::FUNCTIONS`](crate::abi::FUNCTIONS) describes it for the ABI test. The layers
//! above (checked calls, `DeviceIpc`) only ever see an `AclApi` and cannot tell how it
//! was filled.
//!
//! # Required and optional functions
//!
//! A function is required when devipc cannot work at all without it and every CANN
//! version with any IPC support has it: init, device, `aclrtMalloc`-family memory,
//! streams, peer access, and the core VMM calls (`aclrtMallocPhysical`,
//! `aclrtReserveMemAddress`, `aclrtMapMem` and their releases), all of which are in the
//! 2024 torch_npu header (torch-npu 2.1.0.post8). A missing required symbol fails the
//! load with `Error::MissingSymbol`.
//!
//! Everything newer is an `Option` field, so an older runtime still loads and the backend
//! reports what it lacks as capabilities: VMM shareable handles, key-based IPC memory,
//! notify IPC, `aclrtDeviceGetBareTgid`, `aclrtMemGetAddressRange`,
//! `aclrtMemGetAllocationGranularity` and `aclrtMemSetAccess` (absent from the 2024
//! header), `aclsysGetVersionStr`, and the deprecated `aclrtGetVersion` (which a future
//! runtime may drop).
//!
//! The device-synchronisation, memory-info, host-memory, forced-reset and event functions
//! at the end of the list (`aclrtSynchronizeDevice` .. `aclrtIpcOpenEventHandle`) are
//! optional too: devipc does not call them, they are there because the IPC code of
//! frameworks does (torch_npu synchronises the device before closing an IPC key, sizes its
//! expandable segments with `aclrtGetMemInfo`, shares events with the IPC event API), so
//! the emulator and the conformance suite can replay it.
//!
//! One optional function is not newer: `aclrtMemcpyAsync` is in every header, but devipc
//! calls it on one path only (`read`/`write` of memory imported by IPC key onto another
//! device than the exporter's, where the vendor allows no other copy), so a table
//! without it (a partial shim, an older emulator) still loads and only that path fails
//! with `Error::Unsupported`.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use devipc_core::{Error, LibrarySource, Result};
use libloading::Library;

use crate::abi::{FnDecl, ParamDecl};
use crate::discovery;
#[allow(
    clippy::wildcard_imports,
    reason = "the function list names the C types bare, as the headers do"
)]
use crate::types::*;

/// Invokes a callback macro with the list of every ACL function devipc calls.
///
/// The single source of the ACL function set. Invoke as
/// `for_each_acl_fn!(path::to::callback)` or `for_each_acl_fn!(path::to::callback; args...)`;
/// the callback is invoked with this input (shown for one function of each section),
/// the same shape as `devipc_hip_sys::for_each_hip_fn!`: the extra arguments in
/// brackets, then the two sections:
///
/// ```text
/// [args...]
/// required {
///     /// doc lines...
///     fn aclInit(configPath: *const c_char) -> aclError;
///     ...
/// }
/// optional {
///     /// doc lines...
///     fn aclrtIpcMemClose(key: *const c_char) -> aclError;
///     ...
/// }
/// ```
///
/// A callback matches each section with
/// `$( $(#[$doc:meta])* fn $name:ident ( $($p:ident : $t:ty),* ) -> $ret:ty ; )*`.
/// Names and parameter names are the vendor header's. Types are written **bare**, as in
/// the header: the C types of [`types`](crate::types) (`aclError`, `aclrtStream`, ...,
/// and its re-exports `c_char`, `c_void`) and Rust primitives (`i32` for `int32_t`,
/// `usize` for `size_t`, ...). A callback that emits the types needs
/// `use devipc_ascend_sys::types::*;` in scope where it expands (see
/// [`acl_export_c_abi!`](crate::acl_export_c_abi), which does this itself); one that only
/// uses names and `stringify!` does not.
///
/// ```
/// macro_rules! count {
///     ([]
///      required { $( $(#[$rd:meta])* fn $r:ident ( $($rp:ident : $rt:ty),* ) -> $rr:ty ; )* }
///      optional { $( $(#[$od:meta])* fn $o:ident ( $($op:ident : $ot:ty),* ) -> $or:ty ; )* }
///     ) => { [$(stringify!($r)),*].len() + [$(stringify!($o)),*].len() };
/// }
/// let n = devipc_ascend_sys::for_each_acl_fn!(count);
/// assert_eq!(n, devipc_ascend_sys::abi::FUNCTIONS.len());
/// ```
#[macro_export]
macro_rules! for_each_acl_fn {
    ($($callback:ident)::+ $(; $($args:tt)*)?) => {
        $($callback)::+! {
            [$($($args)*)?]
            required {
                /// Initializes ACL for this process (reference-counted: a repeated call
                /// returns `ACL_ERROR_REPEAT_INITIALIZE` and counts). `configPath` may be
                /// NULL. RT-DOC `acl.cpp`; api-facts A.3.
                fn aclInit(configPath: *const c_char) -> aclError;
                /// Finalizes ACL; a repeated call returns `ACL_ERROR_REPEAT_FINALIZE`.
                fn aclFinalize() -> aclError;
                /// The calling thread's most recent error message (owned by the runtime;
                /// may be NULL or empty).
                fn aclGetRecentErrMsg() -> *const c_char;
                /// Binds the calling thread to a device (and creates its default context).
                fn aclrtSetDevice(deviceId: i32) -> aclError;
                /// Releases the process's use of a device.
                fn aclrtResetDevice(deviceId: i32) -> aclError;
                /// The calling thread's current device.
                fn aclrtGetDevice(deviceId: *mut i32) -> aclError;
                /// The number of visible devices.
                fn aclrtGetDeviceCount(count: *mut u32) -> aclError;
                /// Allocates device memory (rounded up to 32 bytes plus 32 bytes of
                /// padding); free with `aclrtFree`.
                fn aclrtMalloc(devPtr: *mut *mut c_void, size: usize, policy: aclrtMemMallocPolicy) -> aclError;
                /// Frees memory from `aclrtMalloc`.
                fn aclrtFree(devPtr: *mut c_void) -> aclError;
                /// Synchronous copy; `destMax` is the capacity of `dst`, `count` the bytes
                /// copied.
                fn aclrtMemcpy(dst: *mut c_void, destMax: usize, src: *const c_void, count: usize, kind: aclrtMemcpyKind) -> aclError;
                /// Synchronous fill of `count` bytes with `value`; `maxCount` is the
                /// capacity of `devPtr`.
                fn aclrtMemset(devPtr: *mut c_void, maxCount: usize, value: i32, count: usize) -> aclError;
                /// Creates a stream on the current device.
                fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError;
                /// Destroys a stream.
                fn aclrtDestroyStream(stream: aclrtStream) -> aclError;
                /// Blocks until all work on the stream is done.
                fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError;
                /// VMM: allocates physical memory (`flags` reserved, 0; `size` a multiple
                /// of the granularity). RT-DOC `11-04`; api-facts A.5.
                fn aclrtMallocPhysical(handle: *mut aclrtDrvMemHandle, size: usize, prop: *const aclrtPhysicalMemProp, flags: u64) -> aclError;
                /// VMM: releases a physical handle (freed once also unmapped everywhere).
                fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError;
                /// VMM: reserves a virtual address range (`alignment` and `flags` reserved,
                /// 0; `expectPtr` normally NULL).
                fn aclrtReserveMemAddress(virPtr: *mut *mut c_void, size: usize, alignment: usize, expectPtr: *mut c_void, flags: u64) -> aclError;
                /// VMM: releases a reserved range (unmap first).
                fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError;
                /// VMM: maps a physical handle at a reserved address (`offset` and `flags`
                /// 0; `size` = the physical size).
                fn aclrtMapMem(virPtr: *mut c_void, size: usize, offset: usize, handle: aclrtDrvMemHandle, flags: u64) -> aclError;
                /// VMM: unmaps a mapped range.
                fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError;
                /// Whether `deviceId` can access `peerDeviceId` (writes 1 or 0).
                /// RT-DOC `04`; api-facts A.10.
                fn aclrtDeviceCanAccessPeer(canAccessPeer: *mut i32, deviceId: i32, peerDeviceId: i32) -> aclError;
                /// Enables access from the current device to `peerDeviceId` (`flags`
                /// reserved, 0).
                fn aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) -> aclError;
            }
            optional {
                /// Asynchronous copy on `stream` (NULL: the default stream); complete once
                /// `aclrtSynchronizeStream` returns. The only copy the vendor allows on
                /// memory imported by IPC key and used from another device than the
                /// exporter's, and only device to device (RT-DOC 11-07; api-facts A.3,
                /// C.4). Optional although every header since 2024 declares it: devipc
                /// needs it only for `read`/`write` of such imports, so a runtime or shim
                /// without it still loads and only that path reports `Unsupported`.
                fn aclrtMemcpyAsync(dst: *mut c_void, destMax: usize, src: *const c_void, count: usize, kind: aclrtMemcpyKind, stream: aclrtStream) -> aclError;
                /// Base and size of the allocation containing `ptr` (`aclrtMalloc`,
                /// host and VMM memory). Optional: newer than the 2024 header; used to
                /// export whole blocks of framework memory. api-facts A.3, C.4.
                fn aclrtMemGetAddressRange(ptr: *mut c_void, pbase: *mut *mut c_void, psize: *mut usize) -> aclError;
                /// VMM: allocation granularity for `prop`. Optional: absent from the 2024
                /// header; without it the backend must assume a granularity.
                fn aclrtMemGetAllocationGranularity(prop: *mut aclrtPhysicalMemProp, option: aclrtMemGranularityOptions, granularity: *mut usize) -> aclError;
                /// VMM: grants access to a mapped range (`virPtr`/`size` as mapped).
                /// Optional: absent from the 2024 header.
                fn aclrtMemSetAccess(virPtr: *mut c_void, size: usize, desc: *mut aclrtMemAccessDesc, count: usize) -> aclError;
                /// VMM IPC (V1): exports a physical handle as a `uint64_t` shareable handle
                /// (`handleType` must be `ACL_MEM_HANDLE_TYPE_NONE`; `flags` an
                /// `ACL_RT_VMM_EXPORT_FLAG_*`). Optional: newer family. api-facts A.6, C.5.
                fn aclrtMemExportToShareableHandle(handle: aclrtDrvMemHandle, handleType: aclrtMemHandleType, flags: u64, shareableHandle: *mut u64) -> aclError;
                /// VMM IPC (V1): sets the trustlist (bare tgids) of a shareable handle.
                /// Optional: newer family.
                fn aclrtMemSetPidToShareableHandle(shareableHandle: u64, pid: *mut i32, pidNum: usize) -> aclError;
                /// VMM IPC (V1): imports a shareable handle on `deviceId` (not in the
                /// exporting process). Optional: newer family.
                fn aclrtMemImportFromShareableHandle(shareableHandle: u64, deviceId: i32, handle: *mut aclrtDrvMemHandle) -> aclError;
                /// Key IPC: exports `aclrtMalloc` memory under a NUL-terminated key (`len`
                /// = `ACL_IPC_KEY_LEN`; `flags` an `ACL_RT_IPC_MEM_EXPORT_FLAG_*`).
                /// Optional: newer family (CANN 8.3). api-facts A.7, C.4.
                fn aclrtIpcMemGetExportKey(devPtr: *mut c_void, size: usize, key: *mut c_char, len: usize, flags: u64) -> aclError;
                /// Key IPC: sets the trustlist (bare tgids) of a key. Optional: newer family.
                fn aclrtIpcMemSetImportPid(key: *const c_char, pid: *mut i32, num: usize) -> aclError;
                /// Key IPC: maps the memory of a key (`flags` an
                /// `ACL_RT_IPC_MEM_IMPORT_FLAG_*`). Optional: newer family.
                fn aclrtIpcMemImportByKey(devPtr: *mut *mut c_void, key: *const c_char, flags: u64) -> aclError;
                /// Key IPC: in an importer unmaps one imported address; in the exporter
                /// destroys the key. Importers close first. Optional: newer family.
                fn aclrtIpcMemClose(key: *const c_char) -> aclError;
                /// The process id the NPU driver knows this process by (the host pid
                /// inside a container): the value trustlists expect. Optional: newer.
                /// api-facts A.10.
                fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError;
                /// Notify: creates a notify (`flag` an `ACL_NOTIFY_*`). Optional: notify IPC
                /// family. api-facts A.8, C.6.
                fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError;
                /// Notify: destroys a notify (each process destroys its own).
                fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError;
                /// Notify IPC: exports a notify under a key (`len` >= `ACL_IPC_KEY_LEN`;
                /// `flags` an `ACL_RT_NOTIFY_EXPORT_FLAG_*`, note `0x02`).
                fn aclrtNotifyGetExportKey(notify: aclrtNotify, key: *mut c_char, len: usize, flags: u64) -> aclError;
                /// Notify IPC: sets the trustlist (bare tgids) of an exported notify.
                fn aclrtNotifySetImportPid(notify: aclrtNotify, pid: *mut i32, num: usize) -> aclError;
                /// Notify IPC: opens a notify by key (`flags` an
                /// `ACL_RT_NOTIFY_IMPORT_FLAG_*`).
                fn aclrtNotifyImportByKey(notify: *mut aclrtNotify, key: *const c_char, flags: u64) -> aclError;
                /// Notify: records (sets) the notify on a stream.
                fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError;
                /// Notify: waits on a stream until the notify is set, then resets it.
                /// `timeout` 0 waits forever; otherwise whole seconds: the header says ms,
                /// but the runtime's implementation (logs "timeout is [%u]s", passes the
                /// value unchanged to the queue entry), the current CANN reference and
                /// HCCL's own calls all count seconds (see backend-ascend/src/signal.rs).
                fn aclrtWaitAndResetNotify(notify: aclrtNotify, stream: aclrtStream, timeout: u32) -> aclError;
                /// The ACL API version (deprecated by the vendor, so optional).
                fn aclrtGetVersion(majorVersion: *mut i32, minorVersion: *mut i32, patchVersion: *mut i32) -> aclError;
                /// The version string of a CANN package (`pkgName` e.g. `runtime`,
                /// `driver`) into a buffer of `ACL_PKG_VERSION_MAX_SIZE`. Optional: present
                /// from CANN 8.5. api-facts A.3.
                fn aclsysGetVersionStr(pkgName: *mut c_char, versionStr: *mut c_char) -> aclError;
                /// Blocks until all work of the current device is done (torch_npu
                /// synchronises the device before it closes an IPC key or unmaps an
                /// expandable segment). Optional: devipc does not need it.
                fn aclrtSynchronizeDevice() -> aclError;
                /// `aclrtSynchronizeDevice` bounded by
                /// `timeout` ms (-1: forever; below -1 is `ACL_ERROR_RT_PARAM_INVALID`).
                /// Optional: newer than the 2024 header.
                fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError;
                /// Free and total bytes of memory kind `attr` on the current device.
                /// Optional: devipc does not need it.
                fn aclrtGetMemInfo(attr: aclrtMemAttr, free: *mut usize, total: *mut usize) -> aclError;
                /// Page-locked host memory; free with `aclrtFreeHost`. Optional: devipc does
                /// not need it.
                fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> aclError;
                /// Frees memory of `aclrtMallocHost`. Optional.
                fn aclrtFreeHost(hostPtr: *mut c_void) -> aclError;
                /// Destroys a stream without waiting for its tasks. Optional.
                fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError;
                /// Resets a device whatever the number of `aclrtSetDevice` calls. Optional:
                /// newer than the 2024 header.
                fn aclrtResetDeviceForce(deviceId: i32) -> aclError;
                /// Events: creates an event with `flag` (an `ACL_EVENT_*` combination;
                /// `ACL_EVENT_IPC` alone for an event other processes open). RT-DOC 07;
                /// api-facts A.9. Optional: the event API is not used by devipc.
                fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError;
                /// Events: destroys an event (each process destroys its own).
                fn aclrtDestroyEvent(event: aclrtEvent) -> aclError;
                /// Events: records the event on a stream.
                fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError;
                /// Events: makes a stream wait until the event's latest record completed (at
                /// once if it never was recorded).
                fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError;
                /// Events: blocks the host until the event's latest record completed.
                fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError;
                /// Events: whether the event's latest record completed.
                fn aclrtQueryEventStatus(event: aclrtEvent, status: *mut aclrtEventRecordedStatus) -> aclError;
                /// IPC events: the 64-byte handle of an event created with `ACL_EVENT_IPC`.
                /// Optional: newer than the 2024 header. api-facts A.9, C.7.
                fn aclrtIpcGetEventHandle(event: aclrtEvent, handle: *mut aclrtIpcEventHandle) -> aclError;
                /// IPC events: opens another process's event from its handle (by value).
                fn aclrtIpcOpenEventHandle(handle: aclrtIpcEventHandle, event: *mut aclrtEvent) -> aclError;
            }
        }
    };
}

/// Builds an [`AclApi`](crate::AclApi) whose functions are the Rust functions of a module,
/// with [`LibrarySource::Emulated`](devipc_core::LibrarySource::Emulated) and no library.
///
/// The module must define every function of
/// [`for_each_acl_fn!`](crate::for_each_acl_fn), required and optional, under the vendor
/// name, as `pub unsafe extern "C" fn` (or `pub extern "C" fn`) with the list's
/// signature; a missing or mistyped function is a compile error at the call. Do **not**
/// mark them `#[no_mangle]`: the in-process emulator must keep vendor names out of the
/// dynamic symbol table. Set an optional field to `None` afterwards to emulate an older
/// runtime.
///
/// ```ignore
/// let api: devipc_ascend_sys::AclApi = devipc_ascend_sys::acl_api_from_module!(devipc_emulator::acl);
/// assert!(api.source().is_emulated());
/// ```
#[macro_export]
macro_rules! acl_api_from_module {
    ($module:path) => {
        $crate::for_each_acl_fn!($crate::__acl_api_from_module; $module)
    };
}

/// Callback of [`acl_api_from_module!`]; not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __acl_api_from_module {
    (
        [$module:path]
        required { $( $(#[$rdoc:meta])* fn $rname:ident ( $($rp:ident : $rt:ty),* $(,)? ) -> $rret:ty ; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident ( $($op:ident : $ot:ty),* $(,)? ) -> $oret:ty ; )* }
    ) => {{
        use $module as __acl_module;
        $crate::AclApi::__from_module_fns(
            $( __acl_module::$rname, )*
            $( ::core::option::Option::Some(__acl_module::$oname), )*
        )
    }};
}

/// Defines `#[unsafe(no_mangle)] pub unsafe extern "C"` functions with the vendor names
/// that forward to the same-named functions of a module: the exports of a shared library
/// that stands in for `libascendcl.so` (the emulator's cdylib).
///
/// Invoke once, at item level, in the cdylib crate:
///
/// ```ignore
/// devipc_ascend_sys::acl_export_c_abi!(devipc_emulator::acl);
/// ```
///
/// The module must satisfy the same contract as for
/// [`acl_api_from_module!`](crate::acl_api_from_module). The wrappers are generated in an
/// anonymous `const` block, so they add no names to the invoking module; the types of the
/// list are imported there from [`types`](crate::types).
#[macro_export]
macro_rules! acl_export_c_abi {
    ($module:path) => {
        $crate::for_each_acl_fn!($crate::__acl_export_c_abi; $module);
    };
}

/// Callback of [`acl_export_c_abi!`]; not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __acl_export_c_abi {
    (
        [$module:path]
        required { $( $(#[$rdoc:meta])* fn $rname:ident ( $($rp:ident : $rt:ty),* $(,)? ) -> $rret:ty ; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident ( $($op:ident : $ot:ty),* $(,)? ) -> $oret:ty ; )* }
    ) => {
        const _: () = {
            #[allow(unused_imports, reason = "not every C type appears in every build of the list")]
            use $crate::types::*;
            use $module as __acl_module;
            $crate::__acl_export_c_abi!(@fns __acl_module;
                $( $(#[$rdoc])* fn $rname ( $($rp : $rt),* ) -> $rret ; )*
                $( $(#[$odoc])* fn $oname ( $($op : $ot),* ) -> $oret ; )*
            );
        };
    };
    (@fns $module:ident; $( $(#[$doc:meta])* fn $name:ident ( $($p:ident : $t:ty),* ) -> $ret:ty ; )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// The vendor's contract for this function: pointer arguments must be valid
            /// for the access the ACL documentation describes.
            #[unsafe(no_mangle)]
            #[allow(non_snake_case, reason = "the vendor's symbol and parameter names")]
            pub unsafe extern "C" fn $name($($p: $t),*) -> $ret {
                // SAFETY: the arguments are passed on unchanged to a function with the
                // same signature and contract; the caller upholds that contract.
                unsafe { $module::$name($($p),*) }
            }
        )*
    };
}

/// Generates [`AclApi`], its loader and [`FUNCTION_DECLS`] from the list.
macro_rules! define_acl_api {
    (
        []
        required { $( $(#[$rdoc:meta])* fn $rname:ident ( $($rp:ident : $rt:ty),* $(,)? ) -> $rret:ty ; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident ( $($op:ident : $ot:ty),* $(,)? ) -> $oret:ty ; )* }
    ) => {
        /// The ACL function table: one field per function of
        /// [`for_each_acl_fn!`](crate::for_each_acl_fn), plus where the functions came
        /// from.
        ///
        /// Filled by [`AclApi::discover`] / [`AclApi::load`] from a vendor library (kept
        /// open inside the table for as long as it lives, like `ash::Entry`), or by
        /// [`acl_api_from_module!`](crate::acl_api_from_module) from the in-process
        /// emulator. Required functions are plain fn-pointer fields, newer ones `Option`s
        /// (see the [module docs](self) for which and why).
        ///
        /// Calling a field is `unsafe`: the caller upholds the ACL contract of that
        /// function, and must not call through a copy of a pointer after the `AclApi` it
        /// came from is dropped (that may unload the library).
        ///
        /// `AclApi` is `Send + Sync`: it holds only fn pointers, a
        /// [`LibrarySource`] and a [`libloading::Library`], all of which are, and the ACL
        /// runtime may be called from any thread (it keeps the current device per
        /// thread). A compile-time assertion below keeps it that way.
        #[allow(non_snake_case, reason = "fields carry the vendor's function names")]
        pub struct AclApi {
            source: LibrarySource,
            /// The library the pointers point into; `None` when emulated. Held only to keep
            /// it loaded.
            _library: Option<Library>,
            $(
                $(#[$rdoc])*
                pub $rname: unsafe extern "C" fn($($rp: $rt),*) -> $rret,
            )*
            $(
                $(#[$odoc])*
                ///
                /// `None` when the loaded runtime does not export it.
                pub $oname: Option<unsafe extern "C" fn($($op: $ot),*) -> $oret>,
            )*
        }

        impl AclApi {
            /// The symbols [`AclApi::load`] fails without, in list order.
            pub const REQUIRED_SYMBOLS: &'static [&'static str] = &[$(stringify!($rname)),*];

            /// The symbols that may be missing (`Option` fields), in list order.
            pub const OPTIONAL_SYMBOLS: &'static [&'static str] = &[$(stringify!($oname)),*];

            /// Resolves every symbol of the list in `library`, loaded from `path`.
            ///
            /// # Safety
            ///
            /// `library` must be an ACL runtime whose symbols of these names have the
            /// header's signatures.
            #[allow(non_snake_case, reason = "locals carry the vendor's function names")]
            unsafe fn from_library(library: Library, path: PathBuf) -> Result<Self> {
                $(
                    // SAFETY: the symbol is read as the fn-pointer type of the vendor
                    // prototype (checked against the headers by tests/abi_headers.rs);
                    // the caller vouches that the library is the vendor's. The pointer is
                    // stored next to `library`, which stays loaded as long as it.
                    let symbol = unsafe {
                        library.get::<unsafe extern "C" fn($($rt),*) -> $rret>(
                            concat!(stringify!($rname), "\0").as_bytes(),
                        )
                    };
                    let $rname = match symbol {
                        Ok(symbol) => *symbol,
                        Err(_) => {
                            return Err(Error::MissingSymbol {
                                library: path,
                                symbol: stringify!($rname),
                            })
                        }
                    };
                )*
                $(
                    // SAFETY: as for the required symbols above.
                    let symbol = unsafe {
                        library.get::<unsafe extern "C" fn($($ot),*) -> $oret>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                    };
                    let $oname = symbol.ok().map(|symbol| *symbol);
                )*
                Ok(AclApi {
                    source: LibrarySource::Loaded(path),
                    _library: Some(library),
                    $($rname,)*
                    $($oname,)*
                })
            }

            /// Used by [`acl_api_from_module!`](crate::acl_api_from_module); not public API.
            #[doc(hidden)]
            #[allow(
                non_snake_case,
                clippy::too_many_arguments,
                reason = "one argument per vendor function, named after it"
            )]
            pub fn __from_module_fns(
                $( $rname: unsafe extern "C" fn($($rt),*) -> $rret, )*
                $( $oname: Option<unsafe extern "C" fn($($ot),*) -> $oret>, )*
            ) -> Self {
                AclApi {
                    source: LibrarySource::Emulated,
                    _library: None,
                    $($rname,)*
                    $($oname,)*
                }
            }

            /// The optional functions this table lacks, in list order: what the runtime
            /// is too old for. Empty for a current runtime and for the emulator.
            pub fn missing_optional(&self) -> Vec<&'static str> {
                let mut missing = Vec::new();
                $(
                    if self.$oname.is_none() {
                        missing.push(stringify!($oname));
                    }
                )*
                missing
            }
        }

        /// Records of every function of the list, for [`abi::FUNCTIONS`](crate::abi::FUNCTIONS).
        pub(crate) const FUNCTION_DECLS: &[FnDecl] = &[
            $(
                FnDecl {
                    name: stringify!($rname),
                    required: true,
                    params: &[$(ParamDecl { name: stringify!($rp), rust_type: stringify!($rt) }),*],
                    ret: stringify!($rret),
                },
            )*
            $(
                FnDecl {
                    name: stringify!($oname),
                    required: false,
                    params: &[$(ParamDecl { name: stringify!($op), rust_type: stringify!($ot) }),*],
                    ret: stringify!($oret),
                },
            )*
        ];
    };
}

for_each_acl_fn!(define_acl_api);

// `AclApi` must stay shareable across threads (the backend puts it in an `Arc`); this
// fails to compile if a field ever makes it `!Send` or `!Sync`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<AclApi>();
};

impl AclApi {
    /// Where the functions come from: the library path (or bare name) that was loaded, or
    /// [`LibrarySource::Emulated`].
    pub fn source(&self) -> &LibrarySource {
        &self.source
    }

    /// Loads the ACL runtime from `path` (a file path, or a bare name for the loader's
    /// search) and resolves every function.
    ///
    /// Fails with [`Error::LibraryNotFound`] (one attempt) when the loader cannot open
    /// it, and with [`Error::MissingSymbol`] naming the first required function it lacks.
    /// Missing optional functions are `None` (see [`AclApi::missing_optional`]).
    ///
    /// # Safety
    ///
    /// Loading runs the library's initializers, and its symbols are trusted to have the
    /// ACL signatures: `path` must be an ACL runtime (`libascendcl.so`, `libacl_rt.so`) or
    /// a library that implements the same C ABI (the devipc emulator's).
    pub unsafe fn load(path: impl AsRef<Path>) -> Result<Self> {
        let candidate = discovery::Candidate {
            path: path.as_ref().to_path_buf(),
            origin: "AclApi::load".to_owned(),
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { Self::load_candidates(std::slice::from_ref(&candidate)) }
    }

    /// Finds and loads the ACL runtime in the order of DESIGN section 8 (see
    /// [`discovery`]), reading the process environment.
    ///
    /// The first candidate the dynamic loader opens is used. If it lacks a required
    /// function the result is [`Error::MissingSymbol`]; later candidates are not tried,
    /// as a library that loads but is incomplete is a misconfiguration to report, not
    /// to paper over. If no candidate opens, the result is [`Error::LibraryNotFound`]
    /// listing every path with its loader error.
    pub fn discover() -> Result<Self> {
        Self::discover_with_env(|key| std::env::var_os(key))
    }

    /// [`AclApi::discover`] with an injected environment lookup instead of the process
    /// environment.
    pub fn discover_with_env(env: impl Fn(&str) -> Option<OsString>) -> Result<Self> {
        let candidates = discovery::candidates(env);
        // SAFETY: discovery opens only the vendor library names in the vendor's install
        // locations, or the file the user named in DEVIPC_ASCEND_LIB: the same trust the
        // dynamic linker gives LD_LIBRARY_PATH. The signatures are the vendor headers'
        // (tests/abi_headers.rs).
        unsafe { Self::load_candidates(&candidates) }
    }

    /// Opens the first loadable candidate and resolves the table from it.
    ///
    /// # Safety
    ///
    /// As for [`AclApi::load`], for every candidate.
    unsafe fn load_candidates(candidates: &[discovery::Candidate]) -> Result<Self> {
        let (library, chosen) = discovery::open_first(candidates, |candidate| {
            // SAFETY: the caller vouches for every candidate (see `load`).
            unsafe { Library::new(&candidate.path) }.map_err(|e| e.to_string())
        })?;
        // SAFETY: as above.
        unsafe { Self::from_library(library, chosen.path.clone()) }
    }
}

impl fmt::Debug for AclApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclApi")
            .field("source", &self.source)
            .field("missing_optional", &self.missing_optional())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_lists_follow_the_declarations() {
        let required: Vec<_> = FUNCTION_DECLS
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect();
        let optional: Vec<_> = FUNCTION_DECLS
            .iter()
            .filter(|f| !f.required)
            .map(|f| f.name)
            .collect();
        assert_eq!(required, AclApi::REQUIRED_SYMBOLS);
        assert_eq!(optional, AclApi::OPTIONAL_SYMBOLS);
        assert_eq!(FUNCTION_DECLS.len(), 58);
        assert_eq!(AclApi::REQUIRED_SYMBOLS[0], "aclInit");
    }

    #[test]
    fn the_newer_families_are_optional() {
        for name in [
            "aclrtMemExportToShareableHandle",
            "aclrtMemSetPidToShareableHandle",
            "aclrtMemImportFromShareableHandle",
            "aclrtIpcMemGetExportKey",
            "aclrtIpcMemSetImportPid",
            "aclrtIpcMemImportByKey",
            "aclrtIpcMemClose",
            "aclrtCreateNotify",
            "aclrtNotifyGetExportKey",
            "aclrtWaitAndResetNotify",
            "aclrtDeviceGetBareTgid",
            "aclrtMemGetAddressRange",
            "aclrtMemcpyAsync",
            "aclsysGetVersionStr",
            "aclrtGetVersion",
        ] {
            assert!(AclApi::OPTIONAL_SYMBOLS.contains(&name), "{name}");
        }
        for name in [
            "aclInit",
            "aclrtMalloc",
            "aclrtMallocPhysical",
            "aclrtMapMem",
        ] {
            assert!(AclApi::REQUIRED_SYMBOLS.contains(&name), "{name}");
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_library_without_acl_is_missing_the_first_required_symbol() {
        // SAFETY: libc is already loaded in this process; loading it again runs no
        // initializer, and no symbol is called.
        let err = unsafe { AclApi::load("libc.so.6") }.unwrap_err();
        match err {
            Error::MissingSymbol { library, symbol } => {
                assert_eq!(library, PathBuf::from("libc.so.6"));
                assert_eq!(symbol, "aclInit");
            }
            other => panic!("expected MissingSymbol, got {other:?}"),
        }
    }

    #[test]
    fn an_unloadable_path_is_library_not_found_with_the_loader_error() {
        let path = "/nonexistent/devipc/libascendcl.so";
        // SAFETY: the file does not exist; nothing is loaded.
        let err = unsafe { AclApi::load(path) }.unwrap_err();
        let Error::LibraryNotFound { tried, .. } = err else {
            panic!("expected LibraryNotFound, got {err:?}")
        };
        assert_eq!(tried.len(), 1);
        assert_eq!(tried[0].path, PathBuf::from(path));
        assert_eq!(tried[0].origin, "AclApi::load");
        assert!(!tried[0].error.is_empty());
    }
}
