//! [`Request`]: the completion of copies enqueued on a [`Stream`], and the background
//! drain that finishes the requests dropped before they completed.
//!
//! A request owns a local event recorded after its copies, the spans they name (and so
//! the allocations and imports behind them), the stream, and the host buffer of a host
//! copy. It is complete when the event is; then it gives the event back to the stream's
//! pool and lets go of the rest.
//!
//! Dropping a request never blocks. If it has not completed, its work goes to the
//! process's **drainer**, one thread started on first use, which then releases what the
//! request held: an import closed while a copy from it was in flight is unmapped only once
//! the copy is done. Each round the drainer asks the oldest pending request of each stream
//! (a later one of the same stream cannot be done first) and finishes those that are
//! done; between rounds it waits for new work for a pause that grows from
//! [`DRAIN_PAUSE_MIN`] to [`DRAIN_PAUSE_MAX`] while nothing completes, so an idle backlog
//! costs a wake-up every 20 ms, and a release comes at most that late.
//!
//! The drainer also destroys devipc's streams: an event recorded when the last clone
//! dropped tells it when the stream's work is done, and only then is the stream destroyed,
//! so the vendor destroy never waits on the drainer's thread. A request whose event could
//! not be recorded is finished on a thread of its own (only a stream synchronisation
//! tells). Where no thread can be started at all, the release waits where it is: the
//! memory must not go before the copies did.
//!
//! A process forked from one whose drainer runs starts its own (the inbox is per
//! process); it never touches the parent's objects (they are inherited, and dropped there
//! without a vendor call).

use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use devipc_core::fork::{PerProcess, forget_inherited};

use devipc_core::protection::{self, Protection};
use devipc_core::{DeviceIpc, Error, EventHandle, Result, StreamHandle};

use crate::runtime::Runtime;
use crate::span::DeviceSpan;
use crate::stream::Stream;

/// What a request holds until its copies completed.
#[derive(Debug)]
pub(crate) struct Work {
    stream: Stream,
    /// Never read: holding the spans keeps their memory allocated or mapped.
    _keep: Vec<DeviceSpan>,
    host: Option<Vec<u8>>,
    event: Option<EventHandle>,
    /// Whether the event was recorded after the copies; if not (the record failed),
    /// completion is a synchronisation of the stream.
    recorded: bool,
}

impl Work {
    pub(crate) fn new(stream: Stream, keep: Vec<DeviceSpan>, host: Option<Vec<u8>>) -> Work {
        let keep = if protection::enabled(Protection::RequestKeepsMemory) {
            keep
        } else {
            // Switched off (a test build only): the memory may go under the copies.
            Vec::new()
        };
        Work {
            stream,
            _keep: keep,
            host,
            event: None,
            recorded: false,
        }
    }

    pub(crate) fn set_event(&mut self, event: EventHandle, recorded: bool) {
        self.event = Some(event);
        self.recorded = recorded;
    }

    fn runtime(&self) -> &Runtime {
        &self.stream.inner.rt
    }

    /// Whether the copies completed; a failure of theirs is the error.
    fn poll(&self) -> Result<bool> {
        let backend = self.runtime().inner.backend()?;
        match (&self.event, self.recorded) {
            (Some(event), true) => backend.query_event(event),
            _ => Ok(false),
        }
    }

    /// Waits for completion, at most `timeout` (`None`: as long as it takes).
    fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let backend = self.runtime().inner.backend()?;
        match (&self.event, self.recorded) {
            (Some(event), true) => backend.synchronize_event(event, timeout),
            _ => backend.synchronize_stream(self.stream.device(), self.stream.raw()),
        }
    }

    /// Lets go of everything; the event goes back to the stream's pool after a success
    /// (a failed one is destroyed: its state is the runtime's to tell).
    fn finish(mut self, succeeded: bool) -> Option<Vec<u8>> {
        if let Some(event) = self.event.take() {
            if succeeded && self.recorded {
                self.stream.inner.return_event(event);
            } else if let Ok(backend) = self.runtime().inner.backend()
                && let Err(e) = backend.destroy_event(event)
            {
                log::error!("devipc: destroying a failed request's event failed: {e}");
            }
        }
        self.host.take()
    }
}

/// The completion of copies enqueued on a [`Stream`]. It owns a local event recorded
/// after the copies and keeps the spans they name (so the allocations and imports behind
/// them), the stream and the host buffer of a host copy until they completed.
///
/// Poll it ([`Request::is_complete`]), wait for it ([`Request::wait`]), or take the host
/// buffer of a host copy ([`Request::into_host`]). A copy that failed while it ran is the
/// error of the first of these calls to see it. Dropping it never blocks: an unfinished
/// request goes to a background thread (`devipc-drain`) that waits for it and then
/// releases what it held.
#[derive(Debug)]
#[must_use = "a request is the only way to learn that its copies completed"]
pub struct Request {
    work: Option<Work>,
    /// The host buffer, once the request completed.
    host: Option<Vec<u8>>,
    /// The text of a failure already reported.
    failed: Option<String>,
}

impl Request {
    pub(crate) fn new(work: Work) -> Request {
        Request {
            work: Some(work),
            host: None,
            failed: None,
        }
    }

    /// Whether the copies completed (without waiting).
    pub fn is_complete(&mut self) -> Result<bool> {
        let Some(work) = &self.work else {
            return self.settled();
        };
        match work.poll() {
            Ok(true) => self.complete(Ok(())).map(|()| true),
            Ok(false) => Ok(false),
            Err(e) => self.complete(Err(e)).map(|()| true),
        }
    }

    /// Waits until the copies completed, at most `timeout` (`None`: as long as it takes);
    /// [`Error::Timeout`] when the time is up (the request is still pending then).
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<()> {
        let Some(work) = &self.work else {
            return self.settled().map(|_| ());
        };
        match work.wait(timeout) {
            Err(e @ Error::Timeout { .. }) => Err(e),
            outcome => self.complete(outcome),
        }
    }

    /// Waits for the copies and returns the host buffer: the bytes read by
    /// [`Stream::read`], or the source given to [`Stream::write`] back for reuse. A
    /// device-to-device request has none ([`Error::InvalidArgument`]).
    pub fn into_host(mut self) -> Result<Vec<u8>> {
        self.wait(None)?;
        self.host
            .take()
            .ok_or_else(|| Error::invalid_argument("a device-to-device request has no host buffer"))
    }

    /// The outcome of a request already complete.
    fn settled(&self) -> Result<bool> {
        match &self.failed {
            None => Ok(true),
            Some(text) => Err(Error::invalid_argument(format!(
                "the request failed earlier: {text}"
            ))),
        }
    }

    fn complete(&mut self, outcome: Result<()>) -> Result<()> {
        if let Some(work) = self.work.take() {
            self.host = work.finish(outcome.is_ok());
        }
        if let Err(e) = &outcome {
            self.failed = Some(e.to_string());
        }
        outcome
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        if work.runtime().inner.is_inherited() {
            // A forked child's copy of its parent's request: the parent's to finish.
            return;
        }
        match work.poll() {
            Ok(true) => {
                work.finish(true);
            }
            Ok(false) => drain_later(work),
            Err(e) => {
                log::error!("devipc: a request dropped unread had failed: {e}");
                work.finish(false);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The drainer.

/// A stream devipc created, to destroy once the work queued on it is done.
struct EndingStream {
    rt: Runtime,
    handle: StreamHandle,
    /// Recorded on the stream when it was dropped; `None` if that failed.
    event: Option<EventHandle>,
}

impl EndingStream {
    /// Whether the stream's work is done (or cannot be told: then it is destroyed now).
    fn poll(&self) -> bool {
        let Ok(backend) = self.rt.inner.backend() else {
            return true;
        };
        match &self.event {
            Some(event) => !matches!(backend.query_event(event), Ok(false)),
            None => true,
        }
    }

    /// Destroys the event and the stream (nothing is queued on it any more, so the
    /// vendor destroy does not wait).
    fn end(self) {
        let Ok(backend) = self.rt.inner.backend() else {
            return;
        };
        if let Some(event) = self.event
            && let Err(e) = backend.destroy_event(event)
        {
            log::error!("devipc: destroying a stream's last event failed: {e}");
        }
        if let Err(e) = backend.destroy_stream(self.handle) {
            log::error!("devipc: destroying a stream failed: {e}");
            self.rt.inner.release_failed(e);
        }
    }
}

enum Job {
    Drain(Work),
    EndStream(EndingStream),
}

impl Job {
    /// The stream the job waits on: jobs of one stream complete in its order.
    fn stream_key(&self) -> usize {
        match self {
            Job::Drain(work) => std::sync::Arc::as_ptr(&work.stream.inner) as usize,
            Job::EndStream(s) => s.handle.raw.as_raw(),
        }
    }

    /// Asks once: `true` when the job is done (and finished).
    fn try_finish(self) -> Option<Job> {
        match self {
            Job::Drain(work) => match work.poll() {
                Ok(true) => {
                    work.finish(true);
                    None
                }
                Ok(false) if work.recorded => Some(Job::Drain(work)),
                Ok(false) => {
                    // No event after its copies: only a stream synchronisation tells,
                    // and it may wait; never on the drainer's thread.
                    finish_elsewhere(work);
                    None
                }
                Err(e) => {
                    log::error!("devipc: a dropped request failed: {e}");
                    work.finish(false);
                    None
                }
            },
            Job::EndStream(s) => {
                if s.poll() {
                    s.end();
                    None
                } else {
                    Some(Job::EndStream(s))
                }
            }
        }
    }
}

/// How many dropped requests and streams this process has not released yet.
static UNDRAINED: PerProcess<usize> = PerProcess::new(|_| 0);

/// How many dropped requests and ended streams the background drain has not released
/// yet (this process).
pub(crate) fn undrained() -> usize {
    *UNDRAINED.lock()
}

fn count_in() {
    *UNDRAINED.lock() += 1;
}

fn count_out() {
    let mut n = UNDRAINED.lock();
    *n = n.saturating_sub(1);
}

/// The drainer's inbox, per process: a child forked while another thread held it gets a
/// fresh one (and its own thread) instead of the parent's lock.
static DRAINER: PerProcess<Option<Sender<Job>>> = PerProcess::new(forget_inherited);

/// The drainer's first pause between two rounds when nothing completed; it doubles up to
/// [`DRAIN_PAUSE_MAX`], and a completion or a new job resets it.
pub const DRAIN_PAUSE_MIN: Duration = Duration::from_micros(100);
/// The drainer's longest pause: how late after completion a dropped request lets go of
/// its memory, at most.
pub const DRAIN_PAUSE_MAX: Duration = Duration::from_millis(20);

/// Hands `work` (copies enqueued, not known complete) to the drainer.
pub(crate) fn drain_later(work: Work) {
    send(Job::Drain(work));
}

/// Has the drainer destroy a stream devipc created once its queued work is done (an
/// event recorded on it now tells), so the vendor destroy never waits.
pub(crate) fn destroy_stream_later(rt: Runtime, handle: StreamHandle) {
    let event = rt.inner.backend().ok().and_then(|backend| {
        let event = backend.create_event(handle.device).ok()?;
        match backend.record_event(&event, handle.raw) {
            Ok(()) => Some(event),
            Err(_) => {
                let _ = backend.destroy_event(event);
                None
            }
        }
    });
    send(Job::EndStream(EndingStream { rt, handle, event }));
}

fn send(job: Job) {
    count_in();
    let mut job = job;
    for _ in 0..2 {
        // The lock is held only to read or start the sender: never while a job runs.
        let sender = {
            let mut slot = DRAINER.lock();
            if slot.is_none() {
                match start() {
                    Ok(jobs) => *slot = Some(jobs),
                    Err(e) => log::error!("devipc: cannot start the request drainer: {e}"),
                }
            }
            slot.clone()
        };
        let Some(sender) = sender else { break };
        match sender.send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(back)) => {
                // The thread is gone (it never exits while a sender lives, so only a
                // panic): start another.
                job = back;
                DRAINER.lock().take();
            }
        }
    }
    // No drainer: finish on a thread of its own, or here as a last resort.
    match job {
        Job::Drain(work) => finish_elsewhere(work),
        Job::EndStream(s) => on_a_thread(s, end_when_done),
    }
}

fn lock_take<T>(m: &std::sync::Mutex<Option<T>>) -> Option<T> {
    m.lock().unwrap_or_else(|p| p.into_inner()).take()
}

fn end_when_done(s: EndingStream) {
    if let (Some(event), Ok(backend)) = (&s.event, s.rt.inner.backend()) {
        let _ = backend.synchronize_event(event, None);
    }
    s.end();
    count_out();
}

fn start() -> std::io::Result<Sender<Job>> {
    let (jobs, inbox) = mpsc::channel();
    std::thread::Builder::new()
        .name("devipc-drain".into())
        .spawn(move || drain(inbox))?;
    Ok(jobs)
}

/// The drainer's loop: each round asks the oldest pending job of each stream (a later one
/// of the same stream cannot be done before it), finishes what is done, and waits for a
/// new job for a pause that grows while nothing completes.
fn drain(inbox: Receiver<Job>) {
    let mut pending: Vec<Job> = Vec::new();
    let mut pause = DRAIN_PAUSE_MIN;
    loop {
        let incoming = if pending.is_empty() {
            inbox.recv().ok()
        } else {
            match inbox.recv_timeout(pause) {
                Ok(job) => Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) if pending.is_empty() => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            }
        };
        if pending.is_empty() && incoming.is_none() {
            return;
        }
        let arrived = incoming.is_some();
        pending.extend(incoming);
        pending.extend(inbox.try_iter());
        let before = pending.len();
        let mut blocked = std::collections::HashSet::new();
        let mut still = Vec::with_capacity(pending.len());
        for job in pending.drain(..) {
            let key = job.stream_key();
            if blocked.contains(&key) {
                still.push(job);
                continue;
            }
            match job.try_finish() {
                Some(job) => {
                    blocked.insert(key);
                    still.push(job);
                }
                None => count_out(),
            }
        }
        pending = still;
        pause = if arrived || pending.len() < before {
            DRAIN_PAUSE_MIN
        } else {
            (pause * 2).min(DRAIN_PAUSE_MAX)
        };
    }
}

/// Waits for `work` on a thread of its own (a stream synchronisation may wait long) and
/// lets it go; here, blocking, if no thread can be started (the memory must not go
/// before the copies did).
fn finish_elsewhere(work: Work) {
    on_a_thread(work, finish_blocking);
}

/// Runs `f(value)` on a new thread, or here if none can be started.
fn on_a_thread<T: Send + 'static>(value: T, f: fn(T)) {
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(value)));
    let theirs = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("devipc-drain-1".into())
        .spawn(move || {
            if let Some(value) = lock_take(&theirs) {
                f(value);
            }
        });
    if let Err(e) = spawned {
        log::error!("devipc: no thread for a background release ({e}); waiting here");
        if let Some(value) = lock_take(&slot) {
            f(value);
        }
    }
}

/// Waits for `work` and lets it go.
fn finish_blocking(work: Work) {
    let outcome = work.wait(None);
    if let Err(e) = &outcome {
        log::error!("devipc: a dropped request failed: {e}");
    }
    work.finish(outcome.is_ok());
    count_out();
}
