//! `aclInit` / `aclFinalize` reference counting and the version queries.
//!
//! Like the vendor's `acl.cpp` (api-facts A.3): the first `aclInit` initialises the
//! process, every further one returns `ACL_ERROR_REPEAT_INITIALIZE` (100002) and counts;
//! each `aclFinalize` uncounts one, and one beyond the count returns
//! `ACL_ERROR_REPEAT_FINALIZE` (100037). Initialising opens the state directory, so a bad
//! `DEVIPC_EMU_*` configuration is reported by `aclInit`. A non-NULL `configPath` must name
//! a readable file (`ACL_ERROR_INVALID_FILE` otherwise); the emulator has no options to
//! read from it. The other calls do not require `aclInit` (the vendor runtime does not
//! uniformly either), and `aclFinalize` releases nothing: what a process holds is released
//! by the calls that own it, or reclaimed when the process exits.
//!
//! Versions: `aclrtGetVersion` reports ACL API 1.16.0 (the `ACL_*_VERSION` of the CANN
//! 8.5.0 headers), and `aclsysGetVersionStr` reports [`VERSION_STR`] for the packages
//! [`PACKAGES`] (`ACL_ERROR_INVALID_FILE`, the vendor's "no such package" code, for
//! others).

use devipc_ascend_sys::codes::ACL_ERROR_INVALID_FILE;
use devipc_ascend_sys::consts::ACL_PKG_VERSION_MAX_SIZE;

use super::errors::{AclFailure, AclResult};
use super::{process_state, rules};
use crate::local::{ForkGuard, ForkLocal, forget_inherited};

/// The ACL API version `aclrtGetVersion` reports: `(major, minor, patch)` of the CANN 8.5.0
/// headers.
pub const ACL_VERSION: (i32, i32, i32) = (1, 16, 0);

/// The package version string `aclsysGetVersionStr` reports: the CANN release the
/// emulated API follows, marked as the emulator.
pub const VERSION_STR: &str = "8.5.0-devipc-emulator";

/// The package names `aclsysGetVersionStr` knows (a CANN install's `share/info`
/// directories plus `driver` and `firmware`).
pub const PACKAGES: &[&str] = &[
    "runtime", "cann", "toolkit", "compiler", "opp", "driver", "firmware",
];

/// `aclInit` calls not yet finalized, in this process (a forked child starts at 0).
static INIT_COUNT: ForkLocal<u64> = ForkLocal::new(forget_inherited);

fn count() -> ForkGuard<'static, u64> {
    INIT_COUNT.lock()
}

/// `aclInit`. `config_path` is the file named by a non-NULL `configPath`.
pub fn init(config_path: Option<&str>) -> AclResult<()> {
    if let Some(path) = config_path.filter(|p| !p.is_empty()) {
        std::fs::File::open(path).map_err(|e| {
            AclFailure::code(
                ACL_ERROR_INVALID_FILE,
                format!("cannot read the configuration file {path:?}: {e}"),
            )
        })?;
    }
    let mut n = count();
    if *n > 0 {
        *n += 1;
        let depth = *n;
        drop(n);
        return super::errors::check(true, rules::INIT_REPEAT, || {
            format!("ACL is already initialized in this process (aclInit count now {depth})")
        });
    }
    process_state::state()?;
    *n = 1;
    Ok(())
}

/// `aclFinalize`.
pub fn finalize() -> AclResult<()> {
    let mut n = count();
    if *n == 0 {
        drop(n);
        return super::errors::check(true, rules::FINALIZE_REPEAT, || {
            "ACL is not initialized (aclFinalize without a matching aclInit)".to_owned()
        });
    }
    *n -= 1;
    Ok(())
}

/// `aclsysGetVersionStr`: the version string of `package` as bytes with the terminating
/// NUL, at most `ACL_PKG_VERSION_MAX_SIZE` long.
pub fn version_str(package: &str) -> AclResult<Vec<u8>> {
    if !PACKAGES.contains(&package) {
        return Err(AclFailure::code(
            ACL_ERROR_INVALID_FILE,
            format!("no version information for package {package:?} (known: {PACKAGES:?})"),
        ));
    }
    let mut bytes = VERSION_STR.as_bytes().to_vec();
    bytes.truncate(ACL_PKG_VERSION_MAX_SIZE - 1);
    bytes.push(0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        let v = version_str("runtime").unwrap();
        assert_eq!(v.last(), Some(&0));
        assert_eq!(&v[..v.len() - 1], VERSION_STR.as_bytes());
        assert_eq!(
            version_str("nonsense").unwrap_err().code,
            ACL_ERROR_INVALID_FILE
        );
    }
}
