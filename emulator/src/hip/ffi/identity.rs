//! Entry points of the devices' physical identity (safe layer: `identity`):
//! `hipDeviceGetPCIBusId`, `hipDeviceGetByPCIBusId`, `hipDeviceGetUuid` (issue 16).
#![allow(unsafe_code, non_snake_case)]

use std::ffi::CStr;

use devipc_hip_sys::types::*;

use crate::hip::errors::{Failure, call};
use crate::hip::identity;
use crate::hip::rules::{self, DEVICE_PCI_BUS_ID_LEN_CHECKED};

use super::non_null;

/// `hipError_t hipDeviceGetPCIBusId(char* pciBusId, int len, int device)`: the bus id of
/// this process's device `device`, `snprintf`ed into `len` bytes (`"0000:12:00.0"`); a
/// `len` of 12 or less writes what fits and returns `hipErrorInvalidValue`, as CLR.
///
/// # Safety
/// `pci_bus_id` must be NULL or valid for writing `len` bytes.
pub unsafe extern "C" fn hipDeviceGetPCIBusId(
    pci_bus_id: *mut c_char,
    len: c_int,
    device: c_int,
) -> hipError_t {
    call("hipDeviceGetPCIBusId", || {
        let text = identity::pci_bus_id(device)?;
        let out = non_null(pci_bus_id, "pciBusId")?;
        // snprintf: at most len - 1 characters and a NUL; nothing for len <= 0.
        if let Ok(cap) = usize::try_from(len) {
            if cap > 0 {
                let n = text.len().min(cap - 1);
                // SAFETY: `out` is non-null (checked) and valid for `len` bytes (the
                // caller's contract); `n + 1 <= len` bytes are written, from a local
                // string that cannot overlap the caller's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), out, n);
                    out.add(n).write(0);
                }
            }
        }
        if len <= 12 && rules::enforced(DEVICE_PCI_BUS_ID_LEN_CHECKED) {
            return Err(Failure::rule(
                devipc_hip_sys::hipErrorInvalidValue,
                DEVICE_PCI_BUS_ID_LEN_CHECKED,
                format!("len {len}: the bus id {text} and its NUL need 13 bytes"),
            ));
        }
        Ok(())
    })
}

/// `hipError_t hipDeviceGetByPCIBusId(int* device, const char* pciBusId)`: this process's
/// ordinal of the device at that PCI bus id; a device its masks hide is
/// `hipErrorInvalidValue`, as an unknown one.
///
/// # Safety
/// `device` must be NULL or valid for writing one `int`; `pci_bus_id` NULL or a
/// NUL-terminated string.
pub unsafe extern "C" fn hipDeviceGetByPCIBusId(
    device: *mut c_int,
    pci_bus_id: *const c_char,
) -> hipError_t {
    call("hipDeviceGetByPCIBusId", || {
        let out = non_null(device, "device")?;
        if pci_bus_id.is_null() {
            return Err(Failure::invalid_value("pciBusId is NULL"));
        }
        // SAFETY: non-null (checked) and NUL-terminated (the caller's contract).
        let text = unsafe { CStr::from_ptr(pci_bus_id) };
        let d = identity::by_pci_bus_id(text.to_bytes())?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device)`: the 16 bytes of
/// this process's device `device` (the same for one physical device in every process);
/// the ordinal is checked before the pointer, as CLR does.
///
/// # Safety
/// `uuid` must be NULL or valid for writing one `hipUUID`.
pub unsafe extern "C" fn hipDeviceGetUuid(uuid: *mut hipUUID, device: hipDevice_t) -> hipError_t {
    call("hipDeviceGetUuid", || {
        let bytes = identity::uuid(device)?;
        let out = non_null(uuid, "uuid")?;
        let mut value = hipUUID::default();
        for (slot, b) in value.bytes.iter_mut().zip(bytes) {
            *slot = b as c_char;
        }
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(value) };
        Ok(())
    })
}
