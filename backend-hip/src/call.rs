//! The checked-call helper: every HIP call goes through [`hip!`], which turns a non-zero
//! `hipError_t` into [`Error::Vendor`] with the api name, the code, its symbolic name and
//! the runtime's message, resolved at the moment of failure (the library may be gone when
//! the error is printed).

use std::ffi::{CStr, c_char};

use devipc_core::{BackendKind, Error, Result};
use devipc_hip_sys::{HipApi, hipError_t, hipSuccess};

/// Calls `api.$f(args)` and checks the status: `hip!(api, hipMalloc(&mut p, n))`.
///
/// Expands to an `unsafe` call, so it must sit inside an `unsafe` block whose `SAFETY:`
/// comment covers the call's C contract.
macro_rules! hip {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_hip_sys::HipApi = &$api;
        let code = (api.$f)($($arg),*);
        $crate::call::check(api, stringify!($f), code)
    }};
}
pub(crate) use hip;

/// `Ok(())` for `hipSuccess`, otherwise the [`Error::Vendor`] for `code`.
pub(crate) fn check(api: &HipApi, call: &'static str, code: hipError_t) -> Result<()> {
    if code == hipSuccess {
        Ok(())
    } else {
        Err(vendor_error(api, call, code))
    }
}

/// Builds the [`Error::Vendor`] for a failed call: name from `hipGetErrorName`, falling
/// back to devipc's table for codes the runtime calls `hipErrorUnknown`; message from
/// `hipGetErrorString` (left empty when it only repeats the name, as ROCm 5.2 does).
pub(crate) fn vendor_error(api: &HipApi, call: &'static str, code: hipError_t) -> Error {
    // SAFETY: hipGetErrorName accepts any code and returns a static string or NULL.
    let runtime_name = copy_c_str(unsafe { (api.hipGetErrorName)(code) });
    let name = match (runtime_name, devipc_hip_sys::error_name(code)) {
        (Some(n), Some(ours)) if n == "hipErrorUnknown" && code != 999 => ours.to_owned(),
        (Some(n), _) => n,
        (None, Some(ours)) => ours.to_owned(),
        (None, None) => format!("hipError({code})"),
    };
    // SAFETY: as above, for hipGetErrorString.
    let message = copy_c_str(unsafe { (api.hipGetErrorString)(code) }).unwrap_or_default();
    let message = if message == name {
        String::new()
    } else {
        message
    };
    Error::Vendor {
        backend: BackendKind::Hip,
        api: call,
        code,
        name,
        message,
    }
}

/// Copies a NUL-terminated string the runtime returned, if any.
fn copy_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null pointers from hipGetErrorName/String point at static NUL-terminated
    // strings owned by the runtime, alive for the duration of this copy.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}
