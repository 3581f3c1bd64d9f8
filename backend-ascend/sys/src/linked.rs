//! Link mode (feature `link`): [`AclApi::linked`] fills the table from `extern "C"`
//! declarations of the list, resolved by the linker against `libascendcl`.
//!
//! `build.rs` (active only with the feature) adds the library directory to the link
//! search path: `$DEVIPC_ASCEND_LINK_DIR`, else `$ASCEND_HOME_PATH/lib64`, else the first
//! CANN default directory that exists. The prototypes are the list's, which
//! `tests/ascend_sys/abi_headers.rs` checks against the vendor headers; there is no
//! Rust binding crate of CANN to check them against at compile time, as `devipc-hip-sys`
//! does with `hip-sys`.

use crate::AclApi;
#[allow(
    clippy::wildcard_imports,
    unused_imports,
    reason = "the function list names the C types bare, as the headers do"
)]
use crate::types::*;

/// `extern "C"` declarations of every required function of the list (the optional ones
/// may be missing from the linked runtime and are looked up at run time).
mod externs {
    #[allow(
        clippy::wildcard_imports,
        unused_imports,
        reason = "the function list names the C types bare, as the headers do"
    )]
    use crate::types::*;

    crate::for_each_acl_fn!(devipc_sys_common::declare_linked_fns; "ascendcl");
}

impl AclApi {
    /// The table of the ACL runtime linked into this binary at build time, with
    /// [`LibrarySource::Linked`](devipc_core::LibrarySource::Linked).
    ///
    /// Needs feature `link`, which links against `libascendcl` (see `build.rs` for where
    /// it is looked for at build time; at run time the dynamic loader finds it as for any
    /// linked library). The optional functions are looked up in the process, `None` when
    /// the linked runtime lacks them.
    pub fn linked() -> Self {
        crate::for_each_acl_fn!(devipc_sys_common::linked_table; crate::AclApi; externs)
    }
}
