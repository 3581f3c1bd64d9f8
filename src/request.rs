//! [`Request`]: the completion of copies enqueued on a [`Stream`], and the background
//! drain that finishes the requests dropped before they completed.
//!
//! A request owns a local event recorded after its copies, the spans they name (and so
//! the allocations and imports behind them), the stream, and the host buffer of a host
//! copy. It is complete when the event is; then it gives the event back to the stream's
//! pool and lets go of the rest.
//!
//! Dropping a request never blocks. If it has not completed, its work goes to the
//! process's **drainer**, one thread started on first use, which waits for the event (in
//! slices of [`DRAIN_SLICE`], asking the other pending requests between slices) and then
//! releases what the request held: an import closed while a copy from it was in flight
//! is unmapped only once the copy is done. The drainer also destroys devipc's streams,
//! whose vendor destroy may wait for their work. A process forked from one whose drainer
//! runs starts its own; it never touches the parent's objects (they are inherited, and
//! dropped there without a vendor call).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use devipc_core::protection::{self, Protection};
use devipc_core::{DeviceIpc, Error, EventHandle, Result, StreamHandle};

use crate::runtime::Runtime;
use crate::span::DeviceSpan;
use crate::stream::Stream;

/// How long the drainer waits on one pending request before it asks the others.
pub const DRAIN_SLICE: Duration = Duration::from_millis(10);

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

enum Job {
    Drain(Work),
    DestroyStream(Runtime, StreamHandle),
}

struct Drainer {
    pid: u32,
    jobs: Sender<Job>,
}

static DRAINER: Mutex<Option<Drainer>> = Mutex::new(None);

fn drainer() -> MutexGuard<'static, Option<Drainer>> {
    // Each critical section replaces or clones a sender: a poisoned lock is consistent.
    DRAINER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands `work` (copies enqueued, not known complete) to the drainer.
pub(crate) fn drain_later(work: Work) {
    send(Job::Drain(work));
}

/// Has the drainer destroy a stream devipc created (the vendor destroy may wait).
pub(crate) fn destroy_stream_later(rt: Runtime, handle: StreamHandle) {
    send(Job::DestroyStream(rt, handle));
}

fn send(job: Job) {
    let mut slot = drainer();
    let pid = std::process::id();
    let mut job = job;
    for _ in 0..2 {
        if slot.as_ref().is_none_or(|d| d.pid != pid) {
            match start() {
                Ok(jobs) => *slot = Some(Drainer { pid, jobs }),
                Err(e) => {
                    // No thread: finish here rather than leak (a wait, but only when the
                    // system cannot start a thread).
                    log::error!("devipc: cannot start the request drainer ({e}); finishing here");
                    run_job(job, &mut Vec::new(), true);
                    return;
                }
            }
        }
        let Some(d) = slot.as_ref() else { return };
        match d.jobs.send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(back)) => {
                // The thread is gone (it never exits while a sender lives, so only a
                // panic): start another.
                job = back;
                *slot = None;
            }
        }
    }
}

fn start() -> std::io::Result<Sender<Job>> {
    let (jobs, inbox) = mpsc::channel();
    std::thread::Builder::new()
        .name("devipc-drain".into())
        .spawn(move || drain(inbox))?;
    Ok(jobs)
}

fn drain(inbox: Receiver<Job>) {
    let mut pending: Vec<Work> = Vec::new();
    loop {
        if pending.is_empty() {
            match inbox.recv() {
                Ok(job) => run_job(job, &mut pending, false),
                Err(_) => return,
            }
        }
        while let Ok(job) = inbox.try_recv() {
            run_job(job, &mut pending, false);
        }
        let mut still = Vec::with_capacity(pending.len());
        for work in pending.drain(..) {
            match work.poll() {
                Ok(true) => {
                    work.finish(true);
                }
                Ok(false) if work.recorded => still.push(work),
                Ok(false) => finish_blocking(work),
                Err(e) => {
                    log::error!("devipc: a dropped request failed: {e}");
                    work.finish(false);
                }
            }
        }
        pending = still;
        if let Some(first) = pending.first() {
            // Wakes as soon as the oldest completes; the others are asked every slice.
            let _ = first.wait(Some(DRAIN_SLICE));
        }
    }
}

fn run_job(job: Job, pending: &mut Vec<Work>, inline: bool) {
    match job {
        Job::Drain(work) if inline => finish_blocking(work),
        Job::Drain(work) => pending.push(work),
        Job::DestroyStream(rt, handle) => {
            if let Ok(backend) = rt.inner.backend()
                && let Err(e) = backend.destroy_stream(handle)
            {
                log::error!("devipc: destroying a stream failed: {e}");
                rt.inner.release_failed(e);
            }
        }
    }
}

/// Waits for `work` (the drainer's thread, or no thread at all) and lets it go.
fn finish_blocking(work: Work) {
    let outcome = work.wait(None);
    if let Err(e) = &outcome {
        log::error!("devipc: a dropped request failed: {e}");
    }
    work.finish(outcome.is_ok());
}
