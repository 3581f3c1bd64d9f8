//! The raw `futex(2)` calls, shared (not `_PRIVATE`) so that they pair across processes
//! mapping the same file. [`crate::futex`] builds waiting with deadlines and the binary
//! semaphore on them.

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// What a [`futex_wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexWait {
    /// Woken by a `FUTEX_WAKE` (or spuriously): re-check the word.
    Woken,
    /// The word did not hold the expected value when the kernel checked it.
    ValueChanged,
    /// The timeout elapsed.
    TimedOut,
    /// Interrupted by a signal: re-check the word.
    Interrupted,
}

/// `FUTEX_WAIT` (shared, not `_PRIVATE`, so it pairs with wakers in other processes that
/// map the same file) on `word` while it holds `expected`, for at most `timeout` (`None`:
/// no limit).
pub fn futex_wait(
    word: &AtomicU32,
    expected: u32,
    timeout: Option<Duration>,
) -> io::Result<FutexWait> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the call; `ts_ptr` is null or points to
    // a timespec that outlives the call. FUTEX_WAIT only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc == 0 {
        return Ok(FutexWait::Woken);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) => Ok(FutexWait::ValueChanged),
        Some(libc::ETIMEDOUT) => Ok(FutexWait::TimedOut),
        Some(libc::EINTR) => Ok(FutexWait::Interrupted),
        _ => Err(err),
    }
}

/// `FUTEX_WAKE` (shared): wakes up to `count` waiters on `word` in any process; returns
/// how many were woken.
pub fn futex_wake(word: &AtomicU32, count: i32) -> io::Result<usize> {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not access memory through
    // the remaining (ignored) arguments.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            count,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}
