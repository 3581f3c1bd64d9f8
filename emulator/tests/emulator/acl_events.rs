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
/// `ACL_EVENT_RECORDED_STATUS_COMPLETE`.
const COMPLETE: &str = "1";

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
    a.fails("event-create 0x80", 100000, rules::PARAM_ENUM_VALUE);
    // Only an event created with exactly ACL_EVENT_IPC has an IPC handle
    // (rules::EVENT_IPC_FLAG).
    let plain = a.val(&format!("event-create {EVENT_SYNC}"));
    a.fails(
        &format!("event-handle {plain}"),
        107000,
        rules::EVENT_IPC_FLAG,
    );
    let mixed = a.val(&format!("event-create {}", EVENT_IPC | EVENT_SYNC));
    a.fails(
        &format!("event-handle {mixed}"),
        107000,
        rules::EVENT_IPC_FLAG,
    );
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

    for x in [&plain, &mixed, &e] {
        a.ok(&format!("event-destroy {x}"));
    }
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}
