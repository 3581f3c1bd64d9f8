//! The status codes every function returns, and their names ([`devipc_status_name`]).
//!
//! - `DEVIPC_OK` (0): success.
//! - 1 and up: the kinds of devipc's one error table (`devipc_core::ErrorKind`, in
//!   `core/src/error/kinds.rs`): `DEVIPC_ERR_<NAME>` has the kind's code. A code, once
//!   released, is never renumbered or reused; a new kind takes the next number (a library
//!   newer than the header may return a code the header does not name:
//!   [`devipc_status_name`] names it).
//! - Negative: failures of the C ABI itself, which the table never uses (its codes are
//!   positive): `DEVIPC_ERR_NULL_ARGUMENT` (-1), `DEVIPC_ERR_PANIC` (-2),
//!   `DEVIPC_ERR_BUFFER_TOO_SMALL` (-3). The next one will be -4.
//!
//! The unit tests pin every constant to the table, so the two cannot drift.

use std::ffi::{CStr, CString, c_char};
use std::sync::OnceLock;

use safe::ErrorKind;

/// What every function returns: `DEVIPC_OK` (0), a kind of devipc's error table (positive)
/// or a failure of the C ABI itself (negative). Details of a failure:
/// `devipc_last_error_message`.
pub type devipc_status = i32;

/// Success.
pub const DEVIPC_OK: devipc_status = 0;
/// No candidate path held a loadable vendor library.
pub const DEVIPC_ERR_LIBRARY_NOT_FOUND: devipc_status = 1;
/// The vendor library lacks a symbol devipc requires.
pub const DEVIPC_ERR_MISSING_SYMBOL: devipc_status = 2;
/// A vendor call failed (`devipc_last_error_vendor_code` gives the vendor's code).
pub const DEVIPC_ERR_VENDOR: devipc_status = 3;
/// No backend could start; the message keeps each backend's own error.
pub const DEVIPC_ERR_NO_BACKEND_STARTED: devipc_status = 4;
/// devipc's own configuration (an environment variable, a directory) is unusable.
pub const DEVIPC_ERR_CONFIG: devipc_status = 5;
/// Bytes or text that are not a valid devipc token.
pub const DEVIPC_ERR_INVALID_TOKEN: devipc_status = 6;
/// A token belongs to another backend than the runtime asked to use it.
pub const DEVIPC_ERR_BACKEND_MISMATCH: devipc_status = 7;
/// The backend or this runtime version cannot do what was asked.
pub const DEVIPC_ERR_UNSUPPORTED: devipc_status = 8;
/// A device id outside the devices the backend reports.
pub const DEVIPC_ERR_INVALID_DEVICE: devipc_status = 9;
/// The token's device is not among the devices this process sees.
pub const DEVIPC_ERR_DEVICE_NOT_VISIBLE: devipc_status = 10;
/// An argument is out of range or inconsistent.
pub const DEVIPC_ERR_INVALID_ARGUMENT: devipc_status = 11;
/// A handle already freed or closed, or not a handle of the type the function takes.
pub const DEVIPC_ERR_UNKNOWN_HANDLE: devipc_status = 12;
/// An object used in a child forked after it was made: open a new runtime in the child.
pub const DEVIPC_ERR_INHERITED_ACROSS_FORK: devipc_status = 13;
/// A blocking operation did not complete in time.
pub const DEVIPC_ERR_TIMEOUT: devipc_status = 14;
/// An operating-system call failed.
pub const DEVIPC_ERR_IO: devipc_status = 15;
/// A copy of a batch was refused when enqueued.
pub const DEVIPC_ERR_COPY: devipc_status = 16;
/// A pointer argument that must not be NULL was NULL (the message names it).
pub const DEVIPC_ERR_NULL_ARGUMENT: devipc_status = -1;
/// devipc panicked inside the call (a bug: please report the message). The call's
/// effects are unknown; the handles it took stay valid to free.
pub const DEVIPC_ERR_PANIC: devipc_status = -2;
/// An output buffer was too small; `*needed` (where given) holds the size needed.
pub const DEVIPC_ERR_BUFFER_TOO_SMALL: devipc_status = -3;

/// The C ABI's own codes with their names (negative, never in the table).
pub(crate) const OWN_CODES: &[(devipc_status, &str)] = &[
    (DEVIPC_ERR_NULL_ARGUMENT, "null_argument"),
    (DEVIPC_ERR_PANIC, "panic"),
    (DEVIPC_ERR_BUFFER_TOO_SMALL, "buffer_too_small"),
];

/// The table kind's status code.
pub(crate) fn of_kind(kind: ErrorKind) -> devipc_status {
    // Codes are small (one per kind); a code past i32::MAX cannot exist.
    i32::try_from(kind.code()).unwrap_or(i32::MAX)
}

/// The stable name of `code`: `"ok"`, a kind of the table (`"invalid_token"`, ...), the
/// ABI's own (`"null_argument"`, `"panic"`, `"buffer_too_small"`) or `"unknown"`.
pub(crate) fn name_of(code: devipc_status) -> &'static CStr {
    static NAMES: OnceLock<Vec<(devipc_status, CString)>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let table = ErrorKind::ALL.iter().map(|k| (of_kind(*k), k.name()));
        std::iter::once((DEVIPC_OK, "ok"))
            .chain(table)
            .chain(OWN_CODES.iter().copied())
            .filter_map(|(c, n)| Some((c, CString::new(n).ok()?)))
            .collect()
    });
    names
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(c"unknown", |(_, n)| n.as_c_str())
}

/// The stable name of a status code, e.g. `"invalid_token"` (the kind's name in devipc's
/// error table), `"ok"`, `"null_argument"`, `"panic"`, `"buffer_too_small"`, or
/// `"unknown"` for a code this library does not know. A static string: never freed.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_status_name(status: devipc_status) -> *const c_char {
    crate::boundary::catch_static(|| name_of(status).as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every constant of this file, as `(name, code)`; the test below pins it to the table.
    const CONSTANTS: &[(&str, devipc_status)] = &[
        ("LIBRARY_NOT_FOUND", DEVIPC_ERR_LIBRARY_NOT_FOUND),
        ("MISSING_SYMBOL", DEVIPC_ERR_MISSING_SYMBOL),
        ("VENDOR", DEVIPC_ERR_VENDOR),
        ("NO_BACKEND_STARTED", DEVIPC_ERR_NO_BACKEND_STARTED),
        ("CONFIG", DEVIPC_ERR_CONFIG),
        ("INVALID_TOKEN", DEVIPC_ERR_INVALID_TOKEN),
        ("BACKEND_MISMATCH", DEVIPC_ERR_BACKEND_MISMATCH),
        ("UNSUPPORTED", DEVIPC_ERR_UNSUPPORTED),
        ("INVALID_DEVICE", DEVIPC_ERR_INVALID_DEVICE),
        ("DEVICE_NOT_VISIBLE", DEVIPC_ERR_DEVICE_NOT_VISIBLE),
        ("INVALID_ARGUMENT", DEVIPC_ERR_INVALID_ARGUMENT),
        ("UNKNOWN_HANDLE", DEVIPC_ERR_UNKNOWN_HANDLE),
        ("INHERITED_ACROSS_FORK", DEVIPC_ERR_INHERITED_ACROSS_FORK),
        ("TIMEOUT", DEVIPC_ERR_TIMEOUT),
        ("IO", DEVIPC_ERR_IO),
        ("COPY", DEVIPC_ERR_COPY),
    ];

    #[test]
    fn one_constant_per_kind_of_the_table_with_its_code() {
        let table: Vec<(String, devipc_status)> = ErrorKind::ALL
            .iter()
            .map(|k| (k.name().to_uppercase(), of_kind(*k)))
            .collect();
        let ours: Vec<(String, devipc_status)> = CONSTANTS
            .iter()
            .map(|(n, c)| ((*n).to_owned(), *c))
            .collect();
        assert_eq!(
            ours, table,
            "a kind was added to devipc's error table: add its DEVIPC_ERR_ constant here \
             (with the table's code) and regenerate the header"
        );
    }

    #[test]
    fn the_abi_codes_are_negative_and_every_code_has_its_name() {
        for (code, name) in OWN_CODES {
            assert!(*code < 0);
            assert_eq!(name_of(*code).to_str().unwrap(), *name);
        }
        for k in ErrorKind::ALL {
            assert_eq!(name_of(of_kind(*k)).to_str().unwrap(), k.name());
        }
        assert_eq!(name_of(DEVIPC_OK).to_str().unwrap(), "ok");
        assert_eq!(name_of(9999).to_str().unwrap(), "unknown");
    }
}
