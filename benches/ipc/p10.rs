//! P10 (issue 25): post one request and complete it, polling (`Stream::copy` +
//! `Request::is_complete` until true, then the drop), against a raw event record plus
//! `hipEventQuery` / `aclrtQueryEventStatus` polled until complete (goal: at most 1.1x).
//!
//! **Both sides include one 4 KiB device-to-device copy out of an import** (a request
//! is the completion of copies: the judged row posts the smallest real one); the raw side
//! is `*MemcpyAsync` + event record + query. Two informational rows split the cost:
//! - *no copy on either side*: an empty batch (`copy_batch(&[])`, a request that is only
//!   its event) against record + query alone;
//! - *control*: the same copy through devipc's raw trait (`DeviceIpc::copy_async` +
//!   `record_event` + `query_event` on the devipc stream, a trait event), i.e. the
//!   backend's device scoping, handle tables and checks without the facade's request,
//!   spans and event pool; a last row sets the request against those trait calls, so
//!   it shows the facade's own cost (`src/stream.rs`, `src/request.rs`) alone.

use std::hint::spin_loop;
use std::time::Instant;

use devipc::raw::DeviceIpc;
use devipc::{BackendKind, Runtime};
use devipc_core::{CopyDesc, CopyKind};

use crate::peer::{Peer, parse_tokens, pattern};
use crate::raw::RawApi;
use crate::raw_stream::RawStream;
use crate::stats::{Goal, Row, fmt_series, paired};
use crate::{BenchResult, DEV, Plan};

const BLOCK: usize = 4 << 10;
/// Requests per repetition (full run, smoke run).
const POSTS: usize = 20_000;
const POSTS_QUICK: usize = 50;

/// P10: one request (one 4 KiB copy) posted and polled to completion vs raw copy +
/// record + query.
pub fn run(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw: &RawApi,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let posts = if plan.full { POSTS } else { POSTS_QUICK };
    let (_, items) = exporter.batch(&format!("devipc 1 {BLOCK} 1"))?;
    let token = parse_tokens(&items)?.pop().ok_or("no token")?;
    let imported = rt.import(&token, DEV)?;
    let local = rt.allocate(DEV, BLOCK)?;
    let stream = rt.create_stream(DEV)?;
    // SAFETY: devipc's own stream, alive (`stream` is held) for every raw call below.
    let on_stream = unsafe { devipc::RawStream::from_raw(stream.as_raw()) };
    let raw_stream = RawStream::new(raw)?;
    let (src_ptr, dst_ptr) = (imported.ptr().0, local.ptr().0);
    let (dst, src) = (local.span(0..BLOCK)?, imported.span(0..BLOCK)?);
    let backend = rt.backend();
    let event = backend.create_event(DEV)?;
    let desc = CopyDesc {
        dst: dst_ptr as usize,
        src: src_ptr as usize,
        len: BLOCK,
        kind: CopyKind::DeviceToDevice,
    };

    // Each side's copy once, checked.
    let want = pattern(BLOCK);
    let mut got = vec![0u8; BLOCK];
    for side in 0..3 {
        local.write(0, &[0u8; BLOCK])?;
        match side {
            0 => {
                // SAFETY: both blocks are live until the event completes, just after.
                unsafe { raw_stream.copy(dst_ptr, src_ptr, BLOCK)? };
                raw_stream.record()?;
                raw_stream.poll_until_complete()?;
            }
            1 => stream.copy(&dst, &src)?.wait(None)?,
            _ => {
                // SAFETY: as above; the devipc stream is live.
                unsafe { backend.copy_async(DEV, on_stream, &[desc])? };
                backend.record_event(&event, on_stream)?;
                while !backend.query_event(&event)? {
                    spin_loop();
                }
            }
        }
        local.read(0, &mut got)?;
        if got != want {
            return Err(format!("P10: the copied bytes differ (side {side})").into());
        }
    }

    let timed = |body: &mut dyn FnMut() -> BenchResult<()>| -> BenchResult<f64> {
        let start = Instant::now();
        for _ in 0..posts {
            body()?;
        }
        Ok(start.elapsed().as_secs_f64() / posts as f64)
    };
    let raw_copy = || -> BenchResult<()> {
        // SAFETY: both blocks are live until the event completes, within this call.
        unsafe { raw_stream.copy(dst_ptr, src_ptr, BLOCK)? };
        raw_stream.record()?;
        raw_stream.poll_until_complete()
    };
    let poll = |mut request: devipc::Request| -> BenchResult<()> {
        while !request.is_complete()? {
            spin_loop();
        }
        Ok(())
    };

    let (base, dev) = paired(plan.reps, |devipc| {
        if devipc {
            timed(&mut || poll(stream.copy(&dst, &src)?))
        } else {
            timed(&mut || raw_copy())
        }
    })?;
    let (base_empty, dev_empty) = paired(plan.reps, |devipc| {
        if devipc {
            timed(&mut || poll(stream.copy_batch(&[])?))
        } else {
            timed(&mut || {
                raw_stream.record()?;
                raw_stream.poll_until_complete()
            })
        }
    })?;
    let trait_path = || -> BenchResult<()> {
        // SAFETY: as above; the event completes within this call.
        unsafe { backend.copy_async(DEV, on_stream, &[desc])? };
        backend.record_event(&event, on_stream)?;
        while !backend.query_event(&event)? {
            spin_loop();
        }
        Ok(())
    };
    let (base_trait, dev_trait) = paired(plan.reps, |devipc| {
        if devipc {
            timed(&mut || trait_path())
        } else {
            timed(&mut || raw_copy())
        }
    })?;
    // The facade alone: the request against the trait calls it makes.
    let (trait_only, facade) = paired(plan.reps, |devipc| {
        if devipc {
            timed(&mut || poll(stream.copy(&dst, &src)?))
        } else {
            timed(&mut || trait_path())
        }
    })?;

    // Parts alone: the device query each of devipc's backend calls makes to bind its
    // device (three per request), and one `getpid` (the fork checks of the facade and of
    // the emulator's per-process state each make one).
    let part = |f: &dyn Fn() -> BenchResult<()>| -> BenchResult<String> {
        let mut costs = Vec::new();
        for _ in 0..=plan.reps {
            costs.push(timed(&mut || f())?);
        }
        Ok(fmt_series(&costs[1..]))
    };
    let get_device = part(&|| raw_stream.current_device().map(drop))?;
    let getpid = part(&|| {
        std::hint::black_box(std::process::id());
        Ok(())
    })?;
    let name = match kind {
        BackendKind::Ascend => "aclrtGetDevice",
        _ => "hipGetDevice",
    };
    println!("  (P10 {kind}: one {name} alone {get_device}; one getpid alone {getpid})");

    let rows = [
        (
            "post + poll to completion: one request of one 4 KiB copy out of an import",
            "raw copy+record+query",
            base,
            dev,
            true,
        ),
        (
            "  no copy on either side: an empty request vs record+query",
            "raw record+query",
            base_empty,
            dev_empty,
            false,
        ),
        (
            "  control: devipc's raw trait (copy_async+record_event+query_event)",
            "raw copy+record+query",
            base_trait,
            dev_trait,
            false,
        ),
        (
            "  the facade alone: the request vs the same trait calls (control above)",
            "trait calls",
            trait_only,
            facade,
            false,
        ),
    ];
    for (what, baseline_name, baseline, devipc, judged) in rows {
        push(Row {
            id: "P10",
            backend: kind,
            what: what.into(),
            baseline_name,
            baseline,
            devipc,
            goal: Goal::AtMost(1.1),
            judged,
        });
    }
    backend.destroy_event(event)?;
    drop((stream, local, imported));
    exporter.send("free")?;
    exporter.expect("ok")?;
    Ok(())
}
