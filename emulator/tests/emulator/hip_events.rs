//! HIP events across real processes, through the emulator's C ABI (`HipApi`): creation
//! flag rules, IPC export/open rules with their exact `hipError_t`, a record in one
//! process observed by `hipEventQuery` / `hipEventSynchronize` / `hipStreamWaitEvent` in
//! another (pending work made with the emulator's `hold_stream`), never-recorded events,
//! streams, and holders reclaimed after kill -9.

use crate::hip_support::*;
use devipc_emulator::hip::rules;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

const IPC: u32 = hipEventInterprocess | hipEventDisableTiming;

fn event_rules(version: &str) {
    let root = TestRoot::new(&format!("event-rules-{version}"));
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);

    // Creation flags.
    a.expect_rule(
        &format!("event_create {hipEventInterprocess}"),
        hipErrorInvalidValue,
        rules::EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
    );
    a.expect_rule(
        "event_create 0x100",
        hipErrorInvalidValue,
        rules::EVENT_UNKNOWN_FLAGS_REJECTED,
    );
    a.expect_rule(
        &format!(
            "event_create {}",
            hipEventReleaseToDevice | hipEventReleaseToSystem
        ),
        hipErrorInvalidValue,
        rules::EVENT_ONE_RELEASE_FLAG,
    );
    let fence = format!("event_create {hipEventDisableSystemFence}");
    // hipEventDisableSystemFence appeared in ROCm 5.6.
    if matches!(version, "5.2" | "5.5") {
        a.expect_rule(
            &fence,
            hipErrorInvalidValue,
            rules::EVENT_UNKNOWN_FLAGS_REJECTED,
        );
    } else {
        let e = a.ok(&fence).val(0).to_owned();
        a.ok(&format!("event_destroy {e}"));
    }
    a.expect_code(&format!("event_create_null {IPC}"), hipErrorInvalidValue);
    for flags in [
        0,
        hipEventBlockingSync,
        hipEventDisableTiming,
        IPC | hipEventBlockingSync,
    ] {
        let e = a.ok(&format!("event_create {flags}")).val(0).to_owned();
        a.ok(&format!("event_destroy {e}"));
    }

    // Export needs an interprocess event; NULL arguments are invalid.
    let local = a.ok("event_create 0").val(0).to_owned();
    a.expect_rule(
        &format!("event_export {local}"),
        hipErrorInvalidConfiguration,
        rules::EVENT_EXPORT_NEEDS_INTERPROCESS,
    );
    let e = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
    a.expect_code(&format!("event_export_null {e}"), hipErrorInvalidValue);
    a.expect_code("event_export 0x0", hipErrorInvalidValue);
    a.expect_code("event_export 0x12340", hipErrorInvalidHandle);
    let h = a.ok(&format!("event_export {e}")).val(0).to_owned();

    // Open: the exporter is refused; garbage and other kinds are refused.
    a.expect_rule(
        &format!("event_open {h}"),
        hipErrorInvalidContext,
        rules::EVENT_OPEN_IN_EXPORTER_REJECTED,
    );
    let p = a.ok("malloc 4096").num(0);
    let mem_handle = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    for bad in ["00".repeat(64), "5a".repeat(64), mem_handle] {
        b.expect_rule(
            &format!("event_open {bad}"),
            hipErrorInvalidValue,
            rules::EVENT_INVALID_HANDLE_REJECTED,
        );
    }
    b.expect_code(&format!("event_open_null {h}"), hipErrorInvalidValue);
    let eb = b.ok(&format!("event_open {h}")).val(0).to_owned();
    assert_eq!(root.meta(&h).hold_count(b.identity()), 1);

    // Never recorded: complete at once, in both processes, local and shared.
    for (hip, ev) in [(&mut a, &local), (&mut b, &eb)] {
        hip.ok(&format!("query {ev}"));
        hip.ok(&format!("event_sync {ev}"));
        hip.ok(&format!("wait_event 0x0 {ev} 0"));
    }
    a.ok(&format!("query {e}"));
    a.ok(&format!("event_sync {e}"));
    // Stream waits take flags 0.
    b.expect_rule(
        &format!("wait_event 0x0 {eb} 1"),
        hipErrorInvalidValue,
        rules::STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
    );
    // Bad event and stream handles.
    for cmd in [
        "event_destroy 0x0".to_owned(),
        "event_destroy 0x12340".to_owned(),
        "query 0x0".to_owned(),
        "event_sync 0x12340".to_owned(),
        format!("record {e} 0x12340"),
        "record 0x0 0x0".to_owned(),
        "wait_event 0x0 0x0 0".to_owned(),
        format!("wait_event 0x12340 {e} 0"),
    ] {
        a.expect_code(&cmd, hipErrorInvalidHandle);
    }
    // An event handle of this process is not a stream, and vice versa.
    let s = a.ok("stream_create").val(0).to_owned();
    a.expect_code(&format!("record {s} {e}"), hipErrorInvalidHandle);
    a.expect_code(&format!("stream_destroy {e}"), hipErrorInvalidHandle);
    a.ok(&format!("stream_destroy {s}"));

    // The exporter destroys first; the importer's event keeps working.
    a.ok(&format!("event_destroy {e}"));
    a.expect_code(&format!("event_destroy {e}"), hipErrorInvalidHandle);
    a.ok(&format!("event_destroy {local}"));
    b.ok(&format!("record {eb} 0x0"));
    b.ok(&format!("query {eb}"));
    b.ok(&format!("event_destroy {eb}"));
    a.ok(&format!("free {}", hexptr(p)));
    // Nothing is left: the handle names nothing any more.
    b.expect_rule(
        &format!("event_open {h}"),
        hipErrorInvalidValue,
        rules::EVENT_INVALID_HANDLE_REJECTED,
    );
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn event_rules_6x() {
    event_rules("6.2");
}

#[test]
fn event_rules_5x() {
    event_rules("5.2");
}

#[test]
fn event_rules_5_5_and_5_6() {
    event_rules("5.5");
    event_rules("5.6");
}

fn record_seen_across_processes(version: &str) {
    let root = TestRoot::new(&format!("event-x-{version}"));
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);
    let ea = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
    let h = a.ok(&format!("event_export {ea}")).val(0).to_owned();
    let eb = b.ok(&format!("event_open {h}")).val(0).to_owned();

    // A record on a free stream completes at once, seen by both.
    a.ok(&format!("record {ea} 0x0"));
    a.ok(&format!("query {ea}"));
    b.ok(&format!("query {eb}"));

    // A's stream is busy: its record is pending in both processes until released.
    let sa = a.ok("stream_create").val(0).to_owned();
    a.ok(&format!("hold {sa}"));
    a.ok(&format!("record {ea} {sa}"));
    a.expect_code(&format!("query {ea}"), hipErrorNotReady);
    b.expect_code(&format!("query {eb}"), hipErrorNotReady);
    // hipErrorNotReady is a status, not an error: it is not the last error.
    assert!(!b.run("lasterr").rest.contains("NotReady"));
    b.bg("sync1", &format!("event_sync {eb}"));
    let sb = b.ok("stream_create").val(0).to_owned();
    b.bg("wait1", &format!("wait_event {sb} {eb} 0"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        !b.bg_done("sync1"),
        "hipEventSynchronize returned before the record completed"
    );
    assert!(
        !b.bg_done("wait1"),
        "hipStreamWaitEvent returned before the record completed"
    );
    a.ok(&format!("release {sa}"));
    assert_eq!(b.bg_result("sync1").code, hipSuccess);
    assert_eq!(b.bg_result("wait1").code, hipSuccess);
    b.ok(&format!("query {eb}"));
    a.ok(&format!("query {ea}"));

    // The other way round, on B's null stream.
    b.ok("hold 0x0");
    b.ok(&format!("record {eb} 0x0"));
    a.expect_code(&format!("query {ea}"), hipErrorNotReady);
    a.bg("sync2", &format!("event_sync {ea}"));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(!a.bg_done("sync2"));
    b.ok("release 0x0");
    assert_eq!(a.bg_result("sync2").code, hipSuccess);
    a.ok(&format!("query {ea}"));

    // The most recent record decides: a pending record followed by a completed one (from
    // the other process) is complete; releasing the older one later changes nothing.
    a.ok(&format!("hold {sa}"));
    a.ok(&format!("record {ea} {sa}"));
    b.expect_code(&format!("query {eb}"), hipErrorNotReady);
    b.ok(&format!("record {eb} {sb}"));
    a.ok(&format!("query {ea}"));
    // Destroying a held stream runs its work first.
    a.ok(&format!("stream_destroy {sa}"));
    a.ok(&format!("query {ea}"));

    b.ok(&format!("stream_destroy {sb}"));
    a.ok(&format!("event_destroy {ea}"));
    b.ok(&format!("event_destroy {eb}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn record_in_one_process_is_seen_in_another_6x() {
    record_seen_across_processes("6.2");
}

#[test]
fn record_in_one_process_is_seen_in_another_5x() {
    record_seen_across_processes("5.2");
}

#[test]
fn held_streams_block_synchronize_until_released() {
    let root = TestRoot::new("hold");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let s = a.ok("stream_create").val(0).to_owned();
    let e = a.ok("event_create 0").val(0).to_owned();
    let e2 = a
        .ok(&format!("event_create {hipEventDisableTiming}"))
        .val(0)
        .to_owned();
    a.ok(&format!("hold {s}"));
    a.ok(&format!("record {e} {s}"));
    a.expect_code(&format!("query {e}"), hipErrorNotReady);
    // Work queued behind the record, in order: a wait on e, then a record of e2.
    a.ok(&format!("wait_event {s} {e} 0"));
    a.ok(&format!("record {e2} {s}"));
    a.expect_code(&format!("query {e2}"), hipErrorNotReady);
    a.bg("ssync", &format!("stream_sync {s}"));
    a.bg("dsync", "devsync");
    a.bg("esync", &format!("event_sync {e2}"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    for tag in ["ssync", "dsync", "esync"] {
        assert!(!a.bg_done(tag), "{tag} returned while the stream was held");
    }
    // Other created streams are unaffected (the null stream is not: by the legacy rule it
    // waits for the device's other streams).
    let other = a.ok("stream_create").val(0).to_owned();
    a.ok(&format!("record {e2} {other}"));
    a.ok(&format!("stream_sync {other}"));
    a.ok(&format!("stream_destroy {other}"));
    a.ok(&format!("release {s}"));
    for tag in ["ssync", "dsync", "esync"] {
        assert_eq!(a.bg_result(tag).code, hipSuccess, "{tag}");
    }
    a.ok(&format!("query {e}"));
    a.ok(&format!("query {e2}"));
    // Releasing a stream that is not held is a no-op; unknown streams are refused.
    a.ok(&format!("release {s}"));
    a.expect_code("hold 0x12340", hipErrorInvalidHandle);
    // Destroying a held stream completes its work.
    a.ok(&format!("hold {s}"));
    a.ok(&format!("record {e} {s}"));
    a.ok(&format!("stream_destroy {s}"));
    a.ok(&format!("query {e}"));
    a.expect_code(&format!("stream_sync {s}"), hipErrorInvalidHandle);
    a.expect_code(&format!("stream_destroy {s}"), hipErrorInvalidHandle);
    a.expect_code("stream_destroy 0x0", hipErrorInvalidHandle);
    a.expect_code("stream_create_null", hipErrorInvalidValue);
    a.ok(&format!("event_destroy {e}"));
    a.ok(&format!("event_destroy {e2}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn killed_event_holders_are_reclaimed() {
    let root = TestRoot::new("event-kill");
    // Reclaimed when the exporter touches the event (destroy).
    let mut a = Hip::spawn("exporter", &root, "6.2", &[]);
    let ea = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
    let h = a.ok(&format!("event_export {ea}")).val(0).to_owned();
    let b = {
        let mut b = Hip::spawn("importer", &root, "6.2", &[]);
        b.ok(&format!("event_open {h}"));
        b.ok(&format!("event_open {h}"));
        assert_eq!(root.meta(&h).hold_count(b.identity()), 2);
        b
    };
    b.kill();
    a.ok(&format!("event_destroy {ea}"));
    root.assert_clean();

    // Reclaimed by gc when nobody else touches it.
    let ea = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
    let h = a.ok(&format!("event_export {ea}")).val(0).to_owned();
    let mut c = Hip::spawn("importer2", &root, "6.2", &[]);
    c.ok(&format!("event_open {h}"));
    a.ok(&format!("event_destroy {ea}"));
    assert_eq!(root.meta(&h).holders().len(), 1);
    c.kill();
    let report = root.state().gc().unwrap();
    assert_eq!(
        (report.holders_reclaimed, report.objects_freed),
        (1, 1),
        "{report}"
    );
    a.exit();
    root.assert_clean();
}
