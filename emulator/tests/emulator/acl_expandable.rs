//! ACL surface: torch_npu's expandable-segment IPC, replayed across real processes through
//! the C ABI (see `acl_support`).
//!
//! The sequence follows torch_npu's `ExpandableSegment` (Ascend/pytorch
//! `torch_npu/csrc/core/npu/NPUCachingAllocator.cpp`): the exporter sizes its address space
//! with `aclrtGetMemInfo(ACL_HBM_MEM)` (1 1/8 of the device's memory), reserves it with
//! `aclrtReserveMemAddress(.., 0, NULL, 1)`, backs it page by page with
//! `aclrtMallocPhysical` (`ACL_HBM_MEM_HUGE`) + `aclrtMapMem` at `ptr + i * page`, and
//! `share` exports each page's handle with `ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION`;
//! the importer (`fromShared`) reserves twice the pages it got (flags 1 again), imports each
//! shareable handle on its device and maps it at `ptr + i * page`, without
//! `aclrtMemSetAccess`. A tensor spans pages, so both sides copy over several pages with one
//! call, and `unmapHandles` synchronises the device before it unmaps and frees. Pages here
//! are 2 MiB (torch_npu's small-pool segment size; its large pool uses 20 MiB).

use crate::acl_support::{Acl, AclRoot, EmuRoot, TestRoot, addr};

/// The page (segment) size: one 2 MiB granule.
const PAGE: usize = 2 << 20;
/// Pages the exporter maps and shares.
const PAGES: usize = 3;
/// `ACL_HBM_MEM` for `aclrtGetMemInfo`, `ACL_HBM_MEM_HUGE` for `aclrtMallocPhysical`.
const HBM_MEM: i32 = 1;
const HBM_MEM_HUGE: i32 = 4;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

fn at(base: usize, offset: usize) -> String {
    format!("{:#x}", base + offset)
}

/// `ExpandableSegment`'s constructor: reserve address space for 1 1/8 of the device's
/// memory (or `handles * 2` pages when rebuilt from a share), with flags 1.
fn reserve_segment(p: &mut Acl, handles: Option<usize>) -> usize {
    let max_handles = match handles {
        Some(n) => 2 * n,
        None => {
            let info = p.ok(&format!("mem-info {HBM_MEM}"));
            let total: usize = info[1].parse().unwrap();
            (total + total / 8).div_ceil(PAGE)
        }
    };
    addr(&p.val(&format!("reserve {} 0 0 1", PAGE * max_handles))) as usize
}

/// `unmapHandles`: synchronise the device, then unmap and free each page; then the
/// destructor releases the address space.
fn tear_down(p: &mut Acl, base: usize, handles: &[String]) {
    p.ok("sync-device");
    for (i, h) in handles.iter().enumerate() {
        p.ok(&format!("unmap {}", at(base, i * PAGE)));
        p.ok(&format!("free-physical {h}"));
    }
    p.ok(&format!("release-address {base:#x}"));
}

#[test]
fn torch_npu_expandable_segment_export_import_and_copies_over_pages() {
    let root = TestRoot::new("expandable");
    let limit = [("DEVIPC_EMU_MEM_LIMIT", "64M")];
    let mut a = root.spawn("exporter", &limit);
    let mut b = root.spawn("importer", &limit);

    // Exporter: reserve, map page by page (map), then share each page's handle.
    a.ok("set-device 0");
    let a_base = reserve_segment(&mut a, None);
    let a_handles: Vec<String> = (0..PAGES)
        .map(|i| {
            let h = a.val(&format!("malloc-physical 0 {PAGE} 0 {HBM_MEM_HUGE}"));
            a.ok(&format!("map {} {PAGE} {h}", at(a_base, i * PAGE)));
            h
        })
        .collect();
    // A tensor that starts inside page 0 and ends inside page 2: one copy.
    let tensor = PAGE / 2;
    let len = 2 * PAGE;
    a.ok(&format!("write {} 51 {len}", at(a_base, tensor)));
    let shareable: Vec<String> = a_handles
        .iter()
        .map(|h| a.val(&format!("export {h} 0 1")))
        .collect();

    // Importer: fromShared.
    b.ok("set-device 0");
    let b_base = reserve_segment(&mut b, Some(PAGES));
    let b_handles: Vec<String> = shareable
        .iter()
        .enumerate()
        .map(|(i, sh)| {
            let h = b.val(&format!("import {sh} 0"));
            b.ok(&format!("map {} {PAGE} {h}", at(b_base, i * PAGE)));
            h
        })
        .collect();
    // One read over the three pages sees the exporter's tensor ...
    b.ok(&format!("check {} 51 {len}", at(b_base, tensor)));
    // ... one device-to-device copy over the pages into the importer's own memory ...
    let local = b.val(&format!("malloc {len}"));
    b.ok(&format!(
        "memcpy-async {local} {len} {} {len} 3",
        at(b_base, tensor)
    ));
    b.ok("stream-sync 0");
    b.ok(&format!("check {local} 51 {len}"));
    b.ok(&format!("free {local}"));
    // ... and one write over the pages reaches the exporter, who reads it in one copy.
    b.ok(&format!("write {} 52 {len} {}", at(b_base, 0), PAGE / 4));
    a.ok(&format!("check {} 52 {len} {}", at(a_base, 0), PAGE / 4));
    // A fill over a page boundary, both ways.
    b.ok(&format!("memset {} 64 9 64", at(b_base, 2 * PAGE - 32)));
    a.ok(&format!("check-byte {} 64 9", at(a_base, 2 * PAGE - 32)));
    // The importer's reservation ends its mapped part at page 3: a copy past it fails.
    b.fails(
        &format!("check {} 51 {}", at(b_base, 2 * PAGE), PAGE + 1),
        107000,
        "ascend.mem.copy-within-bounds",
    );

    // Teardown as torch_npu: the importer first, then the exporter; the memory lives until
    // both freed it.
    tear_down(&mut b, b_base, &b_handles);
    assert_eq!(
        root.used(0),
        (PAGES * PAGE) as u64,
        "the exporter still holds its pages"
    );
    tear_down(&mut a, a_base, &a_handles);
    assert_eq!(root.used(0), 0);
    a.exit();
    b.exit();
    root.assert_clean();
}
