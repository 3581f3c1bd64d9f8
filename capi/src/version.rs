//! The ABI version: the header's macros and [`devipc_abi_version`], and devipc's own
//! version ([`devipc_version`]).
//!
//! The major version changes when a function, type or code changes incompatibly (and
//! with it the soname, `libdevipc.so.<major>`); the minor version counts additions.

use std::ffi::c_char;

/// The ABI major version this header declares (the soname is `libdevipc.so.<major>`).
pub const DEVIPC_ABI_VERSION_MAJOR: u32 = 0;

/// The ABI minor version this header declares: additions since the major version.
pub const DEVIPC_ABI_VERSION_MINOR: u32 = 1;

/// The ABI version of the library loaded: `(major << 16) | minor`. A program compiled
/// against this header runs with a library whose major version equals
/// `DEVIPC_ABI_VERSION_MAJOR` and whose minor version is at least
/// `DEVIPC_ABI_VERSION_MINOR`.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_abi_version() -> u32 {
    (DEVIPC_ABI_VERSION_MAJOR << 16) | DEVIPC_ABI_VERSION_MINOR
}

/// The version of devipc the library was built from, e.g. `"0.1.0"`: a static,
/// NUL-terminated string (never freed).
#[unsafe(no_mangle)]
pub extern "C" fn devipc_version() -> *const c_char {
    const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(v) => v,
        Err(_) => panic!("the package version has no NUL"),
    };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soname_carries_the_header_major_version() {
        assert_eq!(
            env!("DEVIPC_CAPI_SONAME_MAJOR"),
            DEVIPC_ABI_VERSION_MAJOR.to_string()
        );
        assert_eq!(devipc_abi_version() >> 16, DEVIPC_ABI_VERSION_MAJOR);
        assert_eq!(devipc_abi_version() & 0xffff, DEVIPC_ABI_VERSION_MINOR);
    }

    #[test]
    fn the_version_is_the_package_version() {
        // SAFETY: devipc_version returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(devipc_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
