//! The panic boundary: every entry point runs its body through [`call`], which catches a
//! panic (a `DEVIPC_ERR_PANIC` status, never an unwind into C, which Rust turns into an
//! abort) and turns a [`Failure`] into its status code and the thread's last error.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::last_error;
use crate::status::{
    DEVIPC_ERR_BUFFER_TOO_SMALL, DEVIPC_ERR_NULL_ARGUMENT, DEVIPC_ERR_PANIC, DEVIPC_OK,
    devipc_status, of_kind,
};

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The safe API's error: its kind's code from the table.
    Devipc(safe::Error),
    /// A pointer argument, named, was NULL.
    Null(&'static str),
    /// An output buffer, named, of `len` bytes was too small for `needed`.
    TooSmall {
        /// The argument.
        what: &'static str,
        /// Its length.
        len: usize,
        /// What was needed.
        needed: usize,
    },
    /// A panic inside devipc, with its message.
    Panic(String),
}

impl From<safe::Error> for Failure {
    fn from(e: safe::Error) -> Self {
        Failure::Devipc(e)
    }
}

/// The result of a call's body.
pub(crate) type Outcome<T = ()> = Result<T, Failure>;

impl Failure {
    /// An [`safe::Error::InvalidArgument`].
    pub(crate) fn invalid(what: impl Into<String>) -> Failure {
        Failure::Devipc(safe::Error::invalid_argument(what))
    }

    /// Its status code.
    pub(crate) fn status(&self) -> devipc_status {
        match self {
            Failure::Devipc(e) => of_kind(e.error_kind()),
            Failure::Null(_) => DEVIPC_ERR_NULL_ARGUMENT,
            Failure::TooSmall { .. } => DEVIPC_ERR_BUFFER_TOO_SMALL,
            Failure::Panic(_) => DEVIPC_ERR_PANIC,
        }
    }

    /// The whole message, as `devipc_last_error_message` gives it.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Devipc(e) => e.to_string(),
            Failure::Null(what) => format!("invalid argument: `{what}` is NULL"),
            Failure::TooSmall { what, len, needed } => format!(
                "`{what}` holds {len} bytes, {needed} are needed: call again with a larger buffer"
            ),
            Failure::Panic(msg) => format!(
                "devipc panicked (a bug in devipc, please report it): {msg}; the call's \
                 effects are unknown"
            ),
        }
    }
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs an entry point's body: `DEVIPC_OK` when it succeeds; otherwise the failure's
/// status, kept as the thread's last error. A panic is `DEVIPC_ERR_PANIC`.
pub(crate) fn call(body: impl FnOnce() -> Outcome) -> devipc_status {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return DEVIPC_OK,
        Ok(Err(failure)) => failure,
        Err(payload) => {
            let text = panic_text(payload.as_ref());
            // Dropping a payload can panic in turn: that panic is caught too, and its own
            // payload forgotten (a leak, only if a payload's destructor panics).
            if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
                std::mem::forget(again);
            }
            Failure::Panic(text)
        }
    };
    let status = failure.status();
    // Keeping the error allocates; a panic there must not unwind into C either.
    let _ = catch_unwind(AssertUnwindSafe(|| last_error::set(&failure)));
    status
}

/// Runs a body that returns a value and cannot fail (the static-string getters):
/// its value, or `fallback` on a panic. Does not touch the last error.
pub(crate) fn catch_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// [`catch_value`] for a static C string: `""` on a panic.
pub(crate) fn catch_static(
    body: impl FnOnce() -> *const std::ffi::c_char,
) -> *const std::ffi::c_char {
    catch_value(c"".as_ptr(), body)
}

/// Test aid: panics inside devipc, as a bug would, to show that the caller gets
/// `DEVIPC_ERR_PANIC` (and the panic's message as the last error), never an abort.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_testing_panic() -> devipc_status {
    call(|| panic!("devipc_testing_panic was called"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_a_status_and_the_last_error() {
        let status = call(|| panic!("boom {}", 7));
        assert_eq!(status, DEVIPC_ERR_PANIC);
        let last = last_error::get().unwrap();
        assert!(last.message.contains("boom 7"), "{}", last.message);
        assert_eq!(last.status, DEVIPC_ERR_PANIC);
    }

    #[test]
    fn an_error_keeps_its_table_code_and_message() {
        let status = call(|| Err(safe::Error::invalid_token("bad magic").into()));
        assert_eq!(status, crate::status::DEVIPC_ERR_INVALID_TOKEN);
        let last = last_error::get().unwrap();
        assert_eq!(last.message, "invalid devipc token: bad magic");
        assert_eq!(last.status, crate::status::DEVIPC_ERR_INVALID_TOKEN);
        assert_eq!(call(|| Ok(())), DEVIPC_OK);
        assert_eq!(
            last_error::get().unwrap().status,
            crate::status::DEVIPC_ERR_INVALID_TOKEN,
            "a success leaves the last error as it was"
        );
    }
}
