//! Entry points of events (safe layer: `event`): create, destroy, record, wait, query,
//! elapsed time, a stream waiting on an event, and the IPC event handles.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use devipc_hip_sys::hipErrorInvalidHandle;

use crate::hip::errors::{Failure, call};
use crate::hip::event;

use super::non_null;

/// `hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags)`: IPC events
/// need `hipEventInterprocess | hipEventDisableTiming`.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipEventCreateWithFlags(
    event: *mut hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    call("hipEventCreateWithFlags", || {
        let out = non_null(event, "event")?;
        let e = event::create(flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}

/// `hipError_t hipEventCreate(hipEvent_t* event)`: `hipEventCreateWithFlags(event, 0)`.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipEventCreate(event: *mut hipEvent_t) -> hipError_t {
    call("hipEventCreate", || {
        let out = non_null(event, "event")?;
        let e = event::create(0)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}

/// `hipError_t hipEventDestroy(hipEvent_t event)`.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventDestroy(event: hipEvent_t) -> hipError_t {
    call("hipEventDestroy", || event::destroy(event as usize))
}

/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)`: the record
/// completes when the stream reaches it (at once on an idle stream).
///
/// # Safety
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t {
    call("hipEventRecord", || {
        event::record(event as usize, stream as usize)
    })
}

/// `hipError_t hipEventSynchronize(hipEvent_t event)`: waits for the latest record;
/// returns at once for an event never recorded.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventSynchronize(event: hipEvent_t) -> hipError_t {
    call("hipEventSynchronize", || event::synchronize(event as usize))
}

/// `hipError_t hipEventQuery(hipEvent_t event)`: `hipSuccess` when the latest record
/// completed (or none was made), `hipErrorNotReady` while it is pending.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventQuery(event: hipEvent_t) -> hipError_t {
    call("hipEventQuery", || event::query(event as usize))
}

/// `hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop)`: the
/// milliseconds between the completion of `start`'s and `stop`'s latest records. NULL
/// events are `hipErrorInvalidHandle`, a NULL `ms` `hipErrorInvalidValue`; see
/// `event::elapsed_time` for the rest.
///
/// # Safety
/// `ms` must be NULL or valid for writing one `float`.
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: hipEvent_t,
    stop: hipEvent_t,
) -> hipError_t {
    call("hipEventElapsedTime", || {
        if start.is_null() || stop.is_null() {
            return Err(Failure::new(hipErrorInvalidHandle, "NULL event"));
        }
        let out = non_null(ms, "ms")?;
        let t = event::elapsed_time(start as usize, stop as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(t) };
        Ok(())
    })
}

/// `hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int
/// flags)`: `flags` must be 0.
///
/// # Safety
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamWaitEvent(
    stream: hipStream_t,
    event: hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    call("hipStreamWaitEvent", || {
        event::stream_wait(stream as usize, event as usize, flags)
    })
}

/// `hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event)`:
/// `hipErrorInvalidConfiguration` for an event without `hipEventInterprocess`.
///
/// # Safety
/// `handle` must be NULL or valid for writing one `hipIpcEventHandle_t`.
pub unsafe extern "C" fn hipIpcGetEventHandle(
    handle: *mut hipIpcEventHandle_t,
    event: hipEvent_t,
) -> hipError_t {
    call("hipIpcGetEventHandle", || {
        let out = non_null(handle, "handle")?;
        if event.is_null() {
            return Err(Failure::invalid_value("event is NULL"));
        }
        let bytes = event::get_handle(event as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(hipIpcEventHandle_t::from_bytes(bytes)) };
        Ok(())
    })
}

/// `hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle)`: a
/// new event of this process on the exported event; `hipErrorInvalidContext` in the
/// exporting process.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipIpcOpenEventHandle(
    event: *mut hipEvent_t,
    handle: hipIpcEventHandle_t,
) -> hipError_t {
    call("hipIpcOpenEventHandle", || {
        let out = non_null(event, "event")?;
        let e = event::open(&handle.to_bytes())?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}
