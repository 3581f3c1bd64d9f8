//! The stream calls (the staged copies' own stream, the notify wait's stream). Part of the
//! `result` layer (see [`result`](crate::result) for the checked-call helpers and the
//! conventions every function here follows); the parent re-exports each function.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::types::{aclrtEvent, aclrtStream};
use devipc_core::Result;

/// `aclrtCreateStream` on the current device: the stream, as an address.
pub(crate) fn create_stream(api: &AclApi) -> Result<usize> {
    let mut stream: aclrtStream = std::ptr::null_mut();
    // SAFETY: `stream` is a valid out-pointer.
    unsafe { acl!(api, aclrtCreateStream(&mut stream)) }?;
    Ok(stream as usize)
}

/// `aclrtDestroyStream` (waits for the stream's tasks).
///
/// # Safety
/// `stream` is a live stream created here, not used after this call.
pub(crate) unsafe fn destroy_stream(api: &AclApi, stream: usize) -> Result<()> {
    // SAFETY: the caller guarantees a live stream destroyed once.
    unsafe { acl!(api, aclrtDestroyStream(stream as aclrtStream)) }
}

/// `aclrtDestroyStreamForce` (optional): destroys a stream, cancelling its queued tasks.
///
/// # Safety
/// As [`destroy_stream`].
pub(crate) unsafe fn destroy_stream_force(api: &AclApi, stream: usize) -> Result<()> {
    // SAFETY: the caller guarantees a live stream destroyed once.
    unsafe { acl_opt!(api, aclrtDestroyStreamForce(stream as aclrtStream)) }
}

/// `aclrtSynchronizeStream`: waits for the stream's tasks.
///
/// # Safety
/// `stream` is null (the default stream) or a live stream of the current device.
pub(crate) unsafe fn synchronize_stream(api: &AclApi, stream: usize) -> Result<()> {
    // SAFETY: the caller guarantees the stream.
    unsafe { acl!(api, aclrtSynchronizeStream(stream as aclrtStream)) }
}

/// `aclrtSynchronizeEvent` (optional): blocks until the event's latest record completed.
///
/// # Safety
/// `event` is a live event, not destroyed during the call.
pub(crate) unsafe fn synchronize_event(api: &AclApi, event: usize) -> Result<()> {
    // SAFETY: the caller guarantees the event.
    unsafe { acl_opt!(api, aclrtSynchronizeEvent(event as aclrtEvent)) }
}

/// `aclrtStreamWaitEvent` (optional): the stream's later tasks wait for the event.
///
/// # Safety
/// `stream` is null or a live stream of the current device, `event` a live event; neither
/// is destroyed during the call.
pub(crate) unsafe fn stream_wait_event(api: &AclApi, stream: usize, event: usize) -> Result<()> {
    // SAFETY: the caller guarantees both.
    unsafe {
        acl_opt!(
            api,
            aclrtStreamWaitEvent(stream as aclrtStream, event as aclrtEvent)
        )
    }
}
