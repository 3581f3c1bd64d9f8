//! Framework memory exported by IPC key (`export_external`): the key payload with the
//! offset in the block, and a key import on another device asking for peer access.

use devipc_core::{DeviceId, DeviceIpc, DevicePtr, ExportOptions, Mechanism, ProcessId};
use serial_test::serial;

use super::*;

#[test]
#[serial]
fn external_exports_carry_the_whole_key_and_the_offset_in_the_block() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    calls();
    let ptr = DevicePtr(base as u64 + 4096);
    let t = b
        .export_external(DeviceId(1), ptr, 100, ExportOptions::default())
        .unwrap();
    assert_eq!(t.mechanism(), Mechanism::AscendIpcKey);
    assert_eq!(
        t.payload().len(),
        65 + 32,
        "the key buffer, then the lease name"
    );
    assert_eq!(
        &t.payload()[..8],
        b"key\0tail",
        "bytes after the NUL are kept"
    );
    assert_eq!((t.offset(), t.len(), t.object_size()), (4096, 100, 1 << 20));
    let c = calls();
    assert!(
        c.contains(&format!(
            "aclrtIpcMemGetExportKey({:#x},{},65,0)",
            base,
            1 << 20
        )),
        "{c:?}"
    );
    // The same block again reuses its key; the other validation is refused.
    b.export_external(
        DeviceId(1),
        DevicePtr(base as u64),
        1,
        ExportOptions::default(),
    )
    .unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemGetExportKey"), 0);
    assert!(
        b.export_external(DeviceId(1), ptr, 1, ExportOptions::any_process())
            .is_err()
    );
    b.grant(&t, &[ProcessId(9)]).unwrap();
    assert!(calls().contains(&"aclrtIpcMemSetImportPid(key,[9])".to_owned()));

    // Closing the export (exporter side) needs the device and a pointer in the block.
    assert!(b.close_external(DeviceId(0), ptr).is_err());
    b.close_external(DeviceId(1), ptr).unwrap();
    assert!(calls().contains(&"aclrtIpcMemClose(key)".to_owned()));
    assert!(b.close_external(DeviceId(1), ptr).is_err());
}

#[test]
#[serial]
fn a_key_import_on_another_device_asks_for_peer_access() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 8192, 4096, 16);
    calls();
    let same = b.import(&token, DeviceId(1)).unwrap();
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtIpcMemImportByKey(abc,0,on1)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtIpcMemImportByKey(abc,1,on0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(cross.ptr.0 % 4096, 0, "block base + 4096");
    b.close(same).unwrap();
    b.close(cross).unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 2);
}
