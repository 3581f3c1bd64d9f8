//! Garbage collection: the one place that scans the state directory.
//!
//! The hot paths reclaim dead holders only of the object they touch. [`gc`] covers the
//! rest, in two phases:
//! 1. for every `<id>.meta`: take the object lock, drop holders whose process died, and
//!    free the object if no holder is left (exactly what a touch does);
//! 2. under the ledger lock (so no object is being created or freed meanwhile): remove
//!    files left behind by a process killed halfway through creating or freeing an object
//!    (any `<id>.*` without `<id>.meta`, and stale `<id>.meta.tmp`), then recompute the
//!    per-device usage from the metadata of the objects that exist and fix the ledger if it
//!    drifted (a process killed between charging and writing metadata); last, remove the
//!    liveness beacons ([`devipc_shm::liveness`]) of processes that are gone.
//!
//! Files the emulator did not create are left alone. A metadata file that does not parse
//! is reported, never deleted, and while one exists the usage is not recomputed.
//!
//! When it runs: a driver reclaims what a process owned when that process goes away; the
//! emulator has no process-exit hook, so it reclaims at the next opportunity instead:
//! - when a process starts using the directory ([`crate::State::global`], hence
//!   [`crate::start`] and the first call of either vendor surface), through
//!   [`sweep_on_start`]: a lock-free look ([`needs_gc`]) and a full [`gc`] only when it
//!   found something to reclaim, so a process starting next to healthy peers takes no
//!   object lock and no ledger lock;
//! - when an allocation would exceed the memory limit (the registry retries once);
//! - on demand ([`crate::gc`]).
//!
//! What survives is what the vendor keeps when a process dies: an object some live
//! process still holds (an importer's mapping of a dead exporter's memory, a waiter's
//! import of a dead notifier's notify) stays, minus the dead process's holds, until its
//! last live holder releases it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::ids::ObjectId;
use super::layout::{ObjectFile, parse_object_file};
use super::lock::{FileLock, LockMode, OpenMode};
use super::process::ProcessIdentity;
use super::registry::Registry;
use super::segment::remove_if_exists;
use crate::config::MAX_DEVICES;
use crate::error::EmuError;

/// What a [`gc`] run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Objects examined in phase 1.
    pub objects_scanned: usize,
    /// Dead holder processes removed from objects.
    pub holders_reclaimed: usize,
    /// Objects freed because no live holder was left.
    pub objects_freed: usize,
    /// Leftover files of half-created or half-freed objects removed.
    pub orphan_files_removed: usize,
    /// Whether the per-device usage in the ledger had drifted and was corrected.
    pub usage_corrected: bool,
    /// Objects whose metadata could not be read, with the reason (left in place).
    pub unreadable: Vec<(ObjectId, String)>,
}

impl fmt::Display for GcReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "scanned {} object(s): reclaimed {} dead holder(s), freed {} object(s), \
             removed {} orphan file(s){}",
            self.objects_scanned,
            self.holders_reclaimed,
            self.objects_freed,
            self.orphan_files_removed,
            if self.usage_corrected {
                ", corrected device usage"
            } else {
                ""
            }
        )?;
        for (id, why) in &self.unreadable {
            write!(f, "; unreadable {id}: {why}")?;
        }
        Ok(())
    }
}

/// Reclaims dead holders and frees unheld objects in the whole state directory of
/// `registry`, then repairs leftovers of killed processes (see the module docs). Safe to
/// run concurrently with other processes using the directory, and with another `gc`.
pub fn gc(registry: &Registry) -> Result<GcReport, EmuError> {
    let mut report = GcReport::default();
    let salt = registry.ledger().salt();

    // Phase 1: touch every object.
    for (id, roles) in scan(registry)? {
        if id.salt() != salt || !roles.contains(&ObjectFile::Meta) {
            continue;
        }
        report.objects_scanned += 1;
        match registry.touch(id) {
            Ok(t) => {
                report.holders_reclaimed += t.reclaimed;
                report.objects_freed += usize::from(t.freed);
            }
            // Freed by someone else since the scan.
            Err(EmuError::NoSuchObject { .. }) => {}
            Err(EmuError::Corrupt { reason, .. }) => report.unreadable.push((id, reason)),
            Err(e) => return Err(e),
        }
    }

    // Phase 2: leftovers and usage, with creation and freeing excluded.
    let mut ledger = registry.ledger().lock()?;
    let dir = registry.dir();
    let mut used = [0u64; MAX_DEVICES as usize];
    let mut usage_known = true;
    for (id, roles) in scan(registry)? {
        if id.salt() != salt {
            continue;
        }
        if !roles.contains(&ObjectFile::Meta) {
            for role in roles {
                if remove_if_exists(dir.join(&role.name(id)))? {
                    report.orphan_files_removed += 1;
                }
            }
            continue;
        }
        if roles.contains(&ObjectFile::MetaTmp) {
            // Stale unless a process is updating the object right now (holding its lock).
            let lock_path = dir.join(&ObjectFile::Lock.name(id));
            if let Ok(Some(_idle)) =
                FileLock::try_open(&lock_path, OpenMode::Existing, LockMode::Exclusive)
            {
                // Removed while holding the object lock, so no writer can start meanwhile.
                if remove_if_exists(dir.join(&ObjectFile::MetaTmp.name(id)))? {
                    report.orphan_files_removed += 1;
                }
            }
        }
        match registry.read_meta(id) {
            Ok(meta) => {
                let info = meta.info();
                if let Some(slot) = used.get_mut(info.device as usize) {
                    *slot = slot.saturating_add(info.charged);
                }
            }
            Err(EmuError::NoSuchObject { .. }) => {}
            Err(EmuError::Corrupt { reason, .. }) => {
                usage_known = false;
                if !report.unreadable.iter().any(|(u, _)| *u == id) {
                    report.unreadable.push((id, reason));
                }
            }
            Err(e) => return Err(e),
        }
    }
    if usage_known && ledger.data().used != used {
        ledger.set_used(used);
        ledger.commit()?;
        report.usage_corrected = true;
    }
    // The beacons of processes that are gone (a process killed after it let go of
    // everything leaves nothing else). Best effort, and not counted: not emulator state.
    let _ = devipc_shm::liveness::sweep(dir.path());
    Ok(report)
}

/// Whether [`gc`] would find anything to do, judged without taking any lock: an object
/// held by a process that is gone, files of a half-created or half-freed object (or a
/// metadata update in progress), or a per-device usage that differs from the sum of the
/// objects' charges. Work in flight in other processes can make it say `true` needlessly
/// (a gc then finds nothing), never `false` when a dead process's object is left.
/// Unreadable metadata does not count (gc would only report it again).
pub fn needs_gc(registry: &Registry) -> Result<bool, EmuError> {
    let salt = registry.ledger().salt();
    let mut alive: HashMap<ProcessIdentity, bool> = HashMap::new();
    let mut used = [0u64; MAX_DEVICES as usize];
    for (id, roles) in scan(registry)? {
        if id.salt() != salt {
            continue;
        }
        if !roles.contains(&ObjectFile::Meta) || roles.contains(&ObjectFile::MetaTmp) {
            return Ok(true);
        }
        match registry.read_meta(id) {
            Ok(meta) => {
                for holder in meta.holders() {
                    let who = holder.process;
                    let dir = registry.dir().path();
                    if !*alive.entry(who).or_insert_with(|| who.is_alive_in(dir)) {
                        return Ok(true);
                    }
                }
                let info = meta.info();
                if let Some(slot) = used.get_mut(info.device as usize) {
                    *slot = slot.saturating_add(info.charged);
                }
            }
            Err(EmuError::NoSuchObject { .. } | EmuError::Corrupt { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if registry.ledger_snapshot()?.used != used {
        return Ok(true);
    }
    // A beacon of a process that is gone.
    let dir = registry.dir().path();
    let dead_beacon = std::fs::read_dir(dir)
        .map_err(|e| EmuError::io("read_dir", dir, e))?
        .filter_map(|e| e.ok())
        .any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            devipc_shm::liveness::is_dead_beacon(dir, &name)
        });
    Ok(dead_beacon)
}

/// What a process does when it starts using a state directory: [`gc`] if [`needs_gc`]
/// says so. `Ok(None)` when there was nothing to reclaim.
pub fn sweep_on_start(registry: &Registry) -> Result<Option<GcReport>, EmuError> {
    if needs_gc(registry)? {
        gc(registry).map(Some)
    } else {
        Ok(None)
    }
}

/// The emulator's per-object files in the directory, grouped by id.
fn scan(registry: &Registry) -> Result<BTreeMap<ObjectId, Vec<ObjectFile>>, EmuError> {
    let mut by_id: BTreeMap<ObjectId, Vec<ObjectFile>> = BTreeMap::new();
    for name in registry.dir().entry_names()? {
        if let Some((id, role)) = parse_object_file(&name) {
            by_id.entry(id).or_default().push(role);
        }
    }
    Ok(by_id)
}
