//! P9 (issue 25): 1,000 copies of 4 KiB out of an import as one batched request,
//! `Stream::copy_batch` + `Request::wait`, against 1,000 raw async copies on a raw stream
//! plus one stream synchronisation (goal: at least 0.9x the throughput).
//!
//! The judged row builds the 1,000 span pairs once, outside the timed section (a caller
//! that moves the same blocks again, a refit bucket or a fixed block table, keeps them);
//! an informational row builds them inside it, 2,000 `span` calls per batch.

use std::time::Instant;

use devipc::{BackendKind, DeviceSpan, ImportedBuffer, Runtime, SharedBuffer};

use crate::peer::{Peer, parse_tokens, pattern};
use crate::raw::RawApi;
use crate::raw_stream::RawStream;
use crate::stats::{Goal, Row, paired};
use crate::{BenchResult, DEV, Plan};

/// Copies per batch and their size.
const COPIES: usize = 1000;
const COPIES_QUICK: usize = 16;
const BLOCK: usize = 4 << 10;

/// Block `i` of the import to block `i` of the local buffer, for `n` blocks.
fn pairs(
    local: &SharedBuffer,
    imported: &ImportedBuffer,
    n: usize,
) -> BenchResult<Vec<(DeviceSpan, DeviceSpan)>> {
    (0..n)
        .map(|i| {
            let r = i * BLOCK..(i + 1) * BLOCK;
            Ok((local.span(r.clone())?, imported.span(r)?))
        })
        .collect()
}

/// P9: `copy_batch` of 1,000 x 4 KiB + `wait(None)` vs 1,000 `*MemcpyAsync` + one sync.
pub fn run(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw: &RawApi,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let n = if plan.full { COPIES } else { COPIES_QUICK };
    let total = n * BLOCK;
    let (_, items) = exporter.batch(&format!("devipc 1 {total} 1"))?;
    let token = parse_tokens(&items)?.pop().ok_or("no token")?;
    let imported = rt.import(&token, DEV)?;
    let local = rt.allocate(DEV, total)?;
    let stream = rt.create_stream(DEV)?;
    let raw_stream = RawStream::new(raw)?;
    let (src_ptr, dst_ptr) = (imported.ptr().0, local.ptr().0);
    let batch = pairs(&local, &imported, n)?;
    let raw_batch = |s: &RawStream| -> BenchResult<()> {
        for i in 0..n {
            let at = (i * BLOCK) as u64;
            // SAFETY: block `i` lies inside the import and the local buffer, both live
            // until the synchronisation after the loop.
            unsafe { s.copy(dst_ptr + at, src_ptr + at, BLOCK)? };
        }
        s.sync()
    };

    let want = pattern(total);
    let mut got = vec![0u8; total];
    for devipc in [false, true] {
        local.write(0, &vec![0u8; total])?;
        if devipc {
            stream.copy_batch(&batch)?.wait(None)?;
        } else {
            raw_batch(&raw_stream)?;
        }
        local.read(0, &mut got)?;
        if got != want {
            return Err(format!("P9: the copied bytes differ (devipc side: {devipc})").into());
        }
    }

    // About 64 batches (256 MiB) per repetition in a full run.
    let iters = (plan.copy_volume / total).max(2);
    let measure = |spans_inside: bool| {
        paired(plan.reps, |devipc| {
            let start = Instant::now();
            for _ in 0..iters {
                if !devipc {
                    raw_batch(&raw_stream)?;
                } else if spans_inside {
                    stream
                        .copy_batch(&pairs(&local, &imported, n)?)?
                        .wait(None)?;
                } else {
                    stream.copy_batch(&batch)?.wait(None)?;
                }
            }
            Ok(start.elapsed().as_secs_f64() / iters as f64)
        })
    };
    let (base, dev) = measure(false)?;
    let (base_spans, dev_spans) = measure(true)?;
    let what = format!("{n} copies of 4 KiB out of an import, one batched request");
    push(Row {
        id: "P9",
        backend: kind,
        what: what.clone(),
        baseline_name: "raw copies+sync",
        baseline: base,
        devipc: dev,
        goal: Goal::AtLeast(0.9),
        judged: true,
    });
    push(Row {
        id: "P9",
        backend: kind,
        what: format!("  the same, the {} spans made inside the timed loop", 2 * n),
        baseline_name: "raw copies+sync",
        baseline: base_spans,
        devipc: dev_spans,
        goal: Goal::AtLeast(0.9),
        judged: false,
    });
    drop((batch, stream, local, imported));
    exporter.send("free")?;
    exporter.expect("ok")?;
    Ok(())
}
