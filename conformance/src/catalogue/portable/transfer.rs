//! Portable guarantees of the data plane (issue 25): a copy through an import keeps the
//! import, and so the exporter's memory, until it completed. A memory rule.
//!
//! On the emulator the scenario holds its stream (the emulator's `hold_stream`, as if a
//! long kernel ran first), so the copy is provably still queued while the view is closed
//! and the exporter frees; on a real runtime the copy may already have run, and the rule
//! checks the bytes only.

use std::time::Duration;

use devipc::DeviceId;

use super::{SIZE, hold, peer_export};
use crate::catalogue::{Import, Step, pattern, portable, same_bytes};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};

/// How long closing the view may take while the copy is queued (it should not reach the
/// vendor at all).
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

pub(super) const CLOSE_WAITS_FOR_COPIES: Rule = portable(
    "portable.transfer.close-waits-for-copies",
    "an importer that closes its view while a stream-ordered copy out of it is still queued, \
     and an exporter that frees meanwhile, do not pull the memory from under the copy: it \
     completes with the exporter's bytes, and the import closes once it did (the request \
     keeps it)",
    "issue 25 (the lifetime promise extended to transfers); DESIGN 10",
    Expect::Behaviour,
    &[],
    close_waits_for_copies,
)
.memory_rule();

fn close_waits_for_copies(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (mut peer, id, token) = peer_export(ctx, &rt, 5, SIZE)?;
    let view = rt.import(&token, DeviceId(0)).imported("import")?;
    let local = rt.allocate(0, SIZE).step("allocate the destination")?;
    let stream = rt.create_stream(0).step("create a stream")?;
    let held = hold(ctx, &stream, true)?;
    let mut request = stream
        .copy(
            &local.span(0..SIZE).step("destination span")?,
            &view.span(0..SIZE).step("source span")?,
        )
        .step("copy out of the import")?;
    let live = rt.live_imports();
    // Closed on a thread: a vendor close that waits for the device's streams (CLR's
    // hipIpcCloseMemHandle does) would wait for the held stream forever.
    let (closed, close_done) = std::sync::mpsc::channel();
    let closer = std::thread::spawn(move || {
        drop(view);
        let _ = closed.send(());
    });
    if close_done.recv_timeout(CLOSE_LIMIT).is_err() {
        if held {
            hold(ctx, &stream, false)?;
        }
        let _ = closer.join();
        drop(request);
        return Err(Stop::fail(format!(
            "closing the view did not return within {CLOSE_LIMIT:?} while a copy out of it \
             was queued: the vendor close ran under the copy (and waited for the device)"
        )));
    }
    let _ = closer.join();
    let kept = rt.live_imports();
    peer.drop_obj(id)
        .step("peer frees its buffer while the copy is queued")?;
    if held {
        hold(ctx, &stream, false)?;
    }
    request
        .wait(Some(Duration::from_secs(30)))
        .step("the copy queued before the close and the free")?;
    let mut got = vec![0u8; SIZE];
    local.read(0, &mut got).step("read the destination")?;
    same_bytes(
        "the copy read the exporter's bytes",
        &got,
        &pattern(5, SIZE),
    )?;
    if held && kept != live {
        return Err(Stop::fail(format!(
            "the import closed under the queued copy ({live} live imports before the close, \
             {kept} after)"
        )));
    }
    let after = rt.live_imports();
    if after + 1 != live {
        return Err(Stop::fail(format!(
            "the import did not close once the copy completed ({live} live imports with \
             the view, {after} after the request)"
        )));
    }
    peer.0.finish()?;
    Ok(if held {
        "a copy queued (stream held) outlived the view's close and the exporter's free, and \
         read the exporter's bytes"
            .into()
    } else {
        "the copy read the exporter's bytes across the view's close and the exporter's free \
         (no hold hook on a real runtime)"
            .into()
    })
}
