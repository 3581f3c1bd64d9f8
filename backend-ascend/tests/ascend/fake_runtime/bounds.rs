//! Bounds and error paths after the vendor import (devipc issue 12, items 1 and 10): a
//! view beyond the mapped block or the export is refused, and what the import acquired
//! (the vendor import, its lease) is released without touching older imports.

use devipc_ascend::sys::acl_api_from_module;
use devipc_core::{DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, MemToken};
use serial_test::serial;

use super::*;

/// A VMM import whose mapped block the runtime reports smaller than the token's range is
/// refused after the map, and everything the import acquired is released.
#[test]
#[serial]
fn a_vmm_view_beyond_the_mapped_block_is_refused_and_the_import_released() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(0));
    fake::with(|s| s.range_at_ptr = Some(8192));
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    fake::with(|s| s.range_at_ptr = None);
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    let c = calls();
    for undo in [
        "aclrtUnmapMem",
        "aclrtReleaseMemAddress",
        "aclrtFreePhysical",
    ] {
        assert_eq!(count(&c, undo), 1, "{undo}: {c:?}");
    }
    // Nothing is left for the drop to release but the allocation.
    b.free(alloc).unwrap();
    calls();
    drop(b);
    assert_eq!(count(&calls(), "aclrtUnmapMem"), 0);
}

/// A VMM token claiming more than the exporter's record is refused before any vendor
/// call (the exporter's record is the size, not the token).
#[test]
#[serial]
fn a_vmm_token_claiming_more_than_the_export_is_refused_before_the_runtime() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(0));
    let mut parts = token.to_parts();
    parts.object_size += 4096;
    parts.len = parts.object_size - parts.offset;
    let grown = MemToken::new(parts).unwrap();
    let mut parts = token.to_parts();
    parts.generation += 1;
    let relabelled = MemToken::new(parts).unwrap();
    calls();
    for t in [&grown, &relabelled] {
        let err = b.import(t, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    }
    assert_eq!(calls(), Vec::<String>::new());
    b.free(alloc).unwrap();
}

/// A key import refused after `aclrtIpcMemImportByKey` (the runtime reports a smaller
/// block than the range) closes that import and drops its lease hold: the exporter's
/// `close_external` then succeeds.
#[test]
#[serial]
fn a_key_import_refused_after_the_vendor_import_is_closed_and_its_lease_released() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    let token = b
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            8192,
            ExportOptions::default(),
        )
        .unwrap();
    fake::with(|s| s.key_import_size = 4096);
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    let c = calls();
    assert_eq!(count(&c, "aclrtIpcMemImportByKey"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtIpcMemClose"), 1, "{c:?}");
    // The hold is gone with the import: the exporter may close its key.
    b.close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 1);
}

/// A failed key import must not close an older import of the same key: the runtime's
/// close unmaps the key's *oldest* import in the process, so the failed one is closed
/// only once the older one is.
#[test]
#[serial]
fn a_failed_key_import_does_not_close_an_older_import_of_the_key() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(0), 8192, 0, 8192);
    let older = b.import(&token, DeviceId(0)).unwrap();
    fake::with(|s| s.key_import_size = 4096);
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        0,
        "the older import stays mapped"
    );
    b.close(older).unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 2, "both, oldest first");
}

/// A key token stripped of its lease, of a key devipc exported, still holds the lease the
/// exporter recorded: the exporter's close is refused while that import lives.
#[test]
#[serial]
fn a_key_token_stripped_of_its_lease_still_holds_the_exporters_lease() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    let token = b
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            4096,
            ExportOptions::default(),
        )
        .unwrap();
    let mut parts = token.to_parts();
    parts.payload.truncate(65);
    let stripped = MemToken::new(parts).unwrap();
    // SAFETY: the `fake` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let importer = backend(unsafe { acl_api_from_module!(fake) });
    let m = importer.import(&stripped, DeviceId(0)).unwrap();
    let err = b
        .close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap_err();
    assert!(err.to_string().contains("importers still have"), "{err}");
    importer.close(m).unwrap();
    b.close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap();
}

/// The exporter frees its allocation after the importer checked the export record and
/// before the runtime imports the handle: the runtime refuses the dead handle, and devipc
/// reports the replay it is (the record is gone), not a vendor error (review of issue 14,
/// finding F3).
#[test]
#[serial]
fn an_import_racing_the_exporters_free_is_a_replay_not_a_vendor_error() {
    let b = std::sync::Arc::new(backend(fake_api()));
    let (alloc, token) = exported_vmm_token(&b, DeviceId(0));
    let exporter = std::sync::Arc::clone(&b);
    fake::with(|s| {
        s.during_import = Some(Box::new(move || {
            exporter.free(alloc).unwrap();
            // What the runtime answers for a handle whose allocation was freed.
            fake::with(|s| s.fail.insert("aclrtMemImportFromShareableHandle", 107017));
        }))
    });
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    fake::with(|s| s.fail.clear());
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("already freed")),
        "{err:?}"
    );
}
