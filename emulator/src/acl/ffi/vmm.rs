//! Entry points of virtual memory management (safe layer: `vmm`): physical memory,
//! address reservations, mappings, granularity and access.

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::errors::AclFailure;
use crate::acl::{rules, vmm};

use super::{address_out, handle_out, non_null, not_null, run};

// ---- VMM -------------------------------------------------------------------------------------

/// `aclrtMallocPhysical`: physical memory of `size` bytes as described by `prop`.
///
/// # Safety
///
/// A non-NULL `handle` is writable; a non-NULL `prop` is readable.
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut aclrtDrvMemHandle,
    size: usize,
    prop: *const aclrtPhysicalMemProp,
    flags: u64,
) -> aclError {
    run("aclrtMallocPhysical", || {
        let out = non_null(handle, "handle")?;
        not_null(prop, "prop")?;
        // SAFETY: non-NULL and readable by the contract.
        let prop = unsafe { prop.read() };
        let h = vmm::malloc_physical(size, &prop, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(h)) };
        Ok(())
    })
}

/// `aclrtFreePhysical`.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError {
    run("aclrtFreePhysical", || {
        non_null(handle, "handle")?;
        vmm::free_physical(handle.addr())
    })
}

/// `aclrtReserveMemAddress`: reserves a virtual address range.
///
/// # Safety
///
/// A non-NULL `virPtr` is writable; `expectPtr` is only compared with NULL.
pub unsafe extern "C" fn aclrtReserveMemAddress(
    virPtr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expectPtr: *mut c_void,
    flags: u64,
) -> aclError {
    run("aclrtReserveMemAddress", || {
        let out = non_null(virPtr, "virPtr")?;
        let base = vmm::reserve(size, alignment, expectPtr.addr(), flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(base)) };
        Ok(())
    })
}

/// `aclrtReleaseMemAddress`.
///
/// # Safety
///
/// None: the address is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError {
    run("aclrtReleaseMemAddress", || {
        non_null(virPtr, "virPtr")?;
        vmm::release(virPtr.addr())
    })
}

/// `aclrtMapMem`: maps a physical handle at a reserved address.
///
/// # Safety
///
/// None: the address and handle are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtMapMem(
    virPtr: *mut c_void,
    size: usize,
    offset: usize,
    handle: aclrtDrvMemHandle,
    flags: u64,
) -> aclError {
    run("aclrtMapMem", || {
        non_null(virPtr, "virPtr")?;
        non_null(handle, "handle")?;
        vmm::map(virPtr.addr(), size, offset, handle.addr(), flags)
    })
}

/// `aclrtUnmapMem`.
///
/// # Safety
///
/// None: the address is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError {
    run("aclrtUnmapMem", || {
        non_null(virPtr, "virPtr")?;
        vmm::unmap(virPtr.addr())
    })
}

// ---- optional: granularity, access ------------------------------------------------------

/// `aclrtMemGetAllocationGranularity`.
///
/// # Safety
///
/// A non-NULL `prop` is readable and a non-NULL `granularity` writable.
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    prop: *mut aclrtPhysicalMemProp,
    option: aclrtMemGranularityOptions,
    granularity: *mut usize,
) -> aclError {
    run("aclrtMemGetAllocationGranularity", || {
        let prop = non_null(prop, "prop")?;
        let out = non_null(granularity, "granularity")?;
        // SAFETY: non-NULL and readable by the contract.
        let prop = unsafe { prop.read() };
        let g = vmm::granularity(&prop, option)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(g) };
        Ok(())
    })
}

/// `aclrtMemSetAccess`: sets the access of a mapping.
///
/// # Safety
///
/// A non-NULL `desc` points to `count` readable descriptors.
pub unsafe extern "C" fn aclrtMemSetAccess(
    virPtr: *mut c_void,
    size: usize,
    desc: *mut aclrtMemAccessDesc,
    count: usize,
) -> aclError {
    run("aclrtMemSetAccess", || {
        non_null(virPtr, "virPtr")?;
        non_null(desc, "desc")?;
        if count > MAX_ACCESS_DESCS {
            return Err(AclFailure::rule(
                rules::PARAM_ENUM_VALUE,
                format!("count {count}: at most {MAX_ACCESS_DESCS} descriptors (one per device)"),
            ));
        }
        // SAFETY: non-NULL, `count` readable descriptors by the contract; `count` is
        // bounded, so the byte length fits an isize.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) }.to_vec();
        vmm::set_access(virPtr.addr(), size, &descs)
    })
}

/// Most descriptors one `aclrtMemSetAccess` call takes: one per possible device.
const MAX_ACCESS_DESCS: usize = crate::config::MAX_DEVICES as usize;
