//! The process's live objects by token identity: what lets an import of a token find the
//! object it names without asking the vendor twice.
//!
//! - [`LocalExports`]: this process's own exports (DESIGN 5.1). An import of a token this
//!   process exported is a view of the local memory, with no vendor call.
//! - [`ImportCache`]: this process's live vendor imports, one per vendor runtime (DESIGN
//!   5.2). A second import of the same object shares the first one's mapping.
//!
//! Both are per process (a forked child starts with empty ones, see `devipc_core::fork`),
//! both are keyed by the token's identity (producer and vendor handle, never its range),
//! and both bound every view by the object's real size, never by the token's claim. They
//! stay two types because their keys and lifetimes differ: an export is looked up from
//! any `Runtime` of the process, an import is shared only between runtimes of one vendor
//! runtime and on one device, and the cache also serialises vendor imports and closes.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};

use devipc_core::fork::{PerProcess, PerProcessGuard, forget_inherited};
use devipc_core::protection::{self, Protection};
use devipc_core::{
    DeviceId, DeviceIpc, DevicePtr, Error, Mapping, MemToken, Result, TokenIdentity,
};

use crate::buffer::Owned;
use crate::raw::Backend;
use crate::runtime::{Runtime, RuntimeInner};

// =======================================================================================
// Local exports: the same-process shortcut (DESIGN section 5.1).

/// This process's own exports, for the same-process shortcut (DESIGN section 5.1).
///
/// Importing a token in the process that exported it must not reach the vendor (Ascend
/// forbids same-process import, HIP answers `hipErrorInvalidContext`). Every export made
/// through the safe API is recorded here, process-wide (so a token exported through one
/// [`Runtime`] is recognised by another), keyed by the token's identity; an import of such
/// a token returns a view of the local memory instead.
#[derive(Debug)]
pub(crate) struct LocalExports;

/// What a local export points at.
#[derive(Debug, Clone)]
pub(crate) enum LocalTarget {
    /// A [`SharedBuffer`](crate::SharedBuffer)'s allocation; the view keeps it alive.
    Owned(Weak<Owned>),
    /// Memory the framework allocated ([`Runtime::export_external`](crate::Runtime::export_external)),
    /// exported through this runtime. Never served as a local view: devipc cannot keep
    /// the block alive (the framework frees it, and a free through the framework, or a
    /// `close_external` on the raw backend, would not reach a view), so a view could
    /// outlive it. The entry only lets the import say so; it goes with
    /// [`Runtime::close_external`](crate::Runtime::close_external) or with the runtime.
    External(Weak<RuntimeInner>),
}

#[derive(Debug, Clone)]
struct LocalExport {
    target: LocalTarget,
    generation: u64,
    /// Address of the exported vendor object's first byte (token offsets count from it).
    object_base: DevicePtr,
    /// Its size, as this process's backend reported it at export (not a token's claim).
    object_size: usize,
    device: DeviceId,
}

/// A view of local memory for a token this process exported.
#[derive(Debug)]
pub(crate) struct LocalView {
    /// Keeps the [`SharedBuffer`](crate::SharedBuffer)'s allocation alive while viewed.
    pub(crate) keepalive: Arc<Owned>,
    /// The runtime whose backend owns the memory (and copies to and from it).
    pub(crate) owner: Runtime,
    /// Where the token's range starts.
    pub(crate) ptr: DevicePtr,
    /// The device the memory lives on.
    pub(crate) device: DeviceId,
}

/// The map's size after the last sweep of dead entries.
static SWEPT_LEN: AtomicUsize = AtomicUsize::new(0);

/// Per process: a forked child's exports are its own (see `devipc_core::fork`).
static EXPORTS: PerProcess<HashMap<TokenIdentity, LocalExport>> = PerProcess::new(forget_inherited);

fn exports() -> PerProcessGuard<'static, HashMap<TokenIdentity, LocalExport>> {
    // Every critical section is a single map operation, so a poisoned map is consistent.
    EXPORTS.lock()
}

impl LocalExport {
    fn is_dead(&self) -> bool {
        match &self.target {
            LocalTarget::Owned(w) => w.strong_count() == 0,
            LocalTarget::External(w) => w.strong_count() == 0,
        }
    }
}

impl LocalExports {
    /// Records that `token` (just exported by this process) names memory starting at
    /// `object_base`. The token's object size is this process's own backend's answer, so
    /// it is trusted here; tokens looked up later are not.
    pub(crate) fn register(token: &MemToken, target: LocalTarget, object_base: DevicePtr) {
        let object_size = usize::try_from(token.object_size()).unwrap_or(usize::MAX);
        let mut map = exports();
        // Drop entries whose buffers are gone, so the map stays proportional to the live
        // exports; amortised: only when it has doubled since the last sweep.
        if map.len() >= 2 * SWEPT_LEN.load(Ordering::Relaxed).max(64) {
            map.retain(|_, e| !e.is_dead());
            SWEPT_LEN.store(map.len(), Ordering::Relaxed);
        }
        map.insert(
            token.identity(),
            LocalExport {
                target,
                generation: token.generation(),
                object_base,
                object_size,
                device: token.device(),
            },
        );
    }

    /// Forgets the external exports of the block holding `ptr` on `device` (after
    /// `close_external`): their tokens no longer resolve to local memory, which the framework
    /// may now free and reuse.
    pub(crate) fn forget_external(device: DeviceId, ptr: DevicePtr) {
        exports().retain(|_, e| {
            let holds_ptr =
                ptr.0 >= e.object_base.0 && ptr.0 - e.object_base.0 < e.object_size as u64;
            !(matches!(e.target, LocalTarget::External(_)) && e.device == device && holds_ptr)
        });
    }

    /// The local view for `token`, which this process exported: refused when the memory is
    /// gone, the token names another generation, or its range does not fit the object.
    pub(crate) fn lookup(token: &MemToken) -> Result<LocalView> {
        let freed = || {
            Error::invalid_argument(
                "this process exported the token, but the exported memory has been freed or its \
                 external export closed",
            )
        };
        let unknown = || {
            Error::invalid_argument(
                "this process exported the token, but not through a devipc Runtime that is still \
                 sharing it: the memory was freed or its external export closed, or it was \
                 exported through the raw layer (devipc::raw), whose exports the Runtime does not \
                 track; import it where it was exported from, or use the exporter's pointer",
            )
        };
        let entry = exports()
            .get(&token.identity())
            .cloned()
            .ok_or_else(unknown)?;
        if entry.generation != token.generation() {
            return Err(Error::invalid_token(format!(
                "the token names generation {} of an object this process exports as generation \
                 {}: it names a freed object or was relabelled",
                token.generation(),
                entry.generation
            )));
        }
        let range = token.range_within(entry.object_size)?;
        let owned = match &entry.target {
            LocalTarget::Owned(weak) => weak.upgrade().ok_or_else(freed)?,
            LocalTarget::External(weak) => {
                if weak.strong_count() == 0 {
                    return Err(freed());
                }
                return Err(Error::Unsupported {
                    backend: token.backend(),
                    what: "importing framework memory (export_external) in the process that \
                           exported it: its lifetime is the framework's, so devipc cannot keep a \
                           view's block alive; use the pointer you exported"
                        .into(),
                });
            }
        };
        let owner = owned.runtime().clone();
        let keepalive = owned;
        Ok(LocalView {
            keepalive,
            owner,
            ptr: entry.object_base.offset(range.start)?,
            device: entry.device,
        })
    }
}

// =======================================================================================
// The import cache (DESIGN section 5.2).

type Key = (Fingerprint, DeviceId);

/// A compact key for a token's identity (what [`TokenIdentity`](devipc_core::TokenIdentity)
/// compares: mechanism, emulator flag, producer and vendor payload): 128 bits of SipHash
/// under a random per-process key, computed without copying the payload.
///
/// Compact keys keep the cache's entries small and inline (no payload to follow on each
/// probe), which is what a lookup among 10,000 live imports pays for (P5). Two different
/// identities share a fingerprint with probability 2^-128 at random, and a token's sender
/// cannot aim for a collision without the process's secret key (SipHash is a keyed PRF),
/// so a fingerprint names one identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint(u64, u64);

impl Fingerprint {
    fn of(token: &MemToken) -> Fingerprint {
        use std::hash::{BuildHasher, Hash, Hasher};
        static SECRET: LazyLock<std::hash::RandomState> = LazyLock::new(Default::default);
        // Two halves from one keyed PRF over domain-separated inputs.
        let half = |domain: u8| {
            let mut h = SECRET.build_hasher();
            domain.hash(&mut h);
            token.mechanism().hash(&mut h);
            token.emulated().hash(&mut h);
            token.origin().hash(&mut h);
            token.payload().hash(&mut h);
            h.finish()
        };
        Fingerprint(half(0), half(1))
    }
}

/// The state of one key.
#[derive(Debug)]
enum Slot {
    /// A thread is running the vendor import; others wait.
    Importing,
    /// Imported; the weak reference dies when the last user drops it.
    Live(Weak<Mapped>),
    /// The last user is running the vendor close; imports of the key wait.
    Closing,
}

/// Live imports of one vendor runtime in this process (DESIGN section 5.2): importing the
/// same token twice in one process returns the same mapping, reference counted; the vendor
/// import runs once, and the vendor close runs when the last user drops it.
///
/// The cache is per process and per vendor runtime, not per [`Runtime`]: the vendors'
/// rules are per process (Ascend VMM allows one import of a shareable handle per process),
/// so two `Runtime`s of one backend share it ([`ImportCache::for_backend`]).
///
/// Entries are weak references, so the cache holds exactly the live imports and is
/// bounded by them. The key is a fingerprint of the token's identity (vendor handle and
/// producer, with its start time; [`Fingerprint`]) plus the importing device; tokens for
/// different ranges of one export share an entry. Every view is bounded by the size the
/// runtime reported for the mapped object ([`Mapping::object_size`]), never by the token's
/// claim, on a cache hit as on the cold import.
///
/// A token whose generation differs from the live import's names another object (a reused
/// handle, or a relabelled token): it is refused, and the live import is left alone.
///
/// Vendor calls run outside the cache lock, so imports of unrelated tokens do not wait on
/// each other. A key being imported or closed is marked in the map, and an import of that
/// key waits for the other thread to finish: runtimes that allow one import per process
/// never see a second import of one handle on one device before the first close.
/// Importing it on a second device is a second vendor import: Ascend VMM refuses it (a
/// typed vendor error), Ascend IPC keys allow it (the backend closes them in the
/// runtime's order), HIP counts it on the one mapping.
#[derive(Debug, Default)]
pub(crate) struct ImportCache {
    entries: Mutex<HashMap<Key, Slot>>,
    /// Signalled whenever a slot stops being `Importing` or `Closing`.
    changed: Condvar,
    /// Vendor imports that succeeded since the cache was made (cache hits not counted).
    vendor_imports: AtomicU64,
}

/// One vendor import, shared by every [`ImportedBuffer`](crate::ImportedBuffer) of it.
#[derive(Debug)]
pub(crate) struct Mapped {
    /// The runtime that imported it, and closes it.
    pub(crate) rt: Runtime,
    cache: Arc<ImportCache>,
    key: Key,
    mapping: Option<Mapping>,
    /// Where the mapped vendor object starts, and its real size (from the runtime).
    object_base: DevicePtr,
    object_size: usize,
    /// The generation of the object this import maps.
    generation: u64,
}

impl Mapped {
    /// Where `token`'s range starts in this mapping, after checking that the range lies
    /// inside the mapped object as the runtime reported it.
    pub(crate) fn ptr_for(&self, token: &MemToken) -> Result<DevicePtr> {
        let range = token.range_within(self.object_size)?;
        self.object_base.offset(range.start)
    }
}

/// The caches of this process, one per vendor runtime ([`Backend::cache_domain`]). Per
/// process: a child forked while a parent's cache lived gets its own (the parent's
/// imports are not the child's).
static CACHES: PerProcess<HashMap<String, Weak<ImportCache>>> = PerProcess::new(forget_inherited);

impl ImportCache {
    /// The cache shared by every runtime of `backend`'s vendor runtime in this process.
    pub(crate) fn for_backend(backend: &Backend) -> Arc<ImportCache> {
        let domain = backend.cache_domain();
        let mut caches = CACHES.lock();
        caches.retain(|_, w| w.strong_count() > 0);
        if let Some(cache) = caches.get(&domain).and_then(Weak::upgrade) {
            return cache;
        }
        let cache = Arc::new(ImportCache::default());
        caches.insert(domain, Arc::downgrade(&cache));
        cache
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Slot>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(
        &self,
        map: MutexGuard<'a, HashMap<Key, Slot>>,
    ) -> MutexGuard<'a, HashMap<Key, Slot>> {
        self.changed.wait(map).unwrap_or_else(|p| p.into_inner())
    }

    /// Vendor imports that succeeded through this cache so far (cumulative).
    pub(crate) fn vendor_imports(&self) -> u64 {
        self.vendor_imports.load(Ordering::Relaxed)
    }

    /// Number of live imports.
    pub(crate) fn len(&self) -> usize {
        self.lock()
            .values()
            .filter(|s| matches!(s, Slot::Live(w) if w.strong_count() > 0))
            .count()
    }

    /// The live import of `token` on `device`, importing it through `rt` if there is none
    /// (with `fd`, the object's descriptor, for a token that [carries
    /// one](devipc_core::Mechanism::carries_fd); a cache hit closes it unused).
    pub(crate) fn get_or_import(
        self: &Arc<Self>,
        rt: &Runtime,
        token: &MemToken,
        fd: Option<OwnedFd>,
        device: DeviceId,
    ) -> Result<Arc<Mapped>> {
        let key = (Fingerprint::of(token), device);
        let mut map = self.lock();
        loop {
            match map.get(&key) {
                None => break,
                Some(Slot::Live(weak)) => {
                    if let Some(live) = weak.upgrade() {
                        // Never drop `live` with the lock held: if it is the last
                        // reference, its drop takes the lock.
                        drop(map);
                        return self.share(live, token);
                    }
                    // Its last user is about to close it: wait for the close.
                    map = self.wait(map);
                }
                Some(Slot::Importing | Slot::Closing) => map = self.wait(map),
            }
        }
        map.insert(key, Slot::Importing);
        drop(map);
        let pending = PendingImport {
            cache: self,
            key: Some(key),
        };
        let mapping = match fd {
            Some(fd) => rt.inner.backend()?.import_fd(token, fd, device)?,
            None => rt.inner.backend()?.import(token, device)?,
        };
        self.vendor_imports.fetch_add(1, Ordering::Relaxed);
        let mapped = Arc::new(Mapped {
            rt: rt.clone(),
            cache: Arc::clone(self),
            key,
            object_base: mapping.object_base,
            object_size: mapping.object_size,
            mapping: Some(mapping),
            generation: token.generation(),
        });
        pending.finish(Slot::Live(Arc::downgrade(&mapped)));
        Ok(mapped)
    }

    /// A cache hit: the same object, if the token's generation and range say so.
    fn share(&self, live: Arc<Mapped>, token: &MemToken) -> Result<Arc<Mapped>> {
        if live.generation != token.generation() {
            return Err(Error::invalid_token(format!(
                "the token names generation {} of a vendor handle this process has imported \
                 as generation {}: it names another object behind a reused handle (close the \
                 earlier import first) or it was relabelled",
                token.generation(),
                live.generation
            )));
        }
        live.ptr_for(token)?;
        if !protection::enabled(Protection::ImportCacheRefcount) {
            // Test only: a second owner of the same vendor import, which closes it when
            // dropped although the first still uses it.
            return Ok(Arc::new(Mapped {
                rt: live.rt.clone(),
                cache: Arc::clone(&live.cache),
                key: live.key,
                mapping: live.mapping.clone(),
                object_base: live.object_base,
                object_size: live.object_size,
                generation: live.generation,
            }));
        }
        Ok(live)
    }
}

/// An `Importing` slot; if the import fails (or panics), dropping it removes the slot
/// and wakes the waiters.
struct PendingImport<'a> {
    cache: &'a ImportCache,
    key: Option<Key>,
}

impl PendingImport<'_> {
    fn finish(mut self, slot: Slot) {
        if let Some(key) = self.key.take() {
            self.cache.lock().insert(key, slot);
            self.cache.changed.notify_all();
        }
    }
}

impl Drop for PendingImport<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.cache.lock().remove(&key);
            self.cache.changed.notify_all();
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.rt.inner.is_inherited() {
            // The parent's import, copied by `fork`: the parent closes it (and its hold).
            return;
        }
        let cache = &self.cache;
        let ours = {
            let mut map = cache.lock();
            let ours =
                matches!(map.get(&self.key), Some(Slot::Live(w)) if std::ptr::eq(w.as_ptr(), self));
            if ours {
                map.insert(self.key, Slot::Closing);
            }
            ours
        };
        // The vendor close runs without the lock; imports of this key wait for it.
        if let Some(mapping) = self.mapping.take()
            && let Err(e) = self.rt.inner.raw_backend().close(mapping)
        {
            log::error!("devipc: closing an imported mapping failed: {e}");
            self.rt.inner.release_failed(e);
        }
        if ours {
            cache.lock().remove(&self.key);
            cache.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests;
