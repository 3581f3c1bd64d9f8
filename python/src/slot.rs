//! [`Slot`]: a Python object's reference to the Rust object behind it (a buffer, a
//! signal, a share server), which `close()` empties: from then on the object's methods
//! raise `ClosedError`, while whatever else holds the Rust object (DLPack views, a
//! waiting thread) keeps it until done.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;

use crate::errors::{self, BufferInUseError};
use crate::held::Held;

/// The Python object's reference to its `T`; `None` once closed.
#[derive(Debug)]
pub(crate) struct Slot<T> {
    value: Mutex<Option<Arc<T>>>,
    /// How error messages name the object (`"the shared buffer"`).
    what: &'static str,
}

impl<T> Slot<T> {
    /// A slot holding `value`.
    pub(crate) fn new(value: T, what: &'static str) -> Slot<T> {
        Slot {
            value: Mutex::new(Some(Arc::new(value))),
            what,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<T>>> {
        // Each critical section is one take or clone: a poisoned lock is consistent.
        self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The object, or [`ClosedError`](crate::errors::ClosedError).
    pub(crate) fn get(&self) -> PyResult<Arc<T>> {
        self.lock().clone().ok_or_else(|| errors::closed(self.what))
    }

    /// Whether `close()` ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Drops this reference now (outside the lock: the object's drop calls into devipc).
    /// Closing twice is a no-op.
    pub(crate) fn close(&self) {
        let taken = self.lock().take();
        drop(taken);
    }
}

impl Slot<Held> {
    /// Releases the buffer now; refused while DLPack views of it are alive. Closing twice
    /// is a no-op.
    pub(crate) fn close_unviewed(&self) -> PyResult<()> {
        let mut held = self.lock();
        let Some(arc) = held.as_ref() else {
            return Ok(());
        };
        let views = Arc::strong_count(arc) - 1;
        if views > 0 {
            return Err(errors::plain::<BufferInUseError>(
                "buffer_in_use",
                format!(
                    "{} is still used by {views} DLPack view(s) (arrays or tensors made with \
                     from_dlpack, or views not yet consumed): delete them first",
                    self.what
                ),
            ));
        }
        let last = held.take();
        drop(held);
        drop(last);
        Ok(())
    }
}
