//! devipc backend for AMD GPUs: [`DeviceIpc`](devipc_core::DeviceIpc) on the HIP runtime.
//!
//! Sits below the `devipc` facade and above `devipc-hip-sys` (the `HipApi` function
//! table, filled from a discovered `libamdhip64`, at link time, or from the devipc
//! emulator). How the trait maps to HIP:
//!
//! | trait | HIP |
//! |---|---|
//! | allocate / free | `hipMalloc` / `hipFree` |
//! | allocate_with `hip-vmm-fd` / free | `hipMemCreate` (POSIX fd) + `hipMemAddressReserve` + `hipMemMap` + `hipMemSetAccess` / the reverse (ROCm 6.2+, see `vmm.rs`) |
//! | export of VMM memory, export_fd | `hipMemExportToShareableHandle`: a dma-buf fd the exporter keeps open; the token names it, its identity and the lease |
//! | import / import_fd of `hip-vmm-fd` | the fd by `pidfd_getfd` or beside the token; `hipMemImportFromShareableHandle` (fd by pointer before 7.1, by value from 7.1), reserve, map, set access |
//! | export, export_external | `hipIpcGetMemHandle` of the allocation's base (`hipMemGetAddressRange`); the token carries the offset. VMM memory behind an external pointer (`hipMemRetainAllocationHandle` succeeds) goes the `hip-vmm-fd` way |
//! | grant | nothing: HIP has no access control (`Capabilities::access_control` is false) |
//! | import / close | `hipIpcOpenMemHandle` with the runtime's `hipIpcMemLazyEnablePeerAccess` (0 on ROCm 5, 1 on 6+), plus the offset / `hipIpcCloseMemHandle` |
//! | free of exported memory | deferred until every importer closed (a crash-safe lease, see `ipc_mem/deferred.rs`) |
//! | signals | interprocess event + a futex word in host shared memory (see [`event`]) |
//! | process_id | `getpid` |
//!
//! The source is laid out by mechanism, with the names the emulator (`emulator/src/hip/`)
//! and the conformance catalogue use: `backend.rs` (the struct, its start and drop, and
//! the `impl DeviceIpc` that picks the mechanism), `ipc_mem.rs`, `vmm.rs`, `external.rs`,
//! `event.rs`, plus `device.rs` (device binding and identity, host copies)
//! and `result.rs`. Every vendor call is one small function in `result.rs` (plain
//! arguments, out-parameters as return values); each goes through one checked-call helper
//! that builds [`Error::Vendor`](devipc_core::Error::Vendor) with `hipGetErrorName` and
//! `hipGetErrorString`, and every call binds the needed device and restores the caller's.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod device;
pub mod event;
mod external;
mod generation;
mod ipc_mem;
mod result;
mod stream;
mod vmm;

pub use backend::HipBackend;
pub use devipc_hip_sys as sys;
