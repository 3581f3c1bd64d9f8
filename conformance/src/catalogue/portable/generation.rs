//! Portable guarantees of signals with generations (issue 25): a wait for a generation
//! orders a stream's later work after the work queued before its post, each generation
//! is its own (two posts are never collapsed into one), and a producer runs at most a
//! ring's length ahead of its consumer's waits.
//!
//! The scenarios use one process and two streams (the same-process import shares the
//! signal, DESIGN 5.1): the multi-process behaviour is the devipc test suite's
//! (`tests/devipc/signal_generations.rs`). On the emulator the producer's stream is held
//! (the emulator's `hold_stream`), so the consumer's copy provably waits for the write; on
//! a real runtime the rule checks the bytes only.

use std::sync::mpsc;
use std::time::Duration;

use devipc::{DeviceId, ExportOptions, Runtime, Signal};

use super::{expect_error, hold};
use crate::catalogue::{Step, ensure, pattern, portable, same_bytes};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};

const LEN: usize = 64 << 10;

/// How many posts a producer may run ahead (the backends' ring length).
const RING: u64 = 4;

pub(super) const ORDERS_STREAMS: Rule = portable(
    "portable.signal.generation-orders-streams",
    "a stream that waits for a signal's generation runs its later work (a copy) after the \
     work queued on the posting stream before the post (a write), without a host \
     synchronisation: the copy reads the written bytes, and stays pending while the \
     posting stream is held",
    "issue 25 (cross-process ordering on streams); DESIGN 10",
    Expect::Behaviour,
    &[],
    orders_streams,
);

pub(super) const EACH_OWN: Rule = portable(
    "portable.signal.generation-each-own",
    "each post is its own generation: two posts before any wait release two waits, a wait \
     for a generation not yet posted times out, and every process sees the same posted and \
     waited generations",
    "issue 25 (a later notify never satisfies an earlier wait's successor)",
    Expect::Behaviour,
    &[],
    each_own,
);

pub(super) const BACK_PRESSURE: Rule = portable(
    "portable.signal.generation-back-pressure",
    "a post that would reuse the ring slot of a generation whose wait was not issued yet \
     waits for that wait (Error::Timeout at its limit), and proceeds once it was: a later \
     post never replaces the record an earlier wait needs",
    "issue 25; devipc_shm::generation (back-pressure)",
    Expect::Behaviour,
    &[],
    back_pressure,
);

/// A signal and its same-process import (as a peer would hold it).
fn signal_pair(rt: &Runtime) -> Result<(Signal, Signal), Stop> {
    let signal = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let token = signal
        .export(ExportOptions::any_process())
        .step("export the signal")?;
    let import = rt
        .import_signal(&token, DeviceId(0))
        .step("import the signal")?;
    Ok((signal, import))
}

fn orders_streams(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (signal, import) = signal_pair(&rt)?;
    let shared = rt.allocate(0, LEN).step("allocate the shared buffer")?;
    let local = rt.allocate(0, LEN).step("allocate the destination")?;
    let producer = rt.create_stream(0).step("create the producer's stream")?;
    let consumer = rt.create_stream(0).step("create the consumer's stream")?;
    let held = hold(ctx, &producer, true)?;
    let mut write = producer
        .write(&shared.span(0..LEN).step("span")?, pattern(11, LEN))
        .step("write on the producer's stream")?;
    let g = signal
        .post(&producer, Some(Duration::from_secs(10)))
        .step("post")?;
    ensure(g == 1, || {
        format!("the first post is generation {g}, not 1")
    })?;
    // On a thread: a runtime whose stream wait on an IPC event blocks the host (HIP
    // before 7.0) returns only once the held write ran.
    let (sent, copies) = mpsc::channel();
    let (src, dst) = (
        shared.span(0..LEN).step("span")?,
        local.span(0..LEN).step("span")?,
    );
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let copied = import
                .wait_for(&consumer, g, Some(Duration::from_secs(10)))
                .and_then(|()| consumer.copy(&dst, &src));
            let _ = sent.send(copied);
        });
        let mut pending_seen = false;
        let early = copies.recv_timeout(Duration::from_millis(300));
        let mut copy = match early {
            Ok(copy) => {
                let mut copy = copy.step("wait for generation 1, then copy")?;
                if held {
                    std::thread::sleep(Duration::from_millis(100));
                    ensure(!copy.is_complete().step("query the copy")?, || {
                        "the consumer's copy completed while the posting stream (and its \
                         write) was held: the wait did not order it"
                            .into()
                    })?;
                    pending_seen = true;
                }
                if held {
                    hold(ctx, &producer, false)?;
                }
                copy
            }
            Err(_) => {
                // Blocked on the host until the write ran (or lost): release and see.
                if held {
                    hold(ctx, &producer, false)?;
                }
                copies
                    .recv_timeout(Duration::from_secs(20))
                    .step("the wait after the release")?
                    .step("wait for generation 1, then copy")?
            }
        };
        let _ = waiter.join();
        copy.wait(Some(Duration::from_secs(20)))
            .step("the consumer's copy")?;
        write
            .wait(Some(Duration::from_secs(20)))
            .step("the producer's write")?;
        let mut got = vec![0u8; LEN];
        local.read(0, &mut got).step("read the destination")?;
        same_bytes("the copy after the wait", &got, &pattern(11, LEN))?;
        Ok(if pending_seen {
            "the consumer's copy waited on the device for the held write, then read its \
             bytes"
                .into()
        } else if held {
            "the consumer's wait blocked the host until the held write ran (a runtime whose \
             IPC-event stream wait is host-side), then the copy read its bytes"
                .into()
        } else {
            "the copy after the wait read the write's bytes (no hold hook on a real runtime)".into()
        })
    })
}

fn each_own(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (signal, import) = signal_pair(&rt)?;
    let producer = rt.create_stream(0).step("create the producer's stream")?;
    let consumer = rt.create_stream(0).step("create the consumer's stream")?;
    let limit = Some(Duration::from_secs(10));
    let posted: Vec<u64> = (0..2)
        .map(|_| signal.post(&producer, limit))
        .collect::<Result<_, _>>()
        .step("two posts")?;
    ensure(posted == [1, 2], || {
        format!("two posts gave generations {posted:?}, not [1, 2]")
    })?;
    for g in [1, 2] {
        import
            .wait_for(&consumer, g, limit)
            .step(&format!("wait for generation {g}"))?;
    }
    let early = import.wait_for(&consumer, 3, Some(Duration::from_millis(200)));
    expect_error("a wait for generation 3, never posted", "Timeout", early)?;
    let seen = (
        signal.generations().step("generations")?,
        import.generations().step("the import's generations")?,
    );
    ensure(
        seen.0 == seen.1 && (seen.0.posted, seen.0.waited) == (2, 2),
        || format!("generations {seen:?}: not posted 2, waited 2 on both sides"),
    )?;
    consumer.synchronize().step("synchronize the consumer")?;
    Ok("two posts released two waits; generation 3 timed out; both sides see 2 / 2".into())
}

fn back_pressure(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let (signal, import) = signal_pair(&rt)?;
    let producer = rt.create_stream(0).step("create the producer's stream")?;
    let consumer = rt.create_stream(0).step("create the consumer's stream")?;
    let limit = Some(Duration::from_secs(10));
    for g in 1..=RING {
        let got = signal.post(&producer, limit).step("post")?;
        ensure(got == g, || format!("post {g} gave generation {got}"))?;
    }
    let ahead = signal.post(&producer, Some(Duration::from_millis(200)));
    expect_error(
        "a post a ring ahead of the consumer's waits",
        "Timeout",
        ahead,
    )?;
    import
        .wait_for(&consumer, 1, limit)
        .step("wait for generation 1")?;
    let next = signal
        .post(&producer, limit)
        .step("the post after the wait")?;
    ensure(next == RING + 1, || {
        format!(
            "the post after the wait gave generation {next}, not {}",
            RING + 1
        )
    })?;
    import
        .wait_for(&consumer, next, limit)
        .step("wait for the last generation")?;
    consumer.synchronize().step("synchronize the consumer")?;
    Ok(format!(
        "the post {} ahead of the waits timed out, and proceeded after one wait",
        RING + 1
    ))
}
