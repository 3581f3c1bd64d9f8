//! The thread's last error: what the last failed call on this thread said, read through
//! [`devipc_last_error_message`], [`devipc_last_error_code`], [`devipc_last_error_kind`]
//! and [`devipc_last_error_vendor_code`].
//!
//! As `errno`: a failed call sets it, a successful one leaves it as it was, and each
//! thread has its own. The readers themselves never change it (a too-small buffer
//! passed to [`devipc_last_error_message`] returns `DEVIPC_ERR_BUFFER_TOO_SMALL` and
//! keeps the error to read again).

use std::cell::RefCell;
use std::ffi::c_char;

use crate::boundary::{Failure, catch_static, catch_value};
use crate::ffi;
use crate::status::{DEVIPC_ERR_PANIC, DEVIPC_OK, devipc_status, name_of};

/// One failure, as kept.
#[derive(Debug, Clone)]
pub(crate) struct LastError {
    /// Its status code.
    pub(crate) status: devipc_status,
    /// The whole message.
    pub(crate) message: String,
    /// The vendor's status code, for a vendor failure.
    pub(crate) vendor_code: Option<i32>,
    /// The index of the refused pair, for a refused copy (`DEVIPC_ERR_COPY`).
    pub(crate) copy_index: Option<usize>,
}

thread_local! {
    static LAST: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// Keeps `failure` as the thread's last error.
pub(crate) fn set(failure: &Failure) {
    let status = failure.status();
    let error = LastError {
        status,
        message: failure.message(),
        vendor_code: match failure {
            Failure::Devipc(e) => e.vendor_code(),
            _ => None,
        },
        copy_index: match failure {
            Failure::Devipc(safe::Error::Copy { index, .. }) => Some(*index),
            _ => None,
        },
    };
    // A thread being torn down has no last error to keep.
    let _ = LAST.try_with(|last| *last.borrow_mut() = Some(error));
}

/// The thread's last error, if a call on it failed.
pub(crate) fn get() -> Option<LastError> {
    LAST.try_with(|last| last.borrow().clone()).ok().flatten()
}

/// Copies the message of the thread's last failure, NUL-terminated, into `buf` (`len`
/// bytes), and stores its size with the NUL in `*needed` (when `needed` is not NULL).
/// The message is the whole error: for a vendor failure, the vendor function, its code,
/// the code's name and the runtime's own message.
///
/// No failure yet on this thread: the empty string. `buf` NULL with `len` 0 asks for the
/// size only. When `len` is too small, `buf` gets as much of the message as fits (still
/// NUL-terminated, when `len` > 0) and the call returns `DEVIPC_ERR_BUFFER_TOO_SMALL`.
/// Never changes the last error.
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_last_error_message(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    catch_value(DEVIPC_ERR_PANIC, || {
        let message = get().map(|e| e.message).unwrap_or_default();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        match unsafe { ffi::write_text(&message, "buf", buf.cast(), len, needed) } {
            Ok(()) => DEVIPC_OK,
            Err(failure) => failure.status(),
        }
    })
}

/// The status the thread's last failed call returned; `DEVIPC_OK` when none failed yet.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_last_error_code() -> devipc_status {
    catch_value(DEVIPC_ERR_PANIC, || get().map_or(DEVIPC_OK, |e| e.status))
}

/// The stable kind name of the thread's last failure (as `devipc_status_name` of its
/// code, e.g. `"invalid_token"`); `"ok"` when none failed yet. A static string.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_last_error_kind() -> *const c_char {
    catch_static(|| name_of(get().map_or(DEVIPC_OK, |e| e.status)).as_ptr())
}

/// When the thread's last failure is a vendor call's (`DEVIPC_ERR_VENDOR`), stores the
/// vendor's own status code (`aclError`, `hipError_t`) in `*code` and returns true;
/// otherwise returns false and leaves `*code` alone.
///
/// # Safety
/// `code` is NULL (then only the answer is given) or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_last_error_vendor_code(code: *mut i32) -> bool {
    catch_value(false, || match get().and_then(|e| e.vendor_code) {
        Some(vendor) => {
            if !code.is_null() {
                // SAFETY: not NULL, and the caller's guarantee that it is writable.
                unsafe { code.write(vendor) };
            }
            true
        }
        None => false,
    })
}

/// When the thread's last failure is a refused copy of a batch (`DEVIPC_ERR_COPY`),
/// stores the index of the first refused pair in `*index` and returns true; otherwise
/// returns false and leaves `*index` alone.
///
/// # Safety
/// `index` is NULL (then only the answer is given) or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_last_error_copy_index(index: *mut usize) -> bool {
    catch_value(false, || match get().and_then(|e| e.copy_index) {
        Some(i) => {
            // SAFETY: the caller's guarantee for `index`.
            unsafe { ffi::put_optional(index, i) };
            true
        }
        None => false,
    })
}

/// Forgets the thread's last failure: the readers answer as if no call had failed.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_last_error_clear() {
    catch_value((), || {
        let _ = LAST.try_with(|last| *last.borrow_mut() = None);
    })
}
