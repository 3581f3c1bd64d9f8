//! Requests: the completion of copies enqueued on a stream (the safe API's `Request`):
//! poll, wait, take the host bytes of a read, free. A request keeps every buffer, import,
//! span and stream it names until its copies completed; freeing an unfinished request
//! never blocks (devipc finishes it in the background, `devipc_drain` waits for that).

use std::sync::{Arc, Mutex, MutexGuard};

use safe::Request;

use crate::boundary::{Failure, Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::status::devipc_status;

/// The completion of copies enqueued on a stream (the safe API's `Request`). Calls on one
/// request from several threads take turns.
pub struct devipc_request {
    _opaque: [u8; 0],
}

/// A request's state: pending (or complete, not yet taken), or its host bytes taken.
#[derive(Debug)]
pub(crate) struct Pending {
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    /// The request, until its host bytes are taken.
    Live(Request),
    /// The host bytes, once taken (a second take copies them again).
    Host(Vec<u8>),
    /// Taken, without host bytes (a device-to-device request) or after a failure.
    Spent,
}

impl Pending {
    /// Wraps a request.
    pub(crate) fn new(req: Request) -> Pending {
        Pending {
            state: Mutex::new(State::Live(req)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every transition is one assignment: a poisoned lock is consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Handle for devipc_request {
    type Target = Pending;
    const KIND: &'static str = "request";
}

fn request(req: *const devipc_request) -> Outcome<Arc<Pending>> {
    handle::get(req, "req")
}

/// Stores in `*out` whether the request's copies completed, without waiting. A copy that
/// failed is its status (and `*out` is left alone).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_request_is_complete(
    req: *const devipc_request,
    out: *mut bool,
) -> devipc_status {
    call(|| {
        let req = request(req)?;
        let done = match &mut *req.lock() {
            State::Live(r) => r.is_complete()?,
            State::Host(_) | State::Spent => true,
        };
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", done) }
    })
}

/// Waits until the request's copies completed; `timeout_ms` negative waits forever, past
/// it the call returns `DEVIPC_ERR_TIMEOUT` and the request is still pending.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_request_wait(
    req: *const devipc_request,
    timeout_ms: i64,
) -> devipc_status {
    call(|| {
        let req = request(req)?;
        match &mut *req.lock() {
            State::Live(r) => Ok(r.wait(ffi::timeout(timeout_ms))?),
            State::Host(_) | State::Spent => Ok(()),
        }
    })
}

/// Waits for the request, then copies its host bytes into `dst` (`len` bytes) and their
/// count into `*needed` (may be NULL): the bytes a `devipc_stream_read` read, or the
/// source a `devipc_stream_write` copied. Too small: nothing copied,
/// `DEVIPC_ERR_BUFFER_TOO_SMALL` (call again). A device-to-device request has none
/// (`DEVIPC_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// `dst` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_request_take_host(
    req: *const devipc_request,
    dst: *mut std::ffi::c_void,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let req = request(req)?;
        let mut state = req.lock();
        if matches!(*state, State::Live(_)) {
            let State::Live(r) = std::mem::replace(&mut *state, State::Spent) else {
                unreachable!("checked just above");
            };
            *state = State::Host(r.into_host()?);
        }
        match &*state {
            // SAFETY: the caller's guarantee for `dst`, `len` and `needed`.
            State::Host(bytes) => unsafe {
                ffi::write_bytes(bytes, "dst", dst.cast(), len, needed)
            },
            _ => Err(Failure::invalid(
                "the request has no host bytes: it copied device to device, or failed",
            )),
        }
    })
}

/// Frees the request handle in `*req` and sets `*req` to NULL (NULL: nothing to do).
/// Never blocks: an unfinished request is finished in the background, which keeps the
/// memory it copies through until then.
///
/// # Safety
/// `req` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_request_free(req: *mut *mut devipc_request) -> devipc_status {
    // SAFETY: the caller's guarantee for `req`.
    call(|| unsafe { handle::free(req, "req") })
}

/// Waits until the background work released every request (and stream) freed before it
/// completed, at most `timeout_ms` (negative: forever); `DEVIPC_ERR_TIMEOUT` when some
/// remain. For orderly shutdowns that must not exit with memory still held for copies in
/// flight.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_drain(timeout_ms: i64) -> devipc_status {
    call(|| {
        let limit = ffi::timeout(timeout_ms).unwrap_or(std::time::Duration::MAX);
        let started = std::time::Instant::now();
        // `wait_for_drained` adds its limit to now: keep it representable.
        let limit = limit.min(std::time::Duration::from_secs(86_400 * 365));
        if safe::testing::wait_for_drained(limit) {
            Ok(())
        } else {
            Err(safe::Error::timed_out(
                "draining the requests freed before they completed",
                started,
            )
            .into())
        }
    })
}
