//! ACL surface: notifies and notify IPC across real processes through the C ABI (see
//! `acl_support`): export/import rules, the binary semaphore, a ping-pong, timeouts,
//! waiting forever, and the lifetime of a shared notify. Every test has its own state
//! directory and checks that it is clean at the end.

use std::time::{Duration, Instant};

use crate::acl_support::{AclRoot, EmuRoot, TestRoot};
use devipc_emulator::acl::rules;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

#[test]
fn create_export_and_argument_rules() {
    let root = TestRoot::new("notify-local");
    let mut a = root.spawn("a", &[]);
    a.fails("notify-create", 107002, rules::CONTEXT_REQUIRED);
    a.ok("set-device 0");
    a.fails("notify-create 7", 100000, rules::PARAM_ENUM_VALUE);
    let dev_only = a.val("notify-create 1");
    let n = a.val("notify-create");
    a.fails(
        &format!("notify-set-pid {n} 5"),
        107017,
        rules::HANDLE_VALID,
    );
    a.fails(
        &format!("notify-export {n} 64"),
        107000,
        rules::NOTIFY_MIN_LEN,
    );
    // 0x1 is the memory flag, not a notify flag.
    a.fails(
        &format!("notify-export {n} 65 1"),
        107000,
        rules::NOTIFY_FLAGS,
    );
    let key = a.val(&format!("notify-export {n} 65 0"));
    assert!(key.starts_with("devipc-emu:acl:notify:"), "{key}");
    assert_eq!(
        a.val(&format!("notify-export {n} 100 2")),
        key,
        "same notify, same key"
    );
    a.ok(&format!("notify-set-pid {n} 4242"));
    a.fails(
        &format!("notify-import {key} 1"),
        107000,
        rules::NOTIFY_FLAGS,
    );
    a.fails("notify-import garbage", 107017, rules::HANDLE_VALID);
    a.fails(
        "notify-import devipc-emu:acl:memkey:0000010000000001",
        107017,
        rules::HANDLE_VALID,
    );
    a.fails("notify-record 0x5550", 107017, rules::HANDLE_VALID);
    a.fails(
        &format!("notify-record {n} 0x5550"),
        107017,
        rules::HANDLE_VALID,
    );
    // Record and wait on a created stream (the wait, then its synchronisation).
    let s = a.val("stream-create");
    a.ok(&format!("notify-record {n} {s}"));
    a.ok(&format!("notify-wait {n} 5 {s}"));
    a.ok(&format!("stream-destroy {s}"));
    a.ok(&format!("notify-destroy {dev_only}"));
    a.ok(&format!("notify-destroy {n}"));
    a.fails(&format!("notify-destroy {n}"), 107017, rules::HANDLE_VALID);
    a.fails(&format!("notify-import {key}"), 107017, rules::HANDLE_VALID);
    a.exit();
    root.assert_clean();
}

#[test]
fn binary_semaphore_and_timeout_in_seconds() {
    let root = TestRoot::new("notify-sem");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let n = a.val("notify-create");
    // Two records before a wait count once (rules::NOTIFY_BINARY_SEMAPHORE).
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-wait {n} 5"));
    let t0 = Instant::now();
    let f = a.fail(&format!("notify-wait {n} 1"));
    let waited = t0.elapsed();
    f.expect(107019, rules::NOTIFY_WAIT_TIMEOUT);
    assert!(f.message.contains("1 s"), "{}", f.message);
    assert!(
        waited >= Duration::from_secs(1),
        "timeout is in seconds: {waited:?}"
    );
    // The timed-out wait consumed nothing; a later record is seen.
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-wait {n} 5"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn ping_pong_across_processes() {
    const ROUNDS: u32 = 300;
    let root = TestRoot::new("notify-pingpong");
    let mut a = root.spawn("ping", &[]);
    let mut b = root.spawn("pong", &[]);
    a.ok("set-device 0");
    b.ok("set-device 1");
    // A's notify, exported with pid validation (the default): B must be trusted.
    let na = a.val("notify-create");
    let key_a = a.val(&format!("notify-export {na}"));
    b.fails(
        &format!("notify-import {key_a}"),
        507899,
        rules::NOTIFY_TRUSTLIST,
    );
    let bpid = b.val("bare-tgid");
    a.ok(&format!("notify-set-pid {na} {bpid}"));
    // Import flags go up to 3 (DOWNLOAD_TO_DEV 0x1 | the documented ENABLE_PEER_ACCESS
    // 0x02); larger ones are refused, 107000. The emulated notify needs no peer access on
    // another device, so 0x02 and 0 import alike.
    b.fails(
        &format!("notify-import {key_a} 4"),
        107000,
        rules::NOTIFY_IMPORT_FLAGS,
    );
    let peer = b.val(&format!("notify-import {key_a} 2"));
    b.ok(&format!("notify-destroy {peer}"));
    let both = b.val(&format!("notify-import {key_a} 3"));
    b.ok(&format!("notify-destroy {both}"));
    let na_in_b = b.val(&format!("notify-import {key_a}"));
    // B's notify, exported without pid validation (0x02).
    let nb = b.val("notify-create");
    let key_b = b.val(&format!("notify-export {nb} 65 2"));
    let nb_in_a = a.val(&format!("notify-import {key_b}"));
    // Only the creator exports or trusts.
    b.fails(
        &format!("notify-export {na_in_b}"),
        507899,
        rules::ONLY_EXPORTER_TRUSTS,
    );
    b.fails(
        &format!("notify-set-pid {na_in_b} 1"),
        507899,
        rules::ONLY_EXPORTER_TRUSTS,
    );

    // An IPC notify is waited on from the device that created it
    // (rules::NOTIFY_WAIT_ON_CREATING_DEVICE), recorded from any: each side waits on its
    // own notify and records the other's.
    b.fails(
        &format!("notify-wait {na_in_b} 1"),
        107000,
        rules::NOTIFY_WAIT_ON_CREATING_DEVICE,
    );
    a.fails(
        &format!("notify-wait {nb_in_a} 1"),
        107000,
        rules::NOTIFY_WAIT_ON_CREATING_DEVICE,
    );
    b.send(&format!("pong {nb} {na_in_b} {ROUNDS}"));
    let ping = a.val(&format!("ping {nb_in_a} {na} {ROUNDS}"));
    let pong = b.reply().unwrap();
    eprintln!("notify ping-pong across processes: {ROUNDS} rounds in {ping} us (pong {pong:?})");

    // Every record was consumed: nothing is pending on either side.
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

    // On A's device, B waits on A's notify. Timeout 0 waits forever, until the other
    // process records (were 0 a poll, B would fail with 107019 here unless it was slower
    // than the sleep). Its wait consumes the record: nothing is left for A.
    b.ok("set-device 0");
    b.send(&format!("notify-wait {na_in_b} 0"));
    std::thread::sleep(Duration::from_millis(500));
    a.ok(&format!("notify-record {na}"));
    let waited = b.reply().unwrap();
    eprintln!("B waited {} ms for the record", waited[0]);
    a.fails(
        &format!("notify-wait {na} 1"),
        107019,
        rules::NOTIFY_WAIT_TIMEOUT,
    );
    // A thread without a device cannot wait on an IPC notify at all (the check needs the
    // context, as the runtime's does).
    b.ok("reset-device 0");
    b.ok("reset-device 1");
    b.fails(
        &format!("notify-wait {nb} 1"),
        107002,
        rules::CONTEXT_REQUIRED,
    );
    b.ok("set-device 0");

    // The notify lives until every process destroyed it
    // (rules::NOTIFY_FREED_WHEN_ALL_DESTROYED).
    let objects = root.objects();
    a.ok(&format!("notify-destroy {na}"));
    assert_eq!(root.objects(), objects, "B still holds A's notify");
    b.ok(&format!("notify-record {na_in_b}"));
    b.ok(&format!("notify-wait {na_in_b} 5"));
    b.ok(&format!("notify-destroy {na_in_b}"));
    assert_eq!(root.objects(), objects - 1);
    b.ok(&format!("notify-destroy {nb}"));
    a.ok(&format!("notify-destroy {nb_in_a}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn a_killed_importer_is_reclaimed() {
    let root = TestRoot::new("notify-kill");
    let mut a = root.spawn("creator", &[]);
    let mut b = root.spawn("importer", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let n = a.val("notify-create");
    let key = a.val(&format!("notify-export {n} 65 2"));
    let bn = b.val(&format!("notify-import {key}"));
    // The creator is done with it; B blocks in a wait when it is killed.
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-wait {n} 5"));
    a.ok(&format!("notify-destroy {n}"));
    assert_eq!(root.objects(), 1, "B still holds the notify");
    b.send(&format!("notify-wait {bn} 0"));
    std::thread::sleep(Duration::from_millis(100));
    b.kill9();
    // Only the dead importer holds it: gc frees it.
    let report = root.state().gc().unwrap();
    assert_eq!(
        (report.holders_reclaimed, report.objects_freed),
        (1, 1),
        "{report}"
    );
    b.reap();
    a.exit();
    root.assert_clean();
}

#[test]
fn switching_the_semaphore_rule_off_lets_one_record_release_every_wait() {
    let root = TestRoot::new("notify-break");
    let mut a = root.spawn(
        "a",
        &[("DEVIPC_EMU_BREAK_RULE", rules::NOTIFY_BINARY_SEMAPHORE)],
    );
    let mut t = root.spawn(
        "untrusted",
        &[("DEVIPC_EMU_BREAK_RULE", rules::NOTIFY_TRUSTLIST)],
    );
    a.ok("set-device 0");
    t.ok("set-device 0");
    let n = a.val("notify-create");
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-wait {n} 5"));
    a.ok(&format!("notify-wait {n} 5"));
    // Trustlist off: an untrusted process imports a default-exported notify.
    let key = a.val(&format!("notify-export {n}"));
    let tn = t.val(&format!("notify-import {key}"));
    t.ok(&format!("notify-destroy {tn}"));
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    t.exit();
    root.assert_clean();
}

#[test]
fn switching_the_wait_device_rule_off_lets_any_device_wait() {
    let root = TestRoot::new("notify-wait-dev");
    let mut a = root.spawn("creator", &[]);
    let mut b = root.spawn(
        "other-device",
        &[(
            "DEVIPC_EMU_BREAK_RULE",
            rules::NOTIFY_WAIT_ON_CREATING_DEVICE,
        )],
    );
    let mut c = root.spawn(
        "peer-flag",
        &[("DEVIPC_EMU_BREAK_RULE", rules::NOTIFY_IMPORT_FLAGS)],
    );
    a.ok("set-device 0");
    b.ok("set-device 1");
    c.ok("set-device 1");
    let n = a.val("notify-create");
    // Not yet exported: a plain notify, waited on wherever (its creator is on device 0).
    a.ok(&format!("notify-record {n}"));
    a.ok(&format!("notify-wait {n} 5"));
    let key = a.val(&format!("notify-export {n} 65 2"));
    let bn = b.val(&format!("notify-import {key}"));
    a.ok(&format!("notify-record {n}"));
    b.ok(&format!("notify-wait {bn} 5"));
    // Import flags off: 0x04 imports.
    let cn = c.val(&format!("notify-import {key} 4"));
    c.ok(&format!("notify-destroy {cn}"));
    b.ok(&format!("notify-destroy {bn}"));
    a.ok(&format!("notify-destroy {n}"));
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}
