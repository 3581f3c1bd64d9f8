//! devipc backend for Huawei Ascend NPUs: [`DeviceIpc`](devipc_core::DeviceIpc) on the
//! ACL runtime.
//!
//! Sits below the `devipc` facade and above `devipc-ascend-sys` (the `AclApi` function
//! table, filled from a discovered `libascendcl.so` / `libacl_rt.so`, or from the devipc
//! emulator). How the trait maps to ACL:
//!
//! | trait | ACL |
//! |---|---|
//! | allocate / free | `aclrtMemGetAllocationGranularity`, `aclrtMallocPhysical`, `aclrtReserveMemAddress`, `aclrtMapMem`, `aclrtMemSetAccess` / unmap, release, `aclrtFreePhysical` |
//! | export | `aclrtMemExportToShareableHandle`, once per allocation (see [`vmm`]); the token carries the `u64` handle and the range |
//! | export_external | IPC key of the whole `aclrtMalloc` block: `aclrtMemGetAddressRange`, `aclrtIpcMemGetExportKey` (see [`ipc_key`]) |
//! | grant | `aclrtMemSetPidToShareableHandle` / `aclrtIpcMemSetImportPid` / `aclrtNotifySetImportPid` |
//! | import / close | `aclrtMemImportFromShareableHandle`, reserve, map, set access / unmap, release, free; or `aclrtIpcMemImportByKey` / `aclrtIpcMemClose` |
//! | read / write | `aclrtMemcpy`; for memory imported by IPC key onto another device than the exporter's, a staging buffer and `aclrtMemcpyAsync` device to device (`device.rs`) |
//! | signals | IPC Notify (see [`notify`]) |
//! | process_id | `aclrtDeviceGetBareTgid` (the host pid, even inside a container) |
//!
//! Every vendor call is one small function of a private `result` layer (one per ACL
//! call, as in cudarc: plain arguments in, the out-parameters and status as a `Result`
//! out), which goes through one checked-call helper that builds
//! [`Error::Vendor`](devipc_core::Error::Vendor) with the code's name from devipc's
//! table and the runtime's `aclGetRecentErrMsg`; an optional function the runtime lacks
//! is [`Error::Unsupported`](devipc_core::Error::Unsupported). Every call binds the
//! device it needs and restores the caller's. Which optional families the runtime has
//! shows in [`Capabilities`](devipc_core::Capabilities).
//!
//! With feature `emulator`, `AscendBackend::emulated()` starts the backend on the devipc
//! emulator linked into the process (host shared memory, no device).
//!
//! # Layout
//!
//! By mechanism, with the names the emulator (`emulator/src/acl`) and the conformance
//! catalogue (`conformance/src/catalogue/ascend`) use: `backend.rs` holds
//! [`AscendBackend`] (open, `Drop`) and its `impl DeviceIpc`, which hands each call to
//! the mechanism's module: [`vmm`] (`ascend-vmm`, devipc's own allocations), [`ipc_key`]
//! (`ascend-ipc-key`, framework memory) or [`notify`] (`ascend-notify`, signals). The
//! support modules are `device` (binding the thread's device, peer access, host copies
//! and their staged route), `record` (export records) and `result` (the checked ACL
//! calls, and the `Rollback` that undoes a failed acquire).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod device;
mod generation;
mod init;
pub mod ipc_key;
pub mod notify;
mod record;
mod result;
mod stream;
pub mod vmm;

pub use backend::AscendBackend;
pub use device::STAGING_CHUNK;
pub use devipc_ascend_sys as sys;
