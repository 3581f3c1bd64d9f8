//! Ordered work queues for emulated streams: each stream runs its operations in order, and
//! an operation that waits (for a notify, for an event) blocks only its own stream, never
//! the thread that enqueued it. Vendor-agnostic: the ACL and HIP surfaces wrap a
//! [`Queue`] per stream (`aclrtStream`, `hipStream_t`, the default / null streams) and
//! decide which calls enqueue, which wait for a queue, and where errors surface.
//!
//! # How a queue runs
//!
//! - [`Queue::submit`] gives an operation the next sequence number. If the stream is idle
//!   (nothing queued, nothing running, not held), the operation is first tried at once on
//!   the calling thread ([`Op::try_now`]): a record, a copy, or a wait whose condition
//!   already holds completes before `submit` returns, as a device starts work on an idle
//!   stream at once. Anything that would block is queued.
//! - Queued operations run in order on the stream's **worker**, a thread started when
//!   work is queued. Once the queue is empty it lingers [`LINGER`] (looking for work every
//!   [`GRACE`], without being woken by each submission), then ends; so a stream has a
//!   thread only while it has or just had work, and an idle process has none. At most one
//!   operation of a queue runs at a time (inline, on the worker or on a helper), so order
//!   is kept.
//! - A thread that synchronises with an operation ([`Queue::help_until`]: the host wait on
//!   an event recorded on the stream) runs the queued operations up to it itself while no
//!   other thread runs the stream, as far as they let it ([`Op::run_until`]); so a host
//!   wait for a stream that waits for a notify is one futex wait on the notify, as on a
//!   device, not a wait on a worker that waits. An operation it cannot finish by its
//!   deadline goes back to the front of the queue, for the worker or the next helper.
//! - A failed operation does not stop the stream: its error is kept (the first
//!   [`MAX_ERRORS`]) with its sequence number until a synchronisation collects it
//!   ([`Queue::synchronize`], [`Queue::take_errors`]), as a device reports the failure of
//!   asynchronous work at the next synchronisation; later operations still run. An
//!   operation is told where it was queued ([`Op::queued`]), so an event record can look
//!   at the errors kept before it ([`Queue::first_error_before`]) without collecting them.
//! - [`Queue::close_and_drain`] (stream destroy that waits) refuses new work, waits for the
//!   queued work and joins the worker; [`Queue::close_and_abort`] (forced destroy) refuses
//!   new work, drops the queued operations unrun ([`Op::abandon`]), interrupts the running
//!   one ([`Cancel`], polled by waits every [`SLICE`]) and joins the worker. Neither leaves
//!   a thread behind; a drain is bounded by the waits' own timeouts.
//! - [`Queue::hold`] (tests only) keeps queued work from running until
//!   [`Queue::release`], as if a long kernel occupied the stream.
//!
//! At process exit the workers die with the process and queued work is lost, as a
//! device's context is torn down with its process.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::panic_boundary::{self, panic_text};

/// How often a blocked operation looks at its [`Cancel`] flag (and the longest a forced
/// destroy waits for a running wait to notice).
pub const SLICE: Duration = Duration::from_millis(50);

/// How long a worker whose queue ran empty stays for more work before it ends.
pub const LINGER: Duration = Duration::from_millis(50);

/// How often a lingering worker looks for work that no helper took: submissions do not
/// wake it, so that a host wait about to run the work itself is not raced by it.
pub const GRACE: Duration = Duration::from_millis(1);

/// How many errors of asynchronous work a queue keeps until a synchronisation collects
/// them; later ones are dropped (the first failure is what a synchronisation reports).
pub const MAX_ERRORS: usize = 64;

/// Set when a stream is destroyed by force: a running operation stops waiting.
#[derive(Debug, Default)]
pub struct Cancel(AtomicBool);

impl Cancel {
    /// Whether the stream is being torn down.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why [`wait_sliced`] stopped without its condition.
#[derive(Debug)]
pub enum WaitEnd<E> {
    /// The time limit passed.
    TimedOut,
    /// The stream was destroyed by force.
    Cancelled,
    /// The attempt failed.
    Failed(E),
}

/// Waits until `attempt(slice)` reports `true`, blocking at most `slice` per attempt
/// (never more than [`SLICE`]), until `limit` has passed (`None`: no limit) or `cancel` is
/// set. `attempt` blocks on the condition itself (a futex), so the condition is seen at
/// once; the slices only bound how late a cancellation or the limit is noticed.
pub fn wait_sliced<E>(
    cancel: Option<&Cancel>,
    limit: Option<Duration>,
    mut attempt: impl FnMut(Duration) -> Result<bool, E>,
) -> Result<(), WaitEnd<E>> {
    let deadline = limit.and_then(|l| Instant::now().checked_add(l));
    loop {
        if cancel.is_some_and(Cancel::is_set) {
            return Err(WaitEnd::Cancelled);
        }
        let slice = match (limit, deadline) {
            (None, _) | (Some(_), None) => SLICE,
            (Some(_), Some(d)) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(WaitEnd::TimedOut);
                }
                left.min(SLICE)
            }
        };
        if attempt(slice).map_err(WaitEnd::Failed)? {
            return Ok(());
        }
    }
}

/// One operation of a stream.
pub trait Op<E>: Send {
    /// Completes the operation now if that needs no waiting (`None`: it would block, so it
    /// is queued and [`Op::run`] later). Called on the submitting thread, only when the
    /// stream is idle.
    fn try_now(&mut self) -> Option<Result<(), E>>;

    /// Runs the operation on the stream's worker, waiting as long as it needs; a wait
    /// polls `cancel` (see [`wait_sliced`]).
    fn run(self: Box<Self>, cancel: &Cancel) -> Result<(), E>;

    /// The operation is dropped unrun (forced destroy): release whatever others could wait
    /// for (e.g. complete an event record), so nothing waits for work that never comes.
    fn abandon(self: Box<Self>) {}

    /// Where the operation was queued: its stream's queue and its sequence number there.
    /// Called by [`Queue::submit`] before the operation is first tried.
    fn queued(&mut self, _queue: &Queue<E>, _seq: u64) {}

    /// Runs the operation on a thread that synchronises with it ([`Queue::help_until`]),
    /// waiting no later than `until` (`None`: as long as it needs) and polling `cancel`:
    /// `None` if it has not finished by then; it stays queued and is resumed later (by
    /// [`Op::run`] or another helper), so it must keep its own progress (e.g. when its
    /// timeout started). The default runs nothing and returns `None`: only the worker
    /// runs such an operation.
    fn run_until(&mut self, _cancel: &Cancel, _until: Option<Instant>) -> Option<Result<(), E>> {
        None
    }
}

/// An operation that never blocks: `f` runs at once when the stream is idle, else in
/// order on the worker.
pub struct Quick<F>(Option<F>);

/// Wraps a non-blocking operation.
pub fn quick<E, F>(f: F) -> Box<dyn Op<E>>
where
    E: 'static,
    F: FnOnce() -> Result<(), E> + Send + 'static,
{
    Box::new(Quick(Some(f)))
}

impl<E, F> Op<E> for Quick<F>
where
    F: FnOnce() -> Result<(), E> + Send,
{
    fn try_now(&mut self) -> Option<Result<(), E>> {
        Some(self.0.take().map_or(Ok(()), |f| f()))
    }

    fn run(mut self: Box<Self>, _cancel: &Cancel) -> Result<(), E> {
        self.0.take().map_or(Ok(()), |f| f())
    }
}

/// The queue was closed (its stream destroyed): nothing more is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

type Queued<E> = (u64, Box<dyn Op<E>>);

struct State<E> {
    ops: VecDeque<Queued<E>>,
    /// Sequence number of the last operation accepted (0: none yet).
    last: u64,
    /// Every operation up to this sequence number has finished.
    done: u64,
    /// An operation is running (inline or on the worker).
    running: bool,
    /// A forced destroy dropped the queue up to here: when the running operation ends,
    /// `done` jumps to it.
    abort_to: Option<u64>,
    worker: Option<JoinHandle<()>>,
    worker_alive: bool,
    held: bool,
    closed: bool,
    errors: Vec<(u64, E)>,
    /// Threads waiting on `changed`.
    waiters: u32,
}

struct Inner<E> {
    label: String,
    state: Mutex<State<E>>,
    changed: Condvar,
    /// Wakes a lingering worker (a close, a helper giving work back).
    work: Condvar,
    cancel: Cancel,
    /// Builds the error of an operation that panicked or could not be run.
    internal: fn(String) -> E,
}

/// The ordered work queue of one stream (see the module docs). Cloning shares the queue.
pub struct Queue<E> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for Queue<E> {
    fn clone(&self) -> Self {
        Queue {
            inner: self.inner.clone(),
        }
    }
}

impl<E> std::fmt::Debug for Queue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("Queue")
            .field("label", &self.inner.label)
            .field("last", &st.last)
            .field("done", &st.done)
            .field("queued", &st.ops.len())
            .field("held", &st.held)
            .field("closed", &st.closed)
            .finish()
    }
}

impl<E> Inner<E> {
    fn lock(&self) -> MutexGuard<'_, State<E>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a change of the state (at most `limit`), counted in `waiters` so that a
    /// change with nobody waiting wakes nobody (no system call: see [`Inner::notify`]).
    fn wait_at_most<'a>(
        &self,
        mut st: MutexGuard<'a, State<E>>,
        limit: Option<Duration>,
    ) -> MutexGuard<'a, State<E>> {
        st.waiters += 1;
        let mut st = match limit {
            None => self.changed.wait(st).unwrap_or_else(|p| p.into_inner()),
            Some(l) => {
                self.changed
                    .wait_timeout(st, l)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        st.waiters -= 1;
        st
    }

    fn wait<'a>(&self, st: MutexGuard<'a, State<E>>) -> MutexGuard<'a, State<E>> {
        self.wait_at_most(st, None)
    }

    /// Wakes the threads waiting for a change of the state, if any.
    fn notify(&self, st: &State<E>) {
        if st.waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Records the end of operation `seq`.
    fn finished(&self, st: &mut State<E>, seq: u64, result: Result<(), E>) {
        st.done = st.done.max(seq);
        if let Some(to) = st.abort_to.take() {
            st.done = st.done.max(to);
        }
        if let Err(e) = result {
            if st.errors.len() < MAX_ERRORS {
                st.errors.push((seq, e));
            }
        }
        self.notify(st);
    }
}

impl<E: Send + 'static> Queue<E> {
    /// A new, empty queue; `label` names its worker thread, `internal` builds the error
    /// of an operation that panicked or could not be started.
    pub fn new(label: impl Into<String>, internal: fn(String) -> E) -> Queue<E> {
        Queue {
            inner: Arc::new(Inner {
                label: label.into(),
                state: Mutex::new(State {
                    ops: VecDeque::new(),
                    last: 0,
                    done: 0,
                    running: false,
                    abort_to: None,
                    worker: None,
                    worker_alive: false,
                    held: false,
                    closed: false,
                    errors: Vec::new(),
                    waiters: 0,
                }),
                changed: Condvar::new(),
                work: Condvar::new(),
                cancel: Cancel::default(),
                internal,
            }),
        }
    }

    /// Accepts `op` as the stream's next operation and returns its sequence number: it
    /// runs at once if the stream is idle and it need not wait, else in order on the
    /// worker. Fails only on a closed queue.
    pub fn submit(&self, mut op: Box<dyn Op<E>>) -> Result<u64, Closed> {
        let inner = &self.inner;
        let mut st = inner.lock();
        if st.closed {
            return Err(Closed);
        }
        st.last += 1;
        let seq = st.last;
        op.queued(self, seq);
        if !st.held && !st.running && st.ops.is_empty() {
            st.running = true;
            drop(st);
            let now = catch_unwind(AssertUnwindSafe(|| op.try_now()))
                .unwrap_or_else(|p| Some(Err((inner.internal)(panic_text(p.as_ref())))));
            let mut st = inner.lock();
            st.running = false;
            match now {
                Some(result) => inner.finished(&mut st, seq, result),
                // Destroyed by force meanwhile: dropped like the rest of the queue.
                None if st.closed => {
                    op.abandon();
                    inner.finished(&mut st, seq, Ok(()));
                }
                None => st.ops.push_front((seq, op)),
            }
            self.kick(&mut st);
            inner.notify(&st);
            return Ok(seq);
        }
        st.ops.push_back((seq, op));
        self.kick(&mut st);
        Ok(seq)
    }

    /// Starts the worker if work is queued, the stream not held and no worker alive (a
    /// lingering worker finds the work within [`GRACE`]).
    fn kick(&self, st: &mut State<E>) {
        if st.held || st.worker_alive || st.ops.is_empty() {
            return;
        }
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name(self.inner.label.clone())
            .spawn(move || worker(&inner));
        match spawned {
            Ok(handle) => {
                st.worker_alive = true;
                // A previous worker has already left its loop; it is not waited for.
                st.worker = Some(handle);
            }
            Err(e) => {
                // No thread to run the stream: fail its queued work (the errors surface at
                // the next synchronisation) rather than leave it pending forever.
                let message = format!("could not start the stream's worker thread: {e}");
                while let Some((seq, op)) = st.ops.pop_front() {
                    op.abandon();
                    self.inner
                        .finished(st, seq, Err((self.inner.internal)(message.clone())));
                }
            }
        }
    }

    /// Sequence number of the last operation accepted (0: none yet).
    pub fn tail(&self) -> u64 {
        self.inner.lock().last
    }

    /// Whether every operation up to `seq` has finished.
    pub fn is_done(&self, seq: u64) -> bool {
        self.inner.lock().done >= seq
    }

    /// Waits until every operation up to `seq` has finished, or until `deadline`; `false`
    /// if the deadline passed first.
    pub fn wait_for(&self, seq: u64, deadline: Option<Instant>) -> bool {
        let inner = &self.inner;
        let mut st = inner.lock();
        while st.done < seq {
            match deadline {
                None => st = inner.wait(st),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    st = inner.wait_at_most(st, Some(left));
                }
            }
        }
        true
    }

    /// Takes the errors of the operations up to `seq` (oldest first); errors of later
    /// operations stay for a later synchronisation.
    pub fn take_errors(&self, seq: u64) -> Vec<E> {
        let mut st = self.inner.lock();
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut st.errors)
            .into_iter()
            .partition(|(s, _)| *s <= seq);
        st.errors = kept;
        taken.into_iter().map(|(_, e)| e).collect()
    }

    /// Waits for every operation accepted so far (or until `deadline`: `None` on expiry)
    /// and takes their errors.
    pub fn synchronize(&self, deadline: Option<Instant>) -> Option<Vec<E>> {
        let target = self.tail();
        self.wait_for(target, deadline)
            .then(|| self.take_errors(target))
    }

    /// Runs the stream's queued operations up to `seq` on the calling thread while no other
    /// thread runs the stream (see the module docs), else waits for them, until every
    /// operation up to `seq` has finished (`true`) or `deadline` passed (`false`). An
    /// operation that cannot be run here ([`Op::run_until`] gives up before the deadline)
    /// is left to the worker, and this thread waits for it.
    pub fn help_until(&self, seq: u64, deadline: Option<Instant>) -> bool {
        let inner = &self.inner;
        // The sequence number of an operation left to the worker: wait, do not retake it.
        let mut left_to_worker = 0;
        let mut st = inner.lock();
        loop {
            if st.done >= seq {
                return true;
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return false;
            }
            let front = st.ops.front().map(|(s, _)| *s);
            let can_run =
                !st.held && !st.running && front.is_some_and(|f| f > left_to_worker && f <= seq);
            if !can_run {
                st = inner.wait_at_most(st, left);
                continue;
            }
            let Some((op_seq, mut op)) = st.ops.pop_front() else {
                continue;
            };
            st.running = true;
            drop(st);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                op.try_now()
                    .or_else(|| op.run_until(&inner.cancel, deadline))
            }))
            .unwrap_or_else(|p| Some(Err((inner.internal)(panic_text(p.as_ref())))));
            st = inner.lock();
            st.running = false;
            match outcome {
                Some(result) => inner.finished(&mut st, op_seq, result),
                None if st.closed => {
                    op.abandon();
                    inner.finished(&mut st, op_seq, Ok(()));
                }
                None => {
                    st.ops.push_front((op_seq, op));
                    self.kick(&mut st);
                    if deadline.is_none_or(|d| Instant::now() < d) {
                        // It does not run on helpers: the worker's, at once.
                        left_to_worker = op_seq;
                        inner.work.notify_all();
                    }
                    // Else the caller's deadline passed: the next helper (the caller's
                    // next slice, usually) resumes it, or the worker within GRACE.
                    inner.notify(&st);
                }
            }
        }
    }

    /// A handle on the queue that does not keep it alive.
    pub fn downgrade(&self) -> WeakQueue<E> {
        WeakQueue(Arc::downgrade(&self.inner))
    }

    /// Tests only: keeps queued work from running until [`Queue::release`].
    pub fn hold(&self) {
        self.inner.lock().held = true;
    }

    /// Lets a held queue run again; returns the sequence number of the last operation
    /// queued while it was held (wait for it with [`Queue::wait_for`]).
    pub fn release(&self) -> u64 {
        let mut st = self.inner.lock();
        st.held = false;
        self.kick(&mut st);
        self.inner.work.notify_all();
        st.last
    }

    /// Whether the queue is held.
    pub fn is_held(&self) -> bool {
        self.inner.lock().held
    }

    /// Refuses new work, lets the queued work run to its end (a held queue is released)
    /// and joins the worker; returns the errors nobody collected.
    pub fn close_and_drain(&self) -> Vec<E> {
        let target = {
            let mut st = self.inner.lock();
            st.closed = true;
            st.held = false;
            self.kick(&mut st);
            self.inner.work.notify_all();
            st.last
        };
        self.wait_for(target, None);
        self.join();
        self.take_errors(u64::MAX)
    }

    /// Refuses new work, drops the queued operations unrun ([`Op::abandon`]), interrupts
    /// the running one ([`Cancel`]) and joins the worker.
    pub fn close_and_abort(&self) {
        let dropped = {
            let mut st = self.inner.lock();
            st.closed = true;
            st.held = false;
            self.inner.cancel.set();
            self.inner.work.notify_all();
            let dropped: Vec<_> = st.ops.drain(..).collect();
            if st.running {
                st.abort_to = Some(st.last);
            } else {
                st.done = st.last;
            }
            self.inner.notify(&st);
            dropped
        };
        for (_, op) in dropped {
            op.abandon();
        }
        let target = self.tail();
        self.wait_for(target, None);
        self.join();
        self.inner.lock().errors.clear();
    }

    /// Waits for the worker thread (if any) to end.
    fn join(&self) {
        let handle = {
            let inner = &self.inner;
            let mut st = inner.lock();
            while st.worker_alive {
                st = inner.wait(st);
            }
            st.worker.take()
        };
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl<E: Clone> Queue<E> {
    /// The first error kept (not yet collected by a synchronisation) of the operations
    /// before `seq`, without collecting it.
    pub fn first_error_before(&self, seq: u64) -> Option<E> {
        let st = self.inner.lock();
        st.errors
            .iter()
            .find(|(s, _)| *s < seq)
            .map(|(_, e)| e.clone())
    }
}

/// A [`Queue`] that may be gone (its stream destroyed): see [`Queue::downgrade`].
pub struct WeakQueue<E>(std::sync::Weak<Inner<E>>);

impl<E> WeakQueue<E> {
    /// The queue, if it is still there.
    pub fn upgrade(&self) -> Option<Queue<E>> {
        self.0.upgrade().map(|inner| Queue { inner })
    }
}

impl<E> Clone for WeakQueue<E> {
    fn clone(&self) -> Self {
        WeakQueue(self.0.clone())
    }
}

impl<E> std::fmt::Debug for WeakQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakQueue")
    }
}

/// The worker of one queue: runs queued operations in order, ends when none is left (or
/// the queue is held).
fn worker<E: Send + 'static>(inner: &Inner<E>) {
    loop {
        let (seq, op) = {
            let mut st = inner.lock();
            let mut idle_since: Option<Instant> = None;
            loop {
                let idle = st.held || st.ops.is_empty();
                if !idle && !st.running {
                    break;
                }
                // Nothing to run, or a helper runs the stream: linger (see the module
                // docs), unless the queue is closed or the linger is over.
                let since = *idle_since.get_or_insert_with(Instant::now);
                if idle && (st.closed || st.held || since.elapsed() >= LINGER) {
                    st.worker_alive = false;
                    inner.notify(&st);
                    return;
                }
                if !idle {
                    idle_since = None;
                }
                st = inner
                    .work
                    .wait_timeout(st, GRACE)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            st.running = true;
            match st.ops.pop_front() {
                Some(next) => next,
                None => unreachable!("checked non-empty under the lock"),
            }
        };
        let result = panic_boundary::catch(|| op.run(&inner.cancel), inner.internal);
        let mut st = inner.lock();
        st.running = false;
        inner.finished(&mut st, seq, result);
    }
}

#[cfg(test)]
mod tests;
