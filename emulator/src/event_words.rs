//! The state of an event as two 32-bit words, shared by the ACL and HIP surfaces:
//! `recorded` (how many records were submitted) and `completed` (the index of the latest
//! record that completed, when its stream reached it).
//!
//! A record takes the next index when it is *submitted* (`aclrtRecordEvent`,
//! `hipEventRecord`) and completes it when its stream *runs* it
//! ([`crate::stream_queue`]). An event's state is that of its most recent record, as in both
//! runtimes: complete when `completed` has reached `recorded`; a wait for the event
//! (`aclrtStreamWaitEvent`, `hipStreamWaitEvent`, the synchronize calls) waits for the
//! record that was the latest when the wait was issued, so a record submitted later does
//! not delay it, and an event never recorded is complete.
//!
//! The words live in this process's memory, or for an interprocess event in the object's
//! shared page (word 0 `recorded`, word 1 `completed`), so a record in one process is seen
//! in another and waiters sleep on `completed` with a cross-process futex.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use crate::error::EmuError;
use crate::state::SharedMapping;
use crate::state::futex::{wait_until, wake_all};
use crate::stream_queue::{Cancel, Op, WaitEnd, wait_sliced};

/// Offset of the `recorded` word in an event's shared page.
pub const RECORDED: usize = 0;
/// Offset of the `completed` word in an event's shared page.
pub const COMPLETED: usize = 4;
/// Offset of the word counting the threads (of every process) waiting on a shared event,
/// so that a completion nobody waits for makes no system call.
pub const WAITERS: usize = 8;

/// Whether `completed` has reached `target` (indices wrap around).
pub fn reached(completed: u32, target: u32) -> bool {
    completed.wrapping_sub(target) as i32 >= 0
}

/// Where an event's two words live. A process-local event also keeps the time its latest
/// completed record completed (nanoseconds since [`epoch`]), for `hipEventElapsedTime`,
/// and how many threads wait on it, so that a completion nobody waits for makes no
/// system call (a shared event counts its waiters, of every process, in its page's
/// [`WAITERS`] word; one killed while waiting leaves the count high, which only costs a
/// wake).
#[derive(Debug)]
enum Words {
    Local([AtomicU32; 2], AtomicU64, AtomicU32),
    Shared(SharedMapping),
}

/// The process's time origin for event timestamps.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since [`epoch`].
fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The `recorded` / `completed` words of one event.
#[derive(Debug)]
pub struct EventWords(Words);

impl EventWords {
    /// Words in this process's memory, both 0 (never recorded).
    pub fn local() -> EventWords {
        EventWords(Words::Local(
            [AtomicU32::new(0), AtomicU32::new(0)],
            AtomicU64::new(0),
            AtomicU32::new(0),
        ))
    }

    /// Words in an event object's shared page ([`RECORDED`], [`COMPLETED`]).
    pub fn shared(mapping: SharedMapping) -> EventWords {
        EventWords(Words::Shared(mapping))
    }

    fn pair(&self) -> Result<(&AtomicU32, &AtomicU32), EmuError> {
        Ok(match &self.0 {
            Words::Local([r, c], _, _) => (r, c),
            Words::Shared(m) => (m.word(RECORDED)?, m.word(COMPLETED)?),
        })
    }

    /// Submits a record: its index.
    pub fn begin_record(&self) -> Result<u32, EmuError> {
        let (recorded, _) = self.pair()?;
        Ok(recorded.fetch_add(1, Ordering::AcqRel).wrapping_add(1))
    }

    /// Completes the record `index` (never moves `completed` backwards) and wakes waiters.
    pub fn complete(&self, index: u32) -> Result<(), EmuError> {
        let (_, completed) = self.pair()?;
        let mut seen = completed.load(Ordering::Acquire);
        while !reached(seen, index) {
            match completed.compare_exchange_weak(seen, index, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if let Words::Local(_, time, _) = &self.0 {
                        time.store(now_ns(), Ordering::Release);
                    }
                    break;
                }
                Err(now) => seen = now,
            }
        }
        // Pairs with the fence in `waiting`: a waiter that registered after this load
        // sees the completion before it sleeps.
        fence(Ordering::SeqCst);
        if self.waiters()?.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        wake_all(completed)?;
        Ok(())
    }

    /// The count of threads waiting on the words (see [`Words`]).
    fn waiters(&self) -> Result<&AtomicU32, EmuError> {
        match &self.0 {
            Words::Local(_, _, waiters) => Ok(waiters),
            Words::Shared(m) => m.word(WAITERS),
        }
    }

    /// Runs `wait` counted as a waiter (see [`Words`]); `fail` makes the error of a
    /// missing word.
    fn waiting<T>(&self, fail: impl FnOnce(EmuError) -> T, wait: impl FnOnce() -> T) -> T {
        let waiters = match self.waiters() {
            Ok(w) => w,
            Err(e) => return fail(e),
        };
        waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let out = wait();
        waiters.fetch_sub(1, Ordering::Relaxed);
        out
    }

    /// When the latest completed record completed (process-local events only).
    pub fn completed_at(&self) -> Option<u64> {
        match &self.0 {
            Words::Local(_, time, _) => Some(time.load(Ordering::Acquire)),
            Words::Shared(_) => None,
        }
    }

    /// How many records were submitted (the latest record's index; 0: never recorded).
    pub fn latest(&self) -> Result<u32, EmuError> {
        let (recorded, _) = self.pair()?;
        Ok(recorded.load(Ordering::Acquire))
    }

    /// Whether record `target` (and every earlier one) completed.
    pub fn is_complete(&self, target: u32) -> Result<bool, EmuError> {
        let (_, completed) = self.pair()?;
        Ok(reached(completed.load(Ordering::Acquire), target))
    }

    /// Blocks the calling thread until record `target` completed, without a limit (the
    /// host-side synchronize calls).
    pub fn wait(&self, target: u32) -> Result<(), EmuError> {
        let (_, completed) = self.pair()?;
        self.waiting(Err, || wait_until(completed, |c| reached(c, target), None))?;
        Ok(())
    }

    /// Blocks the calling thread until record `target` completed (`true`) or `timeout`
    /// passed (`false`; `None`: no limit), on the `completed` word's futex.
    pub fn wait_for(&self, target: u32, timeout: Option<Duration>) -> Result<bool, EmuError> {
        let (_, completed) = self.pair()?;
        match self.waiting(Err, || {
            wait_until(completed, |c| reached(c, target), timeout)
        }) {
            Ok(_) => Ok(true),
            Err(EmuError::Timeout(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A stream's wait for record `target`: as [`EventWords::wait`], but gives up when the
    /// stream is destroyed by force (`cancel`).
    pub fn wait_on_stream(&self, target: u32, cancel: &Cancel) -> Result<(), WaitEnd<EmuError>> {
        let (_, completed) = self.pair().map_err(WaitEnd::Failed)?;
        self.waiting(
            |e| Err(WaitEnd::Failed(e)),
            || {
                wait_sliced(Some(cancel), None, |slice| {
                    match wait_until(completed, |c| reached(c, target), Some(slice)) {
                        Ok(_) => Ok(true),
                        Err(EmuError::Timeout(_)) => Ok(false),
                        Err(e) => Err(e),
                    }
                })
            },
        )
    }

    /// `(recorded, completed)`.
    pub fn snapshot(&self) -> Result<(u32, u32), EmuError> {
        let (r, c) = self.pair()?;
        Ok((r.load(Ordering::Acquire), c.load(Ordering::Acquire)))
    }
}

/// A stream's wait until the event's record with this index completed
/// (`aclrtStreamWaitEvent`, `hipStreamWaitEvent`); cancelled or timed out, it ends
/// quietly.
pub(crate) struct WaitOp(pub(crate) std::sync::Arc<EventWords>, pub(crate) u32);

impl<E: From<EmuError>> Op<E> for WaitOp {
    fn try_now(&mut self) -> Option<Result<(), E>> {
        match self.0.is_complete(self.1) {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e.into())),
        }
    }

    fn run(self: Box<Self>, cancel: &Cancel) -> Result<(), E> {
        match self.0.wait_on_stream(self.1, cancel) {
            Ok(()) | Err(WaitEnd::Cancelled | WaitEnd::TimedOut) => Ok(()),
            Err(WaitEnd::Failed(e)) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_compare_across_wrap_around() {
        assert!(reached(0, 0));
        assert!(reached(5, 3));
        assert!(!reached(3, 5));
        assert!(reached(2, u32::MAX)); // completed wrapped past the target
        assert!(!reached(u32::MAX, 2));
    }

    #[test]
    fn local_words_record_complete_and_wait() {
        let w = EventWords::local();
        assert!(w.is_complete(w.latest().unwrap()).unwrap());
        let i = w.begin_record().unwrap();
        assert_eq!(i, 1);
        assert!(!w.is_complete(w.latest().unwrap()).unwrap());
        let j = w.begin_record().unwrap();
        w.complete(j).unwrap();
        // The most recent record decides; completing the older one later changes nothing.
        assert!(w.is_complete(w.latest().unwrap()).unwrap());
        w.complete(i).unwrap();
        assert_eq!(w.snapshot().unwrap(), (2, 2));
        w.wait(2).unwrap();
        let cancel = Cancel::default();
        w.wait_on_stream(2, &cancel).unwrap();
    }
}
