//! P8 (issue 25): one stream-ordered copy out of an import into local memory,
//! `Stream::copy` + `Request::wait`, against the raw async copy on a raw stream plus a
//! stream synchronisation (goal: at least 0.95x the throughput).
//!
//! The import is a real cross-process one (the exporter child's buffer, as in P4); both
//! sides copy between the very same two mappings (the import and a local buffer), the
//! raw one by pointer. The stream is idle before every copy on both sides.

use std::time::Instant;

use devipc::raw::DeviceIpc;
use devipc::{BackendKind, Runtime};
use devipc_core::{CopyDesc, CopyKind};

use crate::peer::{Peer, parse_tokens, pattern};
use crate::raw::RawApi;
use crate::raw_stream::RawStream;
use crate::stats::{Goal, Row, paired, summary};
use crate::{BenchResult, DEV, Plan};

/// Copy sizes of a full run and of a smoke run.
const SIZES: &[usize] = &[64 << 10, 1 << 20, 16 << 20];
const SIZES_QUICK: &[usize] = &[64 << 10];

/// P8: `stream.copy(dst, import)` + `wait(None)` vs `*MemcpyAsync` + stream sync.
pub fn run(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw: &RawApi,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let sizes = if plan.full { SIZES } else { SIZES_QUICK };
    let largest = *sizes.iter().max().ok_or("no sizes")?;
    let (_, items) = exporter.batch(&format!("devipc 1 {largest} 1"))?;
    let token = parse_tokens(&items)?.pop().ok_or("no token")?;
    let imported = rt.import(&token, DEV)?;
    let local = rt.allocate(DEV, largest)?;
    let stream = rt.create_stream(DEV)?;
    let raw_stream = RawStream::new(raw)?;
    let (src_ptr, dst_ptr) = (imported.ptr().0, local.ptr().0);

    // Both sides copy the exporter's bytes, checked once each.
    let want = pattern(largest);
    let mut got = vec![0u8; largest];
    for devipc in [false, true] {
        local.write(0, &vec![0u8; largest])?;
        if devipc {
            stream
                .copy(&local.span(0..largest)?, &imported.span(0..largest)?)?
                .wait(None)?;
        } else {
            // SAFETY: both ranges lie inside the import and the local buffer, which
            // outlive the synchronisation right after.
            unsafe { raw_stream.copy(dst_ptr, src_ptr, largest)? };
            raw_stream.sync()?;
        }
        local.read(0, &mut got)?;
        if got != want {
            return Err(format!("P8: the copied bytes differ (devipc side: {devipc})").into());
        }
    }

    for &size in sizes {
        let iters = (plan.copy_volume / size).max(2);
        let dst = local.span(0..size)?;
        let src = imported.span(0..size)?;
        let (base, dev) = paired(plan.reps, |devipc| {
            let start = Instant::now();
            if devipc {
                for _ in 0..iters {
                    stream.copy(&dst, &src)?.wait(None)?;
                }
            } else {
                for _ in 0..iters {
                    // SAFETY: as above: both ranges are live until the sync.
                    unsafe { raw_stream.copy(dst_ptr, src_ptr, size)? };
                    raw_stream.sync()?;
                }
            }
            Ok(start.elapsed().as_secs_f64() / iters as f64)
        })?;
        let (m, _, _) = summary(&dev);
        push(Row {
            id: "P8",
            backend: kind,
            what: format!(
                "async copy of {} out of an import, posted and waited ({:.1} GB/s)",
                human_size(size),
                size as f64 / m / 1e9
            ),
            baseline_name: "raw copy+sync",
            baseline: base,
            devipc: dev,
            goal: Goal::AtLeast(0.95),
            judged: true,
        });
    }
    controls(
        kind,
        plan,
        rt,
        &raw_stream,
        &stream,
        &local,
        &imported,
        sizes[0],
        push,
    )?;
    drop((stream, local, imported));
    exporter.send("free")?;
    exporter.expect("ok")?;
    Ok(())
}

/// Where the time of the smallest copy goes: the raw vendor calls a request makes (copy,
/// event record, event sync instead of a stream sync), then devipc's raw trait making
/// them (the backend's device scoping, handle tables and checks, without the facade),
/// each against the same raw copy + stream sync.
#[allow(clippy::too_many_arguments, reason = "the pieces of one measurement")]
fn controls(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw_stream: &RawStream,
    stream: &devipc::Stream,
    local: &devipc::SharedBuffer,
    imported: &devipc::ImportedBuffer,
    size: usize,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let iters = (plan.copy_volume / size).max(2);
    let (src_ptr, dst_ptr) = (imported.ptr().0, local.ptr().0);
    let backend = rt.backend();
    // SAFETY: devipc's own stream, alive (`stream` is borrowed) for every raw call below.
    let on_stream = unsafe { devipc::RawStream::from_raw(stream.as_raw()) };
    let event = backend.create_event(DEV)?;
    let desc = CopyDesc {
        dst: dst_ptr as usize,
        src: src_ptr as usize,
        len: size,
        kind: CopyKind::DeviceToDevice,
    };
    let raw_copy_sync = || -> BenchResult<()> {
        // SAFETY: both ranges are live until the sync right after.
        unsafe { raw_stream.copy(dst_ptr, src_ptr, size)? };
        raw_stream.sync()
    };
    let variants: [(&str, &dyn Fn() -> BenchResult<()>); 2] = [
        (
            "raw copy + event record + event sync (a request's vendor calls)",
            &|| {
                // SAFETY: as above, until the event sync.
                unsafe { raw_stream.copy(dst_ptr, src_ptr, size)? };
                raw_stream.record()?;
                raw_stream.sync_event()
            },
        ),
        (
            "devipc's raw trait (copy_async + record_event + synchronize_event)",
            &|| {
                // SAFETY: as above; the devipc stream is live.
                unsafe { backend.copy_async(DEV, on_stream, &[desc])? };
                backend.record_event(&event, on_stream)?;
                Ok(backend.synchronize_event(&event, None)?)
            },
        ),
    ];
    for (what, variant) in variants {
        let (base, dev) = paired(plan.reps, |second| {
            let start = Instant::now();
            for _ in 0..iters {
                if second { variant()? } else { raw_copy_sync()? }
            }
            Ok(start.elapsed().as_secs_f64() / iters as f64)
        })?;
        push(Row {
            id: "P8",
            backend: kind,
            what: format!("  control, {}: {what}", human_size(size)),
            baseline_name: "raw copy+sync",
            baseline: base,
            devipc: dev,
            goal: Goal::AtLeast(0.95),
            judged: false,
        });
    }
    backend.destroy_event(event)?;
    Ok(())
}

/// `bytes` as KiB or MiB.
pub fn human_size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
