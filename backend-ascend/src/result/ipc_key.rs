//! The calls of the `ascend-ipc-key` mechanism ([`ipc_key`](crate::ipc_key)): IPC keys of
//! `aclrtMalloc` memory. Part of the `result` layer (see [`result`](crate::result) for the
//! checked-call helpers `acl!`/`acl_opt!`, the key buffers and the conventions every
//! function here follows); the parent re-exports each function, so callers write
//! `result::ipc_mem_close` like any other call.

use std::ffi::c_void;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
use devipc_core::Result;

use super::{Key, as_addr, as_ptr, check_written_key, key_ptr};

/// `aclrtIpcMemGetExportKey` (optional): the key of the `size` bytes at `ptr`, checked to
/// hold a NUL (a key without one is never handed back to the runtime, not even to close
/// it, so it is refused here).
///
/// # Safety
/// `ptr`/`size` name (a page-aligned part of) an `aclrtMalloc` block of this process.
pub(crate) unsafe fn ipc_mem_get_export_key(
    api: &AclApi,
    ptr: u64,
    size: usize,
    flags: u64,
) -> Result<Key> {
    let mut key: Key = [0; ACL_IPC_KEY_LEN];
    // SAFETY: the caller guarantees the block; `key` is a writable buffer of
    // ACL_IPC_KEY_LEN bytes, the `len` passed.
    unsafe {
        acl_opt!(
            api,
            aclrtIpcMemGetExportKey(
                as_ptr(ptr),
                size,
                key.as_mut_ptr().cast(),
                ACL_IPC_KEY_LEN,
                flags
            )
        )
    }?;
    check_written_key(&key, "aclrtIpcMemGetExportKey")?;
    Ok(key)
}

/// `aclrtIpcMemSetImportPid` (optional): the trustlist of an exported key.
pub(crate) fn ipc_mem_set_import_pid(api: &AclApi, key: &Key, pids: &mut [i32]) -> Result<()> {
    let key = key_ptr(key)?;
    // SAFETY: `key` is a NUL-terminated buffer (checked above); `pids` a live buffer of
    // `pids.len()` int32 values.
    unsafe {
        acl_opt!(
            api,
            aclrtIpcMemSetImportPid(key, pids.as_mut_ptr(), pids.len())
        )
    }
}

/// `aclrtIpcMemImportByKey` (optional) on the current device: the imported block's base.
pub(crate) fn ipc_mem_import_by_key(api: &AclApi, key: &Key, flags: u64) -> Result<u64> {
    let key = key_ptr(key)?;
    let mut base: *mut c_void = std::ptr::null_mut();
    // SAFETY: `base` is a valid out-pointer; `key` is a NUL-terminated buffer (checked
    // above); flags are a plain value the runtime validates.
    unsafe { acl_opt!(api, aclrtIpcMemImportByKey(&mut base, key, flags)) }?;
    Ok(as_addr(base))
}

/// `aclrtIpcMemClose` (optional): closes an imported key (its oldest import in this
/// process) or, in the exporter, destroys the key.
pub(crate) fn ipc_mem_close(api: &AclApi, key: &Key) -> Result<()> {
    let key = key_ptr(key)?;
    // SAFETY: `key` is a NUL-terminated buffer (checked above).
    unsafe { acl_opt!(api, aclrtIpcMemClose(key)) }
}
