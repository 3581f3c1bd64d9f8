//! Entry points of streams (safe layer: `stream`): create, destroy (waiting),
//! synchronise, forced destroy (dropping).

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::stream;

use super::{handle_out, non_null, run};

// ---- streams ---------------------------------------------------------------------------------

/// `aclrtCreateStream`: a stream on the current device.
///
/// # Safety
///
/// A non-NULL `stream` is writable.
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    run("aclrtCreateStream", || {
        let out = non_null(stream, "stream")?;
        let handle = stream::create()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(handle)) };
        Ok(())
    })
}

/// `aclrtDestroyStream`: waits for the stream's tasks, then destroys it.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    run("aclrtDestroyStream", || {
        non_null(stream, "stream")?;
        stream::destroy(stream.addr())
    })
}

/// `aclrtSynchronizeStream`: waits for the stream's tasks; returns the first failure among
/// them (e.g. 107019 of a notify wait that expired).
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    run("aclrtSynchronizeStream", || {
        stream::synchronize(stream.addr())
    })
}

// ---- optional: forced destroy -----------------------------------------------------------

/// `aclrtDestroyStreamForce`: destroys a stream without waiting for its tasks (queued
/// tasks are dropped, a running wait is abandoned).
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    run("aclrtDestroyStreamForce", || {
        non_null(stream, "stream")?;
        stream::destroy_force(stream.addr())
    })
}
