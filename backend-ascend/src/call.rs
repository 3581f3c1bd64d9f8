//! The checked-call helpers: every ACL call of the [`result`](crate::result) layer (the
//! only module that calls the table) goes through [`acl!`] (required functions),
//! [`acl_opt!`] (functions a runtime may lack) or [`check`] (where the caller takes one
//! code as an answer first), which turn a non-zero `aclError` into
//! [`Error::Vendor`] with the api name, the code, its symbolic name and the runtime's
//! message, resolved at the moment of failure (the library may be gone when the error is
//! printed, and `aclGetRecentErrMsg` is per thread and overwritten by the next call).
//!
//! An optional function the loaded runtime does not export is
//! [`Error::Unsupported`] naming the symbol, never a panic.

use std::ffi::{CStr, c_char};

use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::types::aclError;
use devipc_ascend_sys::{AclApi, error_description, error_name};
use devipc_core::{BackendKind, Error, Result};

/// Calls the required function `api.$f(args)` and checks the status:
/// `acl!(api, aclrtSetDevice(0))`.
///
/// Expands to an `unsafe` call, so it must sit inside an `unsafe` block whose `SAFETY:`
/// comment covers the call's C contract.
macro_rules! acl {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_ascend_sys::AclApi = &$api;
        let code = (api.$f)($($arg),*);
        $crate::call::check(api, stringify!($f), code)
    }};
}
pub(crate) use acl;

/// Calls the optional function `api.$f(args)` and checks the status; when the runtime
/// lacks `$f` the result is [`Error::Unsupported`] and nothing is called (the arguments
/// are not evaluated).
///
/// Expands to an `unsafe` call, like [`acl!`].
macro_rules! acl_opt {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_ascend_sys::AclApi = &$api;
        match api.$f {
            Some(f) => {
                let code = f($($arg),*);
                $crate::call::check(api, stringify!($f), code)
            }
            None => Err($crate::call::too_old(stringify!($f))),
        }
    }};
}
pub(crate) use acl_opt;

/// The optional function `api.$f`, or [`Error::Unsupported`] naming it: for callers that
/// need the raw status (to accept a code besides success).
macro_rules! optional {
    ($api:expr, $f:ident) => {
        $api.$f.ok_or_else(|| $crate::call::too_old(stringify!($f)))
    };
}
pub(crate) use optional;

/// `Ok(())` for `ACL_SUCCESS`, otherwise the [`Error::Vendor`] for `code`.
pub(crate) fn check(api: &AclApi, call: &'static str, code: aclError) -> Result<()> {
    if code == ACL_SUCCESS {
        Ok(())
    } else {
        Err(vendor_error(api, call, code))
    }
}

/// Builds the [`Error::Vendor`] for a failed call: the name from devipc's code table
/// (`aclError(<code>)` for a code newer than the table), the message from
/// `aclGetRecentErrMsg` copied now, or the table's description when the runtime has none.
pub(crate) fn vendor_error(api: &AclApi, call: &'static str, code: aclError) -> Error {
    let name = error_name(code).map_or_else(|| format!("aclError({code})"), str::to_owned);
    // SAFETY: aclGetRecentErrMsg takes no arguments and returns NULL or a NUL-terminated
    // string owned by the runtime's per-thread state, valid until the thread's next ACL
    // call; it is copied at once below.
    let recent = copy_c_str(unsafe { (api.aclGetRecentErrMsg)() });
    let message = match recent {
        Some(m) if !m.trim().is_empty() => m.trim().to_owned(),
        _ => error_description(code).unwrap_or_default().to_owned(),
    };
    Error::Vendor {
        backend: BackendKind::Ascend,
        api: call,
        code,
        name,
        message,
    }
}

/// The error for calling an optional function the loaded runtime does not export.
pub(crate) fn too_old(symbol: &'static str) -> Error {
    Error::unsupported(
        BackendKind::Ascend,
        format!("{symbol} (this CANN is too old)"),
    )
}

/// Copies a NUL-terminated string the runtime returned, if any.
fn copy_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer from aclGetRecentErrMsg points at a NUL-terminated string
    // that stays alive until this thread's next ACL call; nothing is called during the copy.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}
