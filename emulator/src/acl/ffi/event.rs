//! Entry points of events and IPC events (safe layer: `event`): create / destroy, record,
//! stream wait, synchronise, query, IPC handle export and open (`aclrtCreateEventWithFlag`
//! beside `aclrtCreateEventExWithFlag`).

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use std::time::Duration;

use crate::acl::errors::check;
use crate::acl::{event, rules};

use super::{handle_out, non_null, run};

// ---- optional: events and IPC events -----------------------------------------------------

/// `aclrtCreateEventExWithFlag`: an event on the current device (`ACL_EVENT_IPC` alone for
/// an event other processes open).
///
/// # Safety
///
/// A non-NULL `event` is writable.
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    run("aclrtCreateEventExWithFlag", || {
        let out = non_null(event, "event")?;
        let e = event::create(flag)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(e)) };
        Ok(())
    })
}

/// `aclrtCreateEventWithFlag`: a local event on the current device (never `ACL_EVENT_IPC`;
/// IPC events come from `aclrtCreateEventExWithFlag`).
///
/// # Safety
///
/// A non-NULL `event` is writable.
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    run("aclrtCreateEventWithFlag", || {
        let out = non_null(event, "event")?;
        let e = event::create_with_flag(flag)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(e)) };
        Ok(())
    })
}

/// `aclrtDestroyEvent`: this process's use of the event ends.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyEvent(event: aclrtEvent) -> aclError {
    run("aclrtDestroyEvent", || {
        non_null(event, "event")?;
        event::destroy(event.addr())
    })
}

/// `aclrtRecordEvent`: enqueues a record of the event on `stream`; it completes when the
/// stream reaches it.
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    run("aclrtRecordEvent", || {
        non_null(event, "event")?;
        event::record(event.addr(), stream.addr())
    })
}

/// `aclrtStreamWaitEvent`: `stream` waits for the event's latest record (a stream task;
/// the call returns at once).
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError {
    run("aclrtStreamWaitEvent", || {
        non_null(event, "event")?;
        event::stream_wait(stream.addr(), event.addr())
    })
}

/// `aclrtSynchronizeEvent`: the host waits for the event's latest record.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError {
    run("aclrtSynchronizeEvent", || {
        non_null(event, "event")?;
        event::synchronize(event.addr(), None)
    })
}

/// `aclrtSynchronizeEventWithTimeout`: as `aclrtSynchronizeEvent`, for at most `timeout`
/// ms (-1: forever; 0 and values below -1 are refused, as the runtime's
/// `ApiErrorDecorator::EventSynchronize` does).
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(
    event: aclrtEvent,
    timeout: i32,
) -> aclError {
    run("aclrtSynchronizeEventWithTimeout", || {
        check(
            timeout == 0 || timeout < -1,
            rules::EVENT_SYNC_TIMEOUT_VALID,
            || format!("timeout {timeout}: -1 (forever) or a positive number of ms"),
        )?;
        non_null(event, "event")?;
        let limit = u64::try_from(timeout).ok().map(Duration::from_millis);
        event::synchronize(event.addr(), limit)
    })
}

/// `aclrtQueryEventStatus`: whether the event's latest record completed.
///
/// # Safety
///
/// A non-NULL `status` is writable; `event` is looked up.
pub unsafe extern "C" fn aclrtQueryEventStatus(
    event: aclrtEvent,
    status: *mut aclrtEventRecordedStatus,
) -> aclError {
    run("aclrtQueryEventStatus", || {
        non_null(event, "event")?;
        let out = non_null(status, "status")?;
        let s = event::query(event.addr())?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(s) };
        Ok(())
    })
}

/// `aclrtIpcGetEventHandle`: the 64-byte handle of an `ACL_EVENT_IPC` event.
///
/// # Safety
///
/// A non-NULL `handle` is writable; `event` is looked up.
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: aclrtEvent,
    handle: *mut aclrtIpcEventHandle,
) -> aclError {
    run("aclrtIpcGetEventHandle", || {
        non_null(event, "event")?;
        let out = non_null(handle, "handle")?;
        let bytes = event::get_handle(event.addr())?;
        let mut h = aclrtIpcEventHandle::default();
        for (slot, b) in h.reserved.iter_mut().zip(bytes) {
            *slot = b as c_char;
        }
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(h) };
        Ok(())
    })
}

/// `aclrtIpcOpenEventHandle`: opens another process's event from its handle.
///
/// # Safety
///
/// A non-NULL `event` is writable; `handle` is a value, checked before use.
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: aclrtIpcEventHandle,
    event: *mut aclrtEvent,
) -> aclError {
    run("aclrtIpcOpenEventHandle", || {
        let out = non_null(event, "event")?;
        let mut bytes = [0u8; crate::handle::HANDLE64_LEN];
        for (b, c) in bytes.iter_mut().zip(handle.reserved) {
            *b = c as u8;
        }
        let e = event::open(&bytes)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(e)) };
        Ok(())
    })
}
