//! HIP IPC memory across real processes, through the emulator's C ABI (`HipApi`), in
//! HIP 6.x and 5.x modes: bytes both ways, interior-pointer export, double open,
//! exporter free with live importers, cross-device open, kill -9 of an importer, the
//! shared memory limit, and every memory rule with its exact `hipError_t`.

use crate::hip_support::*;
use devipc_emulator::hip::rules;
use devipc_emulator::state::ObjectFlags;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

const MIB: u64 = 1 << 20;

fn bytes_cross_both_ways(version: &str) {
    let root = TestRoot::new(&format!("bytes-{version}"));
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let p = a.ok(&format!("malloc {MIB}")).num(0);
    a.ok(&format!("fill {} 65536 7", hexptr(p)));
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    assert_eq!(root.used(0), MIB);

    let mut b = Hip::spawn("importer", &root, version, &[]);
    let q = b.ok(&format!("open {h} {}", lazy(version))).num(0);
    assert_eq!(b.ok(&format!("check {} 65536 7", hexptr(q))).val(0), "same");
    // The importer writes at an offset; the exporter reads it.
    b.ok(&format!("fill {} 4096 9", hexptr(q + 300_000)));
    assert_eq!(
        a.ok(&format!("check {} 4096 9", hexptr(p + 300_000)))
            .val(0),
        "same"
    );
    // Device-to-device inside the importer's mapping, memset, seen by the exporter.
    b.ok(&format!(
        "memcpy {} {} 4096 3",
        hexptr(q + 4096),
        hexptr(q + 300_000)
    ));
    assert_eq!(
        a.ok(&format!("check {} 4096 9", hexptr(p + 4096))).val(0),
        "same"
    );
    b.ok(&format!("memset {} 171 100", hexptr(q + MIB - 100)));
    assert_eq!(
        a.ok(&format!("readbyte {}", hexptr(p + MIB - 1))).val(0),
        "171"
    );
    // hipMemGetAddressRange works on the import too.
    let r = b.ok(&format!("range {}", hexptr(q + 777)));
    assert_eq!((r.num(0), r.num(1)), (q, MIB));

    let meta = root.meta(&h);
    assert_eq!(meta.hold_count(a.identity()), 1);
    assert_eq!(meta.hold_count(b.identity()), 1);
    assert!(meta.flags.contains(ObjectFlags::EXPORTED));

    b.ok(&format!("close {}", hexptr(q)));
    assert_eq!(root.meta(&h).hold_count(b.identity()), 0);
    a.ok(&format!("free {}", hexptr(p)));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn bytes_cross_both_ways_6x() {
    bytes_cross_both_ways("6.2");
}

#[test]
fn bytes_cross_both_ways_5x() {
    bytes_cross_both_ways("5.2");
}

fn memory_rules(version: &str) {
    let root = TestRoot::new(&format!("rules-{version}"));
    let flag = lazy(version);
    let wrong = 1 - flag;
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let p = a.ok("malloc 65536").num(0);
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let mut b = Hip::spawn("importer", &root, version, &[]);

    // flags must equal hipIpcMemLazyEnablePeerAccess of the version.
    for bad in [wrong, 2, 0x8000_0000] {
        b.expect_rule(
            &format!("open {h} {bad}"),
            hipErrorInvalidValue,
            rules::MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
        );
    }
    // Zeroed, garbage, corrupted and foreign-kind handles.
    let zero = "00".repeat(64);
    let garbage = "a5".repeat(64);
    let mut flipped = h.clone().into_bytes();
    flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let e = a.ok(&format!(
        "event_create {}",
        hipEventInterprocess | hipEventDisableTiming
    ));
    let event_handle = a
        .ok(&format!("event_export {}", e.val(0)))
        .val(0)
        .to_owned();
    for bad in [&zero, &garbage, &flipped, &event_handle] {
        b.expect_rule(
            &format!("open {bad} {flag}"),
            hipErrorInvalidValue,
            rules::MEM_INVALID_HANDLE_REJECTED,
        );
    }
    // The exporter opening its own handle: refused from ROCm 5.6 (CLR's owner check);
    // ROCm 5.2 has no check and maps the allocation a second time.
    if clr_ipc_checks(version) {
        a.expect_rule(
            &format!("open {h} {flag}"),
            hipErrorInvalidContext,
            rules::MEM_OPEN_IN_EXPORTER_REJECTED,
        );
    } else {
        let own = a.ok(&format!("open {h} {flag}")).num(0);
        assert_ne!(own, p, "5.2 maps the exporter's allocation a second time");
        a.ok(&format!("fill {} 64 9", hexptr(p)));
        assert_eq!(a.ok(&format!("check {} 64 9", hexptr(own))).val(0), "same");
        assert_eq!(a.ok(&format!("range {}", hexptr(own))).num(0), own);
        a.ok(&format!("close {}", hexptr(own)));
    }
    // Export and close refusals: hipErrorInvalidValue from 5.6, before then the codes of
    // ROCm 5.2.3 (IpcCreate failure: hipErrorInvalidDevicePointer; IpcDetach failure:
    // hipErrorInvalidHandle).
    let (no_export, no_close) = if clr_ipc_checks(version) {
        (hipErrorInvalidValue, hipErrorInvalidValue)
    } else {
        (hipErrorInvalidDevicePointer, hipErrorInvalidHandle)
    };
    // NULL out-pointer and handle pointer; unknown pointers.
    b.expect_code(&format!("open_null {h} {flag}"), hipErrorInvalidValue);
    a.expect_code(&format!("export_null {}", hexptr(p)), hipErrorInvalidValue);
    a.expect_code("export 0x0", hipErrorInvalidValue);
    a.expect_code("export 0x1000", no_export);
    // Out of bounds (one past the end) and freed memory.
    a.expect_code(&format!("export {}", hexptr(p + 65536)), no_export);
    let gone = a.ok("malloc 4096").num(0);
    a.ok(&format!("free {}", hexptr(gone)));
    a.expect_code(&format!("export {}", hexptr(gone)), no_export);
    // Close: NULL, a hipMalloc pointer, unknown, and once too often.
    b.expect_code("close 0x0", hipErrorInvalidValue);
    a.expect_rule(
        &format!("close {}", hexptr(p)),
        no_close,
        rules::MEM_CLOSE_NON_IPC_POINTER_REJECTED,
    );
    b.expect_rule(
        "close 0x1000",
        no_close,
        rules::MEM_CLOSE_NON_IPC_POINTER_REJECTED,
    );
    let q = b.ok(&format!("open {h} {flag}")).num(0);
    // An import cannot be re-exported or freed with hipFree.
    b.expect_code(&format!("export {}", hexptr(q)), no_export);
    b.expect_code(&format!("free {}", hexptr(q)), hipErrorInvalidValue);
    b.ok(&format!("close {}", hexptr(q)));
    b.expect_code(&format!("close {}", hexptr(q)), no_close);
    // hipMemGetAddressRange of an unknown pointer: hipErrorNotFound from 6.0, the
    // header's hipErrorInvalidDevicePointer before; NULL outputs are invalid.
    if address_range_not_found(version) {
        a.expect_rule(
            "range 0x1000",
            hipErrorNotFound,
            rules::MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
        );
    } else {
        a.expect_code("range 0x1000", hipErrorInvalidDevicePointer);
    }
    a.expect_code(&format!("range_null {}", hexptr(p)), hipErrorInvalidValue);
    // hipFree: interior pointer and unknown pointer are invalid; NULL is fine.
    a.expect_code(&format!("free {}", hexptr(p + 8)), hipErrorInvalidValue);
    a.expect_code("free 0x1000", hipErrorInvalidValue);
    a.ok("free 0x0");

    a.ok(&format!("event_destroy {}", e.val(0)));
    a.ok(&format!("free {}", hexptr(p)));
    // Once freed and unheld, the handle names nothing.
    b.expect_rule(
        &format!("open {h} {flag}"),
        hipErrorInvalidValue,
        rules::MEM_INVALID_HANDLE_REJECTED,
    );
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn memory_rules_6x() {
    memory_rules("6.2");
}

#[test]
fn memory_rules_5x() {
    memory_rules("5.2");
}

#[test]
fn memory_rules_at_the_cut_offs() {
    // 5.6: the CLR IPC checks, still the 5.x address-range code; 6.0: both.
    memory_rules("5.6");
    memory_rules("6.0");
}

#[test]
fn interior_pointer_export_opens_to_the_base_and_double_open_is_refcounted() {
    for version in VERSIONS {
        let root = TestRoot::new(&format!("interior-{version}"));
        let flag = lazy(version);
        let mut a = Hip::spawn("exporter", &root, version, &[]);
        let p = a.ok(&format!("malloc {MIB}")).num(0);
        let off = 4096 + 17;
        a.ok(&format!("fill {} 1000 5", hexptr(p + off)));
        let h_base = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
        let h_in = a
            .ok(&format!("export {}", hexptr(p + off)))
            .val(0)
            .to_owned();
        assert_ne!(
            h_base, h_in,
            "handles for different offsets differ in their bytes"
        );
        assert_eq!(root.object(&h_base), root.object(&h_in));

        let mut b = Hip::spawn("importer", &root, version, &[]);
        let q1 = b.ok(&format!("open {h_in} {flag}")).num(0);
        let r = b.ok(&format!("range {}", hexptr(q1)));
        assert_eq!((r.num(0), r.num(1)), (q1, MIB), "open returned the base");
        // The importer adds the offset itself.
        assert_eq!(
            b.ok(&format!("check {} 1000 5", hexptr(q1 + off))).val(0),
            "same"
        );
        // Same allocation, other handle bytes: same pointer, one more reference.
        let q2 = b.ok(&format!("open {h_base} {flag}")).num(0);
        let q3 = b.ok(&format!("open {h_in} {flag}")).num(0);
        assert_eq!((q2, q3), (q1, q1));
        assert_eq!(root.meta(&h_base).hold_count(b.identity()), 3);
        // One close per open; the mapping stays until the last.
        b.ok(&format!("close {}", hexptr(q1)));
        b.ok(&format!("close {}", hexptr(q1 + 10)));
        assert_eq!(
            b.ok(&format!("check {} 1000 5", hexptr(q1 + off))).val(0),
            "same"
        );
        assert_eq!(root.meta(&h_base).hold_count(b.identity()), 1);
        b.ok(&format!("close {}", hexptr(q1)));
        let unknown = if address_range_not_found(version) {
            hipErrorNotFound
        } else {
            hipErrorInvalidDevicePointer
        };
        let no_close = if clr_ipc_checks(version) {
            hipErrorInvalidValue
        } else {
            hipErrorInvalidHandle
        };
        b.expect_code(&format!("range {}", hexptr(q1)), unknown);
        b.expect_code(&format!("close {}", hexptr(q1)), no_close);
        assert_eq!(root.meta(&h_base).hold_count(b.identity()), 0);
        a.ok(&format!("free {}", hexptr(p)));
        a.exit();
        b.exit();
        root.assert_clean();
    }
}

/// hipFree by the exporter releases the memory although another process has it open:
/// undefined behaviour on a GPU, so the emulator revokes the pages (copies fail with
/// hipErrorIllegalAddress, host access faults) and records the violation; new opens are
/// refused; the importer's close still succeeds and frees the object.
#[test]
fn exporter_free_under_an_importer_revokes_the_pages_and_records_the_violation() {
    use std::os::unix::process::ExitStatusExt;
    for version in VERSIONS {
        let root = TestRoot::new(&format!("free-first-{version}"));
        let mut a = Hip::spawn("exporter", &root, version, &[]);
        let mut b = Hip::spawn("importer", &root, version, &[]);
        let mut c = Hip::spawn("late", &root, version, &[]);
        let mut d = Hip::spawn("peeker", &root, version, &[]);
        let p = a.ok("malloc 262144").num(0);
        a.ok(&format!("fill {} 262144 3", hexptr(p)));
        let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
        let q = b.ok(&format!("open {h} {}", lazy(version))).num(0);
        let r = d.ok(&format!("open {h} {}", lazy(version))).num(0);
        // Before the free: host access and copies work, nothing is recorded.
        let byte = d
            .ok(&format!("readbyte {}", hexptr(r + 5)))
            .val(0)
            .to_owned();
        assert_eq!(d.ok(&format!("peek {}", hexptr(r + 5))).val(0), byte);
        assert_eq!(root.violations(), []);

        a.ok(&format!("free {}", hexptr(p)));
        // hipMemGetAddressRange of freed memory: 500 from ROCm 6.0, 17 before.
        let unknown = if version.starts_with('5') {
            hipErrorInvalidDevicePointer
        } else {
            hipErrorNotFound
        };
        a.expect_code(&format!("range {}", hexptr(p)), unknown);
        let meta = root.meta(&h);
        assert!(meta.flags.contains(ObjectFlags::CLOSED));
        assert!(meta.flags.contains(ObjectFlags::REVOKED));
        let violations = root.violations();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].rule, rules::MEM_FREE_WHILE_OPENED);
        assert_eq!(violations[0].pid, a.pid());
        assert_eq!(violations[0].object, root.object(&h).to_string());
        // Copies through the importer's pointer fail as a GPU would.
        b.expect_code(&format!("check {} 16 3", hexptr(q)), hipErrorIllegalAddress);
        b.expect_code(&format!("fill {} 16 8", hexptr(q)), hipErrorIllegalAddress);
        b.expect_code(
            &format!("memset {} 1 16", hexptr(q)),
            hipErrorIllegalAddress,
        );
        // Host access through a mapping faults.
        let status = d.run_fatal(&format!("peek {}", hexptr(r + 5)));
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{status}");
        // A process that had not opened it yet is refused.
        c.expect_rule(
            &format!("open {h} {}", lazy(version)),
            hipErrorInvalidValue,
            rules::MEM_OPEN_AFTER_FREE_REJECTED,
        );
        // The importer's close still works; the last holder frees the object (the dead
        // peeker's hold is reclaimed on the way).
        b.ok(&format!("close {}", hexptr(q)));
        assert_eq!(root.used(0), 0);
        for child in [a, b, c] {
            child.exit();
        }
        assert_eq!(root.violations().len(), 1);
        root.clear_violations();
        root.assert_clean();
    }
}

/// With every importer closed first, the same free records nothing.
#[test]
fn exporter_free_after_the_importers_closed_is_no_violation() {
    for version in VERSIONS {
        let root = TestRoot::new(&format!("free-last-{version}"));
        let mut a = Hip::spawn("exporter", &root, version, &[]);
        let mut b = Hip::spawn("importer", &root, version, &[]);
        let p = a.ok("malloc 65536").num(0);
        let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
        let q = b.ok(&format!("open {h} {}", lazy(version))).num(0);
        b.ok(&format!("close {}", hexptr(q)));
        a.ok(&format!("free {}", hexptr(p)));
        for child in [a, b] {
            child.exit();
        }
        assert_eq!(root.violations(), []);
        root.assert_clean();
    }
}

#[test]
fn cross_device_open_works_with_the_lazy_flag() {
    for version in VERSIONS {
        let root = TestRoot::new(&format!("xdev-{version}"));
        let flag = lazy(version);
        let env = [("DEVIPC_EMU_DEVICES", "3")];
        let mut a = Hip::spawn("exporter", &root, version, &env);
        a.ok("setdev 1");
        let p = a.ok("malloc 65536").num(0);
        a.ok(&format!("fill {} 65536 11", hexptr(p)));
        let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
        assert_eq!((root.used(0), root.used(1)), (0, 65536));

        let mut b = Hip::spawn("importer", &root, version, &env);
        // Device 0 opens device 1's memory without enabling peer access first.
        let q = b.ok(&format!("open {h} {flag}")).num(0);
        assert_eq!(
            b.ok(&format!("check {} 65536 11", hexptr(q))).val(0),
            "same"
        );
        // Peer access was not enabled by the open: enabling it succeeds once.
        b.ok("enable_peer 1 0");
        b.expect_code("enable_peer 1 0", hipErrorPeerAccessAlreadyEnabled);
        // Device 2 (a third device) opens it too: same process, same mapping.
        b.ok("setdev 2");
        let q2 = b.ok(&format!("open {h} {flag}")).num(0);
        assert_eq!(q2, q);
        b.ok(&format!("close {}", hexptr(q)));
        b.ok(&format!("close {}", hexptr(q)));
        // An invalid current device cannot open.
        let mut c = Hip::spawn(
            "two-devices",
            &root,
            version,
            &[("DEVIPC_EMU_DEVICES", "3")],
        );
        c.expect_code("setdev 3", hipErrorInvalidDevice);
        c.exit();
        a.ok(&format!("free {}", hexptr(p)));
        a.exit();
        b.exit();
        root.assert_clean();
    }
}

#[test]
fn killed_importer_is_reclaimed_by_gc_and_the_memory_freed() {
    let root = TestRoot::new("kill");
    let mut a = Hip::spawn("exporter", &root, "6.2", &[]);
    let p = a.ok("malloc 131072").num(0);
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let mut b = Hip::spawn("importer", &root, "6.2", &[]);
    b.ok(&format!("open {h} 1"));
    b.ok(&format!("open {h} 1"));
    let b_id = b.identity();
    assert_eq!(root.meta(&h).hold_count(b_id), 2);
    // Both die without freeing or closing (a crash frees nothing: no violation).
    let _ = p;
    a.kill(); // SIGKILL, reaped
    assert_eq!(root.used(0), 131072);
    b.kill();
    let state = root.state();
    let report = state.gc().unwrap();
    assert_eq!(report.holders_reclaimed, 2, "{report}");
    assert_eq!(report.objects_freed, 1, "{report}");
    assert_eq!(root.used(0), 0);
    root.assert_clean();
}

#[test]
fn killed_importer_is_reclaimed_when_the_exporter_frees() {
    let root = TestRoot::new("kill-touch");
    let mut a = Hip::spawn("exporter", &root, "5.2", &[]);
    let p = a.ok("malloc 65536").num(0);
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let mut b = Hip::spawn("importer", &root, "5.2", &[]);
    b.ok(&format!("open {h} 0"));
    b.kill();
    // hipFree touches the object: the dead holder goes with the exporter's hold.
    a.ok(&format!("free {}", hexptr(p)));
    assert_eq!(root.used(0), 0);
    a.exit();
    root.assert_clean();
}

#[test]
fn out_of_memory_is_shared_across_processes() {
    let root = TestRoot::new("oom");
    let env = [("DEVIPC_EMU_MEM_LIMIT", "1M")];
    let mut a = Hip::spawn("a", &root, "6.2", &env);
    let mut b = Hip::spawn("b", &root, "6.2", &env);
    let p = a.ok(&format!("malloc {}", 768 << 10)).num(0);
    b.expect_code(&format!("malloc {}", 512 << 10), hipErrorOutOfMemory);
    assert!(b.run("lasterr").rest.contains("out of memory"));
    a.expect_code(&format!("malloc {}", 2 * MIB), hipErrorOutOfMemory);
    // Device 1 has its own budget.
    b.ok("setdev 1");
    let q = b.ok(&format!("malloc {}", 512 << 10)).num(0);
    b.ok("setdev 0");
    // Size 0 succeeds with NULL; a NULL out-pointer is invalid.
    assert_eq!(a.ok("malloc 0").num(0), 0);
    a.expect_code("malloc_null 16", hipErrorInvalidValue);
    a.ok(&format!("free {}", hexptr(p)));
    let r = b.ok(&format!("malloc {}", 1 << 20)).num(0);
    b.ok(&format!("free {}", hexptr(r)));
    b.ok(&format!("free {}", hexptr(q)));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn out_of_memory_after_a_killed_allocator_is_recovered_by_gc() {
    let root = TestRoot::new("oom-kill");
    let env = [("DEVIPC_EMU_MEM_LIMIT", "1M")];
    let mut a = Hip::spawn("a", &root, "5.2", &env);
    a.ok(&format!("malloc {}", 900 << 10));
    a.kill();
    // The failed charge runs gc, which returns the dead process's memory.
    let mut b = Hip::spawn("b", &root, "5.2", &env);
    let q = b.ok(&format!("malloc {}", 900 << 10)).num(0);
    b.ok(&format!("free {}", hexptr(q)));
    b.exit();
    root.assert_clean();
}

#[test]
fn a_dead_exporters_handle_opens_no_more_but_importers_keep_the_pages() {
    let root = TestRoot::new("exporter-dies");
    let mut a = Hip::spawn("exporter", &root, "5.2", &[]);
    let p = a.ok("malloc 65536").num(0);
    a.ok(&format!("fill {} 65536 4", hexptr(p)));
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let mut b = Hip::spawn("importer", &root, "5.2", &[]);
    let q = b.ok(&format!("open {h} 0")).num(0);
    a.kill();
    let mut c = Hip::spawn("late", &root, "5.2", &[]);
    c.expect_rule(
        &format!("open {h} 0"),
        hipErrorInvalidValue,
        rules::MEM_OPEN_AFTER_FREE_REJECTED,
    );
    assert_eq!(b.ok(&format!("check {} 65536 4", hexptr(q))).val(0), "same");
    // The refused open reclaimed the dead exporter's hold: only the importer is left.
    assert_eq!(root.meta(&h).holders().len(), 1);
    b.ok(&format!("close {}", hexptr(q)));
    assert_eq!(root.used(0), 0);
    b.exit();
    c.exit();
    root.assert_clean();
}

/// The configured topology decides what can peer (`DEVIPC_EMU_PEERS`): with devices 0 and 1
/// connected and 2 not, device 2 cannot enable peer access to 0 nor open device-0 memory
/// (the lazy flag cannot create a link), while device 1 can.
#[test]
fn peer_access_and_cross_device_opens_follow_the_configured_topology() {
    for version in VERSIONS {
        let root = TestRoot::new(&format!("topology-{version}"));
        let env = [("DEVIPC_EMU_DEVICES", "3"), ("DEVIPC_EMU_PEERS", "0-1")];
        let mut a = Hip::spawn("exporter", &root, version, &env);
        assert_eq!(a.ok("can_peer 0 1").val(0), "1");
        assert_eq!(a.ok("can_peer 1 0").val(0), "1");
        assert_eq!(a.ok("can_peer 0 2").val(0), "0");
        assert_eq!(a.ok("can_peer 2 0").val(0), "0");
        a.expect_rule(
            "enable_peer 2 0",
            hipErrorPeerAccessUnsupported,
            rules::PEER_TOPOLOGY_RESPECTED,
        );
        a.ok("enable_peer 1 0");
        let p = a.ok("malloc 65536").num(0);
        a.ok(&format!("fill {} 65536 4", hexptr(p)));
        let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();

        let mut far = Hip::spawn("far", &root, version, &env);
        far.ok("setdev 2");
        far.expect_rule(
            &format!("open {h} {}", lazy(version)),
            hipErrorPeerAccessUnsupported,
            rules::PEER_TOPOLOGY_RESPECTED,
        );
        let mut near = Hip::spawn("near", &root, version, &env);
        near.ok("setdev 1");
        let q = near.ok(&format!("open {h} {}", lazy(version))).num(0);
        assert_eq!(
            near.ok(&format!("check {} 65536 4", hexptr(q))).val(0),
            "same"
        );
        near.ok(&format!("close {}", hexptr(q)));
        a.ok(&format!("free {}", hexptr(p)));
        for child in [a, far, near] {
            child.exit();
        }
        root.assert_clean();
    }
}
