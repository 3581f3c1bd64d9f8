//! Streams: `hipStreamCreate`, `hipStreamDestroy`, `hipStreamSynchronize`,
//! `hipDeviceSynchronize`, the null stream, and the emulator-only [`hold_stream`] /
//! [`release_stream`] hooks.
//!
//! Every stream, the null stream of each device included, is an ordered queue of
//! operations ([`crate::stream_queue`]): `hipEventRecord`, `hipStreamWaitEvent` and
//! `hipMemcpyAsync` enqueue and return; the stream runs them in order, at once on the
//! calling thread when it is idle and the operation need not wait, else on its own worker
//! thread, so a wait blocks only its stream. Argument errors are returned by the call;
//! errors of the work itself (a copy whose memory was freed in the meantime) are kept and
//! returned by the next `hipStreamSynchronize` / `hipDeviceSynchronize` of the stream.
//!
//! # The null stream (legacy default stream)
//!
//! `NULL` is the current device's null stream, with the legacy semantics CLR implements
//! (`hip::Device::NullStream` waits for the active streams; blocking streams wait for the
//! null stream, as for CUDA's legacy default stream): an operation on the null stream waits
//! for the work already submitted to every stream of the device in this process, and an
//! operation on a created stream waits for the work already submitted to the null stream.
//! `hipStreamCreate` makes blocking streams (the surface has no `hipStreamNonBlocking`).
//! The synchronous `hipMemcpy` and `hipMemset` are null-stream work the caller waits for
//! (`ihipMemcpy` on the null stream, then `awaitCompletion`), so they come after the
//! device's pending stream work; their own errors are returned by the call.
//!
//! # Synchronisation and destruction
//!
//! - `hipStreamSynchronize(s)` waits for the work submitted to `s` (for `NULL`, by the
//!   legacy rule, also for that of the device's other streams) and returns the first
//!   failure of that work, once. `hipDeviceSynchronize` does the same for every stream of
//!   the current device.
//! - `hipStreamDestroy(s)` waits for the work already submitted to `s` and then forgets it,
//!   as CLR's `HostQueue::terminate` enqueues a final marker and awaits it; the wait is
//!   bounded by the stream's own waits (`hipStreamWaitEvent` has no timeout). Failures of
//!   that work are dropped with the stream. No thread outlives it.
//! - At process exit queued work is lost with the process.
//!
//! # `hipStreamWaitEvent` on an interprocess event
//!
//! Up to ROCm 6.x, CLR implements `hipStreamWaitEvent` on an interprocess event whose
//! latest record is pending with a marker whose completion callback polls the shared
//! signal, and waits for that marker on the calling thread (`IPCEvent::streamWait` ->
//! `enqueueStreamWaitCommand` -> `awaitCompletion`): the call returns only once the
//! stream reached the wait and the record completed (ROCm/clr issue #127: the callback
//! "causes the CPU to not be able to queue further GPU work ahead"). The emulator does the
//! same before [`super::versions::ipc_stream_wait_on_device`]; from there the wait is a
//! device-side stream wait and the call returns at once. Waits on process-local events
//! are stream-side in every version.
//!
//! # Held streams (tests)
//!
//! To make "work still pending on the device" observable, a test can [`hold_stream`]:
//! until [`release_stream`], the work submitted to that stream stays queued (as if a long
//! kernel occupied it). An event recorded on a held stream is pending in every process
//! that opened it; synchronising the stream (or, by the legacy rule, the null stream)
//! waits for the release from another thread; `hipStreamDestroy` of a held stream releases
//! it and waits for its work. If the holding process dies, its pending records never
//! complete: hold streams only in tests that release them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devipc_hip_sys::{hipError_t, hipErrorUnknown, hipStream_t};

use super::errors::{Failure, HipResult, call};
use super::runtime::{current_device, state};
use crate::config::MAX_DEVICES;
use crate::local::{ForkLocal, HandleTable};
use crate::stream_queue::{Cancel, Closed, Op, Queue, SLICE, quick};

/// Work that runs when its stream reaches it (e.g. an asynchronous copy).
pub(crate) type Work = Box<dyn FnOnce() -> HipResult<()> + Send>;

/// The error of stream work that panicked or could not be started.
fn internal(message: String) -> Failure {
    Failure::new(
        hipErrorUnknown,
        format!("internal emulator error in stream work: {message}"),
    )
}

/// One stream of this process (a created stream or a device's null stream).
#[derive(Debug)]
pub(crate) struct Stream {
    device: u32,
    null: bool,
    queue: Queue<Failure>,
}

impl Stream {
    fn new(device: u32, null: bool) -> Stream {
        let label = if null {
            format!("hip-null-stream-{device}")
        } else {
            format!("hip-stream-{device}")
        };
        Stream {
            device,
            null,
            queue: Queue::new(label, internal),
        }
    }
}

static STREAMS: HandleTable<Arc<Stream>> = HandleTable::new("stream", 0x4853);

/// The null stream of each device.
fn null_stream(device: u32) -> Arc<Stream> {
    // A forked child gets its own (its parent's queues may name worker threads that
    // only the parent has: see crate::local).
    static NULL: ForkLocal<Vec<Arc<Stream>>> = ForkLocal::new(|inherited| {
        std::mem::forget(inherited);
        (0..MAX_DEVICES)
            .map(|d| Arc::new(Stream::new(d, true)))
            .collect()
    });
    let all = NULL.lock();
    all[device as usize % all.len()].clone()
}

/// The stream a C handle names: NULL is the current device's null stream; anything else
/// must come from `hipStreamCreate` in this process (`hipErrorInvalidHandle` otherwise).
pub(crate) fn resolve(handle: usize) -> HipResult<Arc<Stream>> {
    if handle == 0 {
        return Ok(null_stream(current_device(state()?)?));
    }
    STREAMS.get(handle).map_err(|_| {
        Failure::invalid_handle(format!("{handle:#x} is not a stream of this process"))
    })
}

/// The queues a new operation on `stream` waits for by the legacy null-stream rule, with
/// the last operation of each that is not done yet.
fn implicit_dependencies(stream: &Stream) -> Vec<(Queue<Failure>, u64)> {
    let candidates: Vec<Queue<Failure>> = if stream.null {
        STREAMS
            .snapshot()
            .into_iter()
            .filter(|(_, s)| s.device == stream.device)
            .map(|(_, s)| s.queue.clone())
            .collect()
    } else {
        vec![null_stream(stream.device).queue.clone()]
    };
    candidates
        .into_iter()
        .filter_map(|q| {
            let tail = q.tail();
            (!q.is_done(tail)).then_some((q, tail))
        })
        .collect()
}

/// An operation that first waits for other streams' work (the legacy null-stream rule).
struct After {
    deps: Vec<(Queue<Failure>, u64)>,
    op: Box<dyn Op<Failure>>,
}

impl Op<Failure> for After {
    fn try_now(&mut self) -> Option<HipResult<()>> {
        self.deps.retain(|(q, seq)| !q.is_done(*seq));
        if self.deps.is_empty() {
            self.op.try_now()
        } else {
            None
        }
    }

    fn run(self: Box<Self>, cancel: &Cancel) -> HipResult<()> {
        for (q, seq) in &self.deps {
            while !q.wait_for(*seq, Some(Instant::now() + SLICE)) {
                if cancel.is_set() {
                    self.op.abandon();
                    return Ok(());
                }
            }
        }
        self.op.run(cancel)
    }

    fn abandon(self: Box<Self>) {
        self.op.abandon();
    }

    fn queued(&mut self, queue: &Queue<Failure>, seq: u64) {
        self.op.queued(queue, seq);
    }
}

fn destroyed() -> Failure {
    Failure::invalid_handle("the stream was destroyed")
}

/// Submits `op` to `stream` after the work the legacy null-stream rule orders it after;
/// returns its sequence number in the stream's queue.
pub(crate) fn submit(stream: &Stream, op: Box<dyn Op<Failure>>) -> HipResult<u64> {
    let deps = implicit_dependencies(stream);
    let op: Box<dyn Op<Failure>> = if deps.is_empty() {
        op
    } else {
        Box::new(After { deps, op })
    };
    stream.queue.submit(op).map_err(|Closed| destroyed())
}

/// Waits on the calling thread until `stream` has run its operation `seq`.
pub(crate) fn wait_until_run(stream: &Stream, seq: u64) {
    stream.queue.wait_for(seq, None);
}

/// Runs `work` as a synchronous call on `stream` (`hipMemcpy`, `hipMemset` on the null
/// stream): in stream order, with the caller waiting; its own failure is returned here,
/// not kept for a later synchronisation.
pub(crate) fn run_synchronous(stream: &Stream, work: Work) -> HipResult<()> {
    let outcome: Arc<Mutex<Option<HipResult<()>>>> = Arc::new(Mutex::new(None));
    let slot = outcome.clone();
    let seq = submit(
        stream,
        quick(move || {
            let r = work();
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            Ok(())
        }),
    )?;
    stream.queue.wait_for(seq, None);
    let result = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
    result.unwrap_or_else(|| Err(destroyed()))
}

/// Submits `work` to the stream a C handle names (`hipMemcpyAsync`).
pub(crate) fn submit_work(handle: usize, work: Work) -> HipResult<()> {
    let stream = resolve(handle)?;
    submit(&stream, quick(work)).map(drop)
}

/// `hipStreamCreate`: a new (blocking) stream on the current device.
pub(crate) fn create() -> HipResult<usize> {
    let device = current_device(state()?)?;
    Ok(STREAMS.insert(Arc::new(Stream::new(device, false)))?)
}

/// `hipStreamDestroy`: waits for the stream's work (releasing a held stream), then
/// forgets it; failures of that work are dropped with it.
pub(crate) fn destroy(handle: usize) -> HipResult<()> {
    if handle == 0 {
        return Err(Failure::invalid_handle(
            "the null stream cannot be destroyed",
        ));
    }
    let stream = STREAMS.remove(handle).map_err(|_| {
        Failure::invalid_handle(format!("{handle:#x} is not a stream of this process"))
    })?;
    stream.queue.close_and_drain();
    Ok(())
}

/// The first failure of `errors`, if any.
fn first(errors: Vec<Failure>) -> HipResult<()> {
    match errors.into_iter().next() {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Waits for `stream`'s work and takes its failures.
fn drain(stream: &Stream) -> HipResult<()> {
    if stream.null {
        // By the legacy rule the null stream's synchronisation also waits for the other
        // streams' work: a no-op in null-stream order.
        let seq = submit(stream, quick(|| Ok(())))?;
        stream.queue.wait_for(seq, None);
        return first(stream.queue.take_errors(seq));
    }
    first(stream.queue.synchronize(None).unwrap_or_default())
}

/// Waits for the current device's null stream, and by the legacy rule for the work already
/// submitted to the device's other streams, without taking their failures (CLR's
/// `getNullStream()->finish()`, e.g. at the start of `hipIpcCloseMemHandle`).
pub(crate) fn finish_null_stream() -> HipResult<()> {
    let null = resolve(0)?;
    let seq = submit(&null, quick(|| Ok(())))?;
    null.queue.wait_for(seq, None);
    Ok(())
}

/// `hipStreamSynchronize`.
pub(crate) fn synchronize(handle: usize) -> HipResult<()> {
    let stream = resolve(handle)?;
    drain(&stream)
}

/// Waits for every stream of `device` in this process, the null stream included, without
/// submitting anything (CLR's `SyncAllStreams` waits for each stream); returns the first
/// failure of their work.
pub(crate) fn synchronize_device(device: u32) -> HipResult<()> {
    let mut queues = vec![null_stream(device).queue.clone()];
    for (_, stream) in STREAMS.snapshot() {
        if stream.device == device {
            queues.push(stream.queue.clone());
        }
    }
    let mut result = Ok(());
    for q in queues {
        let r = first(q.synchronize(None).unwrap_or_default());
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// How long a release waits at most for the work queued while the stream was held before
/// it returns anyway (the work goes on in the background).
const RELEASE_WAIT: Duration = Duration::from_secs(60);

/// Emulator only: holds `stream` (NULL: the calling thread's device's null stream), so
/// the work submitted to it from now on stays pending until [`release_stream`], as if a
/// long-running kernel occupied it. Returns `hipSuccess`, or `hipErrorInvalidHandle` for
/// a stream that is not this process's.
///
/// While a stream is held: an event recorded on it is pending (`hipEventQuery` returns
/// `hipErrorNotReady` in every process that opened the event, `hipEventSynchronize`
/// waits); work submitted to it queues; `hipStreamSynchronize` of it (and, by the legacy
/// null-stream rule, of the null stream), `hipDeviceSynchronize` and the synchronous
/// copies wait for the release (from another thread); `hipStreamDestroy` releases it and
/// waits for its work. If the holding process dies, its pending records never complete:
/// hold streams only in tests that release them.
///
/// Real HIP has no such call: this is how tests make device work pending, e.g. an event
/// that another process sees as not ready.
pub fn hold_stream(stream: hipStream_t) -> hipError_t {
    call("hold_stream", || {
        resolve(stream as usize)?.queue.hold();
        Ok(())
    })
}

/// Emulator only: releases a stream held with [`hold_stream`]: its queued work runs in
/// order, and the call returns once the work queued while it was held has run (or after
/// a minute, if that work waits for something still pending). Releasing a stream that is
/// not held succeeds and does nothing.
pub fn release_stream(stream: hipStream_t) -> hipError_t {
    call("release_stream", || {
        let s = resolve(stream as usize)?;
        if s.queue.is_held() {
            let last = s.queue.release();
            s.queue.wait_for(last, Some(Instant::now() + RELEASE_WAIT));
        }
        Ok(())
    })
}
