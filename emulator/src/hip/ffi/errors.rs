//! Entry points of the error texts (safe layer: `errors`): `hipGetErrorName` and
//! `hipGetErrorString`, which return static strings and never fail.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors;

use super::text_version;

/// `const char* hipGetErrorName(hipError_t hip_error)`: the canonical name as the
/// emulated version spells it (`hipErrorUnknown` for codes it does not define). The
/// string is static.
///
/// # Safety
/// None: takes no pointers; the result is never NULL and lives as long as the process.
pub unsafe extern "C" fn hipGetErrorName(hip_error: hipError_t) -> *const c_char {
    std::panic::catch_unwind(|| errors::error_name_c(hip_error, text_version()))
        .unwrap_or(c"hipErrorUnknown")
        .as_ptr()
}

/// `const char* hipGetErrorString(hipError_t hipError)`: right after a call on this thread
/// failed with `hip_error`, the description plus what went wrong and the violated rule;
/// otherwise the static description (the name on ROCm 5.x). See [`crate::hip::errors`]. The
/// string lives as long as the process.
///
/// # Safety
/// None: takes no pointers; the result is never NULL and lives as long as the process.
pub unsafe extern "C" fn hipGetErrorString(hip_error: hipError_t) -> *const c_char {
    std::panic::catch_unwind(|| errors::error_string_c(hip_error, text_version()))
        .unwrap_or(c"unknown error")
        .as_ptr()
}
