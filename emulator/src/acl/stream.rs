//! Streams: `aclrtCreateStream`, `aclrtDestroyStream`, `aclrtDestroyStreamForce`,
//! `aclrtSynchronizeStream`.
//!
//! The emulator has no device queue: work "on a stream" (`aclrtMemcpyAsync`, notify
//! record and wait) runs synchronously in the calling thread, so a stream is only a
//! checked handle tied to the device it was created on, and synchronising one returns at
//! once. NULL is the default stream and always valid. Unknown or destroyed streams fail
//! with `ACL_ERROR_RT_INVALID_HANDLE` (107017, `ascend.handle.valid`).

use crate::local::HandleTable;

use super::device;
use super::errors::AclResult;

/// What the emulator keeps per stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamLocal {
    device: u32,
}

static STREAMS: HandleTable<StreamLocal> = HandleTable::new("stream", 0xac51);

/// `aclrtCreateStream` on the current device; returns the handle value.
pub fn create() -> AclResult<usize> {
    let device = device::require_current("aclrtCreateStream")?;
    Ok(STREAMS.insert(StreamLocal { device })?)
}

/// `aclrtDestroyStream`.
pub fn destroy(stream: usize) -> AclResult<()> {
    STREAMS.remove(stream)?;
    Ok(())
}

/// `aclrtDestroyStreamForce`: destroys the stream without waiting for its tasks; the
/// emulator's streams never have pending tasks, so it is `aclrtDestroyStream`.
pub fn destroy_force(stream: usize) -> AclResult<()> {
    destroy(stream)
}

/// Checks a stream argument: NULL (the default stream) or a live stream of this process.
pub fn check(stream: usize) -> AclResult<()> {
    if stream != 0 {
        STREAMS.get(stream)?;
    }
    Ok(())
}

/// `aclrtSynchronizeStream`: nothing is ever pending, so this only checks the handle.
pub fn synchronize(stream: usize) -> AclResult<()> {
    check(stream)
}

/// Destroys the streams of `device` (its context was reset).
pub fn destroy_on_device(device: u32) {
    for (handle, s) in STREAMS.snapshot() {
        if s.device == device {
            let _ = STREAMS.remove(handle);
        }
    }
}
