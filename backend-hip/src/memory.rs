//! Device memory on HIP: `hipMalloc`, IPC memory handles, and host <-> device copies.
//!
//! Exports always name the base of the allocation (`hipIpcGetMemHandle` exports the whole
//! allocation even for an interior pointer, and `hipIpcOpenMemHandle` returns its base,
//! api-facts C.1), so the token carries the range's offset and the importer adds it.
//! Tokens for different ranges of one allocation thus carry the same handle, and the
//! facade's import cache can share one open between them.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use devipc_core::token::MemTokenParts;
use devipc_core::{
    Allocation, BackendKind, DeviceId, DevicePtr, Error, ExportOptions, Mapping, Mechanism,
    MemToken, Result,
};
use devipc_hip_sys::{
    HIP_IPC_HANDLE_SIZE, HipApi, hipErrorPeerAccessAlreadyEnabled, hipIpcMemHandle_t,
};

use devipc_shm::lease::{Binding, Lease, held};
use devipc_shm::process::ProcessIdentity;
use devipc_shm::word_file::NAME_LEN as LEASE_NAME_LEN;

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::result;

/// What the backend keeps for an [`Allocation`].
#[derive(Debug, Clone)]
pub(crate) struct AllocRecord {
    pub(crate) device: DeviceId,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    /// Importers' holds, created by the first export (see [`crate::deferred`]).
    pub(crate) lease: Option<Arc<Lease>>,
}

/// What the backend keeps for a [`Mapping`]: the base `hipIpcOpenMemHandle` returned,
/// which is what `hipIpcCloseMemHandle` takes, and the exporter's lease this process holds.
#[derive(Debug, Clone)]
pub(crate) struct MappingRecord {
    pub(crate) device: DeviceId,
    pub(crate) base: u64,
    pub(crate) lease: Option<Arc<Lease>>,
}

/// An `export_external` of a framework allocation: the lease its importers hold, which
/// `close_external` ends.
#[derive(Debug, Clone)]
pub(crate) struct ExternalExport {
    pub(crate) size: usize,
    pub(crate) generation: u64,
    pub(crate) lease: Arc<Lease>,
}

/// Generations of external exports: allocations use their handle's number, framework
/// memory a number of its own (the lease binds whichever the token carries).
static NEXT_EXTERNAL_GENERATION: AtomicU64 = AtomicU64::new(1 << 62);

/// What a lease is bound to besides the generation: a hash of the IPC handle it was made
/// for (FNV-1a; the exporter writes it, so a forger cannot make it match another handle).
fn handle_tag(handle: &[u8]) -> u64 {
    devipc_core::identity::fnv1a64(handle)
}

/// `hipFree` of a record already taken out of the allocation table (the reaper thread
/// calls it without the backend).
pub(crate) fn free_device_memory(api: &HipApi, record: &AllocRecord) -> Result<()> {
    let _scope = DeviceScope::bind(api, record.device.as_c_int()?)?;
    // SAFETY: the pointer came from hipMalloc in this backend and is freed once: its
    // record was taken out of the table (and out of the deferred list) by the caller, and
    // nobody maps it any more (its lease is unheld, or HipDeferredFree is switched off).
    unsafe { result::free(api, record.ptr) }
}

impl HipBackend {
    pub(crate) fn allocate_memory(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let addr = result::malloc(&self.api, size)?;
        let id = self.allocations.insert(AllocRecord {
            device,
            ptr: addr,
            size,
            lease: None,
        });
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(addr),
            size,
        })
    }

    pub(crate) fn free_memory(&self, alloc: Allocation) -> Result<()> {
        self.allocation(&alloc)?;
        let record = self.allocations.remove(alloc.id)?;
        self.free_or_defer(record.clone())
            .inspect_err(|_| self.allocations.restore(alloc.id, record))
    }

    /// `hipFree` for a record already taken out of the table.
    pub(crate) fn release_allocation(&self, record: &AllocRecord) -> Result<()> {
        free_device_memory(&self.api, record)
    }

    /// The record behind `alloc`, checked against what the caller holds.
    fn allocation(&self, alloc: &Allocation) -> Result<AllocRecord> {
        let record = self.allocations.get(alloc.id)?;
        alloc.check_matches(DevicePtr(record.ptr), record.size, record.device)?;
        Ok(record)
    }

    pub(crate) fn export_allocation(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        let record = self.allocation(alloc)?;
        Allocation::check_range(&range, record.size)?;
        let handle = self.ipc_handle(record.device, record.ptr)?;
        let lease = self.export_lease(alloc.id, handle_tag(&handle.to_bytes()))?;
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(lease.name());
        self.mem_token(record.device, payload, record.size, range, alloc.id.get())
    }

    pub(crate) fn export_external_memory(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        let dev = self.check_device(device)?;
        ptr.check_external_span(len)?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let (base, size) = result::mem_get_address_range(&self.api, ptr.0)?;
        let offset = ptr
            .0
            .checked_sub(base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| {
                Error::invalid_argument("pointer lies outside the allocation the runtime reported")
            })?;
        let range = offset..offset.saturating_add(len);
        Allocation::check_range(&range, size)?;
        // The runtime just reported `base` as the start of a live allocation.
        let handle = self.ipc_handle(device, base)?;
        // The framework owns the memory; the lease lets close_external know whether
        // importers still map it, and makes its tokens stop working after it.
        let export = {
            let mut external = self.external_exports();
            match external.get(&(device, base)) {
                Some(e) => e.clone(),
                None => {
                    let generation = NEXT_EXTERNAL_GENERATION.fetch_add(1, Ordering::Relaxed);
                    let export = ExternalExport {
                        size,
                        generation,
                        lease: held::create_tagged(generation, handle_tag(&handle.to_bytes()))?,
                    };
                    external.insert((device, base), export.clone());
                    export
                }
            }
        };
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(export.lease.name());
        self.mem_token(device, payload, size, range, export.generation)
    }

    /// Ends the external exports of the framework block holding `ptr` on `device`: its
    /// tokens stop importing. Refused while an importer still maps it (the framework's
    /// `hipFree` would pull the memory from under it), like Ascend's key close.
    pub(crate) fn close_external_memory(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        self.check_device(device)?;
        let mut external = self.external_exports();
        let found = external
            .iter()
            .find(|((d, base), e)| *d == device && (*base..*base + e.size as u64).contains(&ptr.0))
            .map(|(k, e)| (*k, e.clone()));
        let Some((key, export)) = found else {
            return Err(Error::invalid_argument(format!(
                "no block exported with export_external holds {ptr} on device {device}"
            )));
        };
        match held::release_if_unheld(&export.lease, || Ok(()))? {
            Some(()) => {
                external.remove(&key);
                Ok(())
            }
            None => Err(Error::invalid_argument(format!(
                "importers still have the block at {ptr} mapped: close_external (after which \
                 the framework may free it) must wait until every importer closed it"
            ))),
        }
    }

    /// The IPC handle of the allocation at `base` on `device`: the base of an allocation
    /// record, or of a block the runtime just reported with `hipMemGetAddressRange`.
    fn ipc_handle(&self, device: DeviceId, base: u64) -> Result<hipIpcMemHandle_t> {
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: `base` is live device memory of `device` (see above); the runtime only
        // reads its allocation table for it, and a block freed meanwhile (by the framework,
        // for external memory) is reported as an error.
        unsafe { result::ipc_get_mem_handle(&self.api, base) }
    }

    fn mem_token(
        &self,
        device: DeviceId,
        payload: Vec<u8>,
        object_size: usize,
        range: Range<usize>,
        generation: u64,
    ) -> Result<MemToken> {
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::HipIpcMem,
            emulated: self.info.source.is_emulated(),
            device,
            origin: self.origin,
            generation,
            object_size: object_size as u64,
            offset: range.start as u64,
            len: (range.end - range.start) as u64,
            payload,
        })
    }

    pub(crate) fn import_memory(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcMem)?;
        let dev = self.check_device(device)?;
        self.check_device(token.device())?;
        if token.origin() == self.origin {
            // Never left to the runtime: ROCm 5.6+ refuses hipIpcOpenMemHandle of one's own
            // handle (hipErrorInvalidContext), ROCm 5.2 has no such check and maps the
            // allocation a second time, whose lease hold would make our own free wait for
            // us. The facade serves same-process imports from the local allocation (DESIGN
            // 5.1) and never gets here.
            return Err(Error::Unsupported {
                backend: BackendKind::Hip,
                what: "importing a hip-ipc-mem token in the process that exported it (use \
                       the exporter's pointer; the devipc facade does)"
                    .into(),
            });
        }
        let payload = token.payload();
        // Every devipc HIP token names the exporter's lease: without it the free of the
        // memory could not wait for this import, nor a replayed token be refused.
        if payload.len() != HIP_IPC_HANDLE_SIZE + LEASE_NAME_LEN {
            return Err(Error::invalid_token(format!(
                "a hip-ipc-mem payload is {} bytes (handle and lease), not {}",
                HIP_IPC_HANDLE_SIZE + LEASE_NAME_LEN,
                payload.len()
            )));
        }
        let (handle, lease_name) = payload.split_at(HIP_IPC_HANDLE_SIZE);
        let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
        bytes.copy_from_slice(handle);
        if device != token.device() {
            // Runtimes before the lazy flag took effect (rocm-systems PR #817) need peer
            // access enabled explicitly for a cross-device open.
            self.enable_peer(device, token.device())?;
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        // Hold the exporter's lease before mapping, so its free waits for our close; the
        // hold fails when the exporter freed the memory or the token's generation is not
        // the exported object's. From here on every failure drops the hold, and after
        // the open closes the mapping too.
        // The lease must be the one its exporter made for this very handle, in the token's
        // producer's table, for the token's generation: a token pairing one object's
        // handle with another (live) object's lease is refused.
        let lease = held::hold_for(
            lease_name,
            &Binding {
                generation: Some(token.generation()),
                tag: Some(handle_tag(handle)),
                creator: Some(ProcessIdentity {
                    pid: i32::try_from(token.origin().pid.0)
                        .map_err(|_| Error::invalid_token("producer pid out of range"))?,
                    start_time: token.origin().start_time,
                }),
            },
        )?;
        let handle = hipIpcMemHandle_t::from_bytes(bytes);
        let addr = match result::ipc_open_mem_handle(&self.api, handle, self.lazy_peer_flag) {
            Ok(addr) => addr,
            Err(e) => {
                held::drop_hold(&lease);
                return Err(e);
            }
        };
        let record = MappingRecord {
            device,
            base: addr,
            lease: Some(lease),
        };
        // The token's sizes are claims; the runtime knows the opened allocation's real
        // extent. A range beyond it (forged or corrupted) is refused, and the open undone.
        let size = match self
            .opened_size(addr)
            .and_then(|size| token.range_within(size).map(|_| size))
        {
            Ok(size) => size,
            Err(e) => {
                self.undo_import(&record);
                return Err(e);
            }
        };
        let id = self.mappings.insert(record);
        Mapping::for_token(id, device, DevicePtr(addr), size, token).inspect_err(|_| {
            if let Ok(record) = self.mappings.remove(id) {
                self.undo_import(&record);
            }
        })
    }

    /// Closes a mapping whose import failed after the open, and drops its hold (kept when
    /// the close fails: the memory is still mapped then).
    fn undo_import(&self, record: &MappingRecord) {
        if let Err(close) = self.release_mapping(record) {
            log::error!("devipc-hip: undoing a refused import failed: {close}");
        }
    }

    /// The size of the allocation `hipIpcOpenMemHandle` mapped at `base`, as the runtime
    /// reports it.
    fn opened_size(&self, base: u64) -> Result<usize> {
        let (start, size) = result::mem_get_address_range(&self.api, base)?;
        if start != base {
            return Err(Error::invalid_token(format!(
                "the runtime mapped the handle at {base:#x} but reports its allocation at \
                 {start:#x}"
            )));
        }
        Ok(size)
    }

    pub(crate) fn close_mapping(&self, mapping: Mapping) -> Result<()> {
        let record = self.mappings.remove(mapping.id)?;
        self.release_mapping(&record)
            .inspect_err(|_| self.mappings.restore(mapping.id, record))
    }

    /// `hipIpcCloseMemHandle` for a record already taken out of the table, then the
    /// release of this process's hold on the exporter's lease.
    pub(crate) fn release_mapping(&self, record: &MappingRecord) -> Result<()> {
        {
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

    pub(crate) fn enable_peer(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        let dev = self.check_device(device)?;
        let peer_dev = self.check_device(peer)?;
        if device == peer {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        match result::device_enable_peer_access(&self.api, peer_dev, 0) {
            Err(Error::Vendor { code, .. }) if code == hipErrorPeerAccessAlreadyEnabled => Ok(()),
            other => other,
        }
    }

    /// `DeviceIpc::write`.
    ///
    /// # Safety
    /// As [`DeviceIpc::write`](devipc_core::DeviceIpc::write).
    pub(crate) unsafe fn write_memory(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller guarantees `dst..dst + src.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_htod(&self.api, dst.0, src) }
    }

    /// `DeviceIpc::read`.
    ///
    /// # Safety
    /// As [`DeviceIpc::read`](devipc_core::DeviceIpc::read).
    pub(crate) unsafe fn read_memory(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller guarantees `src..src + dst.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_dtoh(&self.api, dst, src.0) }
    }
}
