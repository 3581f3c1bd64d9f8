//! HIP runtime C ABI for devipc: C types, constants and the [`HipApi`] function table.
//!
//! This is the `sys` layer of the HIP backend. It sits directly on the vendor C ABI
//! (`libamdhip64.so`, or the devipc emulator, which implements the same ABI over host
//! memory) and below `devipc-hip`, which builds the checked calls and the `DeviceIpc`
//! implementation on top. Nothing here interprets results: functions return raw
//! `hipError_t` codes.
//!
//! - [`types`]: `hipError_t`, streams, events, contexts, the 64-byte IPC handles,
//!   `hipPointerAttribute_t`.
//! - [`consts`]: flags (incl. the ROCm 5/6 `hipIpcMemLazyEnablePeerAccess` split), copy
//!   kinds, every `hipError_t` value and a code-to-name table.
//! - [`api`]: the one list of functions ([`for_each_hip_fn!`]) and the [`HipApi`] table,
//!   filled by `libloading` ([`HipApi::discover`], [`HipApi::load`]), at link time
//!   (`HipApi::linked`, feature `link`) or from an emulator module
//!   ([`hip_api_from_module!`]).
//! - [`discovery`]: where to look for the library.
//!
//! Every required function of the table exists since ROCm 4.2 (`@@hip_4.2` in ROCm 5.2's
//! `libamdhip64.so.5`); `hipGetProcAddress` (ROCm 6.2+) is optional, `None` where the
//! runtime lacks it.
//!
//! # Feature `link`
//!
//! `HipApi::linked()` fills the table from `extern "C"` declarations linked against
//! `libamdhip64` through the `hip-sys` 0.1 crate, whose prototypes are checked against this
//! crate's list at compile time. `hip-sys` ships pre-generated bindings (HIP 5.4 headers;
//! no bindgen, no libclang by default), but its build script still requires
//! `$HIP_PATH/include/hip/hip_runtime_api.h` (else `$ROCM_PATH`, `/opt/rocm`,
//! `/opt/rocm/hip`, or `hipconfig -p`) and links `-lamdhip64` from `$HIP_PATH/lib` or the
//! default linker path. On Debian 12 / Ubuntu:
//!
//! ```text
//! apt-get install -y libamdhip64-dev        # ROCm 5.2.3 headers, libamdhip64.so -> .so.5
//! HIP_PATH=/usr cargo test -p devipc-hip-sys --features link
//! ```
//! Without the headers the build fails in `hip-runtime-sys`'s build script ("Unable to
//! find include path containing `hip/hip_runtime_api.h`"), so `--all-features` builds need
//! the same setup.
//!
//! # Testing against the real runtime
//!
//! `tests/real_runtime.rs` loads the installed runtime (`HipApi::discover()`, or
//! `HipApi::linked()` with `link`) and checks its version, its no-GPU error codes and the
//! error-name table. Without the library it prints `SKIPPED: ...` and passes, unless
//! `DEVIPC_NO_SKIP=1` (CI with `libamdhip64-dev` installed should set it). No GPU needed.
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
