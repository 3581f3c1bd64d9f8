//! Deferred frees: an exported allocation outlives its owner's `free` until every
//! importer has closed it, and its tokens stop importing at the owner's `free`.
//!
//! Freeing memory with `hipFree` while another process still has it open through
//! `hipIpcOpenMemHandle` is undefined behaviour in HIP. So the first export of an
//! allocation creates a [`Lease`] (devipc-shm: an entry in this process's shared-memory
//! lease table) bound to the allocation's generation and names it in the token;
//! importers hold it from just before `hipIpcOpenMemHandle` until just after
//! `hipIpcCloseMemHandle`, and refuse a token whose generation is not the lease's.
//!
//! `free` of a leased allocation first *revokes* the lease: from then on every new hold
//! fails, so a token replayed after the free is refused before the runtime maps anything.
//! When nobody holds the lease the memory is released at once; otherwise the `hipFree`
//! is *deferred*: the caller's handle is gone, the memory stays until the last importer
//! closes. A reaper thread (started on the first deferral, gone when nothing is deferred)
//! then waits on the lease table's futex word, which every release of a revoked lease
//! bumps, and frees what is no longer held: the free does not wait for this process to
//! call into devipc again. Holds are per process (pid + start time), so an importer that
//! was killed is not waited for: when the word stays quiet for [`POLL`], the reaper checks
//! the holders' liveness.
//!
//! A backend dropped while importers still hold its memory (typically: the exporting
//! process exits) leaves the memory to the runtime's process teardown.
//!
//! A child `fork`ed from the exporter inherits a copy of this state but not the reaper
//! thread (threads do not survive `fork`): the deferred frees, their leases and the
//! thread are the parent's, so in a child nothing here starts, joins, frees or removes
//! anything ([`Birth`]).
//!
//! Born with `hip-ipc-mem` (whose `hipFree` under an importer is undefined behaviour),
//! this is also how `hip-vmm-fd` allocations are freed: their exports make the same
//! lease (bound to the exported fd's identity instead of the IPC handle).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use devipc_core::protection::{self, Protection};
use devipc_core::{Allocation, Birth, Error, Result};
use devipc_hip_sys::HipApi;
use devipc_shm::lease::Lease;

use crate::backend::{AllocRecord, HipBackend};

/// How long the reaper waits for a release before it checks whether the holders of the
/// deferred allocations are still alive (a killed importer never releases).
pub const POLL: Duration = Duration::from_millis(200);

/// Allocations whose free waits for importers, and the thread that frees them.
#[derive(Debug)]
pub(crate) struct Deferred {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process whose reaper `thread` is (and whose records these are).
    birth: Birth,
}

/// What the backend and its reaper thread share.
#[derive(Debug)]
struct Shared {
    api: Arc<HipApi>,
    state: Mutex<State>,
    /// Set when the backend is dropped: the reaper leaves.
    stop: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// Deferred allocations not being looked at by a pass right now.
    records: Vec<AllocRecord>,
    /// Deferred and not freed yet (including those a pass has taken out).
    outstanding: usize,
    /// A reaper thread runs.
    running: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// One pass over the deferred allocations: frees those nobody holds (`thorough`: also
    /// those held only by dead processes). Returns how many it freed and the first error.
    /// Holds the state lock only to take and give back records, never across a vendor call.
    fn pass(&self, thorough: bool) -> (usize, Option<Error>) {
        let pending = std::mem::take(&mut lock(&self.state).records);
        let mut kept = Vec::new();
        let mut freed = 0;
        let mut first_error = None;
        for record in pending {
            let unheld = record.lease.as_ref().is_none_or(|l| l.is_unheld(thorough));
            if !unheld {
                kept.push(record);
                continue;
            }
            match record.release(&self.api) {
                Ok(()) => {
                    if let Some(lease) = &record.lease {
                        let _ = lease.remove();
                    }
                    freed += 1;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    kept.push(record);
                }
            }
        }
        let mut state = lock(&self.state);
        state.records.extend(kept);
        state.outstanding = state.outstanding.saturating_sub(freed);
        (freed, first_error)
    }

    /// The reaper thread's body: passes until nothing is deferred or the backend goes.
    fn reap(self: Arc<Self>) {
        let mut thorough = false;
        let mut reported = false;
        loop {
            let (_, error) = self.pass(thorough);
            let failed = error.is_some();
            if let Some(e) = error
                && !reported
            {
                log::warn!("devipc-hip: a deferred hipFree failed (retrying): {e}");
                reported = true;
            }
            let lease = {
                let mut state = lock(&self.state);
                if self.stop.load(Ordering::SeqCst) || state.outstanding == 0 {
                    state.running = false;
                    return;
                }
                match state.records.first() {
                    Some(record) => record.lease.clone(),
                    None => {
                        // Another pass (`reap_deferred`) has the records right now: they
                        // are still outstanding, so stay and look again shortly. Leaving
                        // here would strand them with no reaper (seen under load).
                        drop(state);
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                }
            };
            let Some(lease) = lease else { continue };
            // Read the word before looking: a release after this read changes it, so the
            // wait below returns at once instead of missing it.
            let seen = lease.release_count();
            let any_free = lock(&self.state)
                .records
                .iter()
                .any(|r| r.lease.as_ref().is_none_or(|l| l.is_unheld(false)));
            if any_free && !failed {
                thorough = false;
                continue;
            }
            if let Err(e) = lease.wait_for_release(seen, POLL) {
                log::warn!("devipc-hip: waiting for lease releases failed: {e}");
                std::thread::sleep(POLL);
            }
            // Quiet for a whole period: look for holders that died.
            thorough = lease.release_count() == seen;
        }
    }
}

impl Deferred {
    pub(crate) fn new(api: Arc<HipApi>) -> Deferred {
        Deferred {
            shared: Arc::new(Shared {
                api,
                state: Mutex::new(State::default()),
                stop: AtomicBool::new(false),
            }),
            thread: Mutex::new(None),
            birth: Birth::here(),
        }
    }

    /// Adds `record` and makes sure a reaper runs.
    fn push(&self, record: AllocRecord) {
        let mut state = lock(&self.shared.state);
        state.records.push(record);
        state.outstanding += 1;
        // In a forked child, `running` is the parent's reaper, which does not exist here;
        // the child never frees the parent's memory, so no reaper is started either.
        if state.running || self.shared.stop.load(Ordering::SeqCst) || self.birth.is_inherited() {
            return;
        }
        let shared = self.shared.clone();
        match std::thread::Builder::new()
            .name("devipc-hip-reaper".into())
            .spawn(move || shared.reap())
        {
            Ok(handle) => {
                state.running = true;
                // A previous reaper has left (it cleared `running`): its handle can go.
                *lock(&self.thread) = Some(handle);
            }
            Err(e) => log::warn!(
                "devipc-hip: starting the deferred-free thread failed ({e}); deferred frees \
                 run on the next free, reap_deferred or drop"
            ),
        }
    }

    /// Stops the reaper and waits for it to leave (in the process that started it; a
    /// forked child's copy of the handle names a thread of its parent).
    fn stop(&self) {
        if self.birth.is_inherited() {
            return;
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        let leases: Vec<Arc<Lease>> = lock(&self.shared.state)
            .records
            .iter()
            .filter_map(|r| r.lease.clone())
            .collect();
        for lease in leases {
            lease.wake();
        }
        let handle = lock(&self.thread).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl HipBackend {
    /// `free` of an allocation of either mechanism: its record leaves the table, and its
    /// memory goes now or once no importer holds it ([`HipBackend::free_or_defer`]); on an
    /// error the record is put back.
    pub(crate) fn free_allocation(&self, alloc: Allocation) -> Result<()> {
        self.allocation(&alloc)?;
        let record = self.allocations.remove(alloc.id)?;
        self.free_or_defer(record.clone())
            .inspect_err(|_| self.allocations.restore(alloc.id, record))
    }

    /// Frees `record` now, or revokes its lease and defers the free while importers hold
    /// it. On an error nothing was freed (the lease may stay revoked).
    pub(crate) fn free_or_defer(&self, record: AllocRecord) -> Result<()> {
        let Some(lease) = record.lease.clone() else {
            return record.release(&self.api);
        };
        if !protection::enabled(Protection::HipDeferredFree) {
            // Test only: free under the importers, as plain HIP would.
            record.release(&self.api)?;
            return lease.remove().map_err(|e| Error::io("removing a lease", e));
        }
        lease.revoke();
        // Revoked first, then the holders read (see devipc-shm's lease docs): a hold that
        // this read misses fails.
        if lease.is_unheld(false) {
            record.release(&self.api)?;
            return lease.remove().map_err(|e| Error::io("removing a lease", e));
        }
        self.deferred.push(record);
        Ok(())
    }

    /// Frees every deferred allocation no live importer holds any more (checking the
    /// holders' liveness); returns how many it freed. The reaper thread does this by
    /// itself; this is for callers that want it done now.
    pub fn reap_deferred(&self) -> Result<usize> {
        self.deferred
            .birth
            .check("this HIP backend's deferred frees")?;
        match self.deferred.shared.pass(true) {
            (freed, None) => Ok(freed),
            (_, Some(e)) => Err(e),
        }
    }

    /// Whether the calling process is a child `fork`ed after this backend started: then
    /// it must release nothing (the backend's objects and reaper are the parent's).
    pub(crate) fn is_inherited(&self) -> bool {
        self.deferred.birth.is_inherited()
    }

    /// How many freed allocations still wait for importers to close them.
    pub fn deferred_frees(&self) -> usize {
        lock(&self.deferred.shared.state).outstanding
    }

    /// At drop: stops the reaper, frees what nobody holds, forgets the rest (the
    /// process's teardown releases its memory) and removes their leases.
    pub(crate) fn drop_deferred(&self) {
        if self.deferred.birth.is_inherited() {
            // The parent's deferred frees and leases: its to finish.
            return;
        }
        self.deferred.stop();
        if let Err(e) = self.reap_deferred() {
            log::error!("devipc-hip: freeing deferred allocations failed: {e}");
        }
        let mut state = lock(&self.deferred.shared.state);
        for record in std::mem::take(&mut state.records) {
            if let Some(lease) = &record.lease {
                let _ = lease.remove();
            }
        }
        state.outstanding = 0;
    }
}
