//! Entry points of host memory the devices reach (safe layer: `host`): `hipHostMalloc`
//! and `hipHostFree`.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::call;
use crate::hip::host;

use super::non_null;

/// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`: zeroed,
/// page-aligned host memory the emulated devices reach (see `host`); unknown flags or
/// `Coherent | NonCoherent` are `hipErrorInvalidValue`; size 0 writes NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for writing one pointer.
pub unsafe extern "C" fn hipHostMalloc(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    call("hipHostMalloc", || {
        let out = non_null(ptr, "ptr")?;
        let base = host::malloc(size, flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipHostFree(void* ptr)`: frees `hipHostMalloc` memory (NULL is a no-op).
///
/// # Safety
/// None: the pointer is looked up, never dereferenced. The caller must not use the
/// memory afterwards.
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> hipError_t {
    call("hipHostFree", || host::free(ptr as usize))
}
