//! Streams: `aclrtCreateStream`, `aclrtDestroyStream`, `aclrtDestroyStreamForce`,
//! `aclrtSynchronizeStream`, the default stream of each device, and the stream side of
//! `aclrtSynchronizeDevice(WithTimeout)` and device reset.
//!
//! Every stream, the default stream (`NULL`) of each device included, is an ordered queue
//! of tasks ([`crate::stream_queue`]). The asynchronous calls (`aclrtRecordNotify`,
//! `aclrtWaitAndResetNotify`, "blocks the stream; asynchronous interface",
//! `aclrtRecordEvent`, `aclrtStreamWaitEvent`, `aclrtMemcpyAsync`) check their arguments,
//! enqueue a task and return; the stream runs its tasks in order, at once on the calling
//! thread while it is idle and the task need not wait, else on its own worker thread. A
//! waiting task blocks only its stream: another stream of the process, and the thread that
//! enqueued it, go on.
//!
//! - Argument errors (unknown handles, the device of an IPC notify wait, copy bounds) are
//!   returned by the call that enqueues. A task that fails when it runs (a notify wait that
//!   expires: 107019 `ACL_ERROR_RT_WAIT_TIMEOUT`; a copy whose memory went away in the
//!   meantime) fails the stream's work: the next `aclrtSynchronizeStream` of that stream
//!   (or `aclrtSynchronizeDevice` of its device) returns the first such failure, once;
//!   later tasks still run.
//! - `NULL` is the default stream of the calling thread's current device (device 0 on a
//!   thread without one). Unknown or destroyed streams fail with
//!   `ACL_ERROR_RT_INVALID_HANDLE` (107017, `ascend.handle.valid`).
//! - `aclrtDestroyStream` waits for the stream's tasks, then destroys it ("if the stream
//!   has unfinished tasks, waits for them to complete before destroying the stream",
//!   RT-DOC `aclrtDestroyStream`); failures of those tasks are dropped with the stream.
//!   `aclrtDestroyStreamForce` does not wait ("does not wait for the tasks to complete,
//!   destroys the stream at once"): queued tasks are dropped unrun (an event record among
//!   them is released, so nothing waits for it forever), a running wait is abandoned within
//!   [`crate::stream_queue::SLICE`].
//! - `aclrtResetDevice` (the last one) and `aclrtResetDeviceForce` release the default
//!   stream and every stream created on the device, waiting for their tasks first ("if
//!   tasks of the default context or default stream are not complete, the system waits
//!   for them before releasing", RT-DOC `aclrtResetDevice`, `aclrtResetDeviceForce`).
//! - Every wait is bounded by the tasks' own timeouts (a notify wait with timeout 0 waits
//!   forever, on the device as here). No worker thread outlives its stream; at process
//!   exit queued tasks are lost with the process.
//!
//! With [`rules::STREAM_ASYNC_WAITS`] switched off, the waits run on the calling thread
//! again (the emulator's old synchronous streams), for the mutation sweep.

use std::sync::Arc;
use std::time::Instant;

use devipc_ascend_sys::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT};

use crate::config::MAX_DEVICES;
use crate::local::{ForkLocal, HandleTable};
use crate::stream_queue::{Closed, Op, Queue};

use super::device;
use super::errors::{AclFailure, AclResult};
use super::rules;

/// What the emulator keeps per stream.
#[derive(Debug)]
pub struct StreamLocal {
    device: u32,
    queue: Queue<AclFailure>,
}

impl StreamLocal {
    fn new(device: u32, label: String) -> StreamLocal {
        StreamLocal {
            device,
            queue: Queue::new(label, internal),
        }
    }
}

/// The failure of a task that panicked or could not be started.
fn internal(message: String) -> AclFailure {
    AclFailure::code(
        ACL_ERROR_RT_INTERNAL_ERROR,
        format!("internal emulator error in a stream task: {message}"),
    )
}

static STREAMS: HandleTable<Arc<StreamLocal>> = HandleTable::new("stream", 0xac51);

/// The default stream of each device.
fn default_stream(device: u32) -> Arc<StreamLocal> {
    // A forked child gets its own (its parent's queues may name worker threads that
    // only the parent has: see crate::local).
    static DEFAULT: ForkLocal<Vec<Arc<StreamLocal>>> = ForkLocal::new(|inherited| {
        std::mem::forget(inherited);
        (0..MAX_DEVICES)
            .map(|d| Arc::new(StreamLocal::new(d, format!("acl-default-stream-{d}"))))
            .collect()
    });
    let all = DEFAULT.lock();
    all[device as usize % all.len()].clone()
}

/// `aclrtCreateStream` on the current device; returns the handle value.
pub fn create() -> AclResult<usize> {
    let device = device::require_current("aclrtCreateStream")?;
    let label = format!("acl-stream-{device}");
    Ok(STREAMS.insert(Arc::new(StreamLocal::new(device, label)))?)
}

/// `aclrtDestroyStream`: waits for the stream's tasks, then destroys it.
pub fn destroy(stream: usize) -> AclResult<()> {
    let s = STREAMS.remove(stream)?;
    s.queue.close_and_drain();
    Ok(())
}

/// `aclrtDestroyStreamForce`: destroys the stream without waiting for its tasks (queued
/// tasks are dropped, a running wait is abandoned).
pub fn destroy_force(stream: usize) -> AclResult<()> {
    let s = STREAMS.remove(stream)?;
    s.queue.close_and_abort();
    Ok(())
}

/// The stream a handle names: NULL is the default stream of the calling thread's current
/// device (device 0 without one), anything else a live stream of this process.
pub fn resolve(stream: usize) -> AclResult<Arc<StreamLocal>> {
    if stream == 0 {
        return Ok(default_stream(device::current().unwrap_or(0)));
    }
    Ok(STREAMS.get(stream)?)
}

/// Checks a stream argument: NULL (the default stream) or a live stream of this process.
pub fn check(stream: usize) -> AclResult<()> {
    resolve(stream).map(drop)
}

/// Whether stream tasks that wait run on their stream ([`rules::STREAM_ASYNC_WAITS`]);
/// `false` only with the rule switched off (the old synchronous streams).
pub fn async_waits() -> bool {
    rules::enforced(rules::STREAM_ASYNC_WAITS)
}

/// Enqueues `task` on the stream a handle names (checked first); returns once it is
/// queued, or done if the stream was idle and the task need not wait.
pub fn submit(stream: usize, task: Box<dyn Op<AclFailure>>) -> AclResult<()> {
    let s = resolve(stream)?;
    s.queue
        .submit(task)
        .map(drop)
        .map_err(|Closed| AclFailure::rule(rules::HANDLE_VALID, "the stream was destroyed"))
}

/// The first failure of `errors`, if any.
fn first(errors: Vec<AclFailure>) -> AclResult<()> {
    match errors.into_iter().next() {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// `aclrtSynchronizeStream`: waits for the tasks enqueued so far and returns the first
/// failure among them.
pub fn synchronize(stream: usize) -> AclResult<()> {
    let s = resolve(stream)?;
    first(s.queue.synchronize(None).unwrap_or_default())
}

/// Every stream of `device` in this process, the default stream first.
fn streams_of(device: u32) -> Vec<Arc<StreamLocal>> {
    let mut all = vec![default_stream(device)];
    all.extend(
        STREAMS
            .snapshot()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.device == device),
    );
    all
}

/// `aclrtSynchronizeDevice(WithTimeout)`: waits for the tasks of every stream of `device`
/// (until `deadline`: `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` when it passes first, as the
/// documentation of `aclrtSynchronizeDeviceWithTimeout` says) and returns the first
/// failure among them.
pub fn synchronize_device(device: u32, deadline: Option<Instant>) -> AclResult<()> {
    let mut result = Ok(());
    for s in streams_of(device) {
        let r = match s.queue.synchronize(deadline) {
            Some(errors) => first(errors),
            None => {
                return Err(AclFailure::code(
                    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                    format!("device {device} still has unfinished stream tasks at the timeout"),
                ));
            }
        };
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// The device's context was reset: waits for the tasks of its default stream and of the
/// streams created on it, then destroys the created streams.
pub fn destroy_on_device(device: u32) {
    let _ = default_stream(device).queue.synchronize(None);
    for (handle, s) in STREAMS.snapshot() {
        if s.device == device && STREAMS.remove(handle).is_ok() {
            s.queue.close_and_drain();
        }
    }
}

/// How long [`release_stream`] waits for the work queued while the stream was held.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Emulator only: holds a stream, as if a long kernel occupied it: the tasks submitted
/// to it queue until [`release_stream`]; `aclrtSynchronizeStream` of it waits for the
/// release (from another thread), and `aclrtDestroyStream` releases it and waits. The
/// ACL counterpart of the HIP surface's `hold_stream`. If the holding process dies, its
/// queued tasks are lost with it: hold streams only in tests that release them.
///
/// Real ACL has no such call: this is how tests make device work pending (a copy in
/// flight while its memory is released).
pub fn hold_stream(stream: usize) -> AclResult<()> {
    resolve(stream)?.queue.hold();
    Ok(())
}

/// Emulator only: releases a stream held with [`hold_stream`]: its queued tasks run in
/// order, and the call returns once they ran (or after a minute, if they wait for
/// something still pending). Releasing a stream that is not held does nothing.
pub fn release_stream(stream: usize) -> AclResult<()> {
    let s = resolve(stream)?;
    if s.queue.is_held() {
        let last = s.queue.release();
        s.queue.wait_for(last, Some(Instant::now() + RELEASE_WAIT));
    }
    Ok(())
}
