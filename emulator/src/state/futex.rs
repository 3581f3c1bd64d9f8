//! Cross-process wait/wake on a 32-bit word in shared memory, with emulator errors.
//!
//! The words live in the one-page segment of a `Notify` or `Event` object
//! ([`super::segment::SharedMapping::word`]). The mechanism (non-private futex on a
//! `MAP_SHARED` file, the binary semaphore of `aclrtRecordNotify` /
//! `aclrtWaitAndResetNotify`) is `devipc-shm`'s [`futex`](devipc_shm::futex), shared with
//! the HIP backend; this module only reports its failures as [`EmuError`]s.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use devipc_shm::futex::{self as shm, WaitError};

use crate::error::EmuError;

impl From<WaitError> for EmuError {
    fn from(e: WaitError) -> Self {
        match e {
            WaitError::Timeout(t) => EmuError::Timeout(t),
            WaitError::Sys { op, source } => EmuError::sys(op, source),
        }
    }
}

/// Waits until `pred(word)` holds and returns the value that satisfied it; see
/// [`devipc_shm::futex::wait_until`]. On timeout: [`EmuError::Timeout`].
pub fn wait_until(
    word: &AtomicU32,
    pred: impl FnMut(u32) -> bool,
    timeout: Option<Duration>,
) -> Result<u32, EmuError> {
    Ok(shm::wait_until(word, pred, timeout)?)
}

/// Wakes every waiter of `word` after a change; returns how many were woken.
pub fn wake_all(word: &AtomicU32) -> Result<usize, EmuError> {
    Ok(shm::wake_all(word)?)
}

/// A binary semaphore on a shared word: 0 = clear, non-zero = recorded. See
/// [`devipc_shm::futex::BinarySemaphore`] for the exact semantics.
#[derive(Debug, Clone, Copy)]
pub struct BinarySemaphore<'a>(shm::BinarySemaphore<'a>);

impl<'a> BinarySemaphore<'a> {
    /// Wraps a shared word (typically word 0 of a notify object's segment).
    pub fn new(word: &'a AtomicU32) -> Self {
        BinarySemaphore(shm::BinarySemaphore::new(word))
    }

    /// Sets the word to 1 and wakes all waiters (`aclrtRecordNotify`).
    pub fn record(&self) -> Result<(), EmuError> {
        Ok(self.0.record()?)
    }

    /// Whether the word is currently recorded.
    pub fn is_set(&self) -> bool {
        self.0.is_set()
    }

    /// Consumes a pending record without waiting; `Ok(true)` if there was one.
    pub fn try_take(&self) -> Result<bool, EmuError> {
        Ok(self.0.try_take()?)
    }

    /// Clears the word without waiting (`aclrtNotifyBatchReset`).
    pub fn reset(&self) -> Result<(), EmuError> {
        Ok(self.0.reset()?)
    }

    /// Waits until recorded, then resets to 0 atomically (`aclrtWaitAndResetNotify`).
    /// `None` waits forever; [`EmuError::Timeout`] if no record arrives in time.
    pub fn wait_and_reset(&self, timeout: Option<Duration>) -> Result<(), EmuError> {
        Ok(self.0.wait_and_reset(timeout)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_become_emulator_timeouts() {
        let w = AtomicU32::new(0);
        let s = BinarySemaphore::new(&w);
        assert!(matches!(
            s.wait_and_reset(Some(Duration::from_millis(10))),
            Err(EmuError::Timeout(d)) if d == Duration::from_millis(10)
        ));
        s.record().unwrap();
        assert!(s.is_set());
        s.wait_and_reset(Some(Duration::from_secs(5))).unwrap();
        assert!(matches!(
            wait_until(&w, |v| v == 1, Some(Duration::ZERO)),
            Err(EmuError::Timeout(_))
        ));
    }
}
