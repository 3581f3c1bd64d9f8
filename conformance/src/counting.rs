//! Counting function tables: every vendor call a backend makes, counted per function.
//!
//! Two portable guarantees are about vendor calls that do *not* happen (DESIGN 5.1: a
//! same-process import makes no vendor call; 5.2: a repeated import makes one vendor
//! import and, at the last drop, one vendor close). To observe that on any runtime, real
//! or emulated, [`wrap_acl`] and [`wrap_hip`] replace every function pointer of a loaded
//! [`AclApi`] / [`HipApi`] with a wrapper that counts the call and forwards it to the
//! original. The table keeps its library and its [`LibrarySource`](devipc_core::LibrarySource),
//! so the backend built on it behaves exactly as on the plain table; [`calls`] reads the
//! counts. Both wrapper sets are generated from the vendor function lists
//! (`for_each_acl_fn!`, `for_each_hip_fn!`), so no function can be missed.
//!
//! One table of each kind can be wrapped per process (the originals live in a static);
//! scenarios run in their own processes, so that is all they need.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use devipc_ascend_sys::AclApi;
use devipc_hip_sys::HipApi;

static COUNTS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

fn record(name: &'static str) {
    let mut counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    *counts.entry(name).or_insert(0) += 1;
}

/// How many times the vendor function `name` was called through a wrapped table.
pub fn calls(name: &str) -> u64 {
    let counts = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    counts.get(name).copied().unwrap_or(0)
}

/// Every function called so far through a wrapped table, with its count.
pub fn all_calls() -> BTreeMap<&'static str, u64> {
    COUNTS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Generates, in the module it is expanded in, the counting wrappers of one vendor table:
/// the saved originals, one forwarding wrapper per listed function, and `install`. The
/// callback of `for_each_acl_fn!` / `for_each_hip_fn!`, with `[Table, "what"]` passed
/// through.
macro_rules! counting_table {
    (
        [$table:ty, $what:literal]
        required { $( $(#[$rd:meta])* fn $r:ident ( $($rp:ident : $rt:ty),* $(,)? ) -> $rr:ty ; )* }
        optional { $( $(#[$od:meta])* fn $o:ident ( $($op:ident : $ot:ty),* $(,)? ) -> $or:ty ; )* }
    ) => {
        /// The original pointers of the wrapped table.
        #[allow(non_snake_case, reason = "fields carry the vendor's function names")]
        pub(super) struct Original {
            $( $r: unsafe extern "C" fn($($rt),*) -> $rr, )*
            $( $o: Option<unsafe extern "C" fn($($ot),*) -> $or>, )*
        }

        pub(super) static ORIGINAL: OnceLock<Original> = OnceLock::new();

        #[allow(dead_code, reason = "unused when a list has no functions of a kind")]
        fn original() -> &'static Original {
            // Wrappers are installed only after ORIGINAL is set.
            ORIGINAL.get().expect("the counting table is installed")
        }

        $(
            #[allow(non_snake_case, reason = "the vendor's names")]
            unsafe extern "C" fn $r($($rp: $rt),*) -> $rr {
                super::record(stringify!($r));
                // SAFETY: the caller upholds the contract of the vendor function, which is
                // forwarded unchanged to the original pointer of the same signature.
                unsafe { (original().$r)($($rp),*) }
            }
        )*
        $(
            #[allow(non_snake_case, reason = "the vendor's names")]
            unsafe extern "C" fn $o($($op: $ot),*) -> $or {
                super::record(stringify!($o));
                // Installed only when the original table has the function.
                let f = original().$o.expect("wrapper installed only for present functions");
                // SAFETY: as for the required functions.
                unsafe { f($($op),*) }
            }
        )*

        /// Saves the table's pointers and installs the counting wrappers.
        pub(super) fn install(api: &mut $table) -> Result<(), String> {
            ORIGINAL
                .set(Original { $( $r: api.$r, )* $( $o: api.$o, )* })
                .map_err(|_| format!("{} table is already wrapped in this process", $what))?;
            $( api.$r = $r; )*
            $( if api.$o.is_some() { api.$o = Some($o); } )*
            Ok(())
        }
    };
}

mod acl_wrap {
    #[allow(
        clippy::wildcard_imports,
        reason = "the function list names the C types bare, as the headers do"
    )]
    use devipc_ascend_sys::types::*;
    use std::sync::OnceLock;

    use devipc_ascend_sys::AclApi;

    devipc_ascend_sys::for_each_acl_fn!(counting_table; AclApi, "an ACL");
}

mod hip_wrap {
    #[allow(
        clippy::wildcard_imports,
        reason = "the function list names the C types bare, as the headers do"
    )]
    use devipc_hip_sys::types::*;
    use std::sync::OnceLock;

    use devipc_hip_sys::HipApi;

    devipc_hip_sys::for_each_hip_fn!(counting_table; HipApi, "a HIP");
}

/// Makes every call through `api` counted (see the module docs).
pub fn wrap_acl(api: &mut AclApi) -> Result<(), String> {
    acl_wrap::install(api)
}

/// Makes every call through `api` counted (see the module docs).
pub fn wrap_hip(api: &mut HipApi) -> Result<(), String> {
    hip_wrap::install(api)
}

/// Whether a table of either kind is wrapped in this process.
pub fn active() -> bool {
    is_set(&acl_wrap::ORIGINAL) || is_set(&hip_wrap::ORIGINAL)
}

fn is_set<T>(cell: &OnceLock<T>) -> bool {
    cell.get().is_some()
}
