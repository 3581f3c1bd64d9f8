//! Portable guarantees: what devipc promises on every backend (DESIGN section 5), checked
//! through the facade (`Runtime`, `SharedBuffer`, `ImportedBuffer`, `Signal`) exactly as
//! a framework uses it, with peers running the facade shell.
//!
//! Two guarantees are about vendor calls that must not happen; those scenarios run the
//! facade on a counting vendor table ([`crate::counting`]) and compare call counts.
//!
//! The rules about memory devipc allocates are [memory rules](crate::rule::Rule::memory):
//! they run once more on the allocation variants (`emulated-hip-vmm`: every buffer is
//! `hip-vmm-fd` memory), with the same scenario. So a scenario allocates with
//! [`Ctx::allocate`] (its facade peers' `alloc` follows the target by itself), shows each
//! token it shares to [`Ctx::shares`], and imports with [`Import::imported`] (a refused
//! `pidfd_getfd` is a skip). The framework-memory rules (`export_external`) stay on the
//! default targets: their memory is `hipMalloc`'s, whatever the variant.

use std::time::{Duration, Instant};

use devipc::raw::{
    DeviceIpc, HostIdentity, Mechanism, MemTokenParts, SignalTokenParts, TokenOrigin,
};
use devipc::{
    BackendKind, DeviceId, Error, ExportOptions, ImportedBuffer, MemToken, ProcessId, Runtime,
    SignalToken,
};

use super::{Import, Step, ensure, pattern, portable, same_bytes};
use crate::counting;
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::facade::{FacadeCommand, FacadePeer, error_kind};
use crate::shell::{Failure, Request};

const SIZE: usize = 1 << 20;
const CHECK: usize = 256;
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];
/// How late a wait may return past its timeout (or past the notify that releases it).
const WAIT_SLACK: Duration = Duration::from_millis(1500);

/// Every portable rule.
pub static RULES: &[Rule] = &[
    portable(
        "portable.memory.cross-process-bytes",
        "a buffer allocated, exported and granted in one process, imported in another, shows \
         the same bytes in both directions",
        "DESIGN 2 (allocate/export/grant/import), 3 (tokens cross the process boundary)",
        Expect::Behaviour,
        &[],
        cross_process_bytes,
    )
    .memory_rule(),
    portable(
        "portable.import.same-process-shortcut",
        "importing a token in the process that exported it returns a view of the local \
         allocation without any vendor call",
        "DESIGN 5.1",
        Expect::Behaviour,
        &[],
        same_process_shortcut,
    )
    .memory_rule(),
    portable(
        "portable.signal.same-process-import",
        "importing a signal token in the process that exported it shares the local signal \
         without any vendor call (HIP cannot open its own IPC event), and a notify through \
         the import releases a wait on the original",
        "DESIGN 5.1 and 5.5; api-facts C.2 (hipIpcOpenEventHandle in the exporter: \
         hipErrorInvalidContext)",
        Expect::Behaviour,
        &[],
        signal_same_process,
    ),
    portable(
        "portable.import.cache-refcounted",
        "importing the same export twice in one process (whole and sub-range tokens) shares one \
         mapping: one vendor import, and one vendor close when the last user drops",
        "DESIGN 5.2",
        Expect::Behaviour,
        &[],
        import_cache,
    )
    .memory_rule(),
    portable(
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
    .memory_rule(),
    portable(
        "portable.lifetime.external-close-waits-for-importers",
        "ending the export of framework memory (close_external) while a peer has it imported \
         does not pull it from under the peer: devipc refuses the close until the importers \
         closed (Ascend IPC keys: the vendor's order; HIP: the framework's hipFree after it \
         would free under the importers), and the peer keeps reading",
        "DESIGN 2 (export_external); api-facts C.4 (RT-DOC 11-07: importers close before the \
         exporter)",
        Expect::Behaviour,
        &[],
        external_close_waits_for_importers,
    ),
    portable(
        "portable.export.sub-range-offset",
        "a sub-range export carries its offset: the importer's view starts at the range, and \
         writes through it land at the offset in the exporter",
        "DESIGN 5.3 (HIP exports the base allocation; the token carries the offset)",
        Expect::Behaviour,
        &[],
        sub_range,
    )
    .memory_rule(),
    portable(
        "portable.grant.trustlist",
        "an export with the default options is importable only after grant where the backend has \
         access control (an ungranted import is a typed vendor error), and anywhere on a backend \
         without it (Capabilities::access_control = false)",
        "DESIGN 5.4; api-facts C.4-C.6 (Ascend trustlists), C.1 (HIP has none)",
        Expect::Behaviour,
        &[],
        grant_trustlist,
    )
    .catching(&["ascend.vmm.trustlist-required"])
    .memory_rule(),
    portable(
        "portable.grant.any-process",
        "an export with ExportOptions::any_process() is importable by any process without grant",
        "DESIGN 5.4",
        Expect::Behaviour,
        &[],
        grant_any_process,
    )
    .memory_rule(),
    portable(
        "portable.export.external-memory",
        "memory the framework allocated with the vendor allocator (aclrtMalloc / hipMalloc) is \
         exported with export_external and imported by a peer",
        "DESIGN 2 (export_external)",
        Expect::Behaviour,
        &[],
        external_memory,
    ),
    portable(
        "portable.import.cross-device",
        "a peer imports on another device than the exporter's (devipc enables peer access) and \
         sees the bytes",
        "DESIGN 2 (enable_peer_access, import on a device); api-facts C.1, C.5",
        Expect::Behaviour,
        TWO_DEVICES,
        cross_device,
    )
    .memory_rule(),
    portable(
        "portable.signal.binary-semaphore",
        "a signal is a binary semaphore across processes: notify once and one wait returns and \
         resets; two notifies release one wait; a wait blocks until the peer notifies; both \
         directions",
        "DESIGN 5.5",
        Expect::Behaviour,
        &[],
        signal_semaphore,
    )
    .catching(&["ascend.notify.binary-semaphore"]),
    portable(
        "portable.signal.wait-timeout",
        "waiting on a signal nobody notified blocks for the timeout and gives Error::Timeout \
         (a HIP event alone would return at once): never early and at most 250 ms late, for \
         10 ms and 300 ms (the Ascend runtime counts whole seconds, devipc keeps the deadline), \
         in this process and in a peer that imported the signal; the error states the time \
         measured",
        "DESIGN 5.5; devipc Signal::wait; issue 13 item 2 (Ascend notify timeout unit)",
        Expect::Behaviour,
        &[],
        signal_timeout,
    ),
    portable(
        "portable.error.wrong-backend",
        "a memory or signal token of the other vendor, or from the emulator on a real runtime \
         (and the reverse), is Error::BackendMismatch",
        "DESIGN 3 (mechanism tag), 5.6",
        Expect::Behaviour,
        &[],
        wrong_backend,
    ),
    portable(
        "portable.error.corrupt-token",
        "a corrupted, truncated or garbage token is Error::InvalidToken, in text and binary form",
        "DESIGN 3 (parsing is total), 5.6",
        Expect::Behaviour,
        &[],
        corrupt_token,
    )
    .memory_rule(),
    portable(
        "portable.error.bad-device",
        "a device id outside 0..device_count is Error::InvalidDevice for allocate, import and \
         create_signal",
        "DESIGN 5.6; core DeviceIpc contract",
        Expect::Behaviour,
        &[],
        bad_device,
    )
    .memory_rule(),
    portable(
        "portable.error.double-close",
        "releasing a handle twice (free, close, destroy_signal) is Error::UnknownHandle, never \
         undefined behaviour",
        "DESIGN 5.6; core DeviceIpc contract",
        Expect::Behaviour,
        &[],
        double_close,
    )
    .memory_rule(),
];

// ---------------------------------------------------------------------------------------
// Helpers.

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

/// Fails unless `result` is an error of variant `kind`; returns its message.
fn expect_error<T: std::fmt::Debug>(
    what: &str,
    kind: &str,
    result: Result<T, Error>,
) -> Result<String, Stop> {
    match result {
        Err(e) if error_kind(&e) == kind => Ok(format!("{what}: {kind}")),
        Err(e) => Err(Stop::fail(format!(
            "{what}: expected Error::{kind}, got Error::{}: {e}",
            error_kind(&e)
        ))),
        Ok(v) => Err(Stop::fail(format!(
            "{what}: succeeded ({v:?}), expected Error::{kind}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// Memory.

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

fn signal_same_process(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.counting_runtime()?;
    let signal = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let token = signal.export(ExportOptions::default()).step("export")?;
    let before = counting::all_calls();
    let local = rt
        .import_signal(&token, DeviceId(0))
        .step("import in the exporting process")?;
    let after = counting::all_calls();
    ensure(before == after, || {
        "the same-process signal import made vendor calls".into()
    })?;
    local.notify().step("notify through the import")?;
    signal
        .wait(Some(Duration::from_secs(10)))
        .step("wait on the original")?;
    drop(local);
    drop(signal);
    Ok("the import shares the local signal; notify and wait meet".into())
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
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(3, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
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

fn grant_trustlist(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let access_control = rt.info().capabilities.access_control;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::trustlist())
        .step("peer export")?;
    ctx.shares(&token)?;
    let first = rt.import(&token, DeviceId(0));
    let detail = if access_control {
        let seen = expect_error("ungranted import", "Vendor", first)?;
        peer.grant(&token, rt.process_id()).step("peer grant")?;
        let view = rt.import(&token, DeviceId(0)).imported("granted import")?;
        let mut got = vec![0u8; CHECK];
        view.read(0, &mut got).step("read")?;
        same_bytes("granted import reads", &got, &pattern(1, CHECK))?;
        format!("{seen}; granted import succeeds")
    } else {
        let view = first.imported("import (no access control on this backend)")?;
        peer.grant(&token, rt.process_id())
            .step("grant (a no-op without access control)")?;
        let mut got = vec![0u8; CHECK];
        view.read(0, &mut got).step("read")?;
        same_bytes("import reads", &got, &pattern(1, CHECK))?;
        "no access control (capabilities say so): import works without grant; grant is Ok"
            .to_owned()
    };
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok(detail)
}

fn grant_any_process(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::any_process())
        .step("peer export (any process)")?;
    ctx.shares(&token)?;
    let view = rt
        .import(&token, DeviceId(0))
        .imported("ungranted import")?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read")?;
    same_bytes("ungranted import reads", &got, &pattern(1, CHECK))?;
    drop(view);
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok("imported without grant".into())
}

/// One 2 MiB huge page: Ascend exports whole aligned blocks (api-facts C.4 FAQ).
const EXTERNAL_BLOCK: usize = 2 << 20;

/// A peer's framework memory (`aclrtMalloc` / `hipMalloc` of [`EXTERNAL_BLOCK`], filled
/// with the pattern), its first `len` bytes exported with `export_external`, granted to
/// this process and imported here; the import's bytes checked.
fn external_imported(
    ctx: &mut Ctx,
    len: usize,
) -> Result<(Runtime, FacadePeer, u64, MemToken, ImportedBuffer), Stop> {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let p = peer
        .external_alloc(0, EXTERNAL_BLOCK)
        .step("peer vendor malloc")?;
    peer.external_write(p, &pattern(1, CHECK))
        .step("peer write")?;
    let token = peer
        .external_export(0, p, len, ExportOptions::default())
        .step("export_external")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
    let view = rt.import(&token, DeviceId(0)).step("import")?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read")?;
    same_bytes("import of framework memory reads", &got, &pattern(1, CHECK))?;
    Ok((rt, peer, p, token, view))
}

fn external_memory(ctx: &mut Ctx) -> Verdict {
    let (_rt, mut peer, p, token, view) = external_imported(ctx, 4096)?;
    drop(view);
    peer.external_free(0, p).step("peer close and free")?;
    peer.0.finish()?;
    Ok(format!(
        "framework memory shared through {} (object of {} bytes)",
        token.mechanism(),
        token.object_size()
    ))
}

fn external_close_waits_for_importers(ctx: &mut Ctx) -> Verdict {
    let (_rt, mut peer, p, _token, view) = external_imported(ctx, EXTERNAL_BLOCK)?;
    let mut got = vec![0u8; CHECK];
    let closed = peer.external_close(0, p);
    let refused = match closed {
        Err(Failure::Devipc { kind, message }) if kind == "InvalidArgument" => message,
        other => {
            return Err(Stop::fail(format!(
                "close_external while the peer has the memory imported: expected a refusal \
                 (InvalidArgument), got {other:?}"
            )));
        }
    };
    view.read(0, &mut got)
        .step("read after the exporter's close_external")?;
    same_bytes("the importer still reads", &got, &pattern(1, CHECK))?;
    drop(view);
    peer.external_free(0, p)
        .step("peer close and free after the import closed")?;
    peer.0.finish()?;
    Ok(format!(
        "close_external under the importer: {refused}; the importer kept reading"
    ))
}

fn cross_device(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate on device 0")?;
    peer.write(id, 0, &pattern(1, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
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

// ---------------------------------------------------------------------------------------
// Signals.

fn signal_semaphore(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("peer", false)?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let token = sig.export(ExportOptions::default()).step("export")?;
    let pid = peer.pid().step("peer process_id")?;
    sig.grant(&token, &[pid]).step("grant")?;
    let ps = peer.signal_import(&token, 0).step("peer import_signal")?;
    // Two notifies release one wait.
    peer.notify(ps).step("peer notify")?;
    peer.notify(ps).step("peer notify again")?;
    sig.wait(Some(Duration::from_secs(10)))
        .step("wait after two notifies")?;
    let second = sig.wait(Some(Duration::from_millis(300)));
    expect_error("a second wait after two notifies", "Timeout", second)?;
    // A wait blocks until the peer notifies.
    peer.0.send(Request::Sleep(300)).step("queue sleep")?;
    peer.0
        .send(Request::Run(FacadeCommand::Notify { id: ps }))
        .step("queue notify")?;
    let started = Instant::now();
    sig.wait(Some(Duration::from_secs(10)))
        .step("wait for the delayed notify")?;
    let waited = started.elapsed();
    peer.0.reply().step("peer sleep")?;
    peer.0.reply().step("peer notify")?;
    ensure(waited >= Duration::from_millis(200), || {
        format!("the wait returned after {waited:?}, before the peer notified")
    })?;
    ensure(waited <= Duration::from_millis(300) + WAIT_SLACK, || {
        format!(
            "the wait returned {waited:?} after the peer's 300 ms sleep began: more than \
             {WAIT_SLACK:?} after the notify"
        )
    })?;
    // The other direction: the peer waits, this process notifies.
    peer.wait_start(ps, Duration::from_secs(10))
        .step("peer wait")?;
    std::thread::sleep(Duration::from_millis(100));
    sig.notify().step("notify")?;
    peer.wait_end().step("peer wait returns after the notify")?;
    peer.drop_obj(ps).step("peer destroy")?;
    peer.0.finish()?;
    drop(sig);
    Ok(format!(
        "two notifies released one wait; a wait blocked {waited:.2?} until the peer notified; \
         the peer's wait returned on this process's notify"
    ))
}

/// How late past its timeout `Signal::wait` may return in [`signal_timeout`]: devipc's
/// promise is a few milliseconds (backend-ascend `signal.rs` `WAIT_SLACK`), this is
/// generous for a loaded machine and far below the second the Ascend runtime rounds to.
const DEADLINE_SLACK: Duration = Duration::from_millis(250);

fn signal_timeout(ctx: &mut Ctx) -> Verdict {
    const LIMITS: [Duration; 2] = [Duration::from_millis(10), Duration::from_millis(300)];
    let rt = ctx.runtime()?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let mut seen = Vec::new();
    for limit in LIMITS {
        let started = Instant::now();
        let result = sig.wait(Some(limit));
        let took = started.elapsed();
        let after = match &result {
            Err(Error::Timeout { after, .. }) => *after,
            _ => Duration::ZERO,
        };
        expect_error("wait on a signal never notified", "Timeout", result)?;
        ensure(took >= limit, || {
            format!("wait({limit:?}) gave up after {took:?}, before its timeout")
        })?;
        ensure(took <= limit + DEADLINE_SLACK, || {
            format!(
                "wait({limit:?}) returned after {took:?}, more than {DEADLINE_SLACK:?} past its \
                 timeout (a vendor granularity leaking through?)"
            )
        })?;
        ensure(after >= limit && after <= took, || {
            format!(
                "wait({limit:?}) took {took:?} but its Error::Timeout says it waited {after:?}: \
                 not the time measured"
            )
        })?;
        seen.push(format!("{limit:?} in {took:.1?}"));
    }
    // Across processes: a peer waits on its import of the signal nobody notifies.
    let limit = LIMITS[0];
    let mut peer = ctx.facade_peer("waiter", false)?;
    let token = sig.export(ExportOptions::any_process()).step("export")?;
    let ps = peer.signal_import(&token, 0).step("peer import_signal")?;
    // The first command of a peer may pay for its runtime's start: not timed.
    peer.pid().step("peer process_id")?;
    let started = Instant::now();
    let result = peer.wait(ps, limit);
    let took = started.elapsed();
    match result {
        Err(Failure::Devipc { kind, .. }) if kind == "Timeout" => {}
        other => {
            return Err(Stop::fail(format!(
                "the peer's wait({limit:?}) on a signal nobody notified gave {other:?}, not \
                 Error::Timeout"
            )));
        }
    }
    ensure(took >= limit && took <= limit + DEADLINE_SLACK, || {
        format!(
            "the peer's wait({limit:?}) answered after {took:?}, not within {DEADLINE_SLACK:?} \
             of its timeout"
        )
    })?;
    peer.drop_obj(ps).step("peer destroy")?;
    peer.0.finish()?;
    Ok(format!(
        "Timeout for {} (each no earlier than asked, within {DEADLINE_SLACK:?} after, stating \
         the time measured); the peer's wait({limit:?}) answered in {took:.1?}",
        seen.join(", ")
    ))
}

// ---------------------------------------------------------------------------------------
// Errors.

fn wrong_backend(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let kind = ctx.target.kind();
    let emulated = ctx.target.emulated();
    let other = TokenOrigin {
        pid: ProcessId(std::process::id().wrapping_add(1)),
        start_time: 1,
        host: HostIdentity::current(),
    };
    let (mem_other, sig_other, mem_same, payload) = match kind {
        BackendKind::Ascend => (
            Mechanism::HipIpcMem,
            Mechanism::HipIpcEvent,
            Mechanism::AscendVmm,
            8,
        ),
        _ => (
            Mechanism::AscendVmm,
            Mechanism::AscendNotify,
            Mechanism::HipIpcMem,
            64,
        ),
    };
    let mem = |mechanism: Mechanism, emulated: bool, len: usize| {
        MemToken::new(MemTokenParts {
            mechanism,
            emulated,
            device: DeviceId(0),
            physical: Default::default(),
            origin: other,
            generation: 1,
            object_size: 4096,
            offset: 0,
            len: 4096,
            payload: vec![7; len],
        })
    };
    let foreign = mem(mem_other, emulated, 64).step("building a token")?;
    let a = expect_error(
        "import of the other vendor's memory token",
        "BackendMismatch",
        rt.import(&foreign, DeviceId(0)),
    )?;
    let signal = SignalToken::new(SignalTokenParts {
        mechanism: sig_other,
        emulated,
        device: DeviceId(0),
        physical: Default::default(),
        origin: other,
        generation: 1,
        payload: vec![7; 65],
    })
    .step("building a signal token")?;
    let b = expect_error(
        "import of the other vendor's signal token",
        "BackendMismatch",
        rt.import_signal(&signal, DeviceId(0)),
    )?;
    let flipped = mem(mem_same, !emulated, payload).step("building a token")?;
    let c = expect_error(
        if emulated {
            "import of a real-runtime token on the emulator"
        } else {
            "import of an emulator token on a real runtime"
        },
        "BackendMismatch",
        rt.import(&flipped, DeviceId(0)),
    )?;
    Ok(format!("{a}; {b}; {c}"))
}

fn corrupt_token(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    let token = buf.export(ExportOptions::default()).step("export")?;
    ctx.shares(&token)?;
    let text = token.to_text();
    let mut checks = Vec::new();
    // Flip one character of the base64 body.
    let mut flipped: Vec<char> = text.chars().collect();
    let at = flipped.len() / 2;
    flipped[at] = if flipped[at] == 'A' { 'B' } else { 'A' };
    let flipped: String = flipped.into_iter().collect();
    checks.push(("one character changed", flipped));
    checks.push(("truncated", text[..text.len() - 5].to_owned()));
    checks.push(("garbage after the prefix", "devipc3:not-a-token".to_owned()));
    checks.push(("empty", String::new()));
    checks.push((
        "another format version",
        text.replacen(devipc::raw::token::TEXT_PREFIX, "devipc9:", 1),
    ));
    for (what, t) in &checks {
        expect_error(what, "InvalidToken", t.parse::<MemToken>())?;
    }
    let mut bytes = token.to_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    expect_error(
        "binary token with one bit flipped",
        "InvalidToken",
        MemToken::from_bytes(&bytes),
    )?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let stoken = sig
        .export(ExportOptions::any_process())
        .step("export signal")?;
    expect_error(
        "a signal token read as a memory token",
        "InvalidToken",
        MemToken::from_bytes(&stoken.to_bytes()),
    )?;
    drop(sig);
    drop(buf);
    Ok(format!(
        "{} corruptions (text, binary, kind) are all InvalidToken",
        checks.len() + 2
    ))
}

fn bad_device(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let count = rt.device_count().step("device_count")?;
    let bad = DeviceId(count);
    let a = expect_error(
        &format!("allocate on device {count}"),
        "InvalidDevice",
        ctx.allocate(&rt, bad, 4096),
    )?;
    let s = expect_error(
        &format!("create_signal on device {count}"),
        "InvalidDevice",
        rt.create_signal(bad),
    )?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    let token = buf.export(ExportOptions::default()).step("export")?;
    ctx.shares(&token)?;
    let i = expect_error(
        &format!("import on device {count}"),
        "InvalidDevice",
        rt.import(&token, bad),
    )?;
    let raw = expect_error(
        &format!("raw backend import on device {count}"),
        "InvalidDevice",
        rt.backend().import(&token, bad),
    )?;
    drop(buf);
    Ok(format!("{a}; {s}; {i}; {raw}"))
}

fn double_close(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let backend = rt.backend();
    let mut peer = ctx.facade_peer("exporter", false)?;
    let alloc = ctx
        .allocate_raw(backend, DeviceId(0), 4096)
        .step("allocate")?;
    backend.free(alloc.clone()).step("free")?;
    let f = expect_error("second free", "UnknownHandle", backend.free(alloc))?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
    let mapping = backend.import(&token, DeviceId(0)).imported("import")?;
    backend.close(mapping.clone()).step("close")?;
    let c = expect_error("second close", "UnknownHandle", backend.close(mapping))?;
    let sig = backend.create_signal(DeviceId(0)).step("create_signal")?;
    backend.destroy_signal(sig.clone()).step("destroy_signal")?;
    let s = expect_error(
        "second destroy_signal",
        "UnknownHandle",
        backend.destroy_signal(sig),
    )?;
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok(format!("{f}; {c}; {s}"))
}
