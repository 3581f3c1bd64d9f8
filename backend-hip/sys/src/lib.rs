//! HIP runtime C ABI for devipc: C types, constants and the [`HipApi`] function table.
//!
//! This is the `sys` layer of the HIP backend. It sits directly on the vendor C ABI
//! (`libamdhip64.so`, or the devipc emulator, which implements the same ABI over host
//! memory) and below `devipc-hip`, which builds the checked calls and the `DeviceIpc`
//! implementation on top. Nothing here interprets results: functions return raw
//! `hipError_t` codes.
//!
//! - [`types`]: `hipError_t`, streams, events, the 64-byte IPC handles.
//! - [`consts`]: flags (incl. the ROCm 5/6 `hipIpcMemLazyEnablePeerAccess` split), copy
//!   kinds, every `hipError_t` value and a code-to-name table.
//! - [`api`]: the one list of functions ([`for_each_hip_fn!`]) and the [`HipApi`] table,
//!   filled by `libloading` ([`HipApi::discover`], [`HipApi::load`]), at link time
//!   (`HipApi::linked`, feature `link`) or from an emulator module
//!   ([`hip_api_from_module!`]).
//! - [`discovery`]: where to look for the library.
//!
//! Every function in the table exists since ROCm 4.2, so all are required.
#![allow(non_camel_case_types, non_upper_case_globals)]

pub mod api;
pub mod consts;
pub mod discovery;
pub mod types;

pub use api::HipApi;
pub use consts::*;
pub use discovery::Candidate;
pub use types::*;

/// Names the exported macros reach through `$crate`; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use devipc_core::LibrarySource;
}
