//! The calls of the `ascend-notify` mechanism ([`notify`](crate::notify)): IPC Notify, and
//! the events the wait polls to keep its deadline on the host. Part of the `result` layer
//! (see [`result`](crate::result) for the checked-call helpers `acl!`/`acl_opt!`, the
//! key buffers and the conventions every function here follows); the parent re-exports
//! each function, so callers write `result::create_notify` like any other call.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, ACL_ERROR_RT_WAIT_TIMEOUT,
};
use devipc_ascend_sys::consts::{ACL_IPC_KEY_LEN, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT};
use devipc_ascend_sys::types::{
    ACL_EVENT_RECORDED_STATUS_NOT_READY, aclError, aclrtEvent, aclrtEventRecordedStatus,
    aclrtNotify, aclrtStream,
};
use devipc_core::Result;

use super::{Key, check, check_written_key, key_ptr};

/// `aclrtCreateNotify` (optional) on the current device with `flag`: the notify, as an
/// address.
pub(crate) fn create_notify(api: &AclApi, flag: u64) -> Result<usize> {
    let mut notify: aclrtNotify = std::ptr::null_mut();
    // SAFETY: `notify` is a valid out-pointer; the flag is a plain value the runtime
    // validates.
    unsafe { acl_opt!(api, aclrtCreateNotify(&mut notify, flag)) }?;
    Ok(notify as usize)
}

/// `aclrtDestroyNotify` (optional).
///
/// # Safety
/// `notify` is a live notify (created or imported here), not used after this call.
pub(crate) unsafe fn destroy_notify(api: &AclApi, notify: usize) -> Result<()> {
    // SAFETY: the caller guarantees a live notify destroyed once.
    unsafe { acl_opt!(api, aclrtDestroyNotify(notify as aclrtNotify)) }
}

/// `aclrtNotifyGetExportKey` (optional): the key of a notify, checked to hold a NUL.
///
/// # Safety
/// `notify` is a live notify this process created.
pub(crate) unsafe fn notify_get_export_key(api: &AclApi, notify: usize, flags: u64) -> Result<Key> {
    let mut key: Key = [0; ACL_IPC_KEY_LEN];
    // SAFETY: the caller guarantees the notify; `key` is a writable buffer of
    // ACL_IPC_KEY_LEN bytes, the `len` passed.
    unsafe {
        acl_opt!(
            api,
            aclrtNotifyGetExportKey(
                notify as aclrtNotify,
                key.as_mut_ptr().cast(),
                ACL_IPC_KEY_LEN,
                flags
            )
        )
    }?;
    check_written_key(&key, "aclrtNotifyGetExportKey")?;
    Ok(key)
}

/// `aclrtNotifySetImportPid` (optional): the trustlist of an exported notify.
///
/// # Safety
/// `notify` is a live notify this process created.
pub(crate) unsafe fn notify_set_import_pid(
    api: &AclApi,
    notify: usize,
    pids: &mut [i32],
) -> Result<()> {
    // SAFETY: the caller guarantees the notify; `pids` is a live buffer of `pids.len()`
    // int32 values.
    unsafe {
        acl_opt!(
            api,
            aclrtNotifySetImportPid(notify as aclrtNotify, pids.as_mut_ptr(), pids.len())
        )
    }
}

/// `aclrtNotifyImportByKey` (optional) on the current device: the notify, as an address.
pub(crate) fn notify_import_by_key(api: &AclApi, key: &Key, flags: u64) -> Result<usize> {
    let (code, notify) = notify_import_status(api, key, flags)?;
    check(api, "aclrtNotifyImportByKey", code)?;
    Ok(notify)
}

/// [`notify_import_by_key`], except that `Ok(None)` is returned when `flags` is not the
/// default and the runtime refused the import with `ACL_ERROR_INVALID_PARAM`: some
/// runtimes' ACL wrapper rejects the documented peer-access flag (see
/// [`notify`](crate::notify)), and the caller retries another way. With the default
/// flags that code is an error like any other.
pub(crate) fn try_notify_import_by_key(
    api: &AclApi,
    key: &Key,
    flags: u64,
) -> Result<Option<usize>> {
    let (code, notify) = notify_import_status(api, key, flags)?;
    if code == ACL_ERROR_INVALID_PARAM && flags != ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT {
        return Ok(None);
    }
    check(api, "aclrtNotifyImportByKey", code)?;
    Ok(Some(notify))
}

/// The raw status of `aclrtNotifyImportByKey` and the notify it wrote, for the two
/// functions above; an error only when the runtime lacks the function or the key has no
/// NUL.
fn notify_import_status(api: &AclApi, key: &Key, flags: u64) -> Result<(aclError, usize)> {
    let import = optional!(api, aclrtNotifyImportByKey)?;
    let key = key_ptr(key)?;
    let mut notify: aclrtNotify = std::ptr::null_mut();
    // SAFETY: `notify` is a valid out-pointer; `key` is a NUL-terminated buffer (checked
    // above); flags are a plain value the runtime validates.
    let code = unsafe { import(&mut notify, key, flags) };
    Ok((code, notify as usize))
}

/// `aclrtRecordNotify` (optional): queues the record of `notify` on `stream`.
///
/// # Safety
/// `notify` is a live notify; `stream` is null (the default stream) or a live stream of
/// the current device, as [`RawStream`](devipc_core::RawStream) promises.
pub(crate) unsafe fn record_notify(api: &AclApi, notify: usize, stream: usize) -> Result<()> {
    // SAFETY: the caller guarantees the notify and the stream.
    unsafe {
        acl_opt!(
            api,
            aclrtRecordNotify(notify as aclrtNotify, stream as aclrtStream)
        )
    }
}

/// `aclrtNotifyBatchReset` (optional) of one notify: clears it now, on the host.
///
/// # Safety
/// `notify` is a live notify.
pub(crate) unsafe fn reset_notify(api: &AclApi, notify: usize) -> Result<()> {
    let mut notifies = [notify as aclrtNotify];
    // SAFETY: one live notify in a one-element array, as the call reads `num` handles.
    unsafe { acl_opt!(api, aclrtNotifyBatchReset(notifies.as_mut_ptr(), 1)) }
}

/// `aclrtWaitAndResetNotify` (optional) with `timeout` (seconds; 0 waits forever; see
/// [`notify`](crate::notify)): `Ok(true)` when the wait was queued (or, on a runtime that
/// waits in the call, completed), `Ok(false)` when it timed out
/// (`ACL_ERROR_RT_WAIT_TIMEOUT`, 107019).
///
/// # Safety
/// `notify` is a live notify; `stream` is null (the default stream) or a live stream of
/// the notify's home device, which is current.
pub(crate) unsafe fn wait_and_reset_notify(
    api: &AclApi,
    notify: usize,
    stream: usize,
    timeout: u32,
) -> Result<bool> {
    let wait = optional!(api, aclrtWaitAndResetNotify)?;
    // SAFETY: the caller guarantees the notify and the stream.
    let code = unsafe { wait(notify as aclrtNotify, stream as aclrtStream, timeout) };
    if code == ACL_ERROR_RT_WAIT_TIMEOUT {
        return Ok(false);
    }
    check(api, "aclrtWaitAndResetNotify", code)?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------
// Events (the notify wait's deadline)
// ---------------------------------------------------------------------------------------

/// `aclrtCreateEventExWithFlag` (optional) on the current device: the event, as an
/// address.
pub(crate) fn create_event_ex_with_flag(api: &AclApi, flag: u32) -> Result<usize> {
    let mut event: aclrtEvent = std::ptr::null_mut();
    // SAFETY: `event` is a valid out-pointer; the flag is a plain value the runtime
    // validates.
    unsafe { acl_opt!(api, aclrtCreateEventExWithFlag(&mut event, flag)) }?;
    Ok(event as usize)
}

/// `aclrtDestroyEvent` (optional).
///
/// # Safety
/// `event` is a live event created here, not used after this call.
pub(crate) unsafe fn destroy_event(api: &AclApi, event: usize) -> Result<()> {
    // SAFETY: the caller guarantees a live event destroyed once.
    unsafe { acl_opt!(api, aclrtDestroyEvent(event as aclrtEvent)) }
}

/// `aclrtRecordEvent` (optional): queues a record of `event` on `stream`.
///
/// # Safety
/// `event` is a live event and `stream` a live stream, both of the current device.
pub(crate) unsafe fn record_event(api: &AclApi, event: usize, stream: usize) -> Result<()> {
    // SAFETY: the caller guarantees the event and the stream.
    unsafe {
        acl_opt!(
            api,
            aclrtRecordEvent(event as aclrtEvent, stream as aclrtStream)
        )
    }
}

/// `aclrtQueryEventStatus` (optional): whether the event's latest record completed.
///
/// # Safety
/// `event` is a live event.
pub(crate) unsafe fn query_event_status(
    api: &AclApi,
    event: usize,
) -> Result<aclrtEventRecordedStatus> {
    let mut status: aclrtEventRecordedStatus = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    // SAFETY: the caller guarantees the event; `status` is a valid out-pointer.
    unsafe { acl_opt!(api, aclrtQueryEventStatus(event as aclrtEvent, &mut status)) }?;
    Ok(status)
}

/// `aclrtSynchronizeEventWithTimeout` (optional): blocks until the event's latest record
/// completed (`true`) or `timeout_ms` passed (`false`, `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`);
/// `timeout_ms` is -1 (forever) or positive.
///
/// # Safety
/// `event` is a live event.
pub(crate) unsafe fn synchronize_event_with_timeout(
    api: &AclApi,
    event: usize,
    timeout_ms: i32,
) -> Result<bool> {
    let sync = optional!(api, aclrtSynchronizeEventWithTimeout)?;
    // SAFETY: the caller guarantees the event.
    let code = unsafe { sync(event as aclrtEvent, timeout_ms) };
    if code == ACL_ERROR_RT_EVENT_SYNC_TIMEOUT {
        return Ok(false);
    }
    check(api, "aclrtSynchronizeEventWithTimeout", code)?;
    Ok(true)
}
