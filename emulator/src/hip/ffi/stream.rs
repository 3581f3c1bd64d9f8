//! Entry points of streams (safe layer: `stream`): create, destroy (waiting for the
//! stream's work), synchronise.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::call;
use crate::hip::stream;

use super::non_null;

/// `hipError_t hipStreamCreate(hipStream_t* stream)`: a stream on the current device.
///
/// # Safety
/// `stream` must be NULL or valid for writing one `hipStream_t`.
pub unsafe extern "C" fn hipStreamCreate(stream: *mut hipStream_t) -> hipError_t {
    call("hipStreamCreate", || {
        let out = non_null(stream, "stream")?;
        let s = stream::create()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(s as hipStream_t) };
        Ok(())
    })
}

/// `hipError_t hipStreamDestroy(hipStream_t stream)`: `hipErrorInvalidHandle` for NULL or
/// a stream not created in this process.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    call("hipStreamDestroy", || stream::destroy(stream as usize))
}

/// `hipError_t hipStreamSynchronize(hipStream_t stream)`: NULL is the null stream.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    call("hipStreamSynchronize", || {
        stream::synchronize(stream as usize)
    })
}
