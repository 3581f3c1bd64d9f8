//! A dead process's emulator objects are reclaimed when the next process starts (ACL
//! side), with real processes and `kill -9`: an exporter killed while an importer maps
//! its memory, a notifier killed while a peer waits on its notify. A fresh pair of
//! processes then runs a normal export/import cycle; nobody calls `gc` explicitly.
//! Afterwards the state directory holds only what live processes still hold (the memory
//! the importer maps, the notify the waiter imported), with no dead holder, and once those
//! close, nothing but the ledger (as a driver frees an exited process's memory).

use crate::acl_support::{AclRoot, EmuRoot, TestRoot};
use crate::emu_support::assert_no_dead_holders;
use devipc_emulator::state::gc::needs_gc;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

const MB: u64 = 2 << 20;

#[test]
fn the_next_process_reclaims_a_killed_exporters_and_notifiers_objects() {
    let root = TestRoot::new("acl-crash-reclaim");
    let mut exporter = root.spawn("exporter", &[]);
    let mut importer = root.spawn("importer", &[]);
    let mut notifier = root.spawn("notifier", &[]);
    let mut waiter = root.spawn("waiter", &[]);
    for p in [&mut exporter, &mut importer, &mut notifier, &mut waiter] {
        p.ok("set-device 0");
    }

    // The exporter shares one block and keeps a private block and notify of its own.
    let shared = exporter.val(&format!("malloc {MB}"));
    // What the shared block is charged (aclrtMalloc pads its size).
    let charged = root.used(0);
    exporter.ok(&format!("write {shared} 5 4096"));
    let key = exporter.val(&format!("key-export {shared} {MB} 65 1"));
    exporter.val(&format!("malloc {MB}"));
    exporter.val("notify-create");
    let imported = importer.val(&format!("key-import {key}"));
    importer.ok(&format!("check {imported} 5 4096"));

    // The notifier shares a notify (and owns a block); the waiter waits on it.
    let n = notifier.val("notify-create");
    let nkey = notifier.val(&format!("notify-export {n} 65 2"));
    notifier.val(&format!("malloc {MB}"));
    let wn = waiter.val(&format!("notify-import {nkey}"));
    waiter.send(&format!("notify-wait {wn} 2"));
    std::thread::sleep(std::time::Duration::from_millis(200));

    notifier.kill9();
    exporter.kill9();
    // The wait ends by its timeout (107019), not by the notifier's death.
    let failure = waiter.reply().expect_err("the notify was never recorded");
    assert_eq!(failure.code, 107019, "{failure:?}");
    assert!(
        needs_gc(root.state().registry()).unwrap(),
        "the killed processes left objects"
    );

    // A fresh pair runs a normal cycle; the first of them to start sweeps.
    let mut a = root.spawn("fresh-exporter", &[]);
    let mut b = root.spawn("fresh-importer", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val("malloc 65536");
    a.ok(&format!("write {p} 9 65536"));
    let k = a.val(&format!("key-export {p} 65536 65 1"));
    let q = b.val(&format!("key-import {k}"));
    b.ok(&format!("check {q} 9 65536"));
    b.ok(&format!("key-close {k}"));
    a.ok(&format!("key-close {k}"));
    a.ok(&format!("free {p}"));
    a.exit();
    b.exit();

    // Only what the live importer and waiter hold is left, held by them alone (the
    // exited processes' liveness beacons are swept first, as the next process would).
    assert_no_dead_holders(&root.state());
    assert_eq!(
        root.used(0),
        charged,
        "only the imported block is still charged"
    );
    // The importer's view survived the sweep, bytes intact.
    importer.ok(&format!("check {imported} 5 4096"));
    importer.ok(&format!("key-close {key}"));
    waiter.ok(&format!("notify-destroy {wn}"));
    importer.exit();
    waiter.exit();
    exporter.reap();
    notifier.reap();
    root.assert_clean();
}
