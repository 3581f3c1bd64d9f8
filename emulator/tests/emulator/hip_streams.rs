//! HIP streams as ordered queues across real processes, through the emulator's C ABI: a
//! `hipStreamWaitEvent` blocks only its stream (the cross-wait of two processes on
//! interprocess events completes from ROCm 7.0; before, CLR's call itself waits), work
//! queued behind a wait, the legacy null stream, `hipStreamDestroy` of a stream with
//! pending work, and a failure of asynchronous work reported at synchronisation. Pending
//! device work is made with the emulator's `hold_stream`.
//!
//! No assertion depends on timing: "not run yet" is observed through host memory that only
//! the queued copy writes, and "still blocked" through a background command that has not
//! answered after a round trip, released by the test afterwards.

use crate::hip_support::*;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

const IPC: u32 = hipEventInterprocess | hipEventDisableTiming;
const D2H: i32 = hipMemcpyDeviceToHost;
const D2D: i32 = hipMemcpyDeviceToDevice;

/// Two processes with an interprocess event each, opened by the other:
/// `(a, b, ea, eb, ea_in_b, eb_in_a)`.
fn ipc_pair(root: &TestRoot, version: &str) -> (Hip, Hip, String, String, String, String) {
    let mut a = Hip::spawn("a", root, version, &[]);
    let mut b = Hip::spawn("b", root, version, &[]);
    let ea = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
    let eb = b.ok(&format!("event_create {IPC}")).val(0).to_owned();
    let ha = a.ok(&format!("event_export {ea}")).val(0).to_owned();
    let hb = b.ok(&format!("event_export {eb}")).val(0).to_owned();
    let ea_in_b = b.ok(&format!("event_open {ha}")).val(0).to_owned();
    let eb_in_a = a.ok(&format!("event_open {hb}")).val(0).to_owned();
    (a, b, ea, eb, ea_in_b, eb_in_a)
}

#[test]
fn ipc_event_cross_wait_completes_from_7_0() {
    let root = TestRoot::new("hip-cross-7");
    let (mut a, mut b, ea, eb, ea_in_b, eb_in_a) = ipc_pair(&root, "7.0");
    // Device memory and host buffers first: by the legacy rule, synchronous copies wait
    // for the held streams below.
    let src = a.ok("malloc 4096").num(0);
    a.ok(&format!("fill {} 4096 5", hexptr(src)));
    let buf = a.ok("hostbuf 4096").num(0);
    // Each process has a record of its event pending (its stream is busy).
    let ra = a.ok("stream_create").val(0).to_owned();
    let rb = b.ok("stream_create").val(0).to_owned();
    a.ok(&format!("hold {ra}"));
    b.ok(&format!("hold {rb}"));
    a.ok(&format!("record {ea} {ra}"));
    b.ok(&format!("record {eb} {rb}"));
    // Each makes a stream wait for the other's record, then would let its own record
    // complete. The waits return at once; were they waiting on the caller (as before 7.0),
    // neither process would get to its release.
    let wa = a.ok("stream_create").val(0).to_owned();
    let wb = b.ok("stream_create").val(0).to_owned();
    a.ok(&format!("wait_event {wa} {eb_in_a} 0"));
    b.ok(&format!("wait_event {wb} {ea_in_b} 0"));
    // Work behind A's wait has not run.
    a.ok(&format!(
        "memcpy_async {} {} 4096 {D2H} {wa}",
        hexptr(buf),
        hexptr(src)
    ));
    assert!(
        a.ok(&format!("hostcheck {} 4096 5", hexptr(buf)))
            .val(0)
            .starts_with("differs"),
        "the copy behind the wait ran before the record completed"
    );
    a.ok(&format!("release {ra}"));
    b.ok(&format!("release {rb}"));
    a.ok(&format!("stream_sync {wa}"));
    b.ok(&format!("stream_sync {wb}"));
    assert_eq!(
        a.ok(&format!("hostcheck {} 4096 5", hexptr(buf))).val(0),
        "same"
    );
    for s in [&ra, &wa] {
        a.ok(&format!("stream_destroy {s}"));
    }
    for s in [&rb, &wb] {
        b.ok(&format!("stream_destroy {s}"));
    }
    a.ok(&format!("free {}", hexptr(src)));
    for e in [&ea, &eb_in_a] {
        a.ok(&format!("event_destroy {e}"));
    }
    for e in [&eb, &ea_in_b] {
        b.ok(&format!("event_destroy {e}"));
    }
    a.exit();
    b.exit();
    root.assert_clean();
}

/// Before ROCm 7.0, CLR's `hipStreamWaitEvent` on an interprocess event with a pending
/// record returns only once the record completed (so the cross-wait above deadlocks there,
/// as it would on the real runtime).
#[test]
fn ipc_event_wait_waits_on_the_caller_before_7_0() {
    for version in VERSIONS {
        let root = TestRoot::new(&format!("hip-ipc-wait-{version}"));
        let (mut a, mut b, ea, eb, ea_in_b, eb_in_a) = ipc_pair(&root, version);
        let rb = b.ok("stream_create").val(0).to_owned();
        b.ok(&format!("hold {rb}"));
        b.ok(&format!("record {eb} {rb}"));
        let wa = a.ok("stream_create").val(0).to_owned();
        a.bg("wait", &format!("wait_event {wa} {eb_in_a} 0"));
        assert!(!a.bg_done("wait"), "{version}: the wait returned early");
        b.ok(&format!("release {rb}"));
        assert_eq!(a.bg_result("wait").code, hipSuccess, "{version}");
        a.ok(&format!("stream_sync {wa}"));
        a.ok(&format!("stream_destroy {wa}"));
        b.ok(&format!("stream_destroy {rb}"));
        a.ok(&format!("event_destroy {eb_in_a}"));
        a.ok(&format!("event_destroy {ea}"));
        b.ok(&format!("event_destroy {ea_in_b}"));
        b.ok(&format!("event_destroy {eb}"));
        a.exit();
        b.exit();
        root.assert_clean();
    }
}

#[test]
fn a_wait_blocks_only_its_stream_and_the_null_stream_waits_for_it() {
    let root = TestRoot::new("hip-only");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let src = a.ok("malloc 4096").num(0);
    a.ok(&format!("fill {} 4096 7", hexptr(src)));
    let (buf1, buf2) = (a.ok("hostbuf 4096").num(0), a.ok("hostbuf 4096").num(0));
    let h = a.ok("stream_create").val(0).to_owned();
    let s1 = a.ok("stream_create").val(0).to_owned();
    let s2 = a.ok("stream_create").val(0).to_owned();
    let e = a.ok("event_create 0").val(0).to_owned();
    a.ok(&format!("hold {h}"));
    a.ok(&format!("record {e} {h}"));
    // A process-local event: the wait is the stream's in every version.
    a.ok(&format!("wait_event {s1} {e} 0"));
    a.ok(&format!(
        "memcpy_async {} {} 4096 {D2H} {s1}",
        hexptr(buf1),
        hexptr(src)
    ));
    // Another stream goes on.
    a.ok(&format!(
        "memcpy_async {} {} 4096 {D2H} {s2}",
        hexptr(buf2),
        hexptr(src)
    ));
    a.ok(&format!("stream_sync {s2}"));
    assert_eq!(
        a.ok(&format!("hostcheck {} 4096 7", hexptr(buf2))).val(0),
        "same"
    );
    assert!(
        a.ok(&format!("hostcheck {} 4096 7", hexptr(buf1)))
            .val(0)
            .starts_with("differs")
    );
    // The null stream (a synchronous hipMemcpy) waits for the device's streams.
    a.bg("copy", &format!("check {} 4096 7", hexptr(src)));
    assert!(!a.bg_done("copy"), "hipMemcpy overtook pending stream work");
    a.ok(&format!("release {h}"));
    let copied = a.bg_result("copy");
    assert_eq!((copied.code, copied.val(0)), (hipSuccess, "same"));
    a.ok(&format!("stream_sync {s1}"));
    assert_eq!(
        a.ok(&format!("hostcheck {} 4096 7", hexptr(buf1))).val(0),
        "same"
    );
    for s in [&h, &s1, &s2] {
        a.ok(&format!("stream_destroy {s}"));
    }
    a.ok(&format!("event_destroy {e}"));
    a.ok(&format!("free {}", hexptr(src)));
    a.exit();
    root.assert_clean();
}

#[test]
fn destroy_waits_for_the_pending_work() {
    let root = TestRoot::new("hip-destroy");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let src = a.ok("malloc 4096").num(0);
    a.ok(&format!("fill {} 4096 9", hexptr(src)));
    let buf = a.ok("hostbuf 4096").num(0);
    let h = a.ok("stream_create").val(0).to_owned();
    let s = a.ok("stream_create").val(0).to_owned();
    let e = a.ok("event_create 0").val(0).to_owned();
    a.ok(&format!("hold {h}"));
    a.ok(&format!("record {e} {h}"));
    a.ok(&format!("wait_event {s} {e} 0"));
    a.ok(&format!(
        "memcpy_async {} {} 4096 {D2H} {s}",
        hexptr(buf),
        hexptr(src)
    ));
    a.bg("destroy", &format!("stream_destroy {s}"));
    assert!(
        !a.bg_done("destroy"),
        "hipStreamDestroy dropped pending work"
    );
    a.ok(&format!("release {h}"));
    assert_eq!(a.bg_result("destroy").code, hipSuccess);
    assert_eq!(
        a.ok(&format!("hostcheck {} 4096 9", hexptr(buf))).val(0),
        "same"
    );
    a.expect_code(&format!("stream_sync {s}"), hipErrorInvalidHandle);
    a.ok(&format!("stream_destroy {h}"));
    a.ok(&format!("event_destroy {e}"));
    a.ok(&format!("free {}", hexptr(src)));
    a.exit();
    root.assert_clean();
}

/// An asynchronous copy whose memory is revoked before its stream reaches it fails when
/// it runs; the failure is the stream's, reported once by the next synchronisation, and
/// by the synchronisation and query of an event recorded after it.
#[test]
fn a_failed_async_copy_surfaces_at_synchronize() {
    let version = "6.2";
    let root = TestRoot::new("hip-async-error");
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);
    let p = a.ok("malloc 4096").num(0);
    a.ok(&format!("fill {} 4096 3", hexptr(p)));
    let handle = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let q = b.ok(&format!("open {handle} {}", lazy(version))).num(0);
    let m = b.ok("malloc 4096").num(0);
    let h = b.ok("stream_create").val(0).to_owned();
    let s = b.ok("stream_create").val(0).to_owned();
    let e = b.ok("event_create 0").val(0).to_owned();
    b.ok(&format!("hold {h}"));
    b.ok(&format!("record {e} {h}"));
    b.ok(&format!("wait_event {s} {e} 0"));
    // Checked and accepted when called.
    b.ok(&format!(
        "memcpy_async {} {} 4096 {D2D} {s}",
        hexptr(m),
        hexptr(q)
    ));
    // An event recorded after the copy reports its failure (hip.event.sync-reports-...).
    let after = b.ok("event_create 0").val(0).to_owned();
    b.ok(&format!("record {after} {s}"));
    // The exporter frees it first (undefined in HIP: the emulator revokes the pages).
    a.ok(&format!("free {}", hexptr(p)));
    b.ok(&format!("release {h}"));
    b.expect_code(&format!("event_sync {after}"), hipErrorIllegalAddress);
    b.expect_code(&format!("query {after}"), hipErrorIllegalAddress);
    // Not collected by the event: the stream's synchronisation still reports it, once.
    b.expect_code(&format!("stream_sync {s}"), hipErrorIllegalAddress);
    b.ok(&format!("stream_sync {s}"));
    b.ok("devsync");
    for x in [&h, &s] {
        b.ok(&format!("stream_destroy {x}"));
    }
    b.ok(&format!("event_destroy {e}"));
    b.ok(&format!("event_destroy {after}"));
    b.ok(&format!("close {}", hexptr(q)));
    b.ok(&format!("free {}", hexptr(m)));
    a.exit();
    b.exit();
    assert_eq!(root.violations().len(), 1);
    root.clear_violations();
    root.assert_clean();
}

/// `hipIpcCloseMemHandle` first waits for the null stream, and so for the work pending on
/// the device's streams (CLR's `getNullStream()->finish()`): a queued copy out of the
/// mapping still runs before it goes.
#[test]
fn ipc_close_waits_for_queued_work() {
    let version = "6.2";
    let root = TestRoot::new("hip-close-waits");
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);
    let p = a.ok("malloc 4096").num(0);
    a.ok(&format!("fill {} 4096 4", hexptr(p)));
    let handle = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let q = b.ok(&format!("open {handle} {}", lazy(version))).num(0);
    let buf = b.ok("hostbuf 4096").num(0);
    let h = b.ok("stream_create").val(0).to_owned();
    let s = b.ok("stream_create").val(0).to_owned();
    let e = b.ok("event_create 0").val(0).to_owned();
    b.ok(&format!("hold {h}"));
    b.ok(&format!("record {e} {h}"));
    b.ok(&format!("wait_event {s} {e} 0"));
    b.ok(&format!(
        "memcpy_async {} {} 4096 {D2H} {s}",
        hexptr(buf),
        hexptr(q)
    ));
    b.bg("close", &format!("close {}", hexptr(q)));
    assert!(
        !b.bg_done("close"),
        "the close did not wait for the queued copy"
    );
    b.ok(&format!("release {h}"));
    assert_eq!(b.bg_result("close").code, hipSuccess);
    assert_eq!(
        b.ok(&format!("hostcheck {} 4096 4", hexptr(buf))).val(0),
        "same"
    );
    for x in [&h, &s] {
        b.ok(&format!("stream_destroy {x}"));
    }
    b.ok(&format!("event_destroy {e}"));
    a.ok(&format!("free {}", hexptr(p)));
    a.exit();
    b.exit();
    root.assert_clean();
}
