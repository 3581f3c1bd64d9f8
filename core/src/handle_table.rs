//! [`HandleTable`]: how a backend turns plain-data handles back into its vendor objects.
//!
//! Backends hand out [`HandleId`]s inside [`Allocation`](crate::Allocation),
//! [`Mapping`](crate::Mapping) and [`SignalHandle`](crate::SignalHandle) and keep the
//! vendor objects here. Ids come from one process-wide counter and are never reused, so a
//! handle that was already released, or that belongs to another table or backend
//! instance, is reported as [`Error::UnknownHandle`] instead of reaching the vendor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::ids::HandleId;

/// Source of every [`HandleId`] in the process; starts at 1 so 0 is never valid.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A thread-safe map from [`HandleId`] to a backend's record of a vendor object.
#[derive(Debug)]
pub struct HandleTable<T> {
    kind: &'static str,
    entries: Mutex<HashMap<u64, T>>,
}

impl<T> HandleTable<T> {
    /// An empty table whose errors call its handles `kind` (e.g. `"mapping"`).
    pub fn new(kind: &'static str) -> Self {
        HandleTable {
            kind,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Stores `value` under a fresh id.
    pub fn insert(&self, value: T) -> HandleId {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, value);
        HandleId::mint(id)
    }

    /// Runs `f` on the entry for `id`.
    pub fn with<R>(&self, id: HandleId, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let mut entries = self.lock();
        let entry = entries.get_mut(&id.get()).ok_or_else(|| self.unknown(id))?;
        Ok(f(entry))
    }

    /// Removes and returns the entry for `id` (the release path: a second release of the
    /// same id is an [`Error::UnknownHandle`]).
    pub fn remove(&self, id: HandleId) -> Result<T> {
        self.lock()
            .remove(&id.get())
            .ok_or_else(|| self.unknown(id))
    }

    /// Puts back an entry taken by [`HandleTable::remove`] when its release failed, so the
    /// caller can retry.
    pub fn restore(&self, id: HandleId, value: T) {
        self.lock().insert(id.get(), value);
    }

    /// Removes every entry (for a backend's `Drop`), in no particular order.
    pub fn drain(&self) -> Vec<(HandleId, T)> {
        self.lock()
            .drain()
            .map(|(id, v)| (HandleId::mint(id), v))
            .collect()
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn unknown(&self, id: HandleId) -> Error {
        Error::UnknownHandle {
            kind: self.kind,
            id: id.get(),
        }
    }

    /// Locks the map. A panic while the lock was held cannot leave a half-updated entry
    /// (every mutation is a single map operation), so a poisoned lock is recovered.
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, T>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<T: Clone> HandleTable<T> {
    /// A copy of the entry for `id`.
    pub fn get(&self, id: HandleId) -> Result<T> {
        self.with(id, |v| v.clone())
    }

    /// A copy of the entry whose id number is `raw` (an id a token carried back, e.g. as
    /// its generation), with that id. Only a lookup: releasing needs a [`HandleId`]
    /// the caller was given.
    pub fn get_raw(&self, raw: u64) -> Result<(HandleId, T)> {
        let id = HandleId::mint(raw);
        self.get(id).map(|v| (id, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_twice_is_unknown_handle() {
        let t = HandleTable::new("mapping");
        let id = t.insert(5u32);
        assert_eq!(t.get(id).unwrap(), 5);
        assert_eq!(t.remove(id).unwrap(), 5);
        let err = t.remove(id).unwrap_err();
        assert!(matches!(err, Error::UnknownHandle { kind: "mapping", id: i } if i == id.get()));
        assert!(t.is_empty());
    }

    #[test]
    fn ids_are_unique_across_tables() {
        let a = HandleTable::new("allocation");
        let b = HandleTable::new("allocation");
        let ia = a.insert(1u8);
        let ib = b.insert(2u8);
        assert_ne!(ia, ib);
        assert!(b.get(ia).is_err(), "a handle from another table is unknown");
        assert_ne!(ia.get(), 0);
    }

    #[test]
    fn with_mutates_and_restore_puts_back() {
        let t = HandleTable::new("signal");
        let id = t.insert(vec![1]);
        t.with(id, |v| v.push(2)).unwrap();
        let v = t.remove(id).unwrap();
        assert_eq!(v, [1, 2]);
        t.restore(id, v);
        assert_eq!(t.len(), 1);
        let drained = t.drain();
        assert_eq!(drained, vec![(id, vec![1, 2])]);
        assert!(t.is_empty());
    }
}
