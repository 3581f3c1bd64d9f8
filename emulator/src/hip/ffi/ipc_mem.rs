//! Entry points of IPC memory handles (safe layer: `ipc_mem`): export, open, close.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::call;
use crate::hip::{ipc_mem, stream};

use super::non_null;

/// `hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr)`: a handle
/// naming the whole allocation that contains `devPtr` (interior pointers included; the
/// offset is recorded in the handle).
///
/// # Safety
/// `handle` must be NULL or valid for writing one `hipIpcMemHandle_t`; `dev_ptr` is
/// looked up, never dereferenced.
pub unsafe extern "C" fn hipIpcGetMemHandle(
    handle: *mut hipIpcMemHandle_t,
    dev_ptr: *mut c_void,
) -> hipError_t {
    call("hipIpcGetMemHandle", || {
        let out = non_null(handle, "handle")?;
        let bytes = ipc_mem::get_handle(dev_ptr as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(hipIpcMemHandle_t::from_bytes(bytes)) };
        Ok(())
    })
}

/// `hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int
/// flags)`: maps the exported allocation and writes its *base*. `flags` must equal the
/// emulated version's `hipIpcMemLazyEnablePeerAccess`; see [`crate::hip::rules`] for every
/// refusal.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for writing one pointer.
pub unsafe extern "C" fn hipIpcOpenMemHandle(
    dev_ptr: *mut *mut c_void,
    handle: hipIpcMemHandle_t,
    flags: c_uint,
) -> hipError_t {
    call("hipIpcOpenMemHandle", || {
        let out = non_null(dev_ptr, "devPtr")?;
        let base = ipc_mem::open(&handle.to_bytes(), flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipIpcCloseMemHandle(void* devPtr)`: one close per open; the mapping goes
/// with the last. It first waits for the current device's null stream, and so by the
/// legacy rule for the work pending on its other streams (CLR:
/// `hip::getNullStream()->finish()` before anything else), so no queued copy still uses
/// the mapping.
///
/// # Safety
/// None: the pointer is looked up, never dereferenced. The caller must not use the
/// memory after its last close.
pub unsafe extern "C" fn hipIpcCloseMemHandle(dev_ptr: *mut c_void) -> hipError_t {
    call("hipIpcCloseMemHandle", || {
        stream::finish_null_stream()?;
        ipc_mem::close(dev_ptr as usize)
    })
}
