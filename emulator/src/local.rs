//! Process-local bookkeeping for the surfaces: address ranges, opaque handles, last error.
//!
//! Shared state lives in the state directory ([`crate::state`]); what only this process
//! needs lives here, behind mutexes or in thread-locals:
//! - [`RangeMap`]: the address ranges this process mapped (device allocations, imports,
//!   VMM mappings), so an interior pointer resolves to its allocation
//!   (`hipMemGetAddressRange`, `aclrtMemGetAddressRange`, `hipIpcGetMemHandle` on an
//!   interior pointer) and an unknown pointer is rejected instead of dereferenced.
//! - [`HandleTable`]: opaque handle values (`aclrtNotify`, `aclrtDrvMemHandle`,
//!   `hipEvent_t`, ...) that the surfaces give to C callers; they are looked up, never
//!   dereferenced, so a garbage or stale handle is an error, not undefined behaviour.
//! - The per-thread last error ([`set_last_error`], [`last_error_message_ptr`]): the code
//!   and message of the latest failure on this thread, for `aclGetRecentErrMsg`,
//!   `hipGetLastError` / `hipPeekAtLastError`, naming the violated rule when there is one.
//! - [`ForkLocal`]: any other process-local state of a surface (devices in use, imports,
//!   default streams, ...).
//!
//! # Fork
//!
//! All of it belongs to the process that made it. A child made by `fork` (Python's
//! default start method on Linux before 3.14) inherits a copy of the memory, but neither
//! runtime lets it act under its parent's state (CUDA refuses a forked context,
//! `cudaErrorInitializationError`). So every table and [`ForkLocal`] records the pid that
//! filled it, and the first access from another pid starts afresh, as a new process would:
//! the child sees none of its parent's handles, ranges, devices or streams, and initialises
//! its own. What it inherited is forgotten, never dropped or released (it is the
//! parent's: releasing it would end the parent's holds, closing it would unmap or join
//! what only the parent has); a handle of the parent is answered with
//! [`EmuError::Forked`], which the surfaces report as an invalid handle. The shared state
//! (holders, exporters) names processes by pid and start time, so nothing there needs
//! resetting. A lock another thread of the parent held at the moment of the fork stays
//! held in the child, so the child never takes an inherited lock: each process's state
//! is an instance of its own behind an atomic pointer ([`ForkLocal`] is devipc-core's
//! `PerProcess`), and a child makes a new one without waiting for its parent's.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CString, c_char};

use crate::error::EmuError;

/// This process's pid: devipc-core's cache, refreshed in a `fork`ed child
/// ([`devipc_core::fork::current_pid`]), so no system call per use.
pub fn pid() -> u32 {
    devipc_core::fork::current_pid()
}

/// Process-local state that a `fork`ed child does not inherit (see the [module
/// docs](self#fork)): devipc-core's [`PerProcess`](devipc_core::fork::PerProcess). The
/// value belongs to the pid that first touched it; the first lock in another process
/// makes a new one with `fresh(inherited)` (`inherited` is `None` when a thread of the
/// parent held the value at the fork: the child never waits for that lock), which must
/// forget (never drop) what it does not keep. Usable in a `static`.
///
/// ```
/// use devipc_emulator::local::{ForkLocal, forget_inherited};
/// static COUNT: ForkLocal<u64> = ForkLocal::new(forget_inherited);
/// *COUNT.lock() += 1;
/// assert_eq!(*COUNT.lock(), 1);
/// ```
pub type ForkLocal<T> = devipc_core::fork::PerProcess<T>;

/// The locked value of a [`ForkLocal`].
pub type ForkGuard<'a, T> = devipc_core::fork::PerProcessGuard<'a, T>;

pub use devipc_core::fork::forget_inherited;

/// One registered range and its surface-defined value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRange<T> {
    /// First address.
    pub base: usize,
    /// Length in bytes (non-zero).
    pub len: usize,
    /// What the surface recorded for it, e.g. `(ObjectId, ObjectKind, role)`.
    pub value: T,
}

impl<T> LocalRange<T> {
    /// One past the last address.
    pub fn end(&self) -> usize {
        self.base + self.len
    }

    /// Offset of `addr` from `base` (the caller knows `addr` is inside).
    pub fn offset_of(&self, addr: usize) -> usize {
        addr - self.base
    }
}

/// Non-overlapping address ranges of this process, looked up by any address inside them.
///
/// ```
/// use devipc_emulator::local::RangeMap;
/// use devipc_emulator::state::{ObjectId, ObjectKind};
///
/// static MAPPED: RangeMap<(ObjectId, ObjectKind)> = RangeMap::new();
/// let id = ObjectId::new(1, 1).unwrap();
/// MAPPED.insert(0x10000, 0x2000, (id, ObjectKind::Memory)).unwrap();
/// let hit = MAPPED.resolve(0x10800).unwrap(); // interior pointer
/// assert_eq!((hit.base, hit.len, hit.value.0), (0x10000, 0x2000, id));
/// assert!(MAPPED.resolve(0x12000).is_none()); // one past the end
/// assert!(MAPPED.insert(0x11000, 0x10, (id, ObjectKind::Memory)).is_err()); // overlap
/// assert!(MAPPED.remove(0x10000).is_some());
/// ```
#[derive(Debug)]
pub struct RangeMap<T: 'static> {
    inner: ForkLocal<BTreeMap<usize, (usize, T)>>,
}

impl<T: Clone + 'static> Default for RangeMap<T> {
    fn default() -> Self {
        RangeMap::new()
    }
}

impl<T: Clone + 'static> RangeMap<T> {
    /// An empty map (usable in a `static`); a `fork`ed child starts with an empty one.
    pub const fn new() -> Self {
        RangeMap {
            inner: ForkLocal::new(forget_inherited),
        }
    }

    /// Registers `base..base+len`. [`EmuError::InvalidArgument`] for an empty or
    /// wrapping range, [`EmuError::Overlap`] if it intersects a registered one.
    pub fn insert(&self, base: usize, len: usize, value: T) -> Result<(), EmuError> {
        let end = base
            .checked_add(len)
            .filter(|_| len > 0)
            .ok_or_else(|| EmuError::InvalidArgument(format!("range {base:#x}+{len:#x}")))?;
        let mut map = self.inner.lock();
        let before = map
            .range(..=base)
            .next_back()
            .is_some_and(|(b, (l, _))| b + l > base);
        let after = map.range(base..).next().is_some_and(|(b, _)| *b < end);
        if before || after {
            return Err(EmuError::Overlap { base, len });
        }
        map.insert(base, (len, value));
        Ok(())
    }

    /// Unregisters the range starting exactly at `base`.
    pub fn remove(&self, base: usize) -> Option<LocalRange<T>> {
        self.inner
            .lock()
            .remove(&base)
            .map(|(len, value)| LocalRange { base, len, value })
    }

    /// The range starting exactly at `base`.
    pub fn get(&self, base: usize) -> Option<LocalRange<T>> {
        self.inner.lock().get(&base).map(|(len, value)| LocalRange {
            base,
            len: *len,
            value: value.clone(),
        })
    }

    /// The range containing `addr`, if any.
    pub fn resolve(&self, addr: usize) -> Option<LocalRange<T>> {
        let map = self.inner.lock();
        let (base, (len, value)) = map.range(..=addr).next_back()?;
        (addr - base < *len).then(|| LocalRange {
            base: *base,
            len: *len,
            value: value.clone(),
        })
    }

    /// The range containing all of `addr..addr+len` (e.g. a memcpy operand);
    /// [`EmuError::UnknownPointer`] if `addr` is in no range, [`EmuError::InvalidArgument`]
    /// if the span runs past the end of its range.
    pub fn resolve_span(&self, addr: usize, len: usize) -> Result<LocalRange<T>, EmuError> {
        let hit = self
            .resolve(addr)
            .ok_or(EmuError::UnknownPointer { addr })?;
        let fits = addr.checked_add(len).is_some_and(|end| end <= hit.end());
        if !fits {
            return Err(EmuError::InvalidArgument(format!(
                "{len:#x} bytes at {addr:#x} run past the end of the range {:#x}+{:#x}",
                hit.base, hit.len
            )));
        }
        Ok(hit)
    }

    /// Changes the value of the range starting at `base`.
    pub fn update<R>(&self, base: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        self.inner.lock().get_mut(&base).map(|(_, v)| f(v))
    }

    /// All ranges, in address order.
    pub fn snapshot(&self) -> Vec<LocalRange<T>> {
        self.inner
            .lock()
            .iter()
            .map(|(base, (len, value))| LocalRange {
                base: *base,
                len: *len,
                value: value.clone(),
            })
            .collect()
    }

    /// Number of registered ranges.
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    /// Whether no range is registered.
    pub fn is_empty(&self) -> bool {
        self.inner.lock().is_empty()
    }
}

/// Opaque, never-reused, never-dereferenced handle values for C callers.
///
/// Values are non-zero, pointer-aligned, carry the table's `tag` in bits 32..48 (so a
/// handle of one table is never valid in another) and a per-table counter above bit 4.
///
/// ```
/// use devipc_emulator::local::HandleTable;
/// static NOTIFIES: HandleTable<u64> = HandleTable::new("notify", 0x4e01);
/// let h = NOTIFIES.insert(42).unwrap();
/// assert_eq!(NOTIFIES.get(h).unwrap(), 42);
/// assert_eq!(NOTIFIES.remove(h).unwrap(), 42);
/// assert!(NOTIFIES.get(h).is_err()); // stale
/// assert!(NOTIFIES.get(0).is_err()); // null
/// ```
#[derive(Debug)]
pub struct HandleTable<T: 'static> {
    what: &'static str,
    tag: u16,
    inner: ForkLocal<Handles<T>>,
}

/// The handles of one table in one process.
struct Handles<T> {
    /// Handles ever issued by the table, in this process and its ancestors (so a child's
    /// handles never equal its parent's).
    counter: u64,
    live: BTreeMap<usize, T>,
    /// The pid that issued `live`.
    owner: u32,
    /// Handles the parent had when this process forked from it, and the parent's pid.
    inherited: Option<(u32, BTreeSet<usize>)>,
}

impl<T> Handles<T> {
    /// The table of a new process, or of a forked child from its parent's (whose values
    /// are forgotten: they are the parent's).
    fn fresh(parent: Option<Handles<T>>) -> Handles<T> {
        let mut fresh = Handles {
            counter: 0,
            live: BTreeMap::new(),
            owner: pid(),
            inherited: None,
        };
        if let Some(mut parent) = parent {
            fresh.counter = parent.counter;
            let live = std::mem::take(&mut parent.live);
            let mut handles: BTreeSet<usize> = live.keys().copied().collect();
            std::mem::forget(live);
            if let Some((_, older)) = parent.inherited.take() {
                handles.extend(older);
            }
            fresh.inherited = Some((parent.owner, handles));
        }
        fresh
    }
}

/// Largest per-table counter (keeps handle values below 2^48).
const MAX_HANDLE_COUNTER: u64 = (1 << 28) - 1;

impl<T: Clone + 'static> HandleTable<T> {
    /// An empty table; `what` names it in errors, `tag` distinguishes its values from
    /// other tables' (use a different tag per table). A `fork`ed child starts with an
    /// empty table, and its parent's handles are [`EmuError::Forked`] there.
    pub const fn new(what: &'static str, tag: u16) -> Self {
        HandleTable {
            what,
            tag,
            inner: ForkLocal::new(Handles::fresh),
        }
    }

    /// Stores `value` under a fresh handle.
    pub fn insert(&self, value: T) -> Result<usize, EmuError> {
        let mut inner = self.inner.lock();
        if inner.counter >= MAX_HANDLE_COUNTER {
            return Err(EmuError::LimitExceeded {
                what: "handles issued by one table",
                limit: MAX_HANDLE_COUNTER as usize,
            });
        }
        inner.counter += 1;
        let handle = ((u64::from(self.tag) << 32) | (inner.counter << 4)) as usize;
        inner.live.insert(handle, value);
        Ok(handle)
    }

    /// The value of `handle`; [`EmuError::UnknownHandle`] if never issued or removed,
    /// [`EmuError::Forked`] if it is the parent's.
    pub fn get(&self, handle: usize) -> Result<T, EmuError> {
        let inner = self.inner.lock();
        inner
            .live
            .get(&handle)
            .cloned()
            .ok_or_else(|| self.unknown(&inner, handle))
    }

    /// Runs `f` on the value of `handle` under the table's mutex.
    pub fn with<R>(&self, handle: usize, f: impl FnOnce(&mut T) -> R) -> Result<R, EmuError> {
        let mut inner = self.inner.lock();
        match inner.live.get_mut(&handle) {
            Some(value) => Ok(f(value)),
            None => Err(self.unknown(&inner, handle)),
        }
    }

    /// Removes `handle`, returning its value; the value is never issued again.
    pub fn remove(&self, handle: usize) -> Result<T, EmuError> {
        let mut inner = self.inner.lock();
        match inner.live.remove(&handle) {
            Some(value) => Ok(value),
            None => Err(self.unknown(&inner, handle)),
        }
    }

    /// All live handles and values.
    pub fn snapshot(&self) -> Vec<(usize, T)> {
        self.inner
            .lock()
            .live
            .iter()
            .map(|(h, v)| (*h, v.clone()))
            .collect()
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.inner.lock().live.len()
    }

    /// Whether no handle is live.
    pub fn is_empty(&self) -> bool {
        self.inner.lock().live.is_empty()
    }

    fn unknown(&self, inner: &Handles<T>, value: usize) -> EmuError {
        match &inner.inherited {
            Some((parent, handles)) if handles.contains(&value) => EmuError::Forked {
                what: self.what,
                value,
                parent: *parent,
            },
            _ => EmuError::UnknownHandle {
                what: self.what,
                value,
            },
        }
    }
}

/// The latest failure on this thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// The vendor code returned to the caller.
    pub code: i32,
    /// The rule id, when a documented vendor rule was enforced.
    pub rule: Option<&'static str>,
    /// What went wrong, for humans.
    pub message: String,
}

impl LastError {
    /// The message as shown to C callers: `message`, plus ` [rule <id>]` when a rule was
    /// violated.
    pub fn display(&self) -> String {
        match self.rule {
            Some(rule) => format!("{} [rule {rule}]", self.message),
            None => self.message.clone(),
        }
    }
}

struct Slot {
    error: Option<LastError>,
    /// `error.display()` as a C string, kept alive for `last_error_message_ptr`.
    c_message: CString,
}

thread_local! {
    static LAST: RefCell<Slot> = RefCell::new(Slot {
        error: None,
        c_message: CString::default(),
    });
}

fn store(error: Option<LastError>) {
    let text = error.as_ref().map(LastError::display).unwrap_or_default();
    // Interior NULs would truncate the C string; replace them.
    let c_message = CString::new(text.replace('\0', "?")).unwrap_or_default();
    LAST.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.error = error;
        slot.c_message = c_message;
    });
}

/// Records a failure on this thread (replacing the previous one).
pub fn set_last_error(code: i32, message: impl Into<String>) {
    store(Some(LastError {
        code,
        rule: None,
        message: message.into(),
    }));
}

/// Records a failure caused by enforcing rule `rule` (its id appears in the message).
pub fn set_rule_error(code: i32, rule: &'static str, message: impl Into<String>) {
    store(Some(LastError {
        code,
        rule: Some(rule),
        message: message.into(),
    }));
}

/// The latest failure on this thread, if any (left in place: `hipPeekAtLastError`).
pub fn last_error() -> Option<LastError> {
    LAST.with(|slot| slot.borrow().error.clone())
}

/// The latest failure on this thread, cleared afterwards (`hipGetLastError`).
pub fn take_last_error() -> Option<LastError> {
    let e = last_error();
    store(None);
    e
}

/// Forgets the latest failure on this thread.
pub fn clear_last_error() {
    store(None);
}

/// The latest failure's message as a NUL-terminated C string (`""` when none), for
/// `aclGetRecentErrMsg`. The pointer stays valid until the next set/take/clear on this
/// thread, or the thread's exit; it is never null.
pub fn last_error_message_ptr() -> *const c_char {
    LAST.with(|slot| slot.borrow().c_message.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_and_reject_overlaps() {
        let m: RangeMap<u32> = RangeMap::new();
        m.insert(100, 50, 1).unwrap();
        m.insert(200, 10, 2).unwrap();
        m.insert(150, 50, 3).unwrap(); // exactly between
        assert_eq!(m.resolve(100).unwrap().value, 1);
        assert_eq!(m.resolve(149).unwrap().value, 1);
        assert_eq!(m.resolve(150).unwrap().value, 3);
        assert_eq!(m.resolve(209).unwrap().value, 2);
        assert!(m.resolve(210).is_none());
        assert!(m.resolve(99).is_none());
        for (b, l) in [(90, 11), (149, 2), (120, 1), (205, 100), (0, 1000)] {
            assert!(
                matches!(m.insert(b, l, 9), Err(EmuError::Overlap { .. })),
                "{b}+{l}"
            );
        }
        assert!(matches!(
            m.insert(5, 0, 9),
            Err(EmuError::InvalidArgument(_))
        ));
        assert!(matches!(
            m.insert(usize::MAX, 2, 9),
            Err(EmuError::InvalidArgument(_))
        ));
        assert_eq!(m.resolve_span(120, 30).unwrap().base, 100);
        assert!(matches!(
            m.resolve_span(120, 31),
            Err(EmuError::InvalidArgument(_))
        ));
        assert!(matches!(
            m.resolve_span(10, 1),
            Err(EmuError::UnknownPointer { addr: 10 })
        ));
        assert!(m.resolve_span(120, usize::MAX).is_err());
        assert_eq!(m.update(200, |v| std::mem::replace(v, 7)), Some(2));
        assert_eq!(m.get(200).unwrap().value, 7);
        assert_eq!(m.len(), 3);
        assert_eq!(m.remove(150).unwrap().len, 50);
        assert!(m.remove(150).is_none());
        assert_eq!(
            m.snapshot().iter().map(|r| r.base).collect::<Vec<_>>(),
            [100, 200]
        );
    }

    #[test]
    fn handles_are_unique_tagged_and_checked() {
        let a: HandleTable<&str> = HandleTable::new("notify", 1);
        let b: HandleTable<&str> = HandleTable::new("event", 2);
        let ha = a.insert("x").unwrap();
        let hb = b.insert("y").unwrap();
        assert_ne!(ha, hb);
        assert_eq!(ha % 16, 0);
        assert!(matches!(
            a.get(hb),
            Err(EmuError::UnknownHandle { what: "notify", .. })
        ));
        a.with(ha, |v| *v = "z").unwrap();
        assert_eq!(a.get(ha).unwrap(), "z");
        let ha2 = a.insert("w").unwrap();
        assert_ne!(ha, ha2);
        a.remove(ha).unwrap();
        assert!(a.remove(ha).is_err());
        assert_eq!(a.len(), 1);
        assert_eq!(a.snapshot(), vec![(ha2, "w")]);
    }

    #[test]
    #[allow(unsafe_code)]
    fn last_error_is_per_thread() {
        clear_last_error();
        // SAFETY: the pointer is a valid NUL-terminated string until the next store on
        // this thread, and is read before any.
        let empty = unsafe { std::ffi::CStr::from_ptr(last_error_message_ptr()) };
        assert_eq!(empty.to_bytes(), b"");
        set_rule_error(
            507899,
            "ascend.ipc.importer-not-trusted",
            "pid 5 is not on the trustlist",
        );
        // SAFETY: as above.
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_message_ptr()) };
        assert_eq!(
            msg.to_str().unwrap(),
            "pid 5 is not on the trustlist [rule ascend.ipc.importer-not-trusted]"
        );
        std::thread::spawn(|| assert_eq!(last_error(), None))
            .join()
            .unwrap();
        assert_eq!(last_error().unwrap().code, 507899);
        assert_eq!(take_last_error().unwrap().code, 507899);
        assert_eq!(last_error(), None);
        set_last_error(1, "a\0b");
        // SAFETY: as above.
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_message_ptr()) };
        assert_eq!(msg.to_bytes(), b"a?b");
        clear_last_error();
    }
}
