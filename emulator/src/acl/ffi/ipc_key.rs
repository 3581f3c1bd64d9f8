//! Entry points of key-based IPC memory (safe layer: `ipc_key`): export key, trustlist,
//! import, close, and the bare tgid that trustlists name.

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::{device, ipc_key, rules};

use super::{address_out, non_null, not_null, read_key, read_pids, run, write_key};

// ---- optional: IPC keys ----------------------------------------------------------------------

/// `aclrtIpcMemGetExportKey`: exports `aclrtMalloc` memory under a new key.
///
/// # Safety
///
/// A non-NULL `key` is writable for `len` bytes; `devPtr` is looked up.
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    devPtr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    run("aclrtIpcMemGetExportKey", || {
        non_null(devPtr, "devPtr")?;
        let out = non_null(key, "key")?;
        let k = ipc_key::export(devPtr.addr(), size, len, flags)?;
        // SAFETY: writable for `len >= 65` bytes (checked by `export`) by the contract.
        unsafe { write_key(out.as_ptr(), &k) };
        Ok(())
    })
}

/// `aclrtIpcMemSetImportPid`: adds pids to a key's trustlist.
///
/// # Safety
///
/// A non-NULL `key` is a key string; a non-NULL `pid` points to `num` readable values.
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> aclError {
    run("aclrtIpcMemSetImportPid", || {
        not_null(key, "key")?;
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, num, rules::KEY_SET_PID_ARGS) }?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        ipc_key::set_pids(&key, &pids)
    })
}

/// `aclrtIpcMemImportByKey`: maps the memory of a key at a new address.
///
/// # Safety
///
/// A non-NULL `devPtr` is writable; a non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    devPtr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> aclError {
    run("aclrtIpcMemImportByKey", || {
        let out = non_null(devPtr, "devPtr")?;
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        let addr = ipc_key::import(&key, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(addr)) };
        Ok(())
    })
}

/// `aclrtIpcMemClose`: closes one import, or (in the exporter) destroys the key.
///
/// # Safety
///
/// A non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
    run("aclrtIpcMemClose", || {
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        ipc_key::close(&key)
    })
}

/// `aclrtDeviceGetBareTgid`: the process id trustlists expect (the pid).
///
/// # Safety
///
/// A non-NULL `pid` is writable.
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    run("aclrtDeviceGetBareTgid", || {
        let out = non_null(pid, "pid")?;
        let tgid = device::bare_tgid()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(tgid) };
        Ok(())
    })
}
