//! Cross-process wait/wake on a 32-bit word in shared memory (Linux futex).
//!
//! The words live in a file every process maps `MAP_SHARED` (the emulator's notify and
//! event segments, the HIP backend's signal words), so a non-private `FUTEX_WAIT` in one
//! process is woken by `FUTEX_WAKE` in another (the kernel keys shared futexes by file and
//! offset, not by address).
//!
//! - [`wait_until`]: block until a predicate on the word holds, with an optional timeout.
//! - [`wake_all`]: wake every waiter after changing the word.
//! - [`BinarySemaphore`]: the Ascend notify semantics (`aclrtRecordNotify` sets the word
//!   to 1 and wakes; `aclrtWaitAndResetNotify` waits until it is 1 and atomically resets it
//!   to 0, so each record releases exactly one wait, and records before a wait are not
//!   lost, and two records before one wait count once).
//!
//! Every change of a word is followed by a wake of all its waiters (the semaphore's
//! reset too), so [`wait_until`] works for any predicate, e.g. "until cleared".
//!
//! Waiting never holds any lock, and a waiter whose peer died just times out: there is
//! nothing to clean up in the word.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::os;

/// Why a wait or wake failed.
#[derive(Debug)]
pub enum WaitError {
    /// The word did not reach the awaited state in time; carries the caller's timeout.
    Timeout(Duration),
    /// The futex system call failed.
    Sys {
        /// `"futex wait"` or `"futex wake"`.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::Timeout(t) => write!(f, "timed out after {t:?}"),
            WaitError::Sys { op, source } => write!(f, "{op} failed: {source}"),
        }
    }
}

impl std::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WaitError::Timeout(_) => None,
            WaitError::Sys { source, .. } => Some(source),
        }
    }
}

/// Waits until `pred(word)` holds and returns the value that satisfied it.
/// `timeout == None` waits forever; on timeout returns [`WaitError::Timeout`]. Spurious
/// wake-ups and signals are absorbed; the predicate is always checked once more before
/// giving up.
pub fn wait_until(
    word: &AtomicU32,
    mut pred: impl FnMut(u32) -> bool,
    timeout: Option<Duration>,
) -> Result<u32, WaitError> {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        let value = word.load(Ordering::Acquire);
        if pred(value) {
            return Ok(value);
        }
        let remaining = match (timeout, deadline) {
            (None, _) | (Some(_), None) => None,
            (Some(t), Some(d)) => {
                let now = Instant::now();
                if now >= d {
                    return Err(WaitError::Timeout(t));
                }
                Some(d - now)
            }
        };
        os::futex_wait(word, value, remaining).map_err(|source| WaitError::Sys {
            op: "futex wait",
            source,
        })?;
    }
}

/// Wakes every process and thread waiting on `word`; returns how many were woken.
pub fn wake_all(word: &AtomicU32) -> Result<usize, WaitError> {
    os::futex_wake(word, i32::MAX).map_err(|source| WaitError::Sys {
        op: "futex wake",
        source,
    })
}

/// A binary semaphore on a shared word: 0 = clear, non-zero = recorded.
#[derive(Debug, Clone, Copy)]
pub struct BinarySemaphore<'a> {
    word: &'a AtomicU32,
}

impl<'a> BinarySemaphore<'a> {
    /// Wraps a shared word (typically word 0 of a notify object's segment).
    pub fn new(word: &'a AtomicU32) -> Self {
        BinarySemaphore { word }
    }

    /// Sets the word to 1 and wakes all waiters (`aclrtRecordNotify`).
    pub fn record(&self) -> Result<(), WaitError> {
        self.word.store(1, Ordering::Release);
        wake_all(self.word).map(drop)
    }

    /// Whether the word is currently recorded.
    pub fn is_set(&self) -> bool {
        self.word.load(Ordering::Acquire) != 0
    }

    /// Consumes a pending record without waiting; `Ok(true)` if there was one.
    pub fn try_take(&self) -> Result<bool, WaitError> {
        let v = self.word.load(Ordering::Acquire);
        let taken = v != 0
            && self
                .word
                .compare_exchange(v, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if taken {
            wake_all(self.word)?;
        }
        Ok(taken)
    }

    /// Clears the word without waiting (`aclrtNotifyBatchReset`).
    pub fn reset(&self) -> Result<(), WaitError> {
        self.word.store(0, Ordering::Release);
        wake_all(self.word).map(drop)
    }

    /// Waits until recorded, then resets to 0 atomically, so that of several waiters
    /// exactly one consumes each record (`aclrtWaitAndResetNotify`). `None` waits forever;
    /// [`WaitError::Timeout`] if no record arrives in time (nothing is consumed then).
    pub fn wait_and_reset(&self, timeout: Option<Duration>) -> Result<(), WaitError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let remaining = match (timeout, deadline) {
                (Some(_), Some(d)) => Some(d.saturating_duration_since(Instant::now())),
                _ => None,
            };
            let seen = wait_until(self.word, |v| v != 0, remaining).map_err(|e| match e {
                // Report the caller's timeout, not the remainder of the last round.
                WaitError::Timeout(_) => WaitError::Timeout(timeout.unwrap_or_default()),
                other => other,
            })?;
            if self
                .word
                .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Wake anyone waiting for the word to clear (see the module docs).
                return wake_all(self.word).map(drop);
            }
            // Another waiter took it first: wait for the next record.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn record_before_wait_is_not_lost_and_counts_once() {
        let w = AtomicU32::new(0);
        let s = BinarySemaphore::new(&w);
        s.record().unwrap();
        s.record().unwrap();
        assert!(s.is_set());
        s.wait_and_reset(Some(Duration::from_secs(5))).unwrap();
        assert!(!s.is_set());
        let t0 = Instant::now();
        assert!(matches!(
            s.wait_and_reset(Some(Duration::from_millis(30))),
            Err(WaitError::Timeout(d)) if d == Duration::from_millis(30)
        ));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert!(!s.try_take().unwrap());
        s.record().unwrap();
        assert!(s.try_take().unwrap());
        s.record().unwrap();
        s.reset().unwrap();
        assert!(!s.is_set());
    }

    #[test]
    fn zero_timeout_polls() {
        let w = AtomicU32::new(1);
        let s = BinarySemaphore::new(&w);
        s.wait_and_reset(Some(Duration::ZERO)).unwrap();
        assert!(s.wait_and_reset(Some(Duration::ZERO)).is_err());
    }

    #[test]
    fn wakes_a_waiting_thread() {
        let w = Arc::new(AtomicU32::new(0));
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || {
                BinarySemaphore::new(&w).wait_and_reset(Some(Duration::from_secs(30)))
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        BinarySemaphore::new(&w).record().unwrap();
        waiter.join().unwrap().unwrap();
        assert_eq!(w.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn each_record_releases_one_of_several_waiters() {
        let w = Arc::new(AtomicU32::new(0));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let w = w.clone();
                std::thread::spawn(move || {
                    BinarySemaphore::new(&w).wait_and_reset(Some(Duration::from_secs(30)))
                })
            })
            .collect();
        let s = BinarySemaphore::new(&w);
        for _ in 0..3 {
            s.record().unwrap();
            // Wait until some waiter consumed it before recording again.
            wait_until(&w, |v| v == 0, Some(Duration::from_secs(30))).unwrap();
        }
        for t in waiters {
            t.join().unwrap().unwrap();
        }
    }
}
