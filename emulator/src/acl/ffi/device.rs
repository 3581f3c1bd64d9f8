//! Entry points of initialisation, the thread's last error, devices, peer access,
//! versions, device synchronisation, memory info and forced device reset (safe layer:
//! `init`, `errors`, `device`).

use std::ffi::CStr;
use std::panic::catch_unwind;
use std::ptr;

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::errors;
use crate::acl::{device, init, process_state};

use super::{non_null, run};

// ---- init, errors, devices ---------------------------------------------------------------

/// `aclInit`: initialises ACL for this process (reference counted). `configPath` may be
/// NULL; otherwise it must name a readable file.
///
/// # Safety
///
/// A non-NULL `configPath` is a NUL-terminated string.
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    run("aclInit", || {
        let path = if configPath.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated by the contract.
            Some(
                unsafe { CStr::from_ptr(configPath) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        init::init(path.as_deref())
    })
}

/// `aclFinalize`: undoes one `aclInit`.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclFinalize() -> aclError {
    run("aclFinalize", init::finalize)
}

/// `aclGetRecentErrMsg`: gets and clears the calling thread's last error message (`""`
/// when there is none). The string stays valid until the next call on this thread.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    catch_unwind(errors::take_recent_message).unwrap_or(ptr::null())
}

/// `aclrtSetDevice`: makes `deviceId` the calling thread's current device.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    run("aclrtSetDevice", || device::set_device(deviceId))
}

/// `aclrtResetDevice`: releases one use of `deviceId` by this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    run("aclrtResetDevice", || device::reset_device(deviceId))
}

/// `aclrtGetDevice`: the calling thread's current device.
///
/// # Safety
///
/// A non-NULL `deviceId` is writable.
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    run("aclrtGetDevice", || {
        let out = non_null(deviceId, "deviceId")?;
        let d = device::get_device()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `aclrtGetDeviceCount`: `DEVIPC_EMU_DEVICES`.
///
/// # Safety
///
/// A non-NULL `count` is writable.
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    run("aclrtGetDeviceCount", || {
        let out = non_null(count, "count")?;
        let n = process_state::device_count()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(n) };
        Ok(())
    })
}

// ---- peers -----------------------------------------------------------------------------------

/// `aclrtDeviceCanAccessPeer`: 1 for two distinct valid devices, 0 for a device and
/// itself.
///
/// # Safety
///
/// A non-NULL `canAccessPeer` is writable.
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    canAccessPeer: *mut i32,
    deviceId: i32,
    peerDeviceId: i32,
) -> aclError {
    run("aclrtDeviceCanAccessPeer", || {
        let out = non_null(canAccessPeer, "canAccessPeer")?;
        let can = device::can_access_peer(deviceId, peerDeviceId)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(can) };
        Ok(())
    })
}

/// `aclrtDeviceEnablePeerAccess`: current device -> `peerDeviceId`, for this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) -> aclError {
    run("aclrtDeviceEnablePeerAccess", || {
        device::enable_peer_access(peerDeviceId, flags)
    })
}

// ---- optional: versions ----------------------------------------------------------------------

/// `aclrtGetVersion`: the ACL API version (1.16.0, CANN 8.5.0's).
///
/// # Safety
///
/// Non-NULL arguments are writable.
pub unsafe extern "C" fn aclrtGetVersion(
    majorVersion: *mut i32,
    minorVersion: *mut i32,
    patchVersion: *mut i32,
) -> aclError {
    run("aclrtGetVersion", || {
        let major = non_null(majorVersion, "majorVersion")?;
        let minor = non_null(minorVersion, "minorVersion")?;
        let patch = non_null(patchVersion, "patchVersion")?;
        let (a, b, c) = init::ACL_VERSION;
        // SAFETY: all three non-NULL and writable by the contract.
        unsafe {
            major.write(a);
            minor.write(b);
            patch.write(c);
        }
        Ok(())
    })
}

/// `aclsysGetVersionStr`: the version string of a package into a buffer of
/// `ACL_PKG_VERSION_MAX_SIZE` bytes.
///
/// # Safety
///
/// A non-NULL `pkgName` is a NUL-terminated string; a non-NULL `versionStr` is writable
/// for `ACL_PKG_VERSION_MAX_SIZE` bytes.
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkgName: *mut c_char,
    versionStr: *mut c_char,
) -> aclError {
    run("aclsysGetVersionStr", || {
        non_null(pkgName, "pkgName")?;
        let out = non_null(versionStr, "versionStr")?;
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let name = unsafe { CStr::from_ptr(pkgName) }
            .to_string_lossy()
            .into_owned();
        let text = init::version_str(&name)?;
        // SAFETY: the buffer holds ACL_PKG_VERSION_MAX_SIZE bytes by the contract, and
        // `text` (NUL included) is no longer (see `init::version_str`).
        unsafe { ptr::copy_nonoverlapping(text.as_ptr(), out.as_ptr().cast::<u8>(), text.len()) };
        Ok(())
    })
}

// ---- optional: device synchronisation, memory info, forced reset ------------------------

/// `aclrtSynchronizeDevice`: waits for the tasks of this process's streams on the current
/// device; returns the first failure among them. Needs a current device.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclrtSynchronizeDevice() -> aclError {
    run("aclrtSynchronizeDevice", device::synchronize_device)
}

/// `aclrtSynchronizeDeviceWithTimeout`: as `aclrtSynchronizeDevice`, `timeout` in ms (-1:
/// forever; below -1 is `ACL_ERROR_RT_PARAM_INVALID`; tasks still running at the timeout:
/// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`).
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
    run("aclrtSynchronizeDeviceWithTimeout", || {
        device::synchronize_device_with_timeout(timeout)
    })
}

/// `aclrtGetMemInfo`: free and total bytes of memory kind `attr` on the current device.
///
/// # Safety
///
/// Non-NULL `free` and `total` are writable.
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: aclrtMemAttr,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    run("aclrtGetMemInfo", || {
        let free_out = non_null(free, "free")?;
        let total_out = non_null(total, "total")?;
        let (f, t) = device::mem_info(attr)?;
        // SAFETY: both non-NULL and writable by the contract.
        unsafe {
            free_out.write(f);
            total_out.write(t);
        }
        Ok(())
    })
}

/// `aclrtResetDeviceForce`: releases every use of `deviceId` by this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    run("aclrtResetDeviceForce", || {
        device::reset_device_force(deviceId)
    })
}
