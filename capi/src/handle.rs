//! Opaque handles: what a C caller holds for a runtime, a buffer, a token or a signal.
//!
//! A handle is a key into a table of this process's live objects, never a pointer devipc
//! dereferences. Each key is used once (a counter), so a handle that was freed, that is of
//! another type than the function takes (a buffer passed as a runtime), or that was never
//! made, is `DEVIPC_ERR_UNKNOWN_HANDLE`, not undefined behaviour. The table holds each
//! object behind an `Arc`: a call on one thread keeps the object alive while another
//! thread frees the handle; the object is released when both are done.
//!
//! Ownership: a handle returned through an out-parameter (`devipc_x **out`) belongs to the
//! caller, who releases it exactly once with its own `*_free` / `*_close` call. That call
//! takes the caller's variable (`devipc_x **`) and sets it to NULL, so calling it again
//! through the same variable, or on a NULL handle, does nothing and returns `DEVIPC_OK`.
//! Objects keep what they need alive: a buffer keeps its runtime, so the runtime's handle
//! may be freed first.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devipc_core::fork::{PerProcess, PerProcessGuard};

use crate::boundary::{Failure, Outcome};

/// A C handle type and the Rust object it names.
pub(crate) trait Handle {
    /// The object.
    type Target: Any + Send + Sync;
    /// Its name in messages, e.g. `runtime`.
    const KIND: &'static str;
}

/// The live objects by key.
type Table = HashMap<usize, Arc<dyn Any + Send + Sync>>;

/// Per process: a child `fork`ed while another thread of the parent held the table gets
/// an empty one instead of a lock nobody will release (its inherited handles are then
/// unknown); otherwise it keeps the parent's handles, whose objects refuse the child
/// (`DEVIPC_ERR_INHERITED_ACROSS_FORK`).
static LIVE: PerProcess<Table> = PerProcess::new(|inherited| inherited.unwrap_or_default());

/// The next key. Keys step by 16 so they look like (aligned) pointers to debuggers and
/// never collide with NULL; a 64-bit counter does not wrap.
static NEXT: AtomicUsize = AtomicUsize::new(16);

/// The table, locked for one lookup, insert or remove.
fn live() -> PerProcessGuard<'static, Table> {
    LIVE.lock()
}

/// The error for a handle that names no live object of type `H`.
fn unknown<H: Handle>(key: usize) -> Failure {
    Failure::Devipc(safe::Error::UnknownHandle {
        kind: H::KIND,
        id: key as u64,
    })
}

/// Registers `value` and returns its new handle.
pub(crate) fn new<H: Handle>(value: H::Target) -> *mut H {
    let key = NEXT.fetch_add(16, Ordering::Relaxed);
    live().insert(key, Arc::new(value));
    std::ptr::without_provenance_mut(key)
}

/// The object `handle` names.
pub(crate) fn get<H: Handle>(handle: *const H, what: &'static str) -> Outcome<Arc<H::Target>> {
    if handle.is_null() {
        return Err(Failure::Null(what));
    }
    let key = handle.addr();
    let object = live().get(&key).cloned().ok_or_else(|| unknown::<H>(key))?;
    object
        .downcast::<H::Target>()
        .map_err(|_| unknown::<H>(key))
}

/// Ends the handle in `*handle` and NULLs it: the object is released once no running call
/// uses it. `handle` NULL is [`Failure::Null`]; `*handle` NULL does nothing.
///
/// # Safety
/// `handle` is NULL or valid for a read and a write of a pointer.
pub(crate) unsafe fn free<H: Handle>(handle: *mut *mut H, what: &'static str) -> Outcome {
    if handle.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the caller's guarantee that it is readable.
    let h = unsafe { handle.read() };
    if h.is_null() {
        return Ok(());
    }
    let key = h.addr();
    let object = {
        let mut live = live();
        match live.get(&key) {
            Some(o) if o.is::<H::Target>() => live.remove(&key),
            _ => return Err(unknown::<H>(key)),
        }
    };
    // SAFETY: as above, and writable.
    unsafe { handle.write(std::ptr::null_mut()) };
    // Released outside the lock: a release may call the vendor and wait.
    drop(object);
    Ok(())
}

/// Where a call stores the handle it makes: the caller's `devipc_x **out`, set to NULL
/// as soon as the call starts (so it is NULL after any failure) and to the new handle by
/// [`Out::set`].
pub(crate) struct Out<H> {
    ptr: *mut *mut H,
}

impl<H: Handle> Out<H> {
    /// Checks `out` (NULL is [`Failure::Null`]) and sets `*out` to NULL.
    ///
    /// # Safety
    /// `out` is NULL or valid for writes of a pointer while the `Out` lives.
    pub(crate) unsafe fn new(out: *mut *mut H, what: &'static str) -> Outcome<Out<H>> {
        if out.is_null() {
            return Err(Failure::Null(what));
        }
        // SAFETY: not NULL; the caller's guarantee that it is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        Ok(Out { ptr: out })
    }

    /// Registers `value` and stores its new handle.
    pub(crate) fn set(self, value: H::Target) -> Outcome {
        let handle = new::<H>(value);
        // SAFETY: checked not NULL and writable (the guarantee `Out::new` was given).
        unsafe { self.ptr.write(handle) };
        Ok(())
    }
}

/// How many handles are live in this process (for the tests' leak checks).
pub(crate) fn live_count() -> usize {
    live().len()
}

/// The number of handles of any type this process holds: every handle made and not yet
/// freed. A program that freed everything it made sees 0 (tests check this for leaks).
#[unsafe(no_mangle)]
pub extern "C" fn devipc_live_handles() -> usize {
    crate::boundary::catch_value(usize::MAX, live_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Thing;
    impl Handle for Thing {
        type Target = String;
        const KIND: &'static str = "thing";
    }
    struct Other;
    impl Handle for Other {
        type Target = u32;
        const KIND: &'static str = "other";
    }

    #[test]
    fn a_freed_or_foreign_handle_is_unknown_and_a_second_free_is_a_no_op() {
        let mut h = new::<Thing>("x".to_owned());
        assert_eq!(*get(h, "h").unwrap(), "x");
        let foreign = h.cast::<Other>();
        let err = get(foreign, "h").unwrap_err();
        assert!(matches!(
            err,
            Failure::Devipc(safe::Error::UnknownHandle { kind: "other", .. })
        ));
        let copy = h;
        // SAFETY: a local variable.
        unsafe { free(&mut h, "h") }.unwrap();
        assert!(h.is_null());
        // SAFETY: as above.
        unsafe { free(&mut h, "h") }.unwrap();
        assert!(matches!(
            get(copy, "h").unwrap_err(),
            Failure::Devipc(safe::Error::UnknownHandle { kind: "thing", .. })
        ));
        let mut copy = copy;
        // SAFETY: as above.
        assert!(unsafe { free(&mut copy, "h") }.is_err());
        assert!(matches!(
            get(std::ptr::null::<Thing>(), "h").unwrap_err(),
            Failure::Null("h")
        ));
    }
}
