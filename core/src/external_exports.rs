//! The `export_external`s of this process that are not ended yet, shared by every backend
//! instance (`Runtime`) that drives the same vendor runtime.
//!
//! A framework block is the process's, not one `Runtime`'s: the framework may allocate it
//! through one runtime, export it through a second and free it through a third (two
//! `Runtime`s share the address space and, for one vendor library, the runtime's
//! per-process state). If each backend kept its own table of exports, a `framework_free`
//! or `close_external` through another runtime than the exporting one would not see the
//! export, and the block would be freed under that export's importers (audit N3). So the
//! table is per *vendor runtime in this process* ([`RuntimeDomain`]: the backend kind,
//! where its functions come from, and the address of one of them, which tells two
//! libraries or a test's fake table apart), and every backend of that domain reads and
//! ends the same exports, as `own_memory` is shared for devipc's own blocks.
//!
//! Each entry remembers which backend instances exported it (an export reused by a second
//! runtime counts it too): a backend that is dropped ends only the exports no other live
//! backend made, so the tokens another runtime handed out keep working until that
//! runtime ends them or goes.
//!
//! The backends own what an entry holds (HIP: a lease and maybe an fd; Ascend: an IPC key
//! and its lease) and what ending it means; this module only keeps the table.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fork::{PerProcess, forget_inherited};
use crate::ids::{DeviceId, DevicePtr};
use crate::info::BackendInfo;

/// An export's key: the device the caller named and the block's base.
pub type BlockKey = (DeviceId, u64);

/// Which vendor runtime of this process a backend drives (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuntimeDomain(String);

impl RuntimeDomain {
    /// The domain of a backend described by `info` whose function table has a function
    /// at `marker` (e.g. the runtime's free): one library, loaded once per process, gives
    /// one address; the emulator and a fake table give others.
    pub fn new(info: &BackendInfo, marker: usize) -> RuntimeDomain {
        RuntimeDomain(format!("{}:{}@{marker:#x}", info.kind, info.source))
    }
}

impl fmt::Display for RuntimeDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One export and the backend instances that made (or reused) it.
#[derive(Debug)]
struct Entry<T> {
    export: T,
    owners: Vec<u64>,
}

/// The exports of one domain.
#[derive(Debug)]
struct Table<T> {
    entries: HashMap<BlockKey, Entry<T>>,
}

/// The process-wide registry of one backend type's exports, per domain: a `static` of
/// the backend crate.
#[derive(Debug)]
pub struct ProcessExports<T: 'static> {
    /// Each domain's table, per process: a forked child starts with none (and never
    /// waits for a lock a parent thread held at the fork).
    domains: PerProcess<BTreeMap<RuntimeDomain, SharedTable<T>>>,
}

/// A domain's table, shared by its backends.
type SharedTable<T> = Arc<Mutex<Table<T>>>;

impl<T: 'static> Default for ProcessExports<T> {
    fn default() -> Self {
        ProcessExports::new()
    }
}

/// Numbers backend instances (owners) process-wide.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

impl<T: 'static> ProcessExports<T> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> ProcessExports<T> {
        ProcessExports {
            domains: PerProcess::new(forget_inherited),
        }
    }

    /// The table of `domain` for a new backend instance, which is a new owner.
    ///
    /// A child `fork`ed from this process inherits a copy of the tables, whose exports
    /// (leases, keys) are its parent's: a backend opened in the child starts a table of
    /// its own instead, so nothing it does ends an export of the parent.
    pub fn join(&self, domain: RuntimeDomain) -> SharedExports<T> {
        let table = self
            .domains
            .lock()
            .entry(domain.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Table {
                    entries: HashMap::new(),
                }))
            })
            .clone();
        SharedExports {
            table,
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            domain,
        }
    }
}

/// One backend instance's view of its domain's exports (see the module docs).
#[derive(Debug)]
pub struct SharedExports<T> {
    table: SharedTable<T>,
    owner: u64,
    domain: RuntimeDomain,
}

impl<T> SharedExports<T> {
    /// Locks the domain's table. Every backend of the domain locks the same one, so what
    /// is decided under it (create an export once, end it once) holds process-wide.
    pub fn lock(&self) -> Exports<'_, T> {
        Exports {
            table: self.table.lock().unwrap_or_else(|p| p.into_inner()),
            owner: self.owner,
        }
    }

    /// The domain this table is shared in.
    pub fn domain(&self) -> &RuntimeDomain {
        &self.domain
    }
}

/// The locked table of a domain, as one backend instance (owner) sees it.
#[derive(Debug)]
pub struct Exports<'a, T> {
    table: MutexGuard<'a, Table<T>>,
    owner: u64,
}

impl<T> Exports<'_, T> {
    /// The export of the block at `key`, whoever made it.
    pub fn get(&self, key: &BlockKey) -> Option<&T> {
        self.table.entries.get(key).map(|e| &e.export)
    }

    /// The export of the block at `key`, with this backend counted as one of its
    /// exporters (its tokens now come from this backend too).
    pub fn adopt(&mut self, key: &BlockKey) -> Option<&T> {
        let owner = self.owner;
        let entry = self.table.entries.get_mut(key)?;
        if !entry.owners.contains(&owner) {
            entry.owners.push(owner);
        }
        Some(&entry.export)
    }

    /// Records a new export made by this backend (replacing any entry at `key`, which
    /// the caller checked there is none of).
    pub fn insert(&mut self, key: BlockKey, export: T) {
        self.table.entries.insert(
            key,
            Entry {
                export,
                owners: vec![self.owner],
            },
        );
    }

    /// Forgets the export at `key` (ended by the caller, through whichever backend).
    pub fn remove(&mut self, key: &BlockKey) -> Option<T> {
        self.table.entries.remove(key).map(|e| e.export)
    }

    /// Every export of the domain.
    pub fn iter(&self) -> impl Iterator<Item = (&BlockKey, &T)> {
        self.table.entries.iter().map(|(k, e)| (k, &e.export))
    }

    /// The export on `device` whose block (`size_of` its export's bytes from its base)
    /// holds `ptr`.
    pub fn holding(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        size_of: impl Fn(&T) -> usize,
    ) -> Option<(BlockKey, &T)> {
        self.iter()
            .find(|((d, base), e)| {
                *d == device && (*base..base.saturating_add(size_of(e) as u64)).contains(&ptr.0)
            })
            .map(|(k, e)| (*k, e))
    }

    /// The devices under which the block at `base` is exported (a caller may have named
    /// a wrong one; `export_external` cannot tell).
    pub fn devices_of(&self, base: u64) -> Vec<DeviceId> {
        self.iter()
            .filter(|((_, b), _)| *b == base)
            .map(|((d, _), _)| *d)
            .collect()
    }

    /// This backend stops exporting: it leaves every entry, and the entries no other
    /// backend exported are taken out and returned, for the caller to end.
    pub fn leave(&mut self) -> Vec<(BlockKey, T)> {
        let owner = self.owner;
        let mut ended = Vec::new();
        let keys: Vec<BlockKey> = self.table.entries.keys().copied().collect();
        for key in keys {
            let Some(entry) = self.table.entries.get_mut(&key) else {
                continue;
            };
            entry.owners.retain(|o| *o != owner);
            if entry.owners.is_empty()
                && let Some(e) = self.table.entries.remove(&key)
            {
                ended.push((key, e.export));
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend_kind::BackendKind;
    use crate::info::{Capabilities, LibrarySource};

    fn info() -> BackendInfo {
        BackendInfo {
            kind: BackendKind::Hip,
            source: LibrarySource::Emulated,
            runtime_version: None,
            capabilities: Capabilities::default(),
        }
    }

    #[test]
    fn backends_of_one_domain_share_exports_and_the_last_exporter_ends_them() {
        let registry = ProcessExports::<&'static str>::new();
        let a = registry.join(RuntimeDomain::new(&info(), 1));
        let b = registry.join(RuntimeDomain::new(&info(), 1));
        let other = registry.join(RuntimeDomain::new(&info(), 2));
        let x = (DeviceId(0), 0x1000);
        let y = (DeviceId(1), 0x9000);
        b.lock().insert(x, "x");
        a.lock().insert(y, "y");
        // Seen (and endable) through any backend of the domain, not through another
        // domain's.
        assert_eq!(a.lock().get(&x), Some(&"x"));
        assert_eq!(
            a.lock()
                .holding(DeviceId(0), DevicePtr(0x1fff), |_| 0x1000)
                .map(|(k, _)| k),
            Some(x)
        );
        assert_eq!(
            a.lock().holding(DeviceId(0), DevicePtr(0x2000), |_| 0x1000),
            None
        );
        assert_eq!(a.lock().devices_of(0x9000), vec![DeviceId(1)]);
        assert_eq!(other.lock().get(&x), None);
        // a reuses b's export of x: b's drop leaves it to a.
        assert_eq!(a.lock().adopt(&x), Some(&"x"));
        assert!(b.lock().leave().is_empty());
        assert_eq!(a.lock().get(&x), Some(&"x"));
        let mut ended = a.lock().leave();
        ended.sort();
        assert_eq!(ended, vec![(x, "x"), (y, "y")]);
        assert_eq!(b.lock().iter().count(), 0);
        // Removed through another backend than the exporter's.
        a.lock().insert(x, "again");
        assert_eq!(b.lock().remove(&x), Some("again"));
        assert!(a.lock().leave().is_empty());
    }
}
