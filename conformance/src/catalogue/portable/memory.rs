//! Portable guarantees about memory devipc allocates: bytes shared across processes, the
//! same-process shortcut, the import cache, sub-range offsets, an exporter's free under its
//! importers, imports on another device. All are [memory rules](crate::rule::Rule::memory).
use devipc::raw::Mechanism;
use devipc::{BackendKind, DeviceId, ExportOptions};

use super::{CHECK, SIZE, peer_export};
use crate::catalogue::{Import, Step, ensure, pattern, portable, same_bytes};
use crate::counting;
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};

const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];

pub(super) const CROSS_PROCESS_BYTES: Rule = portable(
    "portable.memory.cross-process-bytes",
    "a buffer allocated, exported and granted in one process, imported in another, shows \
     the same bytes in both directions",
    "DESIGN 2 (allocate/export/grant/import), 3 (tokens cross the process boundary)",
    Expect::Behaviour,
    &[],
    cross_process_bytes,
)
.memory_rule();

pub(super) const SAME_PROCESS_SHORTCUT: Rule = portable(
    "portable.import.same-process-shortcut",
    "importing a token in the process that exported it returns a view of the local \
     allocation without any vendor call",
    "DESIGN 5.1",
    Expect::Behaviour,
    &[],
    same_process_shortcut,
)
.memory_rule();

pub(super) const CACHE_REFCOUNTED: Rule = portable(
    "portable.import.cache-refcounted",
    "importing the same export twice in one process (whole and sub-range tokens) shares one \
     mapping: one vendor import, and one vendor close when the last user drops",
    "DESIGN 5.2",
    Expect::Behaviour,
    &[],
    import_cache,
)
.memory_rule();

pub(super) const FREE_WAITS_FOR_IMPORTERS: Rule = portable(
    "portable.lifetime.free-waits-for-importers",
    "an exporter that frees (drops) its buffer while a peer has it imported does not pull \
     the memory from under the peer: the peer keeps reading the exporter's bytes until it \
     closes (HIP: devipc defers hipFree on a crash-safe lease; Ascend VMM: the runtime \
     frees physical memory when its last holder does)",
    "issue 7 (lifetime); api-facts C.1 (HIP: hipFree before importers close is undefined), C.5",
    Expect::Behaviour,
    &[],
    free_waits_for_importers,
)
.memory_rule();

pub(super) const SUB_RANGE_OFFSET: Rule = portable(
    "portable.export.sub-range-offset",
    "a sub-range export carries its offset: the importer's view starts at the range, and \
     writes through it land at the offset in the exporter",
    "DESIGN 5.3 (HIP exports the base allocation; the token carries the offset)",
    Expect::Behaviour,
    &[],
    sub_range,
)
.memory_rule();

pub(super) const CROSS_DEVICE: Rule = portable(
    "portable.import.cross-device",
    "a peer imports on another device than the exporter's (devipc enables peer access) and \
     sees the bytes",
    "DESIGN 2 (enable_peer_access, import on a device); api-facts C.1, C.5",
    Expect::Behaviour,
    TWO_DEVICES,
    cross_device,
)
.memory_rule();

/// The vendor functions that import memory and close an import, per mechanism (both
/// Ascend mechanisms together).
fn vendor_import_close(mechanism: Mechanism) -> (&'static [&'static str], &'static str) {
    match mechanism {
        Mechanism::HipVmmFd => (&["hipMemImportFromShareableHandle"], "hipMemRelease"),
        m if m.backend() == BackendKind::Hip => (&["hipIpcOpenMemHandle"], "hipIpcCloseMemHandle"),
        _ => (
            &[
                "aclrtMemImportFromShareableHandle",
                "aclrtIpcMemImportByKey",
            ],
            "aclrtUnmapMem",
        ),
    }
}

fn imports(mechanism: Mechanism) -> u64 {
    vendor_import_close(mechanism)
        .0
        .iter()
        .map(|f| counting::calls(f))
        .sum()
}

fn closes(mechanism: Mechanism) -> u64 {
    counting::calls(vendor_import_close(mechanism).1)
}

fn cross_process_bytes(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("importer", false)?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    buf.write(0, &pattern(1, CHECK)).step("write")?;
    let token = buf.export(ExportOptions::default()).step("export")?;
    ctx.shares(&token)?;
    let pid = peer.pid().step("peer process_id")?;
    buf.grant(&token, &[pid]).step("grant")?;
    let (imp, local) = peer.import(&token, 0).imported("peer import")?;
    ensure(!local, || "the peer's import claims to be local".into())?;
    same_bytes(
        "peer reads",
        &peer.read(imp, 0, CHECK).step("peer read")?,
        &pattern(1, CHECK),
    )?;
    peer.write(imp, 128, &pattern(2, 64)).step("peer write")?;
    let mut back = vec![0u8; 64];
    buf.read(128, &mut back).step("read")?;
    same_bytes("exporter reads the peer's bytes", &back, &pattern(2, 64))?;
    peer.drop_obj(imp).step("peer drop")?;
    peer.0.finish()?;
    drop(buf);
    Ok(format!(
        "{} bytes shared both ways ({})",
        token.len(),
        token.mechanism()
    ))
}

fn same_process_shortcut(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.counting_runtime()?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    buf.write(4096, &pattern(1, CHECK)).step("write")?;
    let token = buf
        .export_range(4096..4096 + CHECK, ExportOptions::default())
        .step("export")?;
    ctx.shares(&token)?;
    let before = counting::all_calls();
    let view = rt
        .import(&token, DeviceId(0))
        .step("import in the exporting process")?;
    let after = counting::all_calls();
    ensure(before == after, || {
        let made: Vec<String> = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k} x{}", v - before.get(k).copied().unwrap_or(0)))
            .collect();
        format!(
            "the same-process import made vendor calls: {}",
            made.join(", ")
        )
    })?;
    ensure(view.is_local(), || "the import is not a local view".into())?;
    let want = buf.ptr().offset(4096).step("pointer")?;
    ensure(view.ptr() == want, || {
        format!("the view is at {}, the range starts at {want}", view.ptr())
    })?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read through the view")?;
    same_bytes("the view reads", &got, &pattern(1, CHECK))?;
    drop(view);
    drop(buf);
    Ok(format!(
        "local view at the range start; 0 vendor calls ({} vendor calls in the whole scenario)",
        after.values().sum::<u64>()
    ))
}

fn import_cache(ctx: &mut Ctx) -> Verdict {
    const OFF: usize = 4096;
    let rt = ctx.counting_runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, OFF + CHECK))
        .step("peer write")?;
    let whole = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export (whole)")?;
    let part = peer
        .export(id, OFF, OFF + CHECK, ExportOptions::default())
        .step("peer export (range)")?;
    ctx.shares(&whole)?;
    ctx.shares(&part)?;
    let m = whole.mechanism();
    peer.grant(&whole, rt.process_id()).step("peer grant")?;
    peer.grant(&part, rt.process_id())
        .step("peer grant (range)")?;
    // Counted from here: starting the backend may make the same calls (HIP probes its
    // VMM export with one granule of its own).
    let (imports_before, closes_before) = (imports(m), closes(m));
    let a = rt.import(&whole, DeviceId(0)).imported("first import")?;
    let b = rt
        .import(&part, DeviceId(0))
        .step("second import (range)")?;
    let (n_imports, live) = (imports(m) - imports_before, rt.live_imports());
    ensure(n_imports == 1 && live == 1, || {
        format!("two imports made {n_imports} vendor imports and {live} live mappings")
    })?;
    let want = a.ptr().offset(OFF).step("pointer")?;
    ensure(b.ptr() == want, || {
        format!(
            "the range view is at {}, the shared mapping puts it at {want}",
            b.ptr()
        )
    })?;
    let mut got = vec![0u8; CHECK];
    b.read(0, &mut got).step("read through the range view")?;
    same_bytes("range view reads", &got, &pattern(1, OFF + CHECK)[OFF..])?;
    drop(a);
    ensure(closes(m) == closes_before, || {
        "the vendor close ran while the range view still used the mapping".into()
    })?;
    drop(b);
    let (n_closes, live) = (closes(m) - closes_before, rt.live_imports());
    ensure(n_closes == 1 && live == 0, || {
        format!("after the last drop: {n_closes} vendor closes, {live} live mappings")
    })?;
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    let (import, close) = vendor_import_close(m);
    Ok(format!(
        "two imports: 1 vendor import ({}), 1 shared mapping; 1 vendor close ({close}) at the \
         last drop",
        import.join(" or ")
    ))
}

fn sub_range(ctx: &mut Ctx) -> Verdict {
    const OFF: usize = 4096 + 100;
    const LEN: usize = 1000;
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, OFF + LEN))
        .step("peer write")?;
    let token = peer
        .export(id, OFF, OFF + LEN, ExportOptions::default())
        .step("peer export of a range")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
    ensure(token.len() == LEN as u64, || {
        format!("the token's length is {}, not {LEN}", token.len())
    })?;
    ensure(token.offset() + token.len() <= token.object_size(), || {
        "the token's range leaves its object".into()
    })?;
    let view = rt.import(&token, DeviceId(0)).imported("import")?;
    ensure(view.len() == LEN, || {
        format!("the view is {} bytes", view.len())
    })?;
    let mut got = vec![0u8; LEN];
    view.read(0, &mut got).step("read")?;
    same_bytes(
        "the view reads the range",
        &got,
        &pattern(1, OFF + LEN)[OFF..],
    )?;
    view.write(0, &pattern(9, 16))
        .step("write at the view's start")?;
    same_bytes(
        "the exporter sees the write at the offset",
        &peer.read(id, OFF, 16).step("peer read")?,
        &pattern(9, 16),
    )?;
    drop(view);
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok(format!(
        "range {OFF}..{} travelled as offset {} of a {}-byte object",
        OFF + LEN,
        token.offset(),
        token.object_size()
    ))
}

fn free_waits_for_importers(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (mut peer, id, token) = peer_export(ctx, &rt, 3, CHECK)?;
    let view = rt.import(&token, DeviceId(0)).imported("import")?;
    peer.drop_obj(id)
        .step("peer frees its buffer while imported")?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got)
        .step("read after the exporter's free")?;
    same_bytes(
        "the import outlives the exporter's free",
        &got,
        &pattern(3, CHECK),
    )?;
    view.write(0, &pattern(4, 16))
        .step("write after the exporter's free")?;
    drop(view);
    peer.0.finish()?;
    Ok("the exporter's free waited for the importer's close".into())
}

fn cross_device(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (mut peer, id, token) = peer_export(ctx, &rt, 1, CHECK)?;
    ensure(token.device() == DeviceId(0), || {
        format!(
            "the token says the memory is on {:?}, not device 0",
            token.device()
        )
    })?;
    let view = rt
        .import(&token, DeviceId(1))
        .imported("import on device 1")?;
    ensure(view.device() == DeviceId(1), || {
        format!("the import is mapped on {:?}, not device 1", view.device())
    })?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read")?;
    same_bytes("device-1 import reads", &got, &pattern(1, CHECK))?;
    drop(view);
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok("imported on device 1 (the view says so) from device 0 (the token says so)".into())
}
