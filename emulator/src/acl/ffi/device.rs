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
use crate::acl::{device, init, process_state, visibility};

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

// ---- optional: device ids and identity (issue 16) ----------------------------------------

/// Writes `value` through a checked out-pointer.
fn put<T>(out: *mut T, name: &str, value: T) -> crate::acl::errors::AclResult<()> {
    let out = non_null(out, name)?;
    // SAFETY: non-NULL and writable by the contract of every caller below.
    unsafe { out.write(value) };
    Ok(())
}

/// `aclrtGetLogicDevIdByUserDevId`: the logical (container) id of user device
/// `userDevid` (`ASCEND_RT_VISIBLE_DEVICES` numbering).
///
/// # Safety
///
/// A non-NULL `logicDevId` is writable.
pub unsafe extern "C" fn aclrtGetLogicDevIdByUserDevId(
    userDevid: i32,
    logicDevId: *mut i32,
) -> aclError {
    run("aclrtGetLogicDevIdByUserDevId", || {
        non_null(logicDevId, "logicDevId")?;
        let view = visibility::view()?;
        let l = view
            .logical_of_user(userDevid)
            .ok_or_else(|| visibility::no_such("user", userDevid))?;
        put(logicDevId, "logicDevId", l as i32)
    })
}

/// `aclrtGetUserDevIdByLogicDevId`: the user id of logical device `logicDevId`; a logical
/// device `ASCEND_RT_VISIBLE_DEVICES` does not list has none.
///
/// # Safety
///
/// A non-NULL `userDevid` is writable.
pub unsafe extern "C" fn aclrtGetUserDevIdByLogicDevId(
    logicDevId: i32,
    userDevid: *mut i32,
) -> aclError {
    run("aclrtGetUserDevIdByLogicDevId", || {
        non_null(userDevid, "userDevid")?;
        let view = visibility::view()?;
        let u = view
            .user_of_logical(logicDevId)
            .ok_or_else(|| visibility::no_such("logical", logicDevId))?;
        put(userDevid, "userDevid", u as i32)
    })
}

/// `aclrtGetLogicDevIdByPhyDevId`: the logical id the container gives physical device
/// `phyDevId` (`DEVIPC_EMU_ASCEND_PHY_IDS`).
///
/// # Safety
///
/// A non-NULL `logicDevId` is writable.
pub unsafe extern "C" fn aclrtGetLogicDevIdByPhyDevId(
    phyDevId: i32,
    logicDevId: *mut i32,
) -> aclError {
    run("aclrtGetLogicDevIdByPhyDevId", || {
        non_null(logicDevId, "logicDevId")?;
        let view = visibility::view()?;
        let l = view
            .logical_of_physical(phyDevId)
            .ok_or_else(|| visibility::no_such("physical", phyDevId))?;
        put(logicDevId, "logicDevId", l as i32)
    })
}

/// `aclrtGetPhyDevIdByLogicDevId`: the physical id of the container's logical device
/// `logicDevId`.
///
/// # Safety
///
/// A non-NULL `phyDevId` is writable.
pub unsafe extern "C" fn aclrtGetPhyDevIdByLogicDevId(
    logicDevId: i32,
    phyDevId: *mut i32,
) -> aclError {
    run("aclrtGetPhyDevIdByLogicDevId", || {
        non_null(phyDevId, "phyDevId")?;
        let view = visibility::view()?;
        let p = view
            .physical_of_logical(logicDevId)
            .ok_or_else(|| visibility::no_such("logical", logicDevId))?;
        put(phyDevId, "phyDevId", p as i32)
    })
}

/// `aclrtDeviceGetUuid`: the 16-byte UUID of user device `deviceId`, the same for one
/// physical device in every process ([`crate::machine::ascend_uuid`]).
///
/// # Safety
///
/// A non-NULL `uuid` is writable.
pub unsafe extern "C" fn aclrtDeviceGetUuid(deviceId: i32, uuid: *mut aclrtUuid) -> aclError {
    run("aclrtDeviceGetUuid", || {
        non_null(uuid, "uuid")?;
        let view = visibility::view()?;
        let p = view
            .physical_of_user(deviceId)
            .ok_or_else(|| visibility::no_such("user", deviceId))?;
        let mut value = aclrtUuid::default();
        for (slot, b) in value.bytes.iter_mut().zip(crate::machine::ascend_uuid(p)) {
            *slot = b as c_char;
        }
        put(uuid, "uuid", value)
    })
}
