//! [`HandleTable`]: how a backend turns plain-data handles back into its vendor objects.
//!
//! Backends hand out [`HandleId`]s inside [`Allocation`](crate::Allocation),
//! [`Mapping`](crate::Mapping) and [`SignalHandle`](crate::SignalHandle) and keep the
//! vendor objects here. Ids come from one process-wide counter and are never reused, so a
//! handle that was already released, or that belongs to another table or backend
//! instance, is reported as [`Error::UnknownHandle`] instead of reaching the vendor.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use crate::error::{Error, Result};
use crate::ids::HandleId;

/// Source of every [`HandleId`] in the process; starts at 1 so 0 is never valid.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A thread-safe map from [`HandleId`] to a backend's record of a vendor object.
///
/// Handles are plain data and can be cloned, so one thread may release a handle while
/// another still passes a clone of it to a vendor call. [`HandleTable::pin`] excludes
/// that: a release ([`HandleTable::remove`]) first makes the entry unknown to new
/// lookups, then waits until every pin taken before has been dropped, so a vendor object
/// is never destroyed under a call still using it.
#[derive(Debug)]
pub struct HandleTable<T> {
    kind: &'static str,
    entries: Mutex<HashMap<u64, Entry<T>>>,
    /// Signalled when the last pin of an entry being removed is dropped.
    unpinned: Condvar,
}

/// An entry and who is using it.
#[derive(Debug)]
struct Entry<T> {
    value: T,
    /// The threads holding a [`Pinned`] of it (a thread may hold several).
    pinned_by: Vec<ThreadId>,
    /// A release has begun: the entry is unknown to new lookups and pins.
    removing: bool,
}

impl<T> HandleTable<T> {
    /// An empty table whose errors call its handles `kind` (e.g. `"mapping"`).
    pub fn new(kind: &'static str) -> Self {
        HandleTable {
            kind,
            entries: Mutex::new(HashMap::new()),
            unpinned: Condvar::new(),
        }
    }

    /// Stores `value` under a fresh id.
    pub fn insert(&self, value: T) -> HandleId {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, Entry::new(value));
        HandleId::mint(id)
    }

    /// Runs `f` on the entry for `id`, under the table's lock (keep `f` short: no vendor
    /// call). An entry being released is unknown.
    pub fn with<R>(&self, id: HandleId, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let mut entries = self.lock();
        match entries.get_mut(&id.get()) {
            Some(entry) if !entry.removing => Ok(f(&mut entry.value)),
            _ => Err(self.unknown(id)),
        }
    }

    /// Removes and returns the entry for `id`, for its release: a second release of the
    /// same id is an [`Error::UnknownHandle`].
    ///
    /// From the call on, the entry is unknown to lookups; the call returns once every
    /// [`Pinned`] of it held by other threads has been dropped (a pinned `wait` on a
    /// signal included). A thread that still holds a pin of the entry itself gets
    /// [`Error::InvalidArgument`] instead of waiting for itself forever.
    pub fn remove(&self, id: HandleId) -> Result<T> {
        let me = thread::current().id();
        let mut entries = self.lock();
        match entries.get_mut(&id.get()) {
            Some(entry) if !entry.removing => {
                if entry.pinned_by.contains(&me) {
                    return Err(Error::invalid_argument(format!(
                        "{} {} is released by a thread that is still using it",
                        self.kind, id
                    )));
                }
                entry.removing = true;
            }
            _ => return Err(self.unknown(id)),
        }
        loop {
            let pinned = entries
                .get(&id.get())
                .is_some_and(|entry| !entry.pinned_by.is_empty());
            if !pinned {
                break;
            }
            entries = self
                .unpinned
                .wait(entries)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        let entry = entries
            .remove(&id.get())
            .expect("only the remover takes an entry marked `removing` out");
        Ok(entry.value)
    }

    /// Puts back an entry taken by [`HandleTable::remove`] when its release failed, so the
    /// caller can retry. An id that is still in the table (live, or being removed by
    /// another thread) is left alone: only what `remove` returned can be restored.
    pub fn restore(&self, id: HandleId, value: T) {
        self.lock()
            .entry(id.get())
            .or_insert_with(|| Entry::new(value));
    }

    /// Removes every entry (for a backend's `Drop`), in no particular order. A pin borrows
    /// the table, so none can be outstanding when its owner is dropped.
    pub fn drain(&self) -> Vec<(HandleId, T)> {
        self.lock()
            .drain()
            .map(|(id, entry)| (HandleId::mint(id), entry.value))
            .collect()
    }

    /// Number of live entries (those being released included).
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
    /// (every mutation is a single map or entry operation), so a poisoned lock is
    /// recovered.
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry<T>>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops one pin of `id` taken by `thread`, waking a waiting remover after the last.
    fn unpin(&self, id: u64, thread: ThreadId) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&id) {
            if let Some(at) = entry.pinned_by.iter().position(|t| *t == thread) {
                entry.pinned_by.swap_remove(at);
            }
            if entry.removing && entry.pinned_by.is_empty() {
                self.unpinned.notify_all();
            }
        }
    }
}

impl<T> Entry<T> {
    fn new(value: T) -> Self {
        Entry {
            value,
            pinned_by: Vec::new(),
            removing: false,
        }
    }
}

impl<T: Clone> HandleTable<T> {
    /// A copy of the entry for `id`, for checks that make no vendor call with it (use
    /// [`HandleTable::pin`] for those).
    pub fn get(&self, id: HandleId) -> Result<T> {
        self.with(id, |v| v.clone())
    }

    /// A copy of the entry for `id` that keeps the entry from being released until it is
    /// dropped: hold it across the vendor calls that use the object.
    pub fn pin(&self, id: HandleId) -> Result<Pinned<'_, T>> {
        let thread = thread::current().id();
        let value = self.with_pinned(id, thread)?;
        Ok(Pinned {
            table: self,
            id: id.get(),
            thread,
            value,
            not_send: PhantomData,
        })
    }

    /// A pin of the entry whose id number is `raw` (an id a token carried back, e.g. as
    /// its generation), with that id. Only a lookup: releasing needs a [`HandleId`]
    /// the caller was given.
    pub fn pin_raw(&self, raw: u64) -> Result<(HandleId, Pinned<'_, T>)> {
        let id = HandleId::mint(raw);
        self.pin(id).map(|p| (id, p))
    }

    fn with_pinned(&self, id: HandleId, thread: ThreadId) -> Result<T> {
        let mut entries = self.lock();
        match entries.get_mut(&id.get()) {
            Some(entry) if !entry.removing => {
                entry.pinned_by.push(thread);
                Ok(entry.value.clone())
            }
            _ => Err(self.unknown(id)),
        }
    }
}

/// A copy of a [`HandleTable`] entry whose release waits until this is dropped (see
/// [`HandleTable::pin`]).
///
/// It stays on the thread that pinned (not `Send`): a release on that thread is refused
/// rather than waiting for itself, which needs to know whose pin it is.
///
/// ```compile_fail
/// fn on_another_thread<T: Send>(_: T) {}
/// let table = devipc_core::HandleTable::new("signal");
/// let id = table.insert(1u8);
/// on_another_thread(table.pin(id).unwrap());
/// ```
#[derive(Debug)]
pub struct Pinned<'a, T> {
    table: &'a HandleTable<T>,
    id: u64,
    thread: ThreadId,
    value: T,
    not_send: PhantomData<*const ()>,
}

impl<T> Pinned<'_, T> {
    /// Whether another thread has begun releasing the entry ([`HandleTable::remove`] is
    /// waiting for this pin). A call that may block for long (a signal's `wait`) checks
    /// it now and then and gives up, so that the release is not held up forever.
    pub fn release_requested(&self) -> bool {
        self.table
            .lock()
            .get(&self.id)
            .is_some_and(|entry| entry.removing)
    }
}

impl<T> Deref for Pinned<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Pinned<'_, T> {
    fn drop(&mut self) {
        self.table.unpin(self.id, self.thread);
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

    #[test]
    fn a_release_waits_for_the_pins_of_other_threads() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;

        let t = Arc::new(HandleTable::new("signal"));
        let id = t.insert(7u32);
        let pin = t.pin(id).unwrap();
        assert_eq!(*pin, 7);
        let released = Arc::new(AtomicBool::new(false));
        let remover = {
            let (t, released) = (Arc::clone(&t), Arc::clone(&released));
            std::thread::spawn(move || {
                let v = t.remove(id).unwrap();
                released.store(true, Ordering::SeqCst);
                v
            })
        };
        // The release has begun: new lookups and pins no longer find the entry ...
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while t.get(id).is_ok() {
            assert!(std::time::Instant::now() < deadline, "remove never began");
            std::thread::yield_now();
        }
        assert!(matches!(t.pin(id), Err(Error::UnknownHandle { .. })));
        assert!(t.with(id, |_| ()).is_err());
        // ... but it does not finish while this thread still uses the object, which can
        // see that a release waits for it.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!released.load(Ordering::SeqCst), "released under a pin");
        assert!(pin.release_requested());
        drop(pin);
        assert_eq!(remover.join().unwrap(), 7);
        assert!(released.load(Ordering::SeqCst));
        assert!(t.is_empty());
        assert!(matches!(t.remove(id), Err(Error::UnknownHandle { .. })));
    }

    #[test]
    fn a_thread_releasing_what_it_pins_gets_an_error_not_a_deadlock() {
        let t = HandleTable::new("allocation");
        let id = t.insert(1u8);
        let pin = t.pin(id).unwrap();
        let err = t.remove(id).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(err.to_string().contains("still using it"), "{err}");
        // Nothing changed: the entry is still there, and released once the pin is gone.
        assert_eq!(t.get(id).unwrap(), 1);
        drop(pin);
        assert_eq!(t.remove(id).unwrap(), 1);
    }

    #[test]
    fn restore_never_replaces_an_entry_still_in_the_table() {
        let t = HandleTable::new("allocation");
        let id = t.insert(1u8);
        t.restore(id, 9);
        assert_eq!(t.get(id).unwrap(), 1, "a live entry is not replaced");
        assert_eq!(t.remove(id).unwrap(), 1);
        t.restore(id, 2);
        assert_eq!(t.get(id).unwrap(), 2, "what remove returned comes back");
    }

    #[test]
    fn pins_by_raw_id_and_restore_after_a_failed_release() {
        let t = HandleTable::new("signal");
        let id = t.insert(3u16);
        let (found, pin) = t.pin_raw(id.get()).unwrap();
        assert_eq!((found, *pin), (id, 3));
        assert!(!pin.release_requested());
        drop(pin);
        let v = t.remove(id).unwrap();
        assert!(t.pin_raw(id.get()).is_err());
        t.restore(id, v);
        assert_eq!(
            *t.pin(id).unwrap(),
            3,
            "a restored entry can be pinned again"
        );
    }
}
