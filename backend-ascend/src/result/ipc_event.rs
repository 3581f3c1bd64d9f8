//! The calls of Ascend IPC events (`ACL_EVENT_IPC`; api-facts A.9), which carry the
//! generations of a signal ([`generation`](crate::generation)). Part of the `result`
//! layer (see [`result`](crate::result) for `acl_opt!` and the conventions); the parent
//! re-exports each function.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::types::{aclrtEvent, aclrtIpcEventHandle};
use devipc_core::Result;

/// The bytes of an `aclrtIpcEventHandle`.
pub(crate) const IPC_EVENT_HANDLE_LEN: usize = 64;

/// `aclrtIpcGetEventHandle` (optional): the handle of an event created with
/// `ACL_EVENT_IPC`.
///
/// # Safety
/// `event` is a live event of this process.
pub(crate) unsafe fn ipc_get_event_handle(
    api: &AclApi,
    event: usize,
) -> Result<[u8; IPC_EVENT_HANDLE_LEN]> {
    let mut handle = aclrtIpcEventHandle {
        reserved: [0; IPC_EVENT_HANDLE_LEN],
    };
    // SAFETY: the caller guarantees the event; `handle` is a valid out-pointer of the
    // handle's size.
    unsafe {
        acl_opt!(
            api,
            aclrtIpcGetEventHandle(event as aclrtEvent, &mut handle)
        )
    }?;
    Ok(handle.reserved.map(|c| c as u8))
}

/// `aclrtIpcOpenEventHandle` (optional) on the current device: the event, as an address.
/// The handle is untrusted bytes; the runtime validates it.
pub(crate) fn ipc_open_event_handle(
    api: &AclApi,
    handle: &[u8; IPC_EVENT_HANDLE_LEN],
) -> Result<usize> {
    let handle = aclrtIpcEventHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut event: aclrtEvent = std::ptr::null_mut();
    // SAFETY: the handle is passed by value, as the function takes it; `event` is a valid
    // out-pointer.
    unsafe { acl_opt!(api, aclrtIpcOpenEventHandle(handle, &mut event)) }?;
    Ok(event as usize)
}
