//! A dead process's emulator objects are reclaimed when the next process starts (HIP
//! side), with real processes and `kill -9`: an exporter killed while an importer has
//! its memory open, a notifier killed while holding an IPC event a peer waits on. A fresh
//! pair of processes then runs a normal export/open/close cycle; nobody calls `gc`
//! explicitly. Afterwards the state directory holds only what live processes still hold
//! (the memory the importer opened, the event it opened), with no dead holder, and once
//! those close, nothing but the ledger.

use crate::emu_support::assert_no_dead_holders;
use crate::hip_support::*;
use devipc_emulator::state::gc::needs_gc;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

const MIB: u64 = 1 << 20;
const IPC: u32 = hipEventInterprocess | hipEventDisableTiming;

#[test]
fn the_next_process_reclaims_a_killed_exporters_and_notifiers_objects() {
    let root = TestRoot::new("hip-crash-reclaim");
    let v = "6.2";
    let mut exporter = Hip::spawn("exporter", &root, v, &[]);
    let mut importer = Hip::spawn("importer", &root, v, &[]);
    let mut notifier = Hip::spawn("notifier", &root, v, &[]);

    // The exporter shares a block and an event, and keeps a private block.
    let p = exporter.ok(&format!("malloc {MIB}")).num(0);
    exporter.ok(&format!("fill {} 65536 7", hexptr(p)));
    let h = exporter
        .ok(&format!("export {}", hexptr(p)))
        .val(0)
        .to_owned();
    exporter.ok(&format!("malloc {MIB}"));
    let e = exporter
        .ok(&format!("event_create {IPC}"))
        .val(0)
        .to_owned();
    let he = exporter.ok(&format!("event_export {e}")).val(0).to_owned();
    let q = importer.ok(&format!("open {h} {}", lazy(v))).num(0);
    assert_eq!(
        importer.ok(&format!("check {} 65536 7", hexptr(q))).val(0),
        "same"
    );
    let ie = importer.ok(&format!("event_open {he}")).val(0).to_owned();

    // The notifier opens the event to record it, and owns an event and a block.
    notifier.ok(&format!("event_open {he}"));
    notifier.ok(&format!("event_create {IPC}"));
    notifier.ok(&format!("malloc {MIB}"));
    // The importer waits on the event (a stream wait) while the notifier dies.
    importer.ok(&format!("wait_event 0 {ie} 0"));

    notifier.kill();
    exporter.kill();
    assert!(
        needs_gc(root.state().registry()).unwrap(),
        "the killed processes left objects"
    );

    // A fresh pair runs a normal cycle; the first of them to start sweeps.
    let mut a = Hip::spawn("fresh-exporter", &root, v, &[]);
    let mut b = Hip::spawn("fresh-importer", &root, v, &[]);
    let pa = a.ok("malloc 65536").num(0);
    a.ok(&format!("fill {} 65536 9", hexptr(pa)));
    let ha = a.ok(&format!("export {}", hexptr(pa))).val(0).to_owned();
    let qb = b.ok(&format!("open {ha} {}", lazy(v))).num(0);
    assert_eq!(
        b.ok(&format!("check {} 65536 9", hexptr(qb))).val(0),
        "same"
    );
    b.ok(&format!("close {}", hexptr(qb)));
    a.ok(&format!("free {}", hexptr(pa)));
    a.exit();
    b.exit();

    // Only what the live importer holds is left, held by it alone (the exited processes'
    // liveness beacons are swept first, as the next process would).
    assert_no_dead_holders(&root.state());
    assert_eq!(root.objects(), 2, "the opened block and event");
    assert_eq!(root.used(0), MIB, "only the opened block is still charged");
    assert_eq!(root.meta(&h).holders().len(), 1);
    assert_eq!(root.meta(&h).hold_count(importer.identity()), 1);
    // The importer's view survived the sweep, bytes intact.
    assert_eq!(
        importer.ok(&format!("check {} 65536 7", hexptr(q))).val(0),
        "same"
    );
    importer.ok(&format!("close {}", hexptr(q)));
    importer.ok(&format!("event_destroy {ie}"));
    importer.exit();
    root.assert_clean();
}
