//! The HIP virtual-memory entry points (`hipMemCreate` ... `hipPointerGetAttribute`): the
//! pointer work at the boundary, the logic in [`vmm`] (issue 15).
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::{Failure, HipResult, call};
use crate::hip::{memory, runtime, versions, vmm};

use super::non_null;

/// Reads the caller's `hipMemAllocationProp` in the emulated version's layout.
///
/// # Safety
/// `prop` is non-NULL and valid for reading 32 bytes.
unsafe fn read_prop(prop: *const hipMemAllocationProp) -> HipResult<vmm::Prop> {
    let version = runtime::config()?.hip_version;
    Ok(if versions::prop_layout_current(version) {
        // SAFETY: non-null, readable (the caller's contract); any bytes are valid for the
        // integer fields, and the pointer field is only copied.
        vmm::Prop::from_current(&unsafe { prop.read_unaligned() })
    } else {
        // SAFETY: as above; the ROCm 5.2 layout has the same size (32 bytes).
        let old = unsafe { prop.cast::<hipMemAllocationProp_R0502>().read_unaligned() };
        vmm::Prop::from_current(&old.to_current())
    })
}

/// `hipError_t hipMemGetAllocationGranularity(size_t* granularity, const
/// hipMemAllocationProp* prop, hipMemAllocationGranularity_flags option)`: 2 MiB for a
/// Pinned, Device-located `prop` (read in the emulated version's layout).
///
/// # Safety
/// `granularity` NULL or writable; `prop` NULL or readable (32 bytes).
pub unsafe extern "C" fn hipMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const hipMemAllocationProp,
    option: hipMemAllocationGranularity_flags,
) -> hipError_t {
    call("hipMemGetAllocationGranularity", || {
        let out = non_null(granularity, "granularity")?;
        let prop = non_null(prop.cast_mut(), "prop")?;
        // SAFETY: non-null; readable by the caller's contract.
        let prop = unsafe { read_prop(prop) }?;
        let g = vmm::granularity(&prop, option)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(g) };
        Ok(())
    })
}

/// `hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size, const
/// hipMemAllocationProp* prop, unsigned long long flags)`: a physical allocation (see
/// `vmm.rs`).
///
/// # Safety
/// `handle` NULL or writable; `prop` NULL or readable (32 bytes).
pub unsafe extern "C" fn hipMemCreate(
    handle: *mut hipMemGenericAllocationHandle_t,
    size: usize,
    prop: *const hipMemAllocationProp,
    flags: c_ulonglong,
) -> hipError_t {
    call("hipMemCreate", || {
        let out = non_null(handle, "handle")?;
        let prop = non_null(prop.cast_mut(), "prop")?;
        // SAFETY: non-null; readable by the caller's contract.
        let prop = unsafe { read_prop(prop) }?;
        let h = vmm::create(size, &prop, flags)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(h as hipMemGenericAllocationHandle_t) };
        Ok(())
    })
}

/// `hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)`.
///
/// # Safety
/// None: the handle is only looked up.
pub unsafe extern "C" fn hipMemRelease(handle: hipMemGenericAllocationHandle_t) -> hipError_t {
    call("hipMemRelease", || {
        non_null(handle, "handle")?;
        vmm::release(handle as usize)
    })
}

/// `hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment, void*
/// addr, unsigned long long flags)`: a `PROT_NONE` range (`addr` is ignored, a hint).
///
/// # Safety
/// `ptr` NULL or writable.
pub unsafe extern "C" fn hipMemAddressReserve(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    addr: *mut c_void,
    flags: c_ulonglong,
) -> hipError_t {
    call("hipMemAddressReserve", || {
        let out = non_null(ptr, "ptr")?;
        let base = vmm::reserve(size, alignment, addr as usize, flags)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipMemAddressFree(void* devPtr, size_t size)`.
///
/// # Safety
/// None: the address is only looked up.
pub unsafe extern "C" fn hipMemAddressFree(dev_ptr: *mut c_void, size: usize) -> hipError_t {
    call("hipMemAddressFree", || {
        vmm::address_free(dev_ptr as usize, size)
    })
}

/// `hipError_t hipMemMap(void* ptr, size_t size, size_t offset,
/// hipMemGenericAllocationHandle_t handle, unsigned long long flags)`.
///
/// # Safety
/// None: `ptr` must lie in a reservation of this process, which the emulator checks.
pub unsafe extern "C" fn hipMemMap(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: hipMemGenericAllocationHandle_t,
    flags: c_ulonglong,
) -> hipError_t {
    call("hipMemMap", || {
        vmm::map(ptr as usize, size, offset, handle as usize, flags)
    })
}

/// `hipError_t hipMemUnmap(void* ptr, size_t size)`.
///
/// # Safety
/// None: the range is only looked up.
pub unsafe extern "C" fn hipMemUnmap(ptr: *mut c_void, size: usize) -> hipError_t {
    call("hipMemUnmap", || vmm::unmap(ptr as usize, size))
}

/// `hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc,
/// size_t count)`.
///
/// # Safety
/// `desc` NULL or valid for reading `count` descriptors.
pub unsafe extern "C" fn hipMemSetAccess(
    ptr: *mut c_void,
    size: usize,
    desc: *const hipMemAccessDesc,
    count: usize,
) -> hipError_t {
    call("hipMemSetAccess", || {
        let desc = non_null(desc.cast_mut(), "desc")?;
        if count == 0 || count > 1 << 16 {
            return Err(Failure::invalid_value(format!("count {count}")));
        }
        // SAFETY: non-null; `count` readable descriptors (the caller's contract); any bytes
        // are valid for the integer fields.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) }.to_vec();
        vmm::set_access(ptr as usize, size, &descs)
    })
}

/// `hipError_t hipMemGetAccess(unsigned long long* flags, const hipMemLocation* location,
/// void* ptr)`.
///
/// # Safety
/// `flags` NULL or writable; `location` NULL or readable.
pub unsafe extern "C" fn hipMemGetAccess(
    flags: *mut c_ulonglong,
    location: *const hipMemLocation,
    ptr: *mut c_void,
) -> hipError_t {
    call("hipMemGetAccess", || {
        let out = non_null(flags, "flags")?;
        let location = non_null(location.cast_mut(), "location")?;
        non_null(ptr, "ptr")?;
        // SAFETY: non-null; readable (the caller's contract).
        let location = unsafe { location.read_unaligned() };
        let f = vmm::get_access(&location, ptr as usize)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(f) };
        Ok(())
    })
}

/// `hipError_t hipMemExportToShareableHandle(void* shareableHandle,
/// hipMemGenericAllocationHandle_t handle, hipMemAllocationHandleType handleType, unsigned
/// long long flags)`: writes a new fd to `*(int*)shareableHandle` (POSIX fd type).
///
/// # Safety
/// `shareableHandle` NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipMemExportToShareableHandle(
    shareable_handle: *mut c_void,
    handle: hipMemGenericAllocationHandle_t,
    handle_type: hipMemAllocationHandleType,
    flags: c_ulonglong,
) -> hipError_t {
    call("hipMemExportToShareableHandle", || {
        let out = non_null(shareable_handle, "shareableHandle")?.cast::<c_int>();
        let fd = vmm::export(handle as usize, handle_type, flags)?;
        let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
        // SAFETY: non-null (checked) and valid for one int (the caller's contract);
        // unaligned writes are allowed for a caller's byte buffer.
        unsafe { out.write_unaligned(raw) };
        Ok(())
    })
}

/// `hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t* handle,
/// void* osHandle, hipMemAllocationHandleType shHandleType)`: `osHandle` points to the
/// `int` fd before ROCm 7.1 and is the fd value from 7.1 (`DEVIPC_EMU_HIP_VERSION`).
///
/// # Safety
/// `handle` NULL or writable; before 7.1, `osHandle` NULL, a small integer (refused) or
/// valid for reading one `int`.
pub unsafe extern "C" fn hipMemImportFromShareableHandle(
    handle: *mut hipMemGenericAllocationHandle_t,
    os_handle: *mut c_void,
    sh_handle_type: hipMemAllocationHandleType,
) -> hipError_t {
    call("hipMemImportFromShareableHandle", || {
        let out = non_null(handle, "handle")?;
        non_null(os_handle, "osHandle")?;
        let version = runtime::config()?.hip_version;
        let raw = os_handle as usize;
        let fd = if versions::import_fd_by_value(version) {
            c_int::try_from(raw).map_err(|_| {
                format!("HIP {version} takes the fd value as osHandle; {raw:#x} is no int (a pointer to the fd, the convention before 7.1?)")
            })
        } else if raw < 4096 {
            Err(format!(
                "HIP {version} takes a pointer to the int fd as osHandle; {raw:#x} is in the first page (the fd value itself, the 7.1 convention?) and would crash the real runtime"
            ))
        } else {
            // SAFETY: a pointer outside the first page: valid for one int by the caller's
            // contract (the 7.0 convention).
            Ok(unsafe { os_handle.cast::<c_int>().read_unaligned() })
        };
        let os = match fd {
            Ok(fd) if fd >= 0 && std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok() => {
                // SAFETY: `fd` is open in this process (checked just above) and only
                // borrowed for the duration of the import, which duplicates it before
                // using it; a concurrent close by the caller is the caller's race, as in C.
                vmm::OsHandle::Fd(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
            }
            Ok(fd) => vmm::OsHandle::Unusable(format!("fd {fd} is not open in this process")),
            Err(why) => vmm::OsHandle::Unusable(why),
        };
        let h = vmm::import(os, sh_handle_type)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(h as hipMemGenericAllocationHandle_t) };
        Ok(())
    })
}

/// `hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t* handle, void*
/// addr)`: only for VMM-mapped memory.
///
/// # Safety
/// `handle` NULL or writable.
pub unsafe extern "C" fn hipMemRetainAllocationHandle(
    handle: *mut hipMemGenericAllocationHandle_t,
    addr: *mut c_void,
) -> hipError_t {
    call("hipMemRetainAllocationHandle", || {
        let out = non_null(handle, "handle")?;
        let h = vmm::retain(addr as usize)?;
        // SAFETY: non-null (checked) and writable (the caller's contract).
        unsafe { out.write(h as hipMemGenericAllocationHandle_t) };
        Ok(())
    })
}

/// `hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp* prop,
/// hipMemGenericAllocationHandle_t handle)`: written in the emulated version's layout.
///
/// # Safety
/// `prop` NULL or valid for writing 32 bytes.
pub unsafe extern "C" fn hipMemGetAllocationPropertiesFromHandle(
    prop: *mut hipMemAllocationProp,
    handle: hipMemGenericAllocationHandle_t,
) -> hipError_t {
    call("hipMemGetAllocationPropertiesFromHandle", || {
        let out = non_null(prop, "prop")?;
        non_null(handle, "handle")?;
        let p = vmm::properties(handle as usize)?.to_current();
        if versions::prop_layout_current(runtime::config()?.hip_version) {
            // SAFETY: non-null (checked) and writable (the caller's contract).
            unsafe { out.write_unaligned(p) };
        } else {
            // SAFETY: as above; the ROCm 5.2 layout has the same size.
            unsafe {
                out.cast::<hipMemAllocationProp_R0502>()
                    .write_unaligned(hipMemAllocationProp_R0502::from_current(&p))
            };
        }
        Ok(())
    })
}

/// `hipError_t hipPointerGetAttribute(void* data, hipPointer_attribute attribute,
/// hipDeviceptr_t ptr)`: `IS_LEGACY_HIP_IPC_CAPABLE` (an `int`; from ROCm 7.12),
/// `DEVICE_ORDINAL` (an `int`), `RANGE_START_ADDR` (a pointer) and `RANGE_SIZE` (a
/// `size_t`); other attributes are not emulated (`hipErrorNotSupported`).
///
/// # Safety
/// `data` NULL or valid for writing the attribute's type.
pub unsafe extern "C" fn hipPointerGetAttribute(
    data: *mut c_void,
    attribute: hipPointer_attribute,
    ptr: hipDeviceptr_t,
) -> hipError_t {
    call("hipPointerGetAttribute", || {
        let out = non_null(data, "data")?;
        non_null(ptr, "ptr")?;
        let value = memory::pointer_attribute(attribute, ptr as usize)?;
        match attribute {
            devipc_hip_sys::HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR
            | devipc_hip_sys::HIP_POINTER_ATTRIBUTE_RANGE_SIZE => {
                // SAFETY: non-null (checked), valid for a pointer-sized value (contract).
                unsafe { out.cast::<usize>().write_unaligned(value as usize) }
            }
            // SAFETY: non-null (checked), valid for an int (the caller's contract).
            _ => unsafe { out.cast::<c_int>().write_unaligned(value as c_int) },
        }
        Ok(())
    })
}
