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
//! | export | `aclrtMemExportToShareableHandle`, once per allocation (see [`memory`]); the token carries the `u64` handle and the range |
//! | export_external | IPC key of the whole `aclrtMalloc` block: `aclrtMemGetAddressRange`, `aclrtIpcMemGetExportKey` (see [`external`]) |
//! | grant | `aclrtMemSetPidToShareableHandle` / `aclrtIpcMemSetImportPid` / `aclrtNotifySetImportPid` |
//! | import / close | `aclrtMemImportFromShareableHandle`, reserve, map, set access / unmap, release, free; or `aclrtIpcMemImportByKey` / `aclrtIpcMemClose` |
//! | read / write | `aclrtMemcpy`; for memory imported by IPC key onto another device than the exporter's, a staging buffer and `aclrtMemcpyAsync` device to device (see [`staging`]) |
//! | signals | IPC Notify (see [`signal`]) |
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
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod device;
mod device_ipc;
pub mod external;
pub mod memory;
mod record;
mod result;
mod rollback;
pub mod signal;
pub mod staging;

pub use backend::AscendBackend;
pub use devipc_ascend_sys as sys;
