//! ACL surface: streams as ordered task queues across real processes (see `acl_support`):
//! waits that block only their stream (the cross-wait of two processes completes), work
//! queued behind a wait, timeouts reported at synchronisation, and what destroy, forced
//! destroy and device reset do with pending tasks. Every test has its own state directory
//! and checks that it is clean at the end.
//!
//! No assertion depends on timing: a call that must not block is followed by the event that
//! releases it (if it blocked, the release would never come and the wait would expire with
//! 107019), and "not yet run" is observed through state that only the queued task changes.

use std::time::{Duration, Instant};

use crate::acl_support::{Acl, AclRoot, EmuRoot, TestRoot};
use devipc_emulator::acl::rules;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

/// `aclrtQueryEventStatus` answers.
const NOT_READY: &str = "0";
const COMPLETE: &str = "1";

/// Two processes, each on its own device, each with a notify exported without pid
/// validation and imported by the other: `(a, b, na, nb, na_in_b, nb_in_a)`, where `na`
/// is A's notify (A waits on it, B records it).
fn pair(root: &TestRoot, env: &[(&str, &str)]) -> (Acl, Acl, String, String, String, String) {
    let mut a = root.spawn("a", env);
    let mut b = root.spawn("b", env);
    a.ok("set-device 0");
    b.ok("set-device 1");
    let na = a.val("notify-create");
    let nb = b.val("notify-create");
    let key_a = a.val(&format!("notify-export {na} 65 2"));
    let key_b = b.val(&format!("notify-export {nb} 65 2"));
    let na_in_b = b.val(&format!("notify-import {key_a}"));
    let nb_in_a = a.val(&format!("notify-import {key_b}"));
    (a, b, na, nb, na_in_b, nb_in_a)
}

#[test]
fn cross_waits_across_processes_complete() {
    let root = TestRoot::new("stream-cross");
    let (mut a, mut b, na, nb, na_in_b, nb_in_a) = pair(&root, &[]);
    let sa = a.val("stream-create");
    let sb = b.val("stream-create");
    // Each process enqueues the wait for the other's signal first, then signals the other
    // on a second stream (its default stream). With waits that blocked the caller, neither
    // would reach its record: both waits would expire (107019) after 30 s.
    a.ok(&format!("notify-wait-async {na} 30 {sa}"));
    b.ok(&format!("notify-wait-async {nb} 30 {sb}"));
    a.ok(&format!("notify-record {nb_in_a}"));
    b.ok(&format!("notify-record {na_in_b}"));
    a.ok(&format!("stream-sync {sa}"));
    b.ok(&format!("stream-sync {sb}"));
    // Each wait consumed its record (rules::NOTIFY_BINARY_SEMAPHORE): nothing is left.
    a.fails(
        &format!("notify-wait {na} 1"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    b.fails(
        &format!("notify-wait {nb} 1"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );

    // More rounds, the waits always enqueued before the records. (Each round ends with the
    // synchronisations: a second record before the wait took the first would coalesce
    // with it, the notify being a binary semaphore.)
    for round in 0..20 {
        a.ok(&format!("notify-wait-async {na} 30 {sa}"));
        b.ok(&format!("notify-wait-async {nb} 30 {sb}"));
        if round % 2 == 0 {
            b.ok(&format!("notify-record {na_in_b}"));
            a.ok(&format!("notify-record {nb_in_a}"));
        } else {
            a.ok(&format!("notify-record {nb_in_a}"));
            b.ok(&format!("notify-record {na_in_b}"));
        }
        a.ok(&format!("stream-sync {sa}"));
        b.ok(&format!("stream-sync {sb}"));
    }

    for (mut x, s, mine, theirs) in [(a, sa, na, nb_in_a), (b, sb, nb, na_in_b)] {
        x.ok(&format!("stream-destroy {s}"));
        x.ok(&format!("notify-destroy {theirs}"));
        x.ok(&format!("notify-destroy {mine}"));
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn with_the_rule_switched_off_the_caller_waits_and_the_cross_wait_expires() {
    let root = TestRoot::new("stream-cross-break");
    let env = [("DEVIPC_EMU_BREAK_RULE", rules::STREAM_ASYNC_WAITS)];
    let (mut a, mut b, na, nb, na_in_b, nb_in_a) = pair(&root, &env);
    // The waits run on the calling thread again: A's call blocks until its timeout, since
    // B cannot record before its own wait returned.
    b.send(&format!("notify-wait-async {nb} 2"));
    let f = a.fail(&format!("notify-wait-async {na} 2"));
    f.expect(107019, rules::NOTIFY_WAIT_TIMEOUT);
    b.reply()
        .expect_err("B's wait expires too")
        .expect(107019, rules::NOTIFY_WAIT_TIMEOUT);
    // Records still work (the semaphore is set; the next wait takes it at once).
    b.ok(&format!("notify-record {na_in_b}"));
    a.ok(&format!("notify-wait-async {na} 2"));
    a.ok(&format!("notify-destroy {nb_in_a}"));
    b.ok(&format!("notify-destroy {na_in_b}"));
    a.ok(&format!("notify-destroy {na}"));
    b.ok(&format!("notify-destroy {nb}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn a_wait_blocks_only_its_stream() {
    let root = TestRoot::new("stream-only");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let n = a.val("notify-create");
    let (s1, s2, s3) = (
        a.val("stream-create"),
        a.val("stream-create"),
        a.val("stream-create"),
    );
    let p = a.val("malloc 4096");
    let q = a.val("malloc 4096");
    let r = a.val("malloc 4096");
    let e = a.val("event-create 1");
    a.ok(&format!("write {p} 7 4096"));
    // s1 waits for a record of n (forever); the work queued behind it waits too.
    a.ok(&format!("notify-wait-async {n} 0 {s1}"));
    a.ok(&format!("memcpy-async {q} 4096 {p} 4096 3 {s1}"));
    a.ok(&format!("event-record {e} {s1}"));
    assert_eq!(a.val(&format!("event-query {e}")), NOT_READY);
    // s3 waits for that record (aclrtStreamWaitEvent), so its copy waits as well.
    a.ok(&format!("event-wait {s3} {e}"));
    a.ok(&format!("memcpy-async {r} 4096 {p} 4096 3 {s3}"));
    // Another stream, the default stream and the calling thread go on.
    let x = a.val("malloc 4096");
    a.ok(&format!("memcpy-async {x} 4096 {p} 4096 3 {s2}"));
    a.ok(&format!("stream-sync {s2}"));
    a.ok(&format!("check {x} 7 4096"));
    a.ok("stream-sync 0");
    a.ok(&format!("memcpy {x} 4096 {p} 4096 3"));
    // Nothing behind the waits has run.
    assert!(a.fail(&format!("check {q} 7 4096")).code < 0);
    assert!(a.fail(&format!("check {r} 7 4096")).code < 0);
    assert_eq!(a.val(&format!("event-query {e}")), NOT_READY);
    // The record on s2 releases s1, whose record of e releases s3.
    a.ok(&format!("notify-record {n} {s2}"));
    a.ok(&format!("stream-sync {s3}"));
    a.ok(&format!("check {r} 7 4096"));
    a.ok(&format!("stream-sync {s1}"));
    a.ok(&format!("check {q} 7 4096"));
    assert_eq!(a.val(&format!("event-query {e}")), COMPLETE);
    a.ok(&format!("event-sync {e}"));
    // A wait for a record that already happened does not block.
    a.ok(&format!("event-wait {s3} {e}"));
    a.ok(&format!("stream-sync {s3}"));
    for s in [&s1, &s2, &s3] {
        a.ok(&format!("stream-destroy {s}"));
    }
    for m in [&p, &q, &r, &x] {
        a.ok(&format!("free {m}"));
    }
    a.ok(&format!("event-destroy {e}"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn a_timeout_fails_the_stream_at_synchronize() {
    let root = TestRoot::new("stream-timeout");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let n = a.val("notify-create");
    let s = a.val("stream-create");
    let e = a.val("event-create 1");
    // The call only enqueues; the stream is blocked while the wait lasts.
    a.ok(&format!("notify-wait-async {n} 1 {s}"));
    a.ok(&format!("event-record {e} {s}"));
    assert_eq!(a.val(&format!("event-query {e}")), NOT_READY);
    // Its expiry is the stream's failure, reported by the synchronisation, once
    // (rules::NOTIFY_WAIT_TIMEOUT).
    let f = a.fail(&format!("stream-sync {s}"));
    f.expect(107019, rules::NOTIFY_WAIT_TIMEOUT);
    assert!(
        f.message.contains("aclrtSynchronizeStream"),
        "{}",
        f.message
    );
    assert!(f.message.contains("1 s"), "{}", f.message);
    a.ok(&format!("stream-sync {s}"));
    // The stream went on after the failed wait; the event recorded after it reports the
    // wait's failure (rules::EVENT_SYNC_REPORTS_STREAM_FAILURE), collected or not.
    a.fails(
        &format!("event-query {e}"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    a.fails(
        &format!("event-sync {e}"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    // The expired wait consumed nothing: a later record is seen.
    a.ok(&format!("notify-record {n} {s}"));
    a.ok(&format!("notify-wait {n} 5 {s}"));

    // On the default stream, the device synchronisation reports it too.
    a.ok(&format!("notify-wait-async {n} 1"));
    a.fails("sync-device", 107019, rules::NOTIFY_WAIT_TIMEOUT);
    a.ok("sync-device");
    // A device synchronisation with a timeout gives up first:
    // ACL_ERROR_RT_STREAM_SYNC_TIMEOUT (507046); the wait is still pending after it.
    a.ok(&format!("notify-wait-async {n} 60 {s}"));
    assert_eq!(a.fail("sync-device-timeout 200").code, 507046);
    a.ok(&format!("notify-record {n}"));
    a.ok("sync-device-timeout -1");
    a.ok(&format!("stream-destroy {s}"));
    a.ok(&format!("event-destroy {e}"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn destroy_waits_force_destroy_drops_and_reset_waits() {
    let root = TestRoot::new("stream-destroy");
    let mut a = root.spawn("a", &[]);
    let mut b = root.spawn("b", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let n = a.val("notify-create");
    let key = a.val(&format!("notify-export {n} 65 2"));
    let n_in_b = b.val(&format!("notify-import {key}"));

    // aclrtDestroyStream waits for the pending wait: B's record releases it, and the wait
    // (not dropped) consumes the record.
    let s = a.val("stream-create");
    a.ok(&format!("notify-wait-async {n} 60 {s}"));
    a.send(&format!("stream-destroy {s}"));
    b.ok(&format!("notify-record {n_in_b}"));
    a.reply().expect("destroy returns once the wait is done");
    a.fails(&format!("stream-sync {s}"), 107017, rules::HANDLE_VALID);
    a.fails(
        &format!("notify-wait {n} 1"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );

    // aclrtDestroyStreamForce drops it: it returns without a record (well before the
    // wait's minute), a record queued behind the wait is released, and the dropped wait
    // consumes nothing.
    let s = a.val("stream-create");
    let e = a.val("event-create 1");
    let p = a.val("malloc 4096");
    let q = a.val("malloc 4096");
    a.ok(&format!("write {p} 9 4096"));
    a.ok(&format!("notify-wait-async {n} 60 {s}"));
    a.ok(&format!("memcpy-async {q} 4096 {p} 4096 3 {s}"));
    a.ok(&format!("event-record {e} {s}"));
    let t0 = Instant::now();
    a.ok(&format!("stream-destroy-force {s}"));
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "forced destroy waited for the wait"
    );
    a.fails(&format!("stream-sync {s}"), 107017, rules::HANDLE_VALID);
    a.ok(&format!("event-sync {e}"));
    assert_eq!(a.val(&format!("event-query {e}")), COMPLETE);
    assert!(
        a.fail(&format!("check {q} 9 4096")).code < 0,
        "dropped copy ran"
    );
    b.ok(&format!("notify-record {n_in_b}"));
    a.ok(&format!("notify-wait {n} 5"));

    // The last aclrtResetDevice waits for the device's tasks, then releases its streams.
    let s = a.val("stream-create");
    a.ok(&format!("notify-wait-async {n} 60 {s}"));
    a.ok(&format!("memcpy-async {q} 4096 {p} 4096 3 {s}"));
    a.send("reset-device 0");
    b.ok(&format!("notify-record {n_in_b}"));
    a.reply().expect("reset returns once the tasks are done");
    a.ok("set-device 0");
    a.ok(&format!("check {q} 9 4096"));
    a.fails(&format!("stream-sync {s}"), 107017, rules::HANDLE_VALID);
    a.fails(
        &format!("notify-wait {n} 1"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );

    a.ok(&format!("free {p}"));
    a.ok(&format!("free {q}"));
    a.ok(&format!("event-destroy {e}"));
    b.ok(&format!("notify-destroy {n_in_b}"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

/// `aclrtSynchronizeEventWithTimeout`: a pending record makes it expire with 507047
/// (rules::EVENT_SYNC_TIMEOUT), not before its timeout; 0 is refused
/// (rules::EVENT_SYNC_TIMEOUT_VALID); once the notify the stream waits for is recorded the
/// host wait completes; an event recorded after an expired wait reports the wait's failure
/// without collecting it from the stream (rules::EVENT_SYNC_REPORTS_STREAM_FAILURE).
#[test]
fn event_sync_with_timeout_expires_completes_and_reports_the_stream_failure() {
    let root = TestRoot::new("event-sync-timeout");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let n = a.val("notify-create");
    let s = a.val("stream-create");
    let e = a.val("event-create 1");
    a.fails(
        &format!("event-sync-timeout {e} 0"),
        107000,
        rules::EVENT_SYNC_TIMEOUT_VALID,
    );
    a.fails(
        &format!("event-sync-timeout {e} -2"),
        107000,
        rules::EVENT_SYNC_TIMEOUT_VALID,
    );
    a.ok(&format!("notify-wait-async {n} 0 {s}"));
    a.ok(&format!("event-record {e} {s}"));
    let started = std::time::Instant::now();
    a.fails(
        &format!("event-sync-timeout {e} 100"),
        507047,
        rules::EVENT_SYNC_TIMEOUT,
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(100));
    // The wait went back to the stream unconsumed: a record releases it.
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("event-sync-timeout {e} -1"));
    a.ok(&format!("stream-sync {s}"));
    // A wait that expires fails the stream; the record after it carries the failure.
    a.ok(&format!("notify-wait-async {n} 1 {s}"));
    a.ok(&format!("event-record {e} {s}"));
    a.fails(
        &format!("event-sync-timeout {e} 30000"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    a.fails(
        &format!("stream-sync {s}"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    a.ok(&format!("stream-sync {s}"));
    a.ok(&format!("stream-destroy {s}"));
    a.ok(&format!("event-destroy {e}"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    root.assert_clean();
}
