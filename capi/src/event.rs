//! Events: local, queryable events (the safe API's `Event`). Recorded on a stream, one
//! completes when the work enqueued before it did; the host asks or waits, another stream
//! waits without blocking the host (`devipc_stream_wait_event`). Always process-local:
//! ordering across processes is a signal's job.

use std::sync::Arc;

use safe::{DeviceId, Event};

use crate::boundary::{Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::runtime::{devipc_runtime, runtime};
use crate::status::devipc_status;

/// A local, queryable event (the safe API's `Event`).
pub struct devipc_event {
    _opaque: [u8; 0],
}

impl Handle for devipc_event {
    type Target = Event;
    const KIND: &'static str = "event";
}

/// The event `ev` names.
pub(crate) fn event(ev: *const devipc_event) -> Outcome<Arc<Event>> {
    handle::get(ev, "ev")
}

/// Creates an event on `device` and stores its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_create_event(
    rt: *const devipc_runtime,
    device: u32,
    out: *mut *mut devipc_event,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.create_event(DeviceId(device))?)
    })
}

/// Stores in `*out` whether the work before the event's latest record is done (true for
/// an event never recorded), without waiting.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_event_is_complete(
    ev: *const devipc_event,
    out: *mut bool,
) -> devipc_status {
    call(|| {
        let done = event(ev)?.is_complete()?;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", done) }
    })
}

/// Waits until the event completed; `timeout_ms` negative waits forever, past it the call
/// returns `DEVIPC_ERR_TIMEOUT`.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_event_wait(ev: *const devipc_event, timeout_ms: i64) -> devipc_status {
    call(|| Ok(event(ev)?.wait(ffi::timeout(timeout_ms))?))
}

/// Frees the event handle in `*ev` and sets `*ev` to NULL (NULL: nothing to do).
///
/// # Safety
/// `ev` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_event_free(ev: *mut *mut devipc_event) -> devipc_status {
    // SAFETY: the caller's guarantee for `ev`.
    call(|| unsafe { handle::free(ev, "ev") })
}
