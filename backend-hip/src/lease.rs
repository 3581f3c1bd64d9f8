//! Deferred frees: an exported allocation outlives its owner's `free` until every
//! importer has closed it.
//!
//! Freeing memory with `hipFree` while another process still has it open through
//! `hipIpcOpenMemHandle` is undefined behaviour in HIP. So the first export of an
//! allocation creates a [`Lease`] in devipc's runtime directory and names it in the token;
//! importers hold it from just before `hipIpcOpenMemHandle` until just after
//! `hipIpcCloseMemHandle`. `free` of a leased allocation releases it at once when nobody
//! holds the lease, and otherwise *defers* the `hipFree`: the caller's handle is gone, the
//! memory stays until the last importer closes. Deferred frees are retried on every
//! allocate and free, by [`HipBackend::reap_deferred`], and when the backend is dropped.
//! Holds are per process (pid + start time), so an importer that crashed is not waited for.
//!
//! A backend dropped while importers still hold its memory (typically: the exporting
//! process exits) leaves the memory to the runtime's process teardown.

use std::sync::{Arc, Mutex, MutexGuard};

use devipc_core::protection::{self, Protection};
use devipc_core::{HandleId, Result};
use devipc_shm::lease::{Lease, held};

use crate::backend::HipBackend;
use crate::memory::AllocRecord;

/// Allocations whose free waits for importers.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    records: Mutex<Vec<AllocRecord>>,
}

impl Deferred {
    fn lock(&self) -> MutexGuard<'_, Vec<AllocRecord>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl HipBackend {
    /// The lease of allocation `id`, created by its first export.
    pub(crate) fn export_lease(&self, id: HandleId) -> Result<Arc<Lease>> {
        self.allocations.with(id, |record| match &record.lease {
            Some(lease) => Ok(lease.clone()),
            None => {
                let lease = held::create()?;
                record.lease = Some(lease.clone());
                Ok(lease)
            }
        })?
    }

    /// Frees `record` now, or defers it while importers hold its lease.
    pub(crate) fn free_or_defer(&self, record: AllocRecord) -> Result<()> {
        let freed = self.try_free(&record)?;
        if !freed {
            self.deferred.lock().push(record);
        }
        let _ = self.reap_deferred();
        Ok(())
    }

    /// `Ok(true)` when the allocation was freed, `Ok(false)` when importers hold it.
    fn try_free(&self, record: &AllocRecord) -> Result<bool> {
        let Some(lease) = &record.lease else {
            return self.release_allocation(record).map(|()| true);
        };
        if !protection::enabled(Protection::HipDeferredFree) {
            // Test only: free under the importers, as plain HIP would.
            self.release_allocation(record)?;
            lease
                .remove()
                .map_err(|e| devipc_core::Error::io("removing a lease", e))?;
            return Ok(true);
        }
        Ok(held::release_if_unheld(lease, || self.release_allocation(record))?.is_some())
    }

    /// Frees every deferred allocation no importer holds any more; returns how many it
    /// freed.
    pub fn reap_deferred(&self) -> Result<usize> {
        let pending = std::mem::take(&mut *self.deferred.lock());
        let mut freed = 0;
        let mut first_error = None;
        for record in pending {
            match self.try_free(&record) {
                Ok(true) => freed += 1,
                Ok(false) => self.deferred.lock().push(record),
                Err(e) => {
                    self.deferred.lock().push(record);
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(freed), Err)
    }

    /// How many freed allocations still wait for importers to close them.
    pub fn deferred_frees(&self) -> usize {
        self.deferred.lock().len()
    }

    /// At drop: frees what nobody holds; forgets the rest (the process's teardown releases
    /// its memory) and removes their leases.
    pub(crate) fn drop_deferred(&self) {
        if let Err(e) = self.reap_deferred() {
            eprintln!("devipc-hip: freeing deferred allocations failed: {e}");
        }
        for record in std::mem::take(&mut *self.deferred.lock()) {
            if let Some(lease) = &record.lease {
                let _ = lease.remove();
            }
        }
    }
}
