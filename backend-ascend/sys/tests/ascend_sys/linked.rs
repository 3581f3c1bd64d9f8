//! Feature `link`: `AclApi::linked()` is the table of the `libascendcl` this binary links.
//!
//! There is no CANN on CI; `.ci/run` stands in the devipc emulator's cdylib (which exports
//! every ACL symbol under its vendor name) as `libascendcl.so` in a temporary directory,
//! and points `DEVIPC_ASCEND_LINK_DIR` (link time) and `LD_LIBRARY_PATH` (run time)
//! there. The checks hold for the real runtime as well: the table's pointers are the
//! process's own definitions of the vendor names, and the calls made validate their
//! arguments before touching any device.

use std::ffi::c_void;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::ACL_ERROR_INVALID_PARAM;
use devipc_core::LibrarySource;

/// The address the dynamic loader gives `name` in this process.
fn process_symbol(name: &str) -> *const c_void {
    let this = libloading::os::unix::Library::this();
    let c_name = format!("{name}\0");
    // SAFETY: the symbol is only read as an address, never called.
    let symbol = unsafe { this.get::<*const c_void>(c_name.as_bytes()) };
    symbol.map_or(std::ptr::null(), |s| s.into_raw().cast_const())
}

#[test]
fn linked_table_points_at_the_linked_library() {
    let api = AclApi::linked();
    assert_eq!(api.source(), &LibrarySource::Linked);
    assert!(
        !format!("{api:?}").contains("owns_library: true"),
        "{api:?}"
    );

    // Every required field is the process's definition of that vendor name.
    assert_eq!(api.aclInit as *const c_void, process_symbol("aclInit"));
    assert_eq!(
        api.aclrtGetDeviceCount as *const c_void,
        process_symbol("aclrtGetDeviceCount")
    );
    // Optional ones were found the same way, or are reported missing.
    for name in api.missing_optional() {
        assert!(
            process_symbol(name).is_null(),
            "{name} exists but was not found"
        );
    }
    if let Some(f) = api.aclrtGetVersion {
        assert_eq!(f as *const c_void, process_symbol("aclrtGetVersion"));
    }

    // SAFETY: a NULL out-pointer is rejected by the runtime before anything is written.
    let rc = unsafe { (api.aclrtGetDeviceCount)(std::ptr::null_mut()) };
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
}
