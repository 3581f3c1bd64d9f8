//! What the two vendor `sys` crates (`devipc-hip-sys`, `devipc-ascend-sys`) share, so
//! that they have one shape.
//!
//! Each sys crate writes its vendor's function list once (`for_each_hip_fn!`,
//! `for_each_acl_fn!`) and its search order once; everything generic lives here:
//!
//! - [`define_fn_table!`]: from such a list, the fn-pointer table struct (`HipApi`,
//!   `AclApi`) that owns its `libloading::Library`, the loader (a missing required
//!   symbol is [`Error::MissingSymbol`](devipc_core::Error::MissingSymbol), a missing
//!   optional one `None`), and the same public methods on both tables: `discover`,
//!   `discover_with_env`, `load`, `load_first`, `source`, `missing_optional`.
//! - [`declare_linked_fns!`] and [`linked_table!`]: the `link` feature's `extern "C"`
//!   block and the `linked()` table built from it.
//! - [`discovery`]: [`Candidate`], a vendor's [`SearchOrder`] turned into the ordered
//!   candidate list, and [`open_first`], which tries candidates in order and records a
//!   [`LoadAttempt`](devipc_core::LoadAttempt) per failure.
//!
//! This crate sits below both sys crates and above `devipc-core` (for the error and
//! attempt types). It knows no vendor.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod discovery;
mod linked;
mod table;

pub use discovery::{Candidate, LOADER_PATH_ORIGIN, SearchOrder, open_first};

/// Names the exported macros reach through `$crate`; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use devipc_core::{Error, LibrarySource, Result};
    pub use libloading::Library;
    pub use libloading::os::unix::Library as UnixLibrary;
}
