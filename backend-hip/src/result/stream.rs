//! The checked calls of the data plane: streams and local events (the copies are
//! `result/batch.rs`'s).

use devipc_core::Result;
use devipc_hip_sys::{
    HipApi, hipErrorNotReady, hipEvent_t, hipEventDisableTiming, hipStream_t, hipSuccess,
};

use super::check;

/// `hipStreamCreate`: a new (blocking) stream on the current device. The caller destroys
/// it with [`stream_destroy`].
pub(crate) fn stream_create(api: &HipApi) -> Result<hipStream_t> {
    let mut stream: hipStream_t = std::ptr::null_mut();
    // SAFETY: `stream` is a valid out-pointer for the duration of the call.
    unsafe { hip!(api, hipStreamCreate(&mut stream)) }?;
    Ok(stream)
}

/// `hipStreamDestroy` (waits for the work already queued on it).
///
/// # Safety
/// `stream` came from [`stream_create`], has not been destroyed, and is not used after
/// this call.
pub(crate) unsafe fn stream_destroy(api: &HipApi, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller guarantees a live stream destroyed once, here.
    unsafe { hip!(api, hipStreamDestroy(stream)) }
}

/// `hipStreamSynchronize`: waits for the stream's work; its first failure is the error.
///
/// # Safety
/// `stream` is null (the current device's null stream) or a live stream of this runtime
/// on the current device, not destroyed during the call.
pub(crate) unsafe fn stream_synchronize(api: &HipApi, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller guarantees the stream.
    unsafe { hip!(api, hipStreamSynchronize(stream)) }
}

/// `hipEventCreateWithFlags(hipEventDisableTiming)`: a local event for completion (no
/// timing, which costs a timestamp per record). Destroyed with `event_destroy`.
pub(crate) fn local_event_create(api: &HipApi) -> Result<hipEvent_t> {
    super::event_create_with_flags(api, hipEventDisableTiming)
}

/// `hipEventQuery`: `true` once the latest record completed (or for an event never
/// recorded), `false` while it is pending (`hipErrorNotReady`); other codes are errors.
///
/// # Safety
/// `event` is a live event, not destroyed during the call.
pub(crate) unsafe fn event_query(api: &HipApi, event: hipEvent_t) -> Result<bool> {
    // SAFETY: the caller guarantees the event.
    let code = unsafe { (api.hipEventQuery)(event) };
    match code {
        c if c == hipSuccess => Ok(true),
        c if c == hipErrorNotReady => Ok(false),
        c => check(api, "hipEventQuery", c).map(|()| false),
    }
}

/// `hipEventSynchronize`: blocks until the event's latest record completed.
///
/// # Safety
/// As [`event_query`].
pub(crate) unsafe fn event_synchronize(api: &HipApi, event: hipEvent_t) -> Result<()> {
    // SAFETY: the caller guarantees the event.
    unsafe { hip!(api, hipEventSynchronize(event)) }
}
