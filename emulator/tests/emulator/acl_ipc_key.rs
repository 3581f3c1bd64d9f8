//! ACL surface: key-based IPC memory (`aclrtIpcMem*`) across real processes through the
//! C ABI (see `acl_support`). Every test has its own state directory and checks that it
//! is clean at the end.

use crate::acl_support::{AclRoot, EmuRoot, TestRoot, addr};
use devipc_emulator::acl::rules;

const MB: usize = 1 << 20;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

#[test]
fn export_and_argument_rules_in_one_process() {
    let root = TestRoot::new("key-local");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 1 {MB}"));
    let host = a.val("host-alloc 8192");
    a.ok("reset-device 0");
    a.fails(
        &format!("key-export {p} {MB}"),
        107002,
        rules::CONTEXT_REQUIRED,
    );
    a.ok("set-device 0");
    a.fails(
        &format!("key-export {p} {MB} 64"),
        107000,
        rules::KEY_MIN_LEN,
    );
    a.fails(
        &format!("key-export {p} {MB} 0"),
        107000,
        rules::KEY_MIN_LEN,
    );
    a.fails(
        &format!("key-export {p} 0"),
        107000,
        rules::KEY_SIZE_NONZERO,
    );
    a.fails(
        &format!("key-export {p} {MB} 65 2"),
        107000,
        rules::KEY_FLAGS,
    );
    a.fails(
        &format!("key-export {host} 4096"),
        107000,
        rules::KEY_MALLOC_ONLY,
    );
    a.fails(
        &format!("key-export {p} {}", 2 * MB),
        107000,
        rules::KEY_MALLOC_ONLY,
    );
    a.fails(
        &format!("key-export {:#x} 4096", addr(&p) + 64),
        107000,
        rules::KEY_PAGE_ALIGNED,
    );
    // Both ends must be page-table aligned (rules::KEY_PAGE_ALIGNED): the vendor FAQ's
    // aclrtMalloc(1024) + export of 1024 bytes, and an aligned start with a ragged end.
    let small = a.val("malloc 1024");
    a.fails(
        &format!("key-export {small} 1024"),
        107000,
        rules::KEY_PAGE_ALIGNED,
    );
    a.ok(&format!("free {small}"));
    a.fails(
        &format!("key-export {p} 4095"),
        107000,
        rules::KEY_PAGE_ALIGNED,
    );
    a.fails(
        &format!("key-export {:#x} 100", addr(&p) + 4096),
        107000,
        rules::KEY_PAGE_ALIGNED,
    );
    // aclrtMalloc(4096) exported as 4096 bytes: aligned at both ends, as the FAQ says.
    let page = a.val("malloc 4096");
    let page_key = a.val(&format!("key-export {page} 4096"));
    a.ok(&format!("key-close {page_key}"));
    a.ok(&format!("free {page}"));
    // A page-aligned interior range is fine, and so is a longer buffer.
    let sub = a.val(&format!("key-export {:#x} 8192 100", addr(&p) + 4096));
    assert!(sub.starts_with("devipc-emu:acl:memkey:"), "{sub}");
    let key = a.val(&format!("key-export {p} {MB}"));
    assert_ne!(key, sub, "every export makes a new key");

    a.fails(&format!("key-import {key} 2"), 107000, rules::KEY_FLAGS);
    a.fails("key-import garbage", 107017, rules::HANDLE_VALID);
    a.fails(
        "key-import devipc-emu:acl:notify:0000010000000001",
        107017,
        rules::HANDLE_VALID,
    );
    a.fails("key-close garbage", 107017, rules::HANDLE_VALID);
    a.fails("key-set-pid garbage 5", 107017, rules::HANDLE_VALID);
    a.ok(&format!("key-set-pid {key} 4242"));

    // The exporter may import its own key; each import is a new address, closed in turn,
    // and the last close destroys the key.
    let own = a.val(&format!("key-import {key}"));
    let own2 = a.val(&format!("key-import {key}"));
    assert!(own != p && own2 != p && own != own2);
    a.ok(&format!("check {own} 1 {MB}"));
    // The interior key names offset 4096 of the block, 8192 bytes long.
    let sub_va = a.val(&format!("key-import {sub}"));
    a.ok(&format!("write {sub_va} 2 8192"));
    a.ok(&format!("check {p} 2 8192 4096"));
    assert_eq!(
        a.ok(&format!("range {:#x}", addr(&sub_va) + 100)),
        [sub_va.clone(), "8192".to_owned()]
    );
    a.fails(
        &format!("write {sub_va} 2 8193"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(&format!("free {own}"), 107000, rules::MEM_KNOWN_POINTER);
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("key-close {key}"));
    a.fails(&format!("key-close {key}"), 107017, rules::HANDLE_VALID);
    a.fails(&format!("key-import {key}"), 107017, rules::HANDLE_VALID);
    a.ok(&format!("key-close {sub}"));
    a.ok(&format!("key-close {sub}"));
    a.ok(&format!("free {p}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn bytes_trustlist_repeat_imports_and_close_order_across_processes() {
    let root = TestRoot::new("key-ipc");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val(&format!("malloc {}", 4 * MB));
    a.ok(&format!("write {p} 5 {}", 4 * MB));
    let key = a.val(&format!("key-export {p} {}", 4 * MB));

    b.fails(&format!("key-import {key}"), 507899, rules::KEY_TRUSTLIST);
    let bpid = b.val("bare-tgid");
    b.fails(
        &format!("key-set-pid {key} {bpid}"),
        507899,
        rules::ONLY_EXPORTER_TRUSTS,
    );
    a.ok(&format!("key-set-pid {key} {bpid}"));
    // Repeated imports in one process: each a new address (rules::KEY_REPEAT_IMPORT).
    let v1 = b.val(&format!("key-import {key}"));
    let v2 = b.val(&format!("key-import {key}"));
    assert_ne!(v1, v2);
    b.ok(&format!("check {v1} 5 {}", 4 * MB));
    b.ok(&format!("check {v2} 5 4096"));
    b.ok(&format!("write {v2} 6 4096 65536"));
    a.ok(&format!("check {p} 6 4096 65536"));
    b.ok(&format!("check {v1} 6 4096 65536"));
    assert_eq!(
        b.ok(&format!("range {:#x}", addr(&v1) + 12345)),
        [v1.clone(), (4 * MB).to_string()]
    );
    b.fails(&format!("free {v1}"), 107000, rules::MEM_KNOWN_POINTER);

    // The documented order: importers close, then the exporter closes and frees.
    b.ok(&format!("key-close {key}"));
    b.ok(&format!("key-close {key}"));
    b.fails(&format!("key-close {key}"), 107017, rules::HANDLE_VALID);
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    assert_eq!(root.used(0), 0);
    a.exit();
    b.exit();
    assert_eq!(
        root.violations(),
        [],
        "the documented order is no violation"
    );
    root.assert_clean();
}

/// The exporter destroys the key while an importer still maps it (RT-DOC 11-07:
/// "exceptions may occur"): the close succeeds, the violation is recorded, the import's
/// copies fail with 507013, new imports are refused, and the importer's close still
/// succeeds.
#[test]
fn exporter_close_before_the_importers_is_a_recorded_violation() {
    let root = TestRoot::new("key-close-first");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let mut c = root.spawn("late", &[]);
    for x in [&mut a, &mut b, &mut c] {
        x.ok("set-device 0");
    }
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 4 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    let v = b.val(&format!("key-import {key}"));
    b.ok(&format!("check {v} 4 {MB}"));
    assert_eq!(root.violations(), []);

    a.ok(&format!("key-close {key}"));
    let violations = root.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].rule, rules::KEY_IMPORTERS_CLOSE_FIRST);
    assert_eq!(violations[0].pid, a.pid());
    assert_eq!(b.fail(&format!("check {v} 4 4096")).code, 507013);
    assert_eq!(b.fail(&format!("write {v} 5 4096")).code, 507013);
    c.fails(&format!("key-import {key}"), 107017, rules::HANDLE_VALID);
    // The exporter's own block is still its own.
    a.ok(&format!("check {p} 4 {MB}"));
    b.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    assert_eq!(root.used(0), 0);
    for x in [a, b, c] {
        x.exit();
    }
    root.clear_violations();
    root.assert_clean();
}

/// The exporter frees the block while an importer maps it through a key: the runtime
/// frees it under the importer, so the emulator revokes the pages (copies fail with
/// 507013, host access faults) and records the violation. The importer's close and the
/// exporter's key close still succeed.
#[test]
fn exporter_free_under_a_key_import_revokes_the_pages() {
    use std::os::unix::process::ExitStatusExt;
    let root = TestRoot::new("key-lifetime");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let mut d = root.spawn("peeker", &[]);
    for x in [&mut a, &mut b, &mut d] {
        x.ok("set-device 1");
    }
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 9 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    let v = b.val(&format!("key-import {key}"));
    let w = d.val(&format!("key-import {key}"));
    d.ok(&format!("peek {w}"));

    a.ok(&format!("free {p}"));
    let violations = root.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].rule, rules::KEY_FREE_WHILE_IMPORTED);
    assert_eq!(violations[0].pid, a.pid());
    assert_eq!(b.fail(&format!("check {v} 9 {MB}")).code, 507013);
    // A new import of the still-exported key finds nothing to map.
    let mut late = root.spawn("late", &[]);
    late.ok("set-device 1");
    late.fails(&format!("key-import {key}"), 107017, rules::HANDLE_VALID);
    late.exit();
    let status = d.run_fatal(&format!("peek {w}"));
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status}");
    b.ok(&format!("key-close {key}"));
    assert_eq!(root.used(1), 0, "the last holder freed the block");
    a.ok(&format!("key-close {key}"));
    a.exit();
    b.exit();
    root.clear_violations();
    root.assert_clean();
}

#[test]
fn cross_device_import_needs_the_flag_or_peer_access() {
    let root = TestRoot::new("key-peer");
    let mut a = root.spawn("exporter", &[]);
    a.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 13 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));

    let mut b = root.spawn("flag", &[]);
    b.ok("set-device 1");
    b.fails(
        &format!("key-import {key}"),
        507899,
        rules::KEY_CROSS_DEVICE,
    );
    let v = b.val(&format!("key-import {key} 1"));
    // Across devices only asynchronous device-to-device copies are allowed: no
    // synchronous aclrtMemcpy of any kind.
    b.fails(
        &format!("check {v} 13 4096"),
        107000,
        rules::KEY_CROSS_DEVICE_COPY,
    );
    b.fails(
        &format!("write {v} 14 4096"),
        107000,
        rules::KEY_CROSS_DEVICE_COPY,
    );
    let local = b.val("malloc 4096");
    b.fails(
        &format!("memcpy {local} 4096 {v} 4096 3"),
        107000,
        rules::KEY_CROSS_DEVICE_COPY,
    );
    b.fails(
        &format!("memcpy {local} 4096 {v} 4096 4"),
        107000,
        rules::KEY_CROSS_DEVICE_COPY,
    );
    // Asynchronous device-to-device copies are the ones allowed, both ways, on a stream
    // or the default stream: staged through local memory, the bytes reach the host.
    let stream = b.val("stream-create");
    b.ok(&format!("memcpy-async {local} 4096 {v} 4096 3 {stream}"));
    b.ok(&format!("stream-sync {stream}"));
    b.ok(&format!("check {local} 13 4096"));
    b.ok(&format!("write {local} 15 4096"));
    b.ok(&format!("memcpy-async {v} 4096 {local} 4096 3"));
    b.ok("stream-sync 0");
    a.ok(&format!("check {p} 15 4096"));
    b.ok(&format!("memcpy-async {local} 4096 {v} 4096 6 {stream}"));
    b.ok(&format!("memcpy-async {v} 4096 {local} 4096 7 {stream}"));
    // Asynchronous host copies and the automatic direction stay refused.
    let host = b.val("host-alloc 4096");
    for (dst, src, kind) in [
        (&v, &host, 1),
        (&host, &v, 2),
        (&local, &v, 4),
        (&v, &host, 5),
    ] {
        b.fails(
            &format!("memcpy-async {dst} 4096 {src} 4096 {kind} {stream}"),
            107000,
            rules::KEY_CROSS_DEVICE_COPY,
        );
    }
    a.ok(&format!("check {p} 15 4096"));
    a.ok(&format!("write {p} 13 4096"));
    b.ok(&format!("stream-destroy {stream}"));
    b.ok(&format!("free {local}"));
    // ENABLE_PEER_ACCESS enabled peer access 1 -> 0 for the process.
    b.val(&format!("key-import {key}"));
    b.ok(&format!("key-close {key}"));
    b.ok(&format!("key-close {key}"));

    let mut c = root.spawn("peer", &[]);
    c.ok("set-device 1");
    c.ok("enable-peer 0");
    let v = c.val(&format!("key-import {key}"));
    c.fails(
        &format!("check {v} 13 4096"),
        107000,
        rules::KEY_CROSS_DEVICE_COPY,
    );
    c.ok(&format!("key-close {key}"));

    // On the owner's device the restrictions do not apply.
    let mut d = root.spawn("same-device", &[]);
    d.ok("set-device 0");
    let v = d.val(&format!("key-import {key}"));
    d.ok(&format!("check {v} 13 {MB}"));
    d.ok(&format!("key-close {key}"));

    // With the rule switched off, host copies across devices work.
    let mut e = root.spawn(
        "copy-rule-off",
        &[("DEVIPC_EMU_BREAK_RULE", rules::KEY_CROSS_DEVICE_COPY)],
    );
    e.ok("set-device 1");
    let v = e.val(&format!("key-import {key} 1"));
    e.ok(&format!("check {v} 13 {MB}"));
    e.ok(&format!("key-close {key}"));

    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    for x in [a, b, c, d, e] {
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn killed_importer_does_not_block_the_exporter_and_gc_frees_its_hold() {
    let root = TestRoot::new("key-kill");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    b.val(&format!("key-import {key}"));
    b.val(&format!("key-import {key}"));

    b.kill9();
    // The dead importer's imports no longer count: no violation.
    a.ok(&format!("key-close {key}"));
    // Its hold on the block is reclaimed by gc; the exporter still holds the block.
    let report = root.state().gc().unwrap();
    assert_eq!(report.holders_reclaimed, 1, "{report}");
    assert_eq!(report.objects_freed, 0, "{report}");
    // Freeing it now frees it, with nobody left to violate.
    a.ok(&format!("free {p}"));
    assert_eq!(root.used(0), 0);
    b.reap();
    a.exit();
    assert_eq!(root.violations(), []);
    root.assert_clean();
}

#[test]
fn switching_rules_off_shows_their_scenarios_fail() {
    let root = TestRoot::new("key-break");
    let mut a = root.spawn(
        "exporter",
        &[("DEVIPC_EMU_BREAK_RULE", rules::KEY_IMPORTERS_CLOSE_FIRST)],
    );
    let mut b = root.spawn(
        "no-repeat",
        &[("DEVIPC_EMU_BREAK_RULE", rules::KEY_REPEAT_IMPORT)],
    );
    let mut t = root.spawn(
        "untrusted",
        &[("DEVIPC_EMU_BREAK_RULE", rules::KEY_TRUSTLIST)],
    );
    for x in [&mut a, &mut b, &mut t] {
        x.ok("set-device 0");
    }
    let p = a.val(&format!("malloc {MB}"));
    let key = a.val(&format!("key-export {p} {MB}"));
    // Trustlist off: an untrusted process imports.
    t.val(&format!("key-import {key}"));
    t.ok(&format!("key-close {key}"));
    // Repeat imports off: the second import fails, naming the rule.
    let bpid = b.val("bare-tgid");
    a.ok(&format!("key-set-pid {key} {bpid}"));
    let v = b.val(&format!("key-import {key}"));
    b.fails(
        &format!("key-import {key}"),
        507899,
        rules::KEY_REPEAT_IMPORT,
    );
    // Close order off: the exporter destroys the key under the importer, which keeps
    // working; nothing is recorded.
    a.ok(&format!("key-close {key}"));
    assert_eq!(root.violations(), []);
    b.ok(&format!("write {v} 2 4096"));
    b.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    for x in [a, b, t] {
        x.exit();
    }
    root.assert_clean();
}

#[test]
fn switching_free_while_imported_off_keeps_the_importers_pages() {
    let root = TestRoot::new("key-break-free");
    let env = [("DEVIPC_EMU_BREAK_RULE", rules::KEY_FREE_WHILE_IMPORTED)];
    let mut a = root.spawn("exporter", &env);
    let mut b = root.spawn("importer", &env);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 3 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    let v = b.val(&format!("key-import {key}"));
    a.ok(&format!("free {p}"));
    assert_eq!(root.violations(), []);
    b.ok(&format!("check {v} 3 {MB}"));
    b.ok(&format!("key-close {key}"));
    a.ok(&format!("key-close {key}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn concurrent_key_imports_in_one_process_each_get_an_address() {
    let root = TestRoot::new("key-race");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    for _ in 0..3 {
        // rules::KEY_REPEAT_IMPORT: 8 concurrent imports, 8 distinct addresses, 8 closes.
        assert_eq!(b.val(&format!("race-key-import {key} 8")), "8");
    }
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn close_unmaps_the_oldest_import_first() {
    let root = TestRoot::new("key-close-order");
    let mut a = root.spawn("exporter", &[]);
    a.ok("set-device 0");
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 41 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));

    // Three imports; each close unmaps the oldest left (rules::KEY_CLOSE_OLDEST), as the
    // runtime's close takes vaList.front().
    let mut b = root.spawn("importer", &[]);
    b.ok("set-device 0");
    let v: Vec<String> = (0..3)
        .map(|_| b.val(&format!("key-import {key}")))
        .collect();
    b.ok(&format!("key-close {key}"));
    b.fails(&format!("range {}", v[0]), 107000, rules::MEM_KNOWN_POINTER);
    b.ok(&format!("check {} 41 {MB}", v[1]));
    b.ok(&format!("check {} 41 {MB}", v[2]));
    b.ok(&format!("key-close {key}"));
    b.fails(
        &format!("check {} 41 4096", v[1]),
        107000,
        rules::MEM_COPY_KIND,
    );
    b.ok(&format!("check {} 41 {MB}", v[2]));
    b.ok(&format!("key-close {key}"));
    b.fails(&format!("key-close {key}"), 107017, rules::HANDLE_VALID);

    // With the rule switched off the newest goes first, so the oldest is still mapped.
    let mut c = root.spawn(
        "newest-first",
        &[("DEVIPC_EMU_BREAK_RULE", rules::KEY_CLOSE_OLDEST)],
    );
    c.ok("set-device 0");
    let old = c.val(&format!("key-import {key}"));
    let new = c.val(&format!("key-import {key}"));
    c.ok(&format!("key-close {key}"));
    c.ok(&format!("check {old} 41 {MB}"));
    c.fails(&format!("range {new}"), 107000, rules::MEM_KNOWN_POINTER);
    c.ok(&format!("key-close {key}"));

    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    for x in [a, b, c] {
        x.exit();
    }
    root.assert_clean();
}

/// The configured topology decides peer access (`DEVIPC_EMU_PEERS`): with only devices 0
/// and 1 connected, device 2 cannot reach device 0's memory, neither by enabling peer
/// access nor by importing a key with ENABLE_PEER_ACCESS; 0 and 1 still can.
#[test]
fn peer_access_follows_the_configured_topology() {
    let root = TestRoot::new("key-topology");
    let env = [("DEVIPC_EMU_DEVICES", "3"), ("DEVIPC_EMU_PEERS", "0-1")];
    let mut a = root.spawn("exporter", &env);
    a.ok("set-device 0");
    assert_eq!(a.val("can-access 0 1"), "1");
    assert_eq!(a.val("can-access 1 0"), "1");
    assert_eq!(a.val("can-access 0 2"), "0");
    assert_eq!(a.val("can-access 2 0"), "0");
    a.fails("enable-peer 2", 207000, rules::PEER_TOPOLOGY);
    a.ok("enable-peer 1");
    let p = a.val(&format!("malloc {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));

    let mut far = root.spawn("far", &env);
    far.ok("set-device 2");
    far.fails(&format!("key-import {key} 1"), 207000, rules::PEER_TOPOLOGY);
    let mut near = root.spawn("near", &env);
    near.ok("set-device 1");
    near.val(&format!("key-import {key} 1"));
    near.ok(&format!("key-close {key}"));
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));
    for x in [a, far, near] {
        x.exit();
    }
    root.assert_clean();

    // Switched off, the topology is ignored.
    let root = TestRoot::new("key-topology-off");
    let env = [
        ("DEVIPC_EMU_DEVICES", "3"),
        ("DEVIPC_EMU_PEERS", "none"),
        ("DEVIPC_EMU_BREAK_RULE", rules::PEER_TOPOLOGY),
    ];
    let mut a = root.spawn("exporter", &env);
    a.ok("set-device 0");
    assert_eq!(a.val("can-access 0 2"), "0");
    a.ok("enable-peer 2");
    a.exit();
    root.assert_clean();
}

/// A key dies with its exporter: once the exporting process is killed, a new import is
/// refused (the driver destroys a dead process's names), even while an earlier importer
/// still holds the key and maps the block.
#[test]
fn a_killed_exporters_key_cannot_be_imported_any_more() {
    let root = TestRoot::new("key-exporter-killed");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("early", &[]);
    let mut c = root.spawn("late", &[]);
    for x in [&mut a, &mut b, &mut c] {
        x.ok("set-device 0");
    }
    let p = a.val(&format!("malloc {MB}"));
    a.ok(&format!("write {p} 6 {MB}"));
    let key = a.val(&format!("key-export {p} {MB} 65 1"));
    let v = b.val(&format!("key-import {key}"));
    // Positive control: while the exporter lives, another process imports.
    c.val(&format!("key-import {key}"));
    c.ok(&format!("key-close {key}"));
    a.kill9();
    a.reap();
    c.fails(&format!("key-import {key}"), 107017, rules::HANDLE_VALID);
    // The early importer keeps what it mapped.
    b.ok(&format!("check {v} 6 4096"));
    b.ok(&format!("key-close {key}"));
    b.exit();
    c.exit();
    // The dead exporter's block is reclaimed by gc.
    root.state().gc().unwrap();
    assert_eq!(root.violations(), []);
    root.assert_clean();
}
