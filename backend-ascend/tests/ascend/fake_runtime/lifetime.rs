//! Dropping a backend: everything still live is released (a failing release is
//! reported, not a panic), and an exporter dropped under a live importer (devipc issue
//! 12, item 6) leaves the key open and ACL initialised.

use devipc_ascend::sys::acl_api_from_module;
use devipc_core::{DeviceId, DeviceIpc, DevicePtr, ExportOptions};
use serial_test::serial;

use super::*;

#[test]
#[serial]
fn drop_releases_everything_still_live() {
    let b = backend(fake_api());
    let (_alloc, token) = exported_vmm_token(&b, DeviceId(0));
    b.import(&token, DeviceId(0)).unwrap();
    b.create_signal(DeviceId(1)).unwrap();
    let (base, _) = fake::with(|s| s.block);
    b.export_external(
        DeviceId(0),
        DevicePtr(base as u64),
        8,
        ExportOptions::default(),
    )
    .unwrap();
    // A release failing during the drop is reported, not a panic.
    fail("aclrtDestroyNotify", 107017);
    calls();
    drop(b);
    let c = calls();
    assert_eq!(count(&c, "aclrtDestroyNotify"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtUnmapMem"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtFreePhysical"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtIpcMemClose"), 1, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 1, "{c:?}");
}

/// A backend dropped while an importer holds its key export leaves the key open, and the
/// last backend then does not finalize ACL (which could tear the key down under the
/// importer).
#[test]
#[serial]
fn a_key_left_open_for_an_importer_keeps_acl_initialised() {
    let exporter = backend(fake_api());
    assert!(exporter.initialized_acl());
    let (base, _) = fake::with(|s| s.block);
    let token = exporter
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            4096,
            ExportOptions::default(),
        )
        .unwrap();
    // SAFETY: the `fake` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let importer = backend(unsafe { acl_api_from_module!(fake) });
    let m = importer.import(&token, DeviceId(0)).unwrap();
    calls();
    drop(exporter);
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        0,
        "the key stays open for the importer"
    );
    // The dropped export no longer imports.
    let err = importer.import(&token, DeviceId(0)).unwrap_err();
    assert!(err.to_string().contains("already freed"), "{err}");
    importer.close(m).unwrap();
    drop(importer);
    let c = calls();
    assert_eq!(
        count(&c, "aclrtIpcMemClose"),
        1,
        "the import's close: {c:?}"
    );
    assert_eq!(count(&c, "aclFinalize"), 0, "{c:?}");
}
