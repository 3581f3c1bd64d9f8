//! Device memory on HIP: `hipMalloc`, IPC memory handles, and host <-> device copies.
//!
//! Exports always name the base of the allocation (`hipIpcGetMemHandle` exports the whole
//! allocation even for an interior pointer, and `hipIpcOpenMemHandle` returns its base,
//! api-facts C.1), so the token carries the range's offset and the importer adds it.
//! Tokens for different ranges of one allocation thus carry the same handle, and the
//! facade's import cache can share one open between them.
//!
//! This module holds the records the backend keeps and the helpers shared by the
//! `DeviceIpc` methods (in `backend.rs`) and the backend's `Drop`.

use std::ops::Range;
use std::sync::Arc;

use devipc_core::own_memory;
use devipc_core::token::MemTokenParts;
use devipc_core::{Allocation, DeviceId, DevicePtr, Error, Mechanism, MemToken, Pinned, Result};
use devipc_hip_sys::{HipApi, hipIpcMemHandle_t};

use devipc_shm::lease::{Lease, held};

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::result;
use crate::vmm::{VmmAlloc, VmmRange};

pub(crate) mod deferred;

/// What the backend keeps for an [`Allocation`].
#[derive(Debug, Clone)]
pub(crate) struct AllocRecord {
    pub(crate) device: DeviceId,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    /// Importers' holds, created by the first export (see [`crate::ipc_mem::deferred`]).
    pub(crate) lease: Option<Arc<Lease>>,
    /// `Some` for virtual memory of `allocate_with` (`hip-vmm-fd`), `None` for `hipMalloc`.
    pub(crate) vmm: Option<Arc<VmmAlloc>>,
    /// The block's entry in devipc's own memory ([`own_memory`]), ended after the vendor
    /// free: exactly this one, never a later block's at the same address.
    pub(crate) registration: own_memory::Registration,
}

/// What the backend keeps for a [`Mapping`](devipc_core::Mapping): the base `hipIpcOpenMemHandle` returned,
/// which is what `hipIpcCloseMemHandle` takes, and the exporter's lease this process holds.
#[derive(Debug, Clone)]
pub(crate) struct MappingRecord {
    pub(crate) device: DeviceId,
    pub(crate) base: u64,
    pub(crate) lease: Option<Arc<Lease>>,
    /// `Some` for a `hip-vmm-fd` import: the imported handle's mapping (`base` is its
    /// address), released instead of `hipIpcCloseMemHandle`.
    pub(crate) vmm: Option<Arc<VmmRange>>,
}

/// What a lease is bound to besides the generation: a hash of the IPC handle it was made
/// for (FNV-1a; the exporter writes it, so a forger cannot make it match another handle).
pub(crate) fn handle_tag(handle: &[u8]) -> u64 {
    devipc_core::identity::fnv1a64(handle)
}

/// `hipFree` of a record already taken out of the allocation table (the reaper thread
/// calls it without the backend); for VMM memory, unmap, address free, handle release and
/// the close of the exported fd instead.
pub(crate) fn free_device_memory(api: &HipApi, record: &AllocRecord) -> Result<()> {
    if let Some(vmm) = &record.vmm {
        vmm.release(api)?;
    } else {
        let _scope = DeviceScope::bind(api, record.device.as_c_int()?)?;
        // SAFETY: the pointer came from hipMalloc in this backend and is freed once: its
        // record was taken out of the table (and out of the deferred list) by the caller,
        // and nobody maps it any more (its lease is unheld, or HipDeferredFree is off).
        unsafe { result::free(api, record.ptr) }?;
    }
    // Only now: until the vendor freed it, the block is devipc's (export_external). The
    // address may already be another block's (another thread's allocation got it and
    // registered it): only this record's registration is removed (audit N4).
    own_memory::unregister_exactly(record.registration);
    Ok(())
}

impl HipBackend {
    /// `hipFree` for a record already taken out of the table.
    pub(crate) fn release_allocation(&self, record: &AllocRecord) -> Result<()> {
        free_device_memory(&self.api, record)
    }

    /// The record behind `alloc`, checked against what the caller holds, and pinned: a
    /// `free` of a clone of the handle on another thread waits until it is dropped.
    pub(crate) fn allocation(&self, alloc: &Allocation) -> Result<Pinned<'_, AllocRecord>> {
        let record = self.allocations.pin(alloc.id)?;
        alloc.check_matches(DevicePtr(record.ptr), record.size, record.device)?;
        Ok(record)
    }

    /// The IPC handle of the allocation at `base` on `device`: the base of an allocation
    /// record, or of a block the runtime just reported with `hipMemGetAddressRange`.
    pub(crate) fn ipc_handle(&self, device: DeviceId, base: u64) -> Result<hipIpcMemHandle_t> {
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: `base` is live device memory of `device` (see above); the runtime only
        // reads its allocation table for it, and a block freed meanwhile (by the framework,
        // for external memory) is reported as an error.
        unsafe { result::ipc_get_mem_handle(&self.api, base) }
    }

    /// A token of this process for `range` of an object of `object_size` bytes.
    pub(crate) fn mem_token(
        &self,
        mechanism: Mechanism,
        device: DeviceId,
        payload: Vec<u8>,
        object_size: usize,
        range: Range<usize>,
        generation: u64,
    ) -> Result<MemToken> {
        MemToken::new(MemTokenParts {
            mechanism,
            emulated: self.info.source.is_emulated(),
            device,
            physical: self.token_physical(device),
            origin: self.origin,
            generation,
            object_size: object_size as u64,
            offset: range.start as u64,
            len: (range.end - range.start) as u64,
            payload,
        })
    }

    /// Closes a mapping whose import failed after the open, and drops its hold (kept when
    /// the close fails: the memory is still mapped then).
    pub(crate) fn undo_import(&self, record: &MappingRecord) {
        if let Err(close) = self.release_mapping(record) {
            log::error!("devipc-hip: undoing a refused import failed: {close}");
        }
    }

    /// The size of the allocation `hipIpcOpenMemHandle` mapped at `base`, as the runtime
    /// reports it.
    pub(crate) fn opened_size(&self, base: u64) -> Result<usize> {
        let (start, size) = result::mem_get_address_range(&self.api, base)?;
        if start != base {
            return Err(Error::invalid_token(format!(
                "the runtime mapped the handle at {base:#x} but reports its allocation at \
                 {start:#x}"
            )));
        }
        Ok(size)
    }

    /// `hipIpcCloseMemHandle` (a VMM import: unmap, address free, handle release) for a
    /// record already taken out of the table, then the release of this process's hold on
    /// the exporter's lease.
    pub(crate) fn release_mapping(&self, record: &MappingRecord) -> Result<()> {
        if let Some(vmm) = &record.vmm {
            // While the reservation is still ours nobody else can be given its address, so
            // forgetting it by address is exact; it comes back if the release fails (the
            // memory may still be mapped, and the record is restored by the caller).
            self.vmm_imports.unregister(DevicePtr(record.base));
            vmm.release(&self.api).inspect_err(|_| {
                self.vmm_imports
                    .register(DevicePtr(record.base), vmm.size, record.device);
            })?;
        } else {
            let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
            // SAFETY: `base` came from hipIpcOpenMemHandle and is closed once: its record
            // was taken out of the table by the caller.
            unsafe { result::ipc_close_mem_handle(&self.api, record.base) }?;
        }
        if let Some(lease) = &record.lease {
            held::drop_hold(lease);
        }
        Ok(())
    }
}
