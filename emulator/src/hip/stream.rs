//! Streams: `hipStreamCreate`, `hipStreamDestroy`, `hipStreamSynchronize`, the null
//! stream, and the emulator-only [`hold_stream`] / [`release_stream`] hooks.
//!
//! Streams execute synchronously: an operation submitted to a stream (an event record, a
//! wait for an event) runs at once on the calling thread, so a record completes before
//! `hipEventRecord` returns. The null stream (`NULL`) is valid and means the current
//! device's null stream.
//!
//! To make "work still pending on the device" observable without a device, a test can
//! [`hold_stream`]: until [`release_stream`], operations submitted to that stream queue
//! up instead of running (as if a long kernel were running on it). An event recorded on
//! a held stream is pending (`hipEventQuery` returns `hipErrorNotReady` in every process
//! that opened it, `hipEventSynchronize` waits); releasing runs the queue in order.
//! `hipStreamSynchronize` / `hipDeviceSynchronize` on a held stream wait for its release
//! (from another thread); `hipStreamDestroy` of a held stream releases it first.
//!
//! A record pending on a held stream stays pending if the holding process dies before
//! releasing it (its waiters in other processes keep waiting, as for a device that never
//! finishes the work): hold streams only in tests that release them.
//!
//! A stream that waits for a pending event (`hipStreamWaitEvent`) while not held blocks
//! the calling thread until the event completes: with synchronous streams, "the stream
//! waits" is "the submitting thread waits". Waiting on an event recorded on a stream the
//! same thread holds therefore never returns, as the device would hang in the same
//! situation.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use devipc_hip_sys::{hipError_t, hipStream_t};

use super::errors::{Failure, HipResult, call};
use super::event::EventWords;
use super::runtime::{current_device, state};
use crate::config::MAX_DEVICES;
use crate::local::HandleTable;

/// Work that runs when its stream reaches it (e.g. an asynchronous copy).
pub(crate) type Work = Box<dyn FnOnce() -> HipResult<()> + Send>;

/// An operation queued on a held stream.
pub(crate) enum Op {
    /// Complete the event record with this index.
    Record(Arc<EventWords>, u32),
    /// Wait until the event's records up to this index completed.
    Wait(Arc<EventWords>, u32),
    /// Run this work (`hipMemcpyAsync`).
    Run(Work),
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Record(_, index) => write!(f, "Record({index})"),
            Op::Wait(_, target) => write!(f, "Wait({target})"),
            Op::Run(_) => f.write_str("Run(..)"),
        }
    }
}

impl Op {
    fn run(self) -> HipResult<()> {
        match self {
            Op::Record(words, index) => words.complete(index),
            Op::Wait(words, target) => words.wait(target),
            Op::Run(work) => work(),
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    held: bool,
    /// A release is running the queued operations.
    draining: bool,
    /// Held again while draining: stay held once the queue is empty.
    rehold: bool,
    ops: VecDeque<Op>,
}

/// One stream of this process.
#[derive(Debug)]
pub(crate) struct Stream {
    device: u32,
    queue: Mutex<Queue>,
    idle: Condvar,
}

impl Stream {
    fn new(device: u32) -> Stream {
        Stream {
            device,
            queue: Mutex::new(Queue::default()),
            idle: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` now, or queues it while the stream is held.
    pub(crate) fn submit(&self, op: Op) -> HipResult<()> {
        {
            let mut q = self.lock();
            if q.held {
                q.ops.push_back(op);
                return Ok(());
            }
        }
        op.run()
    }

    fn hold(&self) {
        let mut q = self.lock();
        if q.draining {
            q.rehold = true;
        }
        q.held = true;
    }

    /// Runs the queued operations in order, then lets new ones run at once. A second
    /// release while the first is draining returns at once.
    fn release(&self) -> HipResult<()> {
        {
            let mut q = self.lock();
            if !q.held || q.draining {
                return Ok(());
            }
            q.draining = true;
        }
        loop {
            let next = {
                let mut q = self.lock();
                match q.ops.pop_front() {
                    Some(op) => op,
                    None => {
                        q.held = std::mem::take(&mut q.rehold);
                        q.draining = false;
                        if !q.held {
                            self.idle.notify_all();
                        }
                        return Ok(());
                    }
                }
            };
            if let Err(e) = next.run() {
                self.lock().draining = false;
                return Err(e);
            }
        }
    }

    /// Waits until the stream is not held (its work is done).
    fn wait_idle(&self) {
        let mut q = self.lock();
        while q.held {
            q = self.idle.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }
}

static STREAMS: HandleTable<Arc<Stream>> = HandleTable::new("stream", 0x4853);

/// The null stream of each device.
fn null_stream(device: u32) -> Arc<Stream> {
    static NULL: OnceLock<Vec<Arc<Stream>>> = OnceLock::new();
    let all = NULL.get_or_init(|| (0..MAX_DEVICES).map(|d| Arc::new(Stream::new(d))).collect());
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

/// Submits `work` to the stream a C handle names: it runs now, on the calling thread,
/// unless the stream is held, in which case it runs in order when the stream is released.
pub(crate) fn submit_work(handle: usize, work: Work) -> HipResult<()> {
    resolve(handle)?.submit(Op::Run(work))
}

/// `hipStreamCreate`: a new stream on the current device.
pub(crate) fn create() -> HipResult<usize> {
    let device = current_device(state()?)?;
    Ok(STREAMS.insert(Arc::new(Stream::new(device)))?)
}

/// `hipStreamDestroy`: releases a held stream's work, then forgets the stream.
pub(crate) fn destroy(handle: usize) -> HipResult<()> {
    if handle == 0 {
        return Err(Failure::invalid_handle(
            "the null stream cannot be destroyed",
        ));
    }
    let stream = STREAMS.remove(handle).map_err(|_| {
        Failure::invalid_handle(format!("{handle:#x} is not a stream of this process"))
    })?;
    stream.release()
}

/// `hipStreamSynchronize`.
pub(crate) fn synchronize(handle: usize) -> HipResult<()> {
    resolve(handle)?.wait_idle();
    Ok(())
}

/// Waits for every stream of `device` in this process, the null stream included.
pub(crate) fn synchronize_device(device: u32) -> HipResult<()> {
    null_stream(device).wait_idle();
    for (_, stream) in STREAMS.snapshot() {
        if stream.device == device {
            stream.wait_idle();
        }
    }
    Ok(())
}

/// Emulator only: holds `stream` (NULL: the calling thread's device's null stream), so
/// the work submitted to it from now on stays pending until [`release_stream`], as if a
/// long-running kernel occupied it. Returns `hipSuccess`, or `hipErrorInvalidHandle` for
/// a stream that is not this process's.
///
/// While a stream is held: an event recorded on it is pending (`hipEventQuery` returns
/// `hipErrorNotReady` in every process that opened the event, `hipEventSynchronize`
/// waits); `hipStreamWaitEvent` on it queues; `hipStreamSynchronize` and
/// `hipDeviceSynchronize` wait for the release (from another thread);
/// `hipStreamDestroy` releases it first. A stream that is not held and waits for a
/// pending event (`hipStreamWaitEvent`) blocks the calling thread until the event
/// completes, since streams execute synchronously. If the holding process dies, its
/// pending records never complete: hold streams only in tests that release them.
///
/// Real HIP has no such call: this is how tests make device work pending, e.g. an event
/// that another process sees as not ready.
pub fn hold_stream(stream: hipStream_t) -> hipError_t {
    call("hold_stream", || {
        resolve(stream as usize)?.hold();
        Ok(())
    })
}

/// Emulator only: releases a stream held with [`hold_stream`], running its queued work in
/// order (completing its pending event records) on the calling thread. Releasing a stream
/// that is not held succeeds and does nothing.
pub fn release_stream(stream: hipStream_t) -> hipError_t {
    call("release_stream", || resolve(stream as usize)?.release())
}
