//! ACL surface: events and IPC events across real processes through the C ABI (see
//! `acl_support`): the documented flow (create with `ACL_EVENT_IPC`, get the handle, record;
//! open in another process, stream-wait, destroy), across devices, the lifetime of a shared
//! event, and the argument rules. Every test has its own state directory and checks that it
//! is clean at the end.

use crate::acl_support::{AclRoot, EmuRoot, TestRoot};
use devipc_emulator::acl::rules;

/// `ACL_EVENT_SYNC` and `ACL_EVENT_IPC`.
const EVENT_SYNC: u32 = 0x1;
const EVENT_IPC: u32 = 0x40;
/// `ACL_EVENT_DEVICE_USE_ONLY`, `ACL_EVENT_EXTERNAL` and `ACL_EVENT_TIME_LINE`.
const EVENT_DEVICE_USE_ONLY: u32 = 0x10;
const EVENT_EXTERNAL: u32 = 0x20;
const EVENT_TIME_LINE: u32 = 0x8;
/// `ACL_EVENT_RECORDED_STATUS_COMPLETE` and `..._NOT_READY`.
const COMPLETE: &str = "1";
const NOT_READY: &str = "0";

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

#[test]
fn ipc_event_flow_across_processes_and_devices() {
    let root = TestRoot::new("event-ipc");
    let mut a = root.spawn("creator", &[]);
    let mut b = root.spawn("opener", &[]);
    a.ok("set-device 0");
    b.ok("set-device 1");
    let e = a.val(&format!("event-create {EVENT_IPC}"));
    let handle = a.val(&format!("event-handle {e}"));
    assert_eq!(handle.len(), 128, "64 bytes");
    assert_eq!(
        a.val(&format!("event-handle {e}")),
        handle,
        "one handle per event"
    );
    assert_eq!(root.objects(), 1);

    // The opener, on another device: never recorded, the wait goes on at once.
    let eb = b.val(&format!("event-open {handle}"));
    let s = b.val("stream-create");
    b.ok(&format!("event-wait {s} {eb}"));
    assert_eq!(b.val(&format!("event-query {eb}")), COMPLETE);
    // The creator records (on its idle default stream: complete at once); the opener's stream
    // wait, host synchronisation and query all see the record complete.
    a.ok(&format!("event-record {e}"));
    b.ok(&format!("event-wait {s} {eb}"));
    b.ok(&format!("event-wait 0 {eb}"));
    b.ok(&format!("event-sync {eb}"));
    assert_eq!(b.val(&format!("event-query {eb}")), COMPLETE);
    // The opened event has the same handle and can be recorded too.
    assert_eq!(b.val(&format!("event-handle {eb}")), handle);
    b.ok(&format!("event-record {eb} {s}"));
    a.ok(&format!("event-sync {e}"));

    // The event lives until every process destroyed it.
    a.ok(&format!("event-destroy {e}"));
    assert_eq!(root.objects(), 1, "the opener still holds it");
    b.ok(&format!("event-record {eb}"));
    let mut c = root.spawn("late-opener", &[]);
    c.ok("set-device 0");
    let ec = c.val(&format!("event-open {handle}"));
    b.ok(&format!("event-destroy {eb}"));
    c.ok(&format!("event-destroy {ec}"));
    assert_eq!(root.objects(), 0);
    c.fails(&format!("event-open {handle}"), 107017, rules::HANDLE_VALID);
    b.fails(&format!("event-wait {s} {eb}"), 107017, rules::HANDLE_VALID);
    b.ok(&format!("stream-destroy {s}"));
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn event_argument_rules() {
    let root = TestRoot::new("event-args");
    let mut a = root.spawn("a", &[]);
    let mut b = root.spawn("b", &[]);
    a.fails(
        &format!("event-create {EVENT_IPC}"),
        107002,
        rules::CONTEXT_REQUIRED,
    );
    a.ok("set-device 0");
    // aclrtCreateEventExWithFlag: SYNC, CAPTURE, 0x04 and TIME_LINE combine, IPC goes alone;
    // DEVICE_USE_ONLY, EXTERNAL, 0 and unknown bits are refused by the runtime, 107000
    // (rules::EVENT_CREATE_EX_FLAGS).
    for bad in [
        EVENT_IPC | EVENT_SYNC,
        EVENT_IPC | EVENT_TIME_LINE,
        EVENT_DEVICE_USE_ONLY,
        EVENT_EXTERNAL,
        0,
        0x80,
    ] {
        a.fails(
            &format!("event-create {bad}"),
            107000,
            rules::EVENT_CREATE_EX_FLAGS,
        );
    }
    let combined = a.val(&format!(
        "event-create {}",
        EVENT_SYNC | 0x2 | 0x4 | EVENT_TIME_LINE
    ));
    a.ok(&format!("event-destroy {combined}"));
    // Only an event created with exactly ACL_EVENT_IPC has an IPC handle
    // (rules::EVENT_IPC_FLAG).
    let plain = a.val(&format!("event-create {EVENT_SYNC}"));
    a.fails(
        &format!("event-handle {plain}"),
        107000,
        rules::EVENT_IPC_FLAG,
    );
    // With the flag rule off, IPC combines (and has no handle); unknown bits are still
    // refused, by the ACL wrapper's enumeration check.
    let mut m = root.spawn(
        "any-flag",
        &[("DEVIPC_EMU_BREAK_RULE", rules::EVENT_CREATE_EX_FLAGS)],
    );
    m.ok("set-device 0");
    let mixed = m.val(&format!("event-create {}", EVENT_IPC | EVENT_SYNC));
    m.fails(
        &format!("event-handle {mixed}"),
        107000,
        rules::EVENT_IPC_FLAG,
    );
    m.fails("event-create 0x80", 100000, rules::PARAM_ENUM_VALUE);
    m.ok(&format!("event-destroy {mixed}"));
    m.exit();
    // A local event records, waits and reports complete like any other.
    a.ok(&format!("event-record {plain}"));
    a.ok(&format!("event-wait 0 {plain}"));
    assert_eq!(a.val(&format!("event-query {plain}")), COMPLETE);
    a.fails("event-record 0x5550", 107017, rules::HANDLE_VALID);
    a.fails(
        &format!("event-record {plain} 0x5550"),
        107017,
        rules::HANDLE_VALID,
    );

    let e = a.val(&format!("event-create {EVENT_IPC}"));
    let handle = a.val(&format!("event-handle {e}"));
    // Opening needs a current device and a real handle.
    b.fails(
        &format!("event-open {handle}"),
        107002,
        rules::CONTEXT_REQUIRED,
    );
    b.ok("set-device 0");
    b.fails(
        &format!("event-open {}", "00".repeat(64)),
        107017,
        rules::HANDLE_VALID,
    );
    let mut damaged = handle.clone().into_bytes();
    damaged[40] = if damaged[40] == b'0' { b'1' } else { b'0' };
    b.fails(
        &format!("event-open {}", String::from_utf8(damaged).unwrap()),
        107017,
        rules::HANDLE_VALID,
    );
    let eb = b.val(&format!("event-open {handle}"));
    b.ok(&format!("event-destroy {eb}"));
    b.fails(&format!("event-destroy {eb}"), 107017, rules::HANDLE_VALID);

    // With the rule switched off, a plain event exports and opens.
    let mut c = root.spawn(
        "any-event",
        &[("DEVIPC_EMU_BREAK_RULE", rules::EVENT_IPC_FLAG)],
    );
    c.ok("set-device 0");
    let cp = c.val(&format!("event-create {EVENT_SYNC}"));
    let ch = c.val(&format!("event-handle {cp}"));
    let bp = b.val(&format!("event-open {ch}"));
    b.ok(&format!("event-destroy {bp}"));
    c.ok(&format!("event-destroy {cp}"));

    for x in [&plain, &e] {
        a.ok(&format!("event-destroy {x}"));
    }
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn create_event_with_flag_makes_local_events() {
    let root = TestRoot::new("event-with-flag");
    let mut a = root.spawn("a", &[]);
    a.fails(
        &format!("event-create-flag {EVENT_SYNC}"),
        107002,
        rules::CONTEXT_REQUIRED,
    );
    a.ok("set-device 0");
    // Local flags combine, DEVICE_USE_ONLY included; EXTERNAL goes alone; never IPC, 0 or
    // unknown bits (rules::EVENT_CREATE_FLAGS).
    let mut made = Vec::new();
    for good in [
        EVENT_SYNC,
        EVENT_SYNC | EVENT_TIME_LINE | EVENT_DEVICE_USE_ONLY,
        EVENT_EXTERNAL,
    ] {
        made.push(a.val(&format!("event-create-flag {good}")));
    }
    for bad in [EVENT_IPC, EVENT_EXTERNAL | EVENT_SYNC, 0, 0x80] {
        a.fails(
            &format!("event-create-flag {bad}"),
            107000,
            rules::EVENT_CREATE_FLAGS,
        );
    }
    // A local event: records, waits, completes; it has no IPC handle.
    let e = made[0].clone();
    a.ok(&format!("event-record {e}"));
    a.ok(&format!("event-wait 0 {e}"));
    a.ok(&format!("event-sync {e}"));
    assert_eq!(a.val(&format!("event-query {e}")), COMPLETE);
    a.fails(&format!("event-handle {e}"), 107000, rules::EVENT_IPC_FLAG);
    // Switched off, the IPC flag is taken (the event is still local).
    let mut b = root.spawn(
        "any-flag",
        &[("DEVIPC_EMU_BREAK_RULE", rules::EVENT_CREATE_FLAGS)],
    );
    b.ok("set-device 0");
    let ipc = b.val(&format!("event-create-flag {EVENT_IPC}"));
    b.ok(&format!("event-destroy {ipc}"));
    for x in &made {
        a.ok(&format!("event-destroy {x}"));
    }
    for x in [a, b] {
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn ipc_event_exported_with_a_pending_record() {
    // torch_npu's order: record the IPC event on the current stream, then export it. The
    // record is still pending (its stream waits on a notify) when the handle is taken; the
    // opener's stream wait ends when it completes
    // (rules::EVENT_EXPORT_PENDING_RECORD).
    let root = TestRoot::new("event-pending");
    let mut a = root.spawn("creator", &[]);
    let mut b = root.spawn("opener", &[]);
    a.ok("set-device 0");
    b.ok("set-device 1");
    let s = a.val("stream-create");
    let n = a.val("notify-create");
    a.ok(&format!("notify-wait-async {n} 60 {s}"));
    let e = a.val(&format!("event-create {EVENT_IPC}"));
    a.ok(&format!("event-record {e} {s}"));
    assert_eq!(a.val(&format!("event-query {e}")), NOT_READY);
    let handle = a.val(&format!("event-handle {e}"));
    let eb = b.val(&format!("event-open {handle}"));
    assert_eq!(b.val(&format!("event-query {eb}")), NOT_READY);
    let bs = b.val("stream-create");
    b.ok(&format!("event-wait {bs} {eb}"));
    // Release the creator's stream: the record completes for both processes.
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("stream-sync {s}"));
    b.ok(&format!("stream-sync {bs}"));
    b.ok(&format!("event-sync {eb}"));
    assert_eq!(b.val(&format!("event-query {eb}")), COMPLETE);
    assert_eq!(a.val(&format!("event-query {e}")), COMPLETE);

    // Switched off: the pending record completes only the creator's process-local words,
    // so the opener never sees it (its stream wait would never end).
    let mut c = root.spawn(
        "old-export",
        &[("DEVIPC_EMU_BREAK_RULE", rules::EVENT_EXPORT_PENDING_RECORD)],
    );
    c.ok("set-device 0");
    let cs = c.val("stream-create");
    let cn = c.val("notify-create");
    c.ok(&format!("notify-wait-async {cn} 60 {cs}"));
    let ce = c.val(&format!("event-create {EVENT_IPC}"));
    c.ok(&format!("event-record {ce} {cs}"));
    let ch = c.val(&format!("event-handle {ce}"));
    let cb = b.val(&format!("event-open {ch}"));
    c.ok(&format!("notify-record {cn}"));
    c.ok(&format!("stream-sync {cs}"));
    assert_eq!(b.val(&format!("event-query {cb}")), NOT_READY);

    b.ok(&format!("event-destroy {cb}"));
    b.ok(&format!("event-destroy {eb}"));
    b.ok(&format!("stream-destroy {bs}"));
    for (x, ev, st, no) in [(&mut a, &e, &s, &n), (&mut c, &ce, &cs, &cn)] {
        x.ok(&format!("event-destroy {ev}"));
        x.ok(&format!("stream-destroy {st}"));
        x.ok(&format!("notify-destroy {no}"));
    }
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}
