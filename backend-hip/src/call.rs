//! The checked-call helper: every HIP call (each one a function in [`crate::result`])
//! goes through [`hip!`], which turns a non-zero `hipError_t` into [`Error::Vendor`] with the api name, the code, its symbolic name and
//! the runtime's message, resolved at the moment of failure (the library may be gone when
//! the error is printed).

use devipc_core::{BackendKind, Error, Result};
use devipc_hip_sys::{HipApi, hipError_t, hipSuccess};

use crate::result;

/// Calls `api.$f(args)` and checks the status: `hip!(api, hipMalloc(&mut p, n))`.
///
/// Expands to an `unsafe` call, so it must sit inside an `unsafe` block whose `SAFETY:`
/// comment covers the call's C contract. Used only by [`crate::result`].
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
    let runtime_name = result::get_error_name(api, code);
    let name = match (runtime_name, devipc_hip_sys::error_name(code)) {
        (Some(n), Some(ours)) if n == "hipErrorUnknown" && code != 999 => ours.to_owned(),
        (Some(n), _) => n,
        (None, Some(ours)) => ours.to_owned(),
        (None, None) => format!("hipError({code})"),
    };
    let message = result::get_error_string(api, code).unwrap_or_default();
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
