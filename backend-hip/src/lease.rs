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

use devipc_core::{Error, HandleId, Result};
use devipc_shm::lease::Lease;
use devipc_shm::process::ProcessIdentity;

use crate::backend::HipBackend;
use crate::memory::AllocRecord;
use crate::signal::runtime_dir;

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

fn lease_error(what: &str, e: std::io::Error) -> Error {
    Error::io(format!("{what} (devipc lease in DEVIPC_RUNTIME_DIR)"), e)
}

impl HipBackend {
    /// The lease of allocation `id`, created by its first export.
    pub(crate) fn export_lease(&self, id: HandleId) -> Result<Arc<Lease>> {
        let dir = runtime_dir()?;
        self.allocations.with(id, |record| match &record.lease {
            Some(lease) => Ok(lease.clone()),
            None => {
                let lease =
                    Arc::new(Lease::create(&dir).map_err(|e| lease_error("creating a lease", e))?);
                record.lease = Some(lease.clone());
                Ok(lease)
            }
        })?
    }

    /// Adds this process's hold on the exporter's lease `name`.
    pub(crate) fn hold_lease(&self, name: &[u8]) -> Result<Arc<Lease>> {
        let dir = runtime_dir()?;
        let lease = Lease::open(&dir, name).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid_argument(
                "the exporter already freed this memory (or runs with another DEVIPC_RUNTIME_DIR)",
            ),
            std::io::ErrorKind::InvalidInput => {
                Error::invalid_token("malformed lease name in a hip-ipc-mem token")
            }
            _ => lease_error("opening a lease", e),
        })?;
        let me = ProcessIdentity::current().map_err(|e| Error::io("reading /proc/self/stat", e))?;
        lease.acquire(me).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::invalid_argument("the exporter freed this memory meanwhile")
            }
            _ => lease_error("holding a lease", e),
        })?;
        Ok(Arc::new(lease))
    }

    /// Drops this process's hold (after its mapping is closed). Failures are reported, not
    /// returned: the mapping is gone either way, and a stale hold of a live process is the
    /// only consequence (a dead process's holds are dropped by the exporter).
    pub(crate) fn drop_hold(&self, lease: &Lease) {
        let released = ProcessIdentity::current().and_then(|me| lease.release(me));
        match released {
            Ok(()) => {}
            // The exporter removed the lease (it was dropped): nothing to release.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("devipc-hip: releasing a lease hold failed: {e}"),
        }
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
        let mut result = Ok(());
        let outcome = lease
            .release_if_unheld(|| {
                result = self.release_allocation(record);
                result.is_ok()
            })
            .map_err(|e| lease_error("checking a lease", e))?;
        result?;
        Ok(outcome.is_some())
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
