//! Entry points of the runtime (safe layer: `runtime`): `hipInit`, the version
//! queries, the device count, `hipDeviceGet` and `hipDeviceGetAttribute`, the calling
//! thread's device and context,
//! `hipDeviceSynchronize`, and `hipGetProcAddress` (the lookup of these entry points by
//! name).
#![allow(unsafe_code, non_snake_case)]

use std::ffi::CStr;

use devipc_hip_sys::types::*;
use devipc_hip_sys::{
    HIP_GET_PROC_ADDRESS_SUCCESS, HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, hipErrorNotSupported,
};

use crate::hip::errors::{Failure, call};
use crate::hip::{runtime, versions};

use super::{non_null, proc_address};

/// `hipError_t hipInit(unsigned int flags)`: initialises the emulator (optional, as in
/// HIP). `flags != 0` is `hipErrorInvalidValue`; no device is `hipErrorInvalidDevice`.
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipInit(flags: c_uint) -> hipError_t {
    call("hipInit", || runtime::init(flags))
}

/// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)`: writes
/// `DEVIPC_EMU_HIP_VERSION` encoded as `HIP_VERSION` (default 60200000).
///
/// # Safety
/// `runtime_version` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> hipError_t {
    call("hipRuntimeGetVersion", || {
        let out = non_null(runtime_version, "runtimeVersion")?;
        let v = runtime::version()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// `hipError_t hipDriverGetVersion(int* driverVersion)`: the same number as
/// `hipRuntimeGetVersion`.
///
/// # Safety
/// `driver_version` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDriverGetVersion(driver_version: *mut c_int) -> hipError_t {
    call("hipDriverGetVersion", || {
        let out = non_null(driver_version, "driverVersion")?;
        let v = runtime::version()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// `hipError_t hipGetDeviceCount(int* count)`: writes `DEVIPC_EMU_DEVICES`; with no
/// device writes 0 and returns `hipErrorNoDevice`.
///
/// # Safety
/// `count` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    call("hipGetDeviceCount", || {
        let out = non_null(count, "count")?;
        let n = runtime::device_count()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(n) };
        if n == 0 {
            return Err(runtime::no_device());
        }
        Ok(())
    })
}

/// `hipError_t hipSetDevice(int deviceId)`: the calling thread's device;
/// `hipErrorInvalidDevice` outside `0..DEVIPC_EMU_DEVICES`.
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipSetDevice(device_id: c_int) -> hipError_t {
    call("hipSetDevice", || runtime::set_device(device_id))
}

/// `hipError_t hipGetDevice(int* deviceId)`: the calling thread's device (0 until
/// `hipSetDevice`).
///
/// # Safety
/// `device_id` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipGetDevice(device_id: *mut c_int) -> hipError_t {
    call("hipGetDevice", || {
        let out = non_null(device_id, "deviceId")?;
        let d = runtime::get_device()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `hipError_t hipDeviceGet(hipDevice_t* device, int ordinal)`: writes the ordinal (a HIP
/// device handle is its ordinal); NULL `device` is `hipErrorInvalidValue`, an ordinal this
/// process does not see `hipErrorInvalidDevice` (CLR `ihipDeviceGet`).
///
/// # Safety
/// `device` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDeviceGet(device: *mut hipDevice_t, ordinal: c_int) -> hipError_t {
    call("hipDeviceGet", || {
        let out = non_null(device, "device")?;
        let d = runtime::device_get(ordinal)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId)`:
/// `hipDeviceAttributeVirtualMemoryManagementSupported` only (1 from ROCm 5.3); NULL `pi`
/// is `hipErrorInvalidValue`, a device this process does not see `hipErrorInvalidDevice`,
/// another attribute `hipErrorInvalidValue`.
///
/// # Safety
/// `pi` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDeviceGetAttribute(
    pi: *mut c_int,
    attr: hipDeviceAttribute_t,
    device_id: c_int,
) -> hipError_t {
    call("hipDeviceGetAttribute", || {
        let out = non_null(pi, "pi")?;
        let v = runtime::device_attribute(attr, device_id)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// `hipError_t hipDeviceSynchronize(void)`: waits for this process's streams of the
/// current device (only held streams ever have pending work).
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipDeviceSynchronize() -> hipError_t {
    call("hipDeviceSynchronize", runtime::device_synchronize)
}

/// `hipError_t hipCtxCreate(hipCtx_t* ctx, unsigned int flags, hipDevice_t device)`: the
/// device's primary context, made the calling thread's current device; a device out of
/// range is `hipErrorInvalidValue` (CLR).
///
/// # Safety
/// `ctx` must be NULL or valid for writing one `hipCtx_t`.
pub unsafe extern "C" fn hipCtxCreate(
    ctx: *mut hipCtx_t,
    flags: c_uint,
    device: hipDevice_t,
) -> hipError_t {
    call("hipCtxCreate", || {
        let out = non_null(ctx, "ctx")?;
        let c = runtime::ctx_create(flags, device)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(c as hipCtx_t) };
        Ok(())
    })
}

/// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion, uint64_t
/// flags, hipDriverProcAddressQueryResult* symbolStatus)` (ROCm 6.2+): the emulator's
/// function of that name, with `symbolStatus = HIP_GET_PROC_ADDRESS_SUCCESS`. A name the
/// emulator does not implement writes NULL and `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND` and
/// returns `hipErrorInvalidValue`, as CLR does for a missing symbol; so do a NULL or empty
/// `symbol` and a NULL `pfn`. `hipVersion` (CLR uses it only to pick the `R0600` device
/// property functions, which the emulator lacks) and `flags` (ignored by 6.2) are not
/// checked. Below ROCm 6.2, where the function does not exist, `hipErrorNotSupported`
/// (the in-process table has no such field there: see [`hip_api`](super::hip_api)).
///
/// # Safety
/// `symbol` must be NULL or a NUL-terminated string; `pfn` and `symbol_status` must each
/// be NULL or valid for writing one value.
pub unsafe extern "C" fn hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    symbol_status: *mut hipDriverProcAddressQueryResult,
) -> hipError_t {
    let _ = (hip_version, flags);
    call("hipGetProcAddress", || {
        let version = runtime::config()?.hip_version;
        if !versions::has_get_proc_address(version) {
            return Err(Failure::new(
                hipErrorNotSupported,
                format!("hipGetProcAddress first shipped in ROCm 6.2; emulating HIP {version}"),
            ));
        }
        let out = non_null(pfn, "pfn")?;
        if symbol.is_null() {
            return Err(Failure::invalid_value("symbol is NULL"));
        }
        // SAFETY: non-null (checked) and NUL-terminated (the caller's contract).
        let name = unsafe { CStr::from_ptr(symbol) }
            .to_string_lossy()
            .into_owned();
        if name.is_empty() {
            return Err(Failure::invalid_value("symbol is empty"));
        }
        let found = proc_address(&name);
        let status = if found.is_some() {
            HIP_GET_PROC_ADDRESS_SUCCESS
        } else {
            HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
        };
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(found.unwrap_or(0) as *mut c_void) };
        if !symbol_status.is_null() {
            // SAFETY: non-null and valid for writes (the caller's contract).
            unsafe { symbol_status.write(status) };
        }
        match found {
            Some(_) => Ok(()),
            None => Err(Failure::invalid_value(format!(
                "{name}: the emulator implements no HIP function of that name"
            ))),
        }
    })
}
