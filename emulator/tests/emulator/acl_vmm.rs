//! ACL surface: VMM (physical memory, reservations, mappings, access) and VMM IPC with
//! shareable handles, across real processes through the C ABI (see `acl_support`).
//! Every test has its own state directory and checks that it is clean at the end.

use crate::acl_support::{AclRoot, EmuRoot, TestRoot};
use devipc_emulator::acl::rules;

const G: usize = 2 << 20;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

#[test]
fn granularity_and_physical_allocation_rules() {
    let root = TestRoot::new("vmm-phys");
    let mut a = root.spawn("a", &[]);
    // ACL_MEM_HUGE (13) and ACL_HBM_MEM_NORMAL (5): 2 MiB; ACL_MEM_HUGE1G (14): 1 GiB.
    assert_eq!(a.val("granularity 0 0"), G.to_string());
    assert_eq!(a.val("granularity 0 1 5"), G.to_string());
    assert_eq!(a.val("granularity 1 1 14"), (1usize << 30).to_string());
    a.fails("granularity 0 2", 100000, rules::PARAM_ENUM_VALUE);
    // DDR (0) is host-only; a host location is reserved.
    a.fails("granularity 0 0 0", 100000, rules::VMM_PROP_VALID);
    a.fails("granularity 0 0 13 0", 100000, rules::VMM_PROP_VALID);
    a.fails("granularity 2 0", 107001, rules::DEVICE_ID_RANGE);

    a.fails(
        &format!("malloc-physical 0 {G} 1"),
        100000,
        rules::PARAM_RESERVED_ZERO,
    );
    a.fails("malloc-physical 0 0", 100000, rules::PARAM_SIZE_NONZERO);
    a.fails(
        &format!("malloc-physical 0 {}", 1 << 20),
        107000,
        rules::VMM_SIZE_GRANULARITY,
    );
    a.fails(
        &format!("malloc-physical 0 {G} 0 3"),
        100000,
        rules::VMM_PROP_VALID,
    );
    a.fails(
        &format!("malloc-physical 0 {G} 0 13 1 1"),
        100000,
        rules::VMM_PROP_VALID,
    );
    a.fails(
        &format!("malloc-physical 3 {G}"),
        107001,
        rules::DEVICE_ID_RANGE,
    );
    // No context needed: the device is in prop.
    let h = a.val(&format!("malloc-physical 1 {}", 2 * G));
    assert_eq!(root.used(1), 2 * G as u64);
    a.ok(&format!("free-physical {h}"));
    a.fails(&format!("free-physical {h}"), 107017, rules::HANDLE_VALID);
    assert_eq!(root.used(1), 0);
    a.exit();
    root.assert_clean();
}

#[test]
fn reserve_map_access_unmap_release() {
    let root = TestRoot::new("vmm-map");
    let mut a = root.spawn("a", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    a.fails(
        &format!("reserve {G} 1"),
        100000,
        rules::PARAM_RESERVED_ZERO,
    );
    // flags is the page-type flag: 0 or 1 (torch_npu and Mooncake pass 1), nothing else.
    a.fails(
        &format!("reserve {G} 0 0 2"),
        100000,
        rules::PARAM_RESERVED_ZERO,
    );
    let flagged = a.val(&format!("reserve {G} 0 0 1"));
    a.ok(&format!("release-address {flagged}"));
    a.fails("reserve 0", 100000, rules::PARAM_SIZE_NONZERO);
    assert_eq!(
        a.fail(&format!("reserve {G} 0 0x7f0000000000")).code,
        207000
    );
    let va = a.val(&format!("reserve {}", 2 * G));
    let base = u64::from_str_radix(&va[2..], 16).unwrap();
    assert_eq!(
        base % G as u64,
        0,
        "reservations are aligned to the granularity"
    );
    let second = format!("{:#x}", base + G as u64);
    let outside = format!("{:#x}", base + 2 * G as u64);

    a.fails(
        &format!("map {va} {} {h}", G / 2),
        107000,
        rules::VMM_MAP_WHOLE,
    );
    a.fails(
        &format!("map {va} {G} {h} 4096"),
        100000,
        rules::PARAM_RESERVED_ZERO,
    );
    a.fails(
        &format!("map {va} {G} {h} 0 1"),
        100000,
        rules::PARAM_RESERVED_ZERO,
    );
    a.fails(
        &format!("map {outside} {G} {h}"),
        107000,
        rules::VMM_MAP_RESERVED,
    );
    a.fails(
        &format!("map {:#x} {G} {h}", base + 100),
        107000,
        rules::VMM_MAP_RESERVED,
    );
    a.fails(&format!("map {va} {G} 0x4242"), 107017, rules::HANDLE_VALID);
    a.ok(&format!("map {second} {G} {h}"));
    a.fails(
        &format!("map {second} {G} {h}"),
        107000,
        rules::VMM_MAP_RESERVED,
    );
    a.ok(&format!("map {va} {G} {h}"));
    // Both mappings show the same physical memory.
    a.ok(&format!("write {va} 3 {G}"));
    a.ok(&format!("check {second} 3 {G}"));
    assert_eq!(
        a.ok(&format!("range {:#x}", base + 77)),
        [va.clone(), G.to_string()]
    );

    // Access: READ only refuses writes, NONE refuses reads too; descriptors are checked.
    a.fails(
        &format!("set-access {va} {} 3 0", G / 2),
        107000,
        rules::VMM_SET_ACCESS_MATCHES,
    );
    a.fails(
        &format!("set-access {va} {G} 2 0"),
        100000,
        rules::PARAM_ENUM_VALUE,
    );
    a.fails(
        &format!("set-access {va} {G} 3 0 0"),
        100000,
        rules::PARAM_ENUM_VALUE,
    );
    a.fails(
        &format!("set-access {va} {G} 3 9"),
        107001,
        rules::DEVICE_ID_RANGE,
    );
    a.ok(&format!("set-access {va} {G} 1 0"));
    a.fails(
        &format!("write {va} 4 64"),
        107000,
        rules::VMM_ACCESS_RESPECTED,
    );
    a.ok(&format!("check {va} 3 64"));
    a.ok(&format!("set-access {va} {G} 0 0"));
    a.fails(
        &format!("check {va} 3 64"),
        107000,
        rules::VMM_ACCESS_RESPECTED,
    );
    a.ok(&format!("set-access {va} {G} 3 0"));
    a.ok(&format!("write {va} 4 64"));

    // Release needs everything unmapped; free while mapped is deferred
    // (rules::VMM_FREE_DEFERRED).
    a.fails(
        &format!("release-address {va}"),
        107000,
        rules::VMM_UNMAP_BEFORE_RELEASE,
    );
    a.fails(
        &format!("release-address {second}"),
        107000,
        rules::VMM_UNMAP_BEFORE_RELEASE,
    );
    a.ok(&format!("free-physical {h}"));
    assert_eq!(root.used(0), G as u64, "still mapped: not released yet");
    a.ok(&format!("check {second} 4 64"));
    a.fails(
        &format!("map {outside} {G} {h}"),
        107017,
        rules::HANDLE_VALID,
    );
    a.ok(&format!("unmap {va}"));
    a.fails(&format!("unmap {va}"), 107000, rules::VMM_MAP_RESERVED);
    a.fails(&format!("check {va} 4 64"), 107000, rules::MEM_COPY_KIND);
    assert_eq!(root.used(0), G as u64);
    a.ok(&format!("unmap {second}"));
    assert_eq!(root.used(0), 0, "released at the last unmap");
    a.ok(&format!("release-address {va}"));
    a.fails(
        &format!("release-address {va}"),
        107000,
        rules::VMM_UNMAP_BEFORE_RELEASE,
    );
    a.exit();
    root.assert_clean();
}

#[test]
fn export_rules_in_the_exporting_process() {
    let root = TestRoot::new("vmm-export");
    let mut a = root.spawn("a", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    a.fails(
        &format!("export {h} 2"),
        100000,
        rules::VMM_HANDLE_TYPE_NONE,
    );
    a.fails(&format!("export {h} 0 2"), 107000, rules::VMM_EXPORT_FLAGS);
    a.fails("export 0x999990 0 0", 107017, rules::HANDLE_VALID);
    let sh = a.val(&format!("export {h} 0 0"));
    a.fails(&format!("export {h} 0 0"), 507899, rules::VMM_ONE_EXPORT);
    a.fails(&format!("export {h} 0 1"), 507899, rules::VMM_ONE_EXPORT);
    a.fails(&format!("import {sh} 0"), 507899, rules::VMM_SAME_PROCESS);
    a.fails(&format!("import {sh} 1"), 507899, rules::VMM_SAME_PROCESS);
    a.fails(&format!("import {sh} 2"), 107001, rules::VMM_DEVICE_RANGE);
    a.fails("import 12345 0", 107017, rules::HANDLE_VALID);
    a.fails("set-pid 12345 7", 107017, rules::HANDLE_VALID);
    a.ok(&format!("set-pid {sh} 4242 4343"));
    a.ok(&format!("free-physical {h}"));
    a.fails(&format!("import {sh} 0"), 107017, rules::HANDLE_VALID);
    a.exit();
    root.assert_clean();
}

#[test]
fn vmm_bytes_cross_processes_with_trustlist_one_import_and_lifetime() {
    let root = TestRoot::new("vmm-ipc");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let va = a.val(&format!("reserve {G}"));
    a.ok(&format!("map {va} {G} {h}"));
    a.ok(&format!("write {va} 11 {G}"));
    let sh = a.val(&format!("export {h} 0 0"));

    // Not trusted yet; only the exporter may trust.
    b.fails(&format!("import {sh} 0"), 507899, rules::VMM_TRUSTLIST);
    let bpid = b.val("bare-tgid");
    b.fails(
        &format!("set-pid {sh} {bpid}"),
        507899,
        rules::ONLY_EXPORTER_TRUSTS,
    );
    a.ok(&format!("set-pid {sh} {bpid}"));
    b.fails(&format!("import {sh} 9"), 107001, rules::VMM_DEVICE_RANGE);
    let bh = b.val(&format!("import {sh} 0"));
    b.fails(&format!("import {sh} 0"), 507899, rules::VMM_ONE_IMPORT);
    b.fails(&format!("export {bh} 0 0"), 507899, rules::VMM_ONE_EXPORT);
    let bva = b.val(&format!("reserve {G}"));
    b.ok(&format!("map {bva} {G} {bh}"));
    b.ok(&format!("set-access {bva} {G} 3 0"));
    b.ok(&format!("check {bva} 11 {G}"));
    b.ok(&format!("write {bva} 12 4096 8192"));
    a.ok(&format!("check {va} 12 4096 8192"));

    // The exporter lets go: the importer's memory stays (one holder left,
    // rules::VMM_LIFETIME).
    a.ok(&format!("unmap {va}"));
    a.ok(&format!("free-physical {h}"));
    a.ok(&format!("release-address {va}"));
    assert_eq!(root.used(0), G as u64);
    b.ok(&format!("check {bva} 12 4096 8192"));
    b.ok(&format!("free-physical {bh}")); // deferred: still mapped
    b.ok(&format!("check {bva} 11 4096"));
    b.ok(&format!("unmap {bva}"));
    assert_eq!(root.used(0), 0, "freed once every holder freed it");
    // Gone for everyone now.
    b.fails(&format!("import {sh} 0"), 107017, rules::HANDLE_VALID);
    b.ok(&format!("release-address {bva}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn one_import_per_process_until_it_is_freed() {
    let root = TestRoot::new("vmm-reimport");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 1 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));
    let first = b.val(&format!("import {sh} 1"));
    b.fails(&format!("import {sh} 1"), 507899, rules::VMM_ONE_IMPORT);
    b.ok(&format!("free-physical {first}"));
    let again = b.val(&format!("import {sh} 1"));
    b.ok(&format!("free-physical {again}"));
    a.ok(&format!("free-physical {h}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn cross_device_import_needs_peer_access() {
    let root = TestRoot::new("vmm-peer");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let va = a.val(&format!("reserve {G}"));
    a.ok(&format!("map {va} {G} {h}"));
    a.ok(&format!("write {va} 21 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));

    b.fails(&format!("import {sh} 1"), 507899, rules::VMM_CROSS_DEVICE);
    // Peer access 0 -> 1 is the wrong direction.
    b.ok("set-device 0");
    b.ok("enable-peer 1");
    b.fails(&format!("import {sh} 1"), 507899, rules::VMM_CROSS_DEVICE);
    b.ok("set-device 1");
    b.ok("enable-peer 0");
    let bh = b.val(&format!("import {sh} 1"));
    let bva = b.val(&format!("reserve {G}"));
    b.ok(&format!("map {bva} {G} {bh}"));
    b.ok(&format!("set-access {bva} {G} 3 1"));
    b.ok(&format!("check {bva} 21 {G}"));
    b.ok(&format!("unmap {bva}"));
    b.ok(&format!("free-physical {bh}"));
    b.ok(&format!("release-address {bva}"));
    // The same device needs no peer access (another process, same device).
    let mut c = root.spawn("same-device", &[]);
    let ch = c.val(&format!("import {sh} 0"));
    c.ok(&format!("free-physical {ch}"));
    a.ok(&format!("unmap {va}"));
    a.ok(&format!("free-physical {h}"));
    a.ok(&format!("release-address {va}"));
    a.exit();
    b.exit();
    c.exit();
    root.assert_clean();
}

#[test]
fn killed_importer_is_reclaimed_by_gc_and_memory_freed() {
    let root = TestRoot::new("vmm-kill");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));
    let bh = b.val(&format!("import {sh} 0"));
    let bva = b.val(&format!("reserve {G}"));
    b.ok(&format!("map {bva} {G} {bh}"));
    a.ok(&format!("free-physical {h}"));
    assert_eq!(root.used(0), G as u64, "the importer still holds it");

    b.kill9();
    let report = root.state().gc().unwrap();
    assert_eq!(report.holders_reclaimed, 1, "{report}");
    assert_eq!(report.objects_freed, 1, "{report}");
    assert_eq!(root.used(0), 0);
    b.reap();
    a.exit();
    root.assert_clean();
}

#[test]
fn switching_rules_off_shows_their_scenarios_fail() {
    let root = TestRoot::new("vmm-break");
    // Same-process import switched off: the exporter can import its own handle.
    let mut a = root.spawn("a", &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_SAME_PROCESS)]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));
    let own = a.val(&format!("import {sh} 0"));
    a.ok(&format!("free-physical {own}"));

    // Lifetime switched off: the allocator's free destroys the memory for the importer.
    let mut e = root.spawn("e", &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_LIFETIME)]);
    let mut b = root.spawn("b", &[]);
    let eh = e.val(&format!("malloc-physical 0 {G}"));
    let esh = e.val(&format!("export {eh} 0 1"));
    let bh = b.val(&format!("import {esh} 0"));
    e.ok(&format!("free-physical {eh}"));
    let bva = b.val(&format!("reserve {G}"));
    b.fails(&format!("map {bva} {G} {bh}"), 107017, rules::HANDLE_VALID);
    assert_eq!(b.fail(&format!("free-physical {bh}")).code, 107017);
    b.ok(&format!("release-address {bva}"));

    // Trustlist switched off: an untrusted process imports.
    let mut t = root.spawn("t", &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_TRUSTLIST)]);
    let sh2_handle = a.val(&format!("malloc-physical 0 {G}"));
    let sh2 = a.val(&format!("export {sh2_handle} 0 0"));
    let th = t.val(&format!("import {sh2} 0"));
    t.ok(&format!("free-physical {th}"));
    a.ok(&format!("free-physical {sh2_handle}"));
    a.ok(&format!("free-physical {h}"));
    for c in [a, e, b, t] {
        c.exit();
    }
    root.assert_clean();
}

#[test]
fn concurrent_imports_in_one_process_yield_exactly_one_handle() {
    let root = TestRoot::new("vmm-race");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));
    for _ in 0..5 {
        let codes = b.ok(&format!("race-import {sh} 0 8"));
        // One success, seven ascend.vmm.one-import-per-process rejections.
        let mut want = vec!["0".to_owned()];
        want.extend(std::iter::repeat_n("507899".to_owned(), 7));
        assert_eq!(codes, want, "rules::VMM_ONE_IMPORT under concurrency");
    }
    a.ok(&format!("free-physical {h}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn copies_span_contiguous_mappings_of_one_reservation() {
    let root = TestRoot::new("vmm-span");
    let mut a = root.spawn("a", &[]);
    // Three pages mapped back to back at the start of a four-page reservation (flags 1, as
    // torch_npu's expandable segments), the fourth left unmapped.
    let va = a.val(&format!("reserve {} 0 0 1", 4 * G));
    let base = u64::from_str_radix(&va[2..], 16).unwrap();
    let page = |i: usize| format!("{:#x}", base + (i * G) as u64);
    let handles: Vec<String> = (0..3)
        .map(|i| {
            let h = a.val(&format!("malloc-physical 0 {G}"));
            a.ok(&format!("map {} {G} {h}", page(i)));
            h
        })
        .collect();
    // One copy over all three pages, both ways, and one starting inside page 0
    // (rules::VMM_COPY_SPANS_MAPPINGS).
    a.ok(&format!("write {va} 31 {}", 3 * G));
    a.ok(&format!("check {va} 31 {}", 3 * G));
    // Each page's physical memory holds its third: page 1's handle mapped again elsewhere
    // shows bytes G..2G of the pattern (which equal the pattern's first G bytes).
    let alias = a.val(&format!("reserve {G}"));
    a.ok(&format!("map {alias} {G} {}", handles[1]));
    a.ok(&format!("check {alias} 31 {G}"));
    a.ok(&format!("unmap {alias}"));
    a.ok(&format!("release-address {alias}"));
    a.ok(&format!("write {va} 32 {} {}", G + 8192, G - 4096));
    a.ok(&format!("check {va} 32 {} {}", G + 8192, G - 4096));
    // A device-to-device copy and a fill across the page boundary.
    a.ok(&format!(
        "memcpy {} {G} {:#x} {G} 3",
        page(1),
        base + (G / 2) as u64
    ));
    a.ok(&format!(
        "memset {:#x} {} 7 {}",
        base + (G - 10) as u64,
        20,
        20
    ));
    a.ok(&format!("check-byte {:#x} 20 7", base + (G - 10) as u64));
    // Into the unmapped fourth page, or past the reservation: refused.
    a.fails(
        &format!("write {va} 33 {}", 3 * G + 1),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(
        &format!("memset {} {} 0 {}", page(2), 2 * G, G + 1),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    // A hole in the middle: unmap page 1, and a span over it is refused.
    a.ok(&format!("unmap {}", page(1)));
    a.fails(
        &format!("write {} 34 {}", page(0), 2 * G),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.ok(&format!("write {} 34 {}", page(0), G));
    a.ok(&format!("map {} {G} {}", page(1), handles[1]));
    // Every page a span covers must allow the access.
    a.ok(&format!("set-access {} {G} 1 0", page(1)));
    a.fails(
        &format!("write {va} 35 {}", 2 * G),
        107000,
        rules::VMM_ACCESS_RESPECTED,
    );
    a.ok(&format!("check {va} 34 {G}"));
    a.ok(&format!("set-access {} {G} 3 0", page(1)));
    // (A span never continues into another reservation, even an adjacent one: the unit
    // test memory::tests::spans_stay_in_their_reservation, which can place ranges.)
    // With the rule switched off, each mapping is its own range again.
    let mut b = root.spawn(
        "one-range-per-map",
        &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_COPY_SPANS_MAPPINGS)],
    );
    let bva = b.val(&format!("reserve {} 0 0 1", 2 * G));
    let bbase = u64::from_str_radix(&bva[2..], 16).unwrap();
    let bh: Vec<String> = (0..2)
        .map(|i| {
            let h = b.val(&format!("malloc-physical 0 {G}"));
            b.ok(&format!("map {:#x} {G} {h}", bbase + (i * G) as u64));
            h
        })
        .collect();
    b.fails(
        &format!("write {bva} 37 {}", 2 * G),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    for (i, h) in bh.iter().enumerate() {
        b.ok(&format!("unmap {:#x}", bbase + (i * G) as u64));
        b.ok(&format!("free-physical {h}"));
    }
    b.ok(&format!("release-address {bva}"));
    b.exit();

    for (i, h) in handles.iter().enumerate() {
        a.ok(&format!("unmap {}", page(i)));
        a.ok(&format!("free-physical {h}"));
    }
    a.ok(&format!("release-address {va}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn a_reservation_holds_one_device_and_one_kind_of_handle() {
    let root = TestRoot::new("vmm-mix");
    let mut a = root.spawn("exporter", &[]);
    let mut b = root.spawn("importer", &[]);
    let h = a.val(&format!("malloc-physical 0 {G}"));
    let sh = a.val(&format!("export {h} 0 1"));
    let imported = b.val(&format!("import {sh} 0"));
    let local0 = b.val(&format!("malloc-physical 0 {G}"));
    let local1 = b.val(&format!("malloc-physical 1 {G}"));
    let va = b.val(&format!("reserve {} 0 0 1", 3 * G));
    let base = u64::from_str_radix(&va[2..], 16).unwrap();
    let page = |i: usize| format!("{:#x}", base + (i * G) as u64);

    // Local memory of device 0 first: device 1's memory and an import are refused
    // (RT-DOC 11-04 aclrtMapMem).
    b.ok(&format!("map {} {G} {local0}", page(0)));
    b.fails(
        &format!("map {} {G} {local1}", page(1)),
        107000,
        rules::VMM_RESERVATION_ONE_DEVICE,
    );
    b.fails(
        &format!("map {} {G} {imported}", page(1)),
        107000,
        rules::VMM_RESERVATION_NOT_MIXED,
    );
    // Once the range is empty again it takes the other kind, then refuses local memory.
    b.ok(&format!("unmap {}", page(0)));
    b.ok(&format!("map {} {G} {imported}", page(2)));
    b.fails(
        &format!("map {} {G} {local0}", page(0)),
        107000,
        rules::VMM_RESERVATION_NOT_MIXED,
    );
    // A second reservation is free to hold device 1's memory.
    let other = b.val(&format!("reserve {G}"));
    b.ok(&format!("map {other} {G} {local1}"));
    b.ok(&format!("unmap {other}"));
    b.ok(&format!("release-address {other}"));
    b.ok(&format!("unmap {}", page(2)));

    // With the rules switched off, both mixes map.
    let mut c = root.spawn(
        "mixes-devices",
        &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_RESERVATION_ONE_DEVICE)],
    );
    let c0 = c.val(&format!("malloc-physical 0 {G}"));
    let c1 = c.val(&format!("malloc-physical 1 {G}"));
    let cva = c.val(&format!("reserve {}", 2 * G));
    let cbase = u64::from_str_radix(&cva[2..], 16).unwrap();
    c.ok(&format!("map {cva} {G} {c0}"));
    c.ok(&format!("map {:#x} {G} {c1}", cbase + G as u64));
    c.ok(&format!("unmap {cva}"));
    c.ok(&format!("unmap {:#x}", cbase + G as u64));
    c.ok(&format!("release-address {cva}"));
    for x in [&c0, &c1] {
        c.ok(&format!("free-physical {x}"));
    }
    c.exit();
    let mut d = root.spawn(
        "mixes-kinds",
        &[("DEVIPC_EMU_BREAK_RULE", rules::VMM_RESERVATION_NOT_MIXED)],
    );
    let dimp = d.val(&format!("import {sh} 0"));
    let dloc = d.val(&format!("malloc-physical 0 {G}"));
    let dva = d.val(&format!("reserve {}", 2 * G));
    let dbase = u64::from_str_radix(&dva[2..], 16).unwrap();
    d.ok(&format!("map {dva} {G} {dimp}"));
    d.ok(&format!("map {:#x} {G} {dloc}", dbase + G as u64));
    d.ok(&format!("unmap {dva}"));
    d.ok(&format!("unmap {:#x}", dbase + G as u64));
    d.ok(&format!("release-address {dva}"));
    for x in [&dimp, &dloc] {
        d.ok(&format!("free-physical {x}"));
    }
    d.exit();

    b.ok(&format!("release-address {va}"));
    for x in [&imported, &local0, &local1] {
        b.ok(&format!("free-physical {x}"));
    }
    a.ok(&format!("free-physical {h}"));
    a.exit();
    b.exit();
    root.assert_clean();
}
