//! The panic boundary of the vendor C ABIs: the ACL and HIP entry points run their bodies
//! through [`catch`], so a panic (a bug in the emulator) becomes a failure carrying the
//! panic's message, which each surface reports as its internal-error code, instead of
//! unwinding into C. A stream's worker thread reports a panicking task the same way
//! ([`panic_text`]).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `body`; a panic becomes `Err(panicked(message))`.
pub(crate) fn catch<T, E>(
    body: impl FnOnce() -> Result<T, E>,
    panicked: impl FnOnce(String) -> E,
) -> Result<T, E> {
    catch_unwind(AssertUnwindSafe(body))
        .unwrap_or_else(|payload| Err(panicked(panic_text(payload.as_ref()))))
}

/// The message of a panic payload (a `panic!` with a literal or a formatted message), or
/// `"unknown panic"`.
pub(crate) fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_error_with_its_message() {
        let ok: Result<u8, String> = catch(|| Ok(7), |what| what);
        assert_eq!(ok, Ok(7));
        let failed: Result<u8, String> = catch(|| Err("no".into()), |what| what);
        assert_eq!(failed, Err("no".into()));
        let literal: Result<u8, String> = catch(|| panic!("boom"), |what| what);
        assert_eq!(literal, Err("boom".into()));
        let n = 3;
        let formatted: Result<u8, String> = catch(|| panic!("boom {n}"), |what| what);
        assert_eq!(formatted, Err("boom 3".into()));
        let other: Result<u8, String> = catch(|| std::panic::panic_any(5u32), |what| what);
        assert_eq!(other, Err("unknown panic".into()));
    }
}
