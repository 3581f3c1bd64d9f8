//! [`Slot`]: a Python object's reference to the Rust object behind it (a runtime, a
//! buffer, a signal, a share server), which `close()` empties: from then on the object's
//! methods raise `ClosedError`.
//!
//! A method that releases the GIL while it uses the object (a copy, an export, one slice
//! of a signal wait or of an `accept`) does so through an [`Op`], which the slot counts:
//! `close()` waits until the operations running on other threads have ended (with the GIL
//! released), so that none of them acts on the object after `close()` returned. A
//! blocking call made of slices (`Signal.wait`, `ShareServer.accept`) takes one `Op` per
//! slice and finds the slot empty at the next one (`ClosedError`). A buffer's other
//! references are its DLPack views, which keep the memory alive; `close()` refuses while
//! any is alive ([`Slot::close_unviewed`]), and an `Op` is not one.
//!
//! The Rust object is dropped with the GIL released (`close()`, and the Python object's
//! collection): its drop may free device memory, close an import or join a thread.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors;
use crate::held::Held;

/// What the slot's lock guards.
#[derive(Debug)]
struct State<T> {
    /// The object; `None` once closed.
    value: Option<Arc<T>>,
    /// The [`Op`]s alive (each holds an `Arc` of the object, not counted as a view).
    ops: usize,
}

/// The Python object's reference to its `T`; empty once closed.
#[derive(Debug)]
pub(crate) struct Slot<T: Send + Sync> {
    state: Mutex<State<T>>,
    /// Notified when the last [`Op`] ends.
    idle: Condvar,
    /// How error messages name the object (`"the shared buffer"`).
    what: &'static str,
    /// The pid of the process that made the slot: in a child `fork`ed from it, the object and the
    /// operations counted are the parent's (threads that do not exist here).
    birth: u32,
}

/// An operation in progress on a slot's object: derefs to it, and `close()` waits for it
/// to end. Take it right before the GIL-free part, and end it (drop it) before running any
/// Python code: a `close()` from that code, on this thread, would wait for it forever.
pub(crate) struct Op<'a, T: Send + Sync> {
    value: Option<Arc<T>>,
    slot: &'a Slot<T>,
}

impl<T: Send + Sync> std::ops::Deref for Op<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // Only `Drop` takes it.
        self.value
            .as_deref()
            .expect("an Op holds its object until dropped")
    }
}

impl<T: Send + Sync> Drop for Op<'_, T> {
    fn drop(&mut self) {
        // The reference and the count go together, under the lock: the references besides
        // the slot's are then exactly its operations and its views. It is never the last
        // one (the slot's, or the one `close()` keeps until the operations ended, is
        // still there).
        let mut state = self.slot.lock();
        drop(self.value.take());
        state.ops -= 1;
        if state.ops == 0 {
            self.slot.idle.notify_all();
        }
    }
}

/// Drops `value` with the GIL released when this thread holds it (the drop may call into
/// the vendor runtime, wait for a thread, or do file I/O); as is when the interpreter is
/// not running (finalizing).
pub(crate) fn release<V: Send>(value: V) {
    let mut value = Some(value);
    let _ = Python::try_attach(|py| {
        let v = value.take();
        py.detach(move || drop(v));
    });
    drop(value);
}

impl<T: Send + Sync> Slot<T> {
    /// A slot holding `value`.
    pub(crate) fn new(value: T, what: &'static str) -> Slot<T> {
        Slot {
            state: Mutex::new(State {
                value: Some(Arc::new(value)),
                ops: 0,
            }),
            idle: Condvar::new(),
            what,
            birth: std::process::id(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Each critical section is a take, a clone or a count: a poisoned lock is
        // consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The object, or [`ClosedError`](crate::errors::ClosedError): for use with the GIL
    /// held throughout, or to keep (a DLPack view).
    pub(crate) fn get(&self) -> PyResult<Arc<T>> {
        self.lock()
            .value
            .clone()
            .ok_or_else(|| errors::closed(self.what))
    }

    /// The object for an operation that releases the GIL, or `ClosedError`.
    pub(crate) fn op(&self) -> PyResult<Op<'_, T>> {
        let mut state = self.lock();
        let value = state
            .value
            .clone()
            .ok_or_else(|| errors::closed(self.what))?;
        state.ops += 1;
        Ok(Op {
            value: Some(value),
            slot: self,
        })
    }

    /// Whether `close()` ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().value.is_none()
    }

    /// Empties the slot (`state` is its lock): new operations raise `ClosedError`; waits
    /// with the GIL released for those running on other threads to end, then drops this
    /// reference, GIL released too.
    fn take_and_release(&self, py: Python<'_>, mut state: MutexGuard<'_, State<T>>) {
        let taken = state.value.take();
        drop(state);
        py.detach(move || {
            let mut state = self.lock();
            while state.ops > 0 {
                // A timeout only guards against a lost wake-up; the count is re-read.
                state = self
                    .idle
                    .wait_timeout(state, Duration::from_millis(50))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            drop(state);
            drop(taken);
        });
    }

    /// Empties the slot: new operations raise `ClosedError`; waits for those running on
    /// other threads to end, then drops this reference with the GIL released. Closing
    /// twice is a no-op.
    pub(crate) fn close(&self, py: Python<'_>) {
        if self.forget_inherited() {
            return;
        }
        self.take_and_release(py, self.lock());
    }

    /// In a child `fork`ed after the slot was made: empties it without waiting for the
    /// operations its parent's threads had running (they never end here) nor for a lock
    /// one of them held, and without releasing the object (the parent's: the devipc
    /// object refuses and releases nothing in a child anyway). Returns whether it did.
    fn forget_inherited(&self) -> bool {
        if self.birth == std::process::id() {
            return false;
        }
        if let Ok(mut state) = self.state.try_lock() {
            std::mem::forget(state.value.take());
        }
        true
    }
}

impl<T: Send + Sync> Drop for Slot<T> {
    fn drop(&mut self) {
        if self.birth != std::process::id() {
            // A forked child's copy (see `forget_inherited`).
            let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
            std::mem::forget(state.value.take());
            return;
        }
        // No `Op` is alive: each borrows the slot.
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = state.value.take() {
            release(value);
        }
    }
}

impl Slot<Held> {
    /// Releases the buffer now: refused while DLPack views of it are alive; else waits for
    /// the copies and exports running on other threads (they are not views), as
    /// [`Slot::close`]. Closing twice is a no-op.
    pub(crate) fn close_unviewed(&self, py: Python<'_>) -> PyResult<()> {
        if self.forget_inherited() {
            return Ok(());
        }
        let state = self.lock();
        let Some(arc) = state.value.as_ref() else {
            return Ok(());
        };
        // Each operation holds one reference (counted together, see `Op`'s drop).
        let views = (Arc::strong_count(arc) - 1).saturating_sub(state.ops);
        if views > 0 {
            return Err(errors::plain(
                errors::BUFFER_IN_USE,
                format!(
                    "{} is still used by {views} DLPack view(s) (arrays or tensors made with \
                     from_dlpack, or views not yet consumed): delete them first",
                    self.what
                ),
            ));
        }
        self.take_and_release(py, state);
        Ok(())
    }
}

/// A value dropped with the GIL released ([`release`]): the devipc objects the data
/// plane's Python classes hold (a stream, an event, a span, a request), whose drop may
/// call the vendor runtime or free memory.
#[derive(Debug)]
pub(crate) struct Detached<T: Send>(Option<T>);

impl<T: Send> Detached<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T) -> Detached<T> {
        Detached(Some(value))
    }
}

impl<T: Send> std::ops::Deref for Detached<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // Only `Drop` takes it.
        self.0
            .as_ref()
            .expect("a Detached holds its value until dropped")
    }
}

impl<T: Send> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            release(value);
        }
    }
}
