//! Findings of the 2026-11-28 audit on the Ascend backend, against the fake runtime:
//!
//! - N6: on a runtime without `aclrtMemGetAddressRange`, `export_external` never hands
//!   the runtime's key export a pointer devipc cannot check: `Unsupported` naming the
//!   call, except for blocks `framework_malloc` made;
//! - N13: a failed `aclrtIpcMemClose` of a key import keeps the import and its lease
//!   hold (the exporter's close still waits), and a retry closes it.

use devipc_core::{DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions};
use serial_test::serial;

use super::*;

#[test]
#[serial]
fn without_mem_get_address_range_only_framework_blocks_export() {
    let mut api = fake_api();
    api.aclrtMemGetAddressRange = None;
    let b = backend(api);
    let (base, _) = fake::with(|s| s.block);
    calls();
    // Any pointer: devipc cannot ask the runtime which block holds it.
    match b.export_external(
        DeviceId(0),
        DevicePtr(base as u64),
        4096,
        ExportOptions::default(),
    ) {
        Err(Error::Unsupported { what, .. }) if what.contains("aclrtMemGetAddressRange") => {}
        other => panic!("an unchecked pointer: {other:?}"),
    }
    assert_eq!(count(&calls(), "aclrtIpcMemGetExportKey"), 0);

    // A block of framework_malloc is known: a pointer inside it exports the whole block.
    let p = b.framework_malloc(DeviceId(1), 8192).unwrap();
    let inside = p.offset(4096).unwrap();
    let t = b
        .export_external(DeviceId(1), inside, 100, ExportOptions::default())
        .unwrap();
    assert_eq!((t.offset(), t.len(), t.object_size()), (4096, 100, 8192));
    let c = calls();
    assert!(
        c.contains(&format!("aclrtIpcMemGetExportKey({:#x},8192,65,0)", p.0)),
        "{c:?}"
    );
    // Not past its end, nor under another device.
    for (device, ptr, len) in [(1, p, 8193), (1, inside, 4097), (0, p, 100)] {
        match b.export_external(DeviceId(device), ptr, len, ExportOptions::default()) {
            Err(Error::Unsupported { .. }) => {}
            other => panic!("{len} bytes at {ptr} on device {device}: {other:?}"),
        }
    }
    // SAFETY: the block of framework_malloc above, not freed yet, with no view of it.
    unsafe { b.framework_free(DeviceId(1), p) }.unwrap();
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        1,
        "the key closed first"
    );
    // Freed: unknown again.
    assert!(matches!(
        b.export_external(DeviceId(1), p, 100, ExportOptions::default()),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
#[serial]
fn a_failed_key_import_close_keeps_the_hold_and_a_retry_closes() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(0), 8192, 0, 4096);
    let lease = devipc_shm::lease::held::reopen(&token.payload()[65..]).unwrap();
    let m = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(lease.live_holders(), 1);
    calls();
    fail_nth("aclrtIpcMemClose", 1, 507899);
    assert!(b.close(m.clone()).is_err());
    assert_eq!(
        lease.live_holders(),
        1,
        "the key may still be mapped: the hold stays"
    );
    // The exporter's close still waits for this import.
    let (base, _) = fake::with(|s| s.block);
    assert!(matches!(
        b.close_external(DeviceId(0), DevicePtr(base as u64)),
        Err(Error::InvalidArgument { .. })
    ));
    // The mapping is still usable, and the retry closes it.
    b.close(m.clone()).unwrap();
    assert_eq!(lease.live_holders(), 0);
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        2,
        "the failed one and the retry"
    );
    assert!(matches!(b.close(m), Err(Error::UnknownHandle { .. })));
    b.close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap();
}
