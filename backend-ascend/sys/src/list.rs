//! The one list of every ACL function devipc calls, plus a few it does not call yet:
//! [`for_each_acl_fn!`](crate::for_each_acl_fn) (see "Not called by devipc yet" below).
//!
//! The list is written once, as a callback macro, and every consumer is generated from
//! it: [`table`](crate::table) builds [`AclApi`](crate::AclApi) (one field per function)
//! and its `libloading` loader (through `devipc_sys_common::define_fn_table!`);
//! [`acl_api_from_module!`](crate::acl_api_from_module) fills the same table from a Rust
//! module (the in-process emulator); [`acl_export_c_abi!`](crate::acl_export_c_abi)
//! generates `#[unsafe(no_mangle)]` `extern "C"` wrappers with the vendor names (the
//! emulator's cdylib); `linked` (feature `link`) declares it in an `extern "C"` block
//! linked against `libascendcl`; and [`abi::FUNCTIONS`](crate::abi::FUNCTIONS) describes
//! it for the ABI test. The layers above (checked calls, `DeviceIpc`) only ever see an
//! `AclApi` and cannot tell how it was filled.
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
//! optional too. The backend's signal wait uses the events (create, record, query,
//! destroy, `aclrtSynchronizeEventWithTimeout`) and `aclrtDestroyStreamForce`
//! (backend-ascend `notify.rs`); the others are
//! there because the IPC code of frameworks calls them (torch_npu synchronises the device
//! before closing an IPC key, sizes its expandable segments with `aclrtGetMemInfo`, shares
//! events with the IPC event API), so the emulator and the conformance suite can replay
//! it.
//!
//! The device-id translation functions and `aclrtDeviceGetUuid` (issue 16, after the event
//! functions) are in the CANN 8.x headers (torch-npu 2.14.0) and absent from the 2024 one:
//! optional, like every newer family; the header check finds them in the newer header and
//! notes their absence in the older one.
//!
//! One optional function is not newer: `aclrtMemcpyAsync` is in every header, but devipc
//! calls it only on the paths that need it (the stream-ordered copies of the data plane,
//! and `read`/`write` of memory imported by IPC key onto another device than the
//! exporter's, where the vendor allows no other copy), so a table without it (a partial
//! shim, an older emulator) still loads and only those paths fail with
//! `Error::Unsupported`.
//!
//! # Not called by devipc yet
//!
//! Seven entries are called by no devipc code, only by the emulator's own tests (each is
//! marked with a `// not called by devipc` comment in the list). They stay in the list, so
//! that the emulator implements them with the vendor's rules, and because devipc's
//! data-plane work may call some of them:
//! - `aclrtMemset` (required), `aclrtMallocHost`, `aclrtFreeHost`,
//!   `aclrtSynchronizeDevice`: memory and synchronisation calls of the data plane
//!   (`aclrtSynchronizeEvent` is now the data plane's untimed event wait);
//! - `aclrtResetDeviceForce`, and `aclrtResetDevice` (required), which devipc avoids on
//!   purpose: resetting a device releases what the framework made on it (backend-ascend
//!   `device.rs`);
//! - `aclrtCreateEventWithFlag`, which torch_npu probes for (its local events; IPC events
//!   come from `aclrtCreateEventExWithFlag`).

/// Invokes a callback macro with the list of every ACL function devipc calls (and the few
/// it does not call yet: see the [module docs](crate::list)).
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
                // not called by devipc (on purpose: see the module docs)
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
                // not called by devipc yet (see the module docs)
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
                /// Batched copies on `stream` (issue 25; a trial feature of CANN 9.0,
                /// RT-DOC `aclrtMemcpyBatchAsync.md`, `acl_rt.h` of hicann/runtime):
                /// `numBatches` copies `srcs[i] -> dsts[i]` of `sizes[i] <= destMaxs[i]`
                /// bytes, host to device or device to host only, each checked against the
                /// `aclrtMemcpyBatchAttr` that `attrsIndexes` assigns it; `*failIndex` names
                /// the first failing descriptor (SIZE_MAX when the error is not one
                /// descriptor's). Optional: absent from older runtimes.
                fn aclrtMemcpyBatchAsync(dsts: *mut *mut c_void, destMaxs: *mut usize, srcs: *mut *mut c_void, sizes: *mut usize, numBatches: usize, attrs: *mut aclrtMemcpyBatchAttr, attrsIndexes: *mut usize, numAttrs: usize, failIndex: *mut usize, stream: aclrtStream) -> aclError;
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
                /// HCCL's own calls all count seconds (see backend-ascend/src/notify.rs).
                fn aclrtWaitAndResetNotify(notify: aclrtNotify, stream: aclrtStream, timeout: u32) -> aclError;
                /// The ACL API version (deprecated by the vendor, so optional).
                fn aclrtGetVersion(majorVersion: *mut i32, minorVersion: *mut i32, patchVersion: *mut i32) -> aclError;
                /// The version string of a CANN package (`pkgName` e.g. `runtime`,
                /// `driver`) into a buffer of `ACL_PKG_VERSION_MAX_SIZE`. Optional: present
                /// from CANN 8.5. api-facts A.3.
                fn aclsysGetVersionStr(pkgName: *mut c_char, versionStr: *mut c_char) -> aclError;
                // not called by devipc yet (see the module docs)
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
                // not called by devipc yet (see the module docs)
                /// Page-locked host memory; free with `aclrtFreeHost`. Optional: devipc does
                /// not need it.
                fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> aclError;
                // not called by devipc yet (see the module docs)
                /// Frees memory of `aclrtMallocHost`. Optional.
                fn aclrtFreeHost(hostPtr: *mut c_void) -> aclError;
                /// Destroys a stream without waiting for its tasks. Optional.
                fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError;
                // not called by devipc yet (see the module docs)
                /// Resets a device whatever the number of `aclrtSetDevice` calls. Optional:
                /// newer than the 2024 header.
                fn aclrtResetDeviceForce(deviceId: i32) -> aclError;
                /// Events: creates an event with `flag` (an `ACL_EVENT_*` combination;
                /// `ACL_EVENT_IPC` alone for an event other processes open). RT-DOC 07;
                /// api-facts A.9. Optional: runtimes before the event API lack it; devipc's
                /// signal wait records and polls one (backend-ascend `notify.rs`).
                fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError;
                // not called by devipc yet (see the module docs)
                /// Events: creates a local event with `flag` (a combination of
                /// `ACL_EVENT_SYNC`, `ACL_EVENT_CAPTURE_STREAM_PROGRESS`, `ACL_EVENT_TIME_LINE`
                /// and `ACL_EVENT_DEVICE_USE_ONLY`, or `ACL_EVENT_EXTERNAL` alone; never
                /// `ACL_EVENT_IPC`). RT-DOC `aclrtCreateEventWithFlag`. Optional: torch_npu
                /// probes for it (`AclInterface.cpp`).
                fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError;
                /// Events: destroys an event (each process destroys its own).
                fn aclrtDestroyEvent(event: aclrtEvent) -> aclError;
                /// Events: records the event on a stream.
                fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError;
                /// Events: makes a stream wait until the event's latest record completed (at
                /// once if it never was recorded).
                fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError;
                /// Events: blocks the host until the event's latest record completed.
                fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError;
                /// Events: as `aclrtSynchronizeEvent`, bounded: `timeout` in milliseconds,
                /// -1 = forever, 0 and below -1 refused (107000); expiry is
                /// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT` (507047). The backend's signal wait
                /// blocks on it. hicann/runtime `src/acl/aclrt_impl/event.cpp`.
                fn aclrtSynchronizeEventWithTimeout(event: aclrtEvent, timeout: i32) -> aclError;
                /// Events: whether the event's latest record completed.
                fn aclrtQueryEventStatus(event: aclrtEvent, status: *mut aclrtEventRecordedStatus) -> aclError;
                /// IPC events: the 64-byte handle of an event created with `ACL_EVENT_IPC`.
                /// Optional: newer than the 2024 header. api-facts A.9, C.7.
                fn aclrtIpcGetEventHandle(event: aclrtEvent, handle: *mut aclrtIpcEventHandle) -> aclError;
                /// IPC events: opens another process's event from its handle (by value).
                fn aclrtIpcOpenEventHandle(handle: aclrtIpcEventHandle, event: *mut aclrtEvent) -> aclError;
                /// Device ids (issue 16): the logical device id (the driver's, in the
                /// container) of user device `userDevid` (the process's id, renumbered by
                /// `ASCEND_RT_VISIBLE_DEVICES`: user id i is the i-th listed logical id).
                /// Optional: newer than the 2024 header (CANN 8.x). An id that is not a
                /// visible device fails (the runtime's `RT_ERROR_DEVICE_ID`, 107001).
                fn aclrtGetLogicDevIdByUserDevId(userDevid: i32, logicDevId: *mut i32) -> aclError;
                /// Device ids: the user device id of logical device `logicDevId`; a logical
                /// id that exists but is not visible in this process fails like one that
                /// does not exist. Optional: CANN 8.x.
                fn aclrtGetUserDevIdByLogicDevId(logicDevId: i32, userDevid: *mut i32) -> aclError;
                /// Device ids: the logical device id of physical device `phyDevId` (the
                /// host's numbering; inside a container logical ids are renumbered).
                /// Optional: CANN 8.x.
                fn aclrtGetLogicDevIdByPhyDevId(phyDevId: i32, logicDevId: *mut i32) -> aclError;
                /// Device ids: the physical device id of logical device `logicDevId`.
                /// Optional: CANN 8.x.
                fn aclrtGetPhyDevIdByLogicDevId(logicDevId: i32, phyDevId: *mut i32) -> aclError;
                /// The 16-byte UUID of user device `deviceId`, the same for one physical
                /// device in every process. Optional: CANN 8.x.
                fn aclrtDeviceGetUuid(deviceId: i32, uuid: *mut aclrtUuid) -> aclError;
                /// Notify: clears `num` notifies at once, on the host, without waiting
                /// ("批量复位Notify", RT-DOC 08). devipc's signal wait calls it when a
                /// vendor wait it left pending consumed a record in the background, so
                /// that records made in between count once (backend-ascend `notify.rs`).
                /// Optional: CANN 8.x, Atlas A2/A3 only; api-facts A.8.
                fn aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) -> aclError;
            }
        }
    };
}
