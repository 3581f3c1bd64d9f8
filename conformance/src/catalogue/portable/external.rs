//! Portable guarantees about framework memory (`export_external`): memory the framework
//! allocated with the vendor's allocator is exported and imported, and its export outlives
//! `close_external` while a peer has it imported. Not memory rules: the memory is the
//! vendor allocator's, whatever the allocation variant.
use devipc::{DeviceId, ExportOptions, ImportedBuffer, MemToken, Runtime};

use super::CHECK;
use crate::catalogue::{Step, pattern, portable, same_bytes};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::Failure;
use crate::shell::facade::FacadePeer;

/// One 2 MiB huge page: Ascend exports whole aligned blocks (api-facts C.4 FAQ).
const EXTERNAL_BLOCK: usize = 2 << 20;

pub(super) const EXTERNAL_CLOSE_WAITS_FOR_IMPORTERS: Rule = portable(
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
);

pub(super) const EXTERNAL_MEMORY: Rule = portable(
    "portable.export.external-memory",
    "memory the framework allocated with the vendor allocator (aclrtMalloc / hipMalloc) is \
     exported with export_external and imported by a peer",
    "DESIGN 2 (export_external)",
    Expect::Behaviour,
    &[],
    external_memory,
);

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
