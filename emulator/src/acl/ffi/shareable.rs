//! Entry points of VMM shareable handles (safe layer: `shareable`): export, trustlist,
//! import.

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::{rules, shareable};

use super::{handle_out, non_null, read_pids, run};

// ---- optional: VMM shareable handles ---------------------------------------------------------

/// `aclrtMemExportToShareableHandle`: exports a physical handle (once).
///
/// # Safety
///
/// A non-NULL `shareableHandle` is writable; `handle` is looked up.
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: aclrtDrvMemHandle,
    handleType: aclrtMemHandleType,
    flags: u64,
    shareableHandle: *mut u64,
) -> aclError {
    run("aclrtMemExportToShareableHandle", || {
        non_null(handle, "handle")?;
        let out = non_null(shareableHandle, "shareableHandle")?;
        let sh = shareable::export(handle.addr(), handleType, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(sh) };
        Ok(())
    })
}

/// `aclrtMemSetPidToShareableHandle`: adds pids to the trustlist.
///
/// # Safety
///
/// A non-NULL `pid` points to `pidNum` readable values.
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareableHandle: u64,
    pid: *mut i32,
    pidNum: usize,
) -> aclError {
    run("aclrtMemSetPidToShareableHandle", || {
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, pidNum, rules::VMM_SET_PID_ARGS) }?;
        shareable::set_pids(shareableHandle, &pids)
    })
}

/// `aclrtMemImportFromShareableHandle`: imports a shareable handle on `deviceId`.
///
/// # Safety
///
/// A non-NULL `handle` is writable.
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareableHandle: u64,
    deviceId: i32,
    handle: *mut aclrtDrvMemHandle,
) -> aclError {
    run("aclrtMemImportFromShareableHandle", || {
        let out = non_null(handle, "handle")?;
        let h = shareable::import(shareableHandle, deviceId)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(h)) };
        Ok(())
    })
}
