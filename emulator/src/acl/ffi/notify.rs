//! Entry points of notifies (safe layer: `notify`): create / destroy, notify IPC (export
//! key, trustlist, import), record and wait-and-reset on streams, batch reset.

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::{notify, rules};

use super::{handle_out, non_null, not_null, read_key, read_pids, run, write_key};

// ---- optional: notify ------------------------------------------------------------------------

/// `aclrtCreateNotify`: a notify on the current device.
///
/// # Safety
///
/// A non-NULL `notify` is writable.
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    run("aclrtCreateNotify", || {
        let out = non_null(notify, "notify")?;
        let n = notify::create(flag)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(n)) };
        Ok(())
    })
}

/// `aclrtDestroyNotify`: this process's use of the notify ends.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    run("aclrtDestroyNotify", || {
        non_null(notify, "notify")?;
        notify::destroy(notify.addr())
    })
}

/// `aclrtNotifyGetExportKey`: the notify's key.
///
/// # Safety
///
/// A non-NULL `key` is writable for `len` bytes; `notify` is looked up.
pub unsafe extern "C" fn aclrtNotifyGetExportKey(
    notify: aclrtNotify,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    run("aclrtNotifyGetExportKey", || {
        non_null(notify, "notify")?;
        let out = non_null(key, "key")?;
        let k = notify::export(notify.addr(), len, flags)?;
        // SAFETY: writable for `len >= 65` bytes (checked by `export`) by the contract.
        unsafe { write_key(out.as_ptr(), &k) };
        Ok(())
    })
}

/// `aclrtNotifySetImportPid`: adds pids to the notify's trustlist.
///
/// # Safety
///
/// A non-NULL `pid` points to `num` readable values; `notify` is looked up.
pub unsafe extern "C" fn aclrtNotifySetImportPid(
    notify: aclrtNotify,
    pid: *mut i32,
    num: usize,
) -> aclError {
    run("aclrtNotifySetImportPid", || {
        non_null(notify, "notify")?;
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, num, rules::NOTIFY_SET_PID_ARGS) }?;
        notify::set_pids(notify.addr(), &pids)
    })
}

/// `aclrtNotifyImportByKey`: opens a notify by key.
///
/// # Safety
///
/// A non-NULL `notify` is writable; a non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtNotifyImportByKey(
    notify: *mut aclrtNotify,
    key: *const c_char,
    flags: u64,
) -> aclError {
    run("aclrtNotifyImportByKey", || {
        let out = non_null(notify, "notify")?;
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        let n = notify::import(&key, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(n)) };
        Ok(())
    })
}

/// `aclrtRecordNotify`: enqueues the record of the notify on the stream.
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    run("aclrtRecordNotify", || {
        non_null(notify, "notify")?;
        notify::record(notify.addr(), stream.addr())
    })
}

/// `aclrtWaitAndResetNotify`: enqueues on the stream a wait until the notify is set, which
/// then resets it; the call returns at once and the wait blocks only the stream. `timeout`
/// in seconds, 0 waits forever; an expired wait fails the stream (107019 from the next
/// `aclrtSynchronizeStream`).
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    run("aclrtWaitAndResetNotify", || {
        non_null(notify, "notify")?;
        notify::wait_and_reset(notify.addr(), stream.addr(), timeout)
    })
}

/// `aclrtNotifyBatchReset`: clears `num` notifies at once (on the host, no stream).
///
/// # Safety
///
/// A non-NULL `notifies` points to `num` readable handles; each is looked up.
pub unsafe extern "C" fn aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) -> aclError {
    run("aclrtNotifyBatchReset", || {
        let first = non_null(notifies, "notifies")?;
        // SAFETY: `num` readable handles by the contract.
        let handles = unsafe { std::slice::from_raw_parts(first.as_ptr(), num) };
        notify::batch_reset(&handles.iter().map(|h| h.addr()).collect::<Vec<_>>())
    })
}
