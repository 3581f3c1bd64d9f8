//! The `hip-ipc-mem` mechanism: `hipMalloc` memory shared with IPC memory handles.
//!
//! - **allocate**: `hipMalloc` on the device, registered as devipc's own memory (so
//!   `export_external` refuses it).
//! - **export**: `hipIpcGetMemHandle` of the allocation's base. The handle names the whole
//!   allocation even for an interior pointer, and `hipIpcOpenMemHandle` returns its base
//!   (api-facts C.1), so the token carries the range's offset and the importer adds it.
//!   Tokens for different ranges of one allocation thus carry the same handle, and the
//!   facade's import cache can share one open between them. The first export also makes
//!   the allocation's lease ([`HipBackend::export_lease`]), which the token names after
//!   the handle: payload = 64-byte handle + lease name.
//! - **import**: hold the exporter's lease (bound to the token's generation, the handle
//!   and the producer), then `hipIpcOpenMemHandle` with the runtime's
//!   `hipIpcMemLazyEnablePeerAccess`, and bound the view by the size the runtime reports
//!   for the mapping (`hipMemGetAddressRange`), never the token's claim.
//! - **close**: `hipIpcCloseMemHandle`, then the hold is dropped.
//! - **free**: `hipFree`, deferred while importers hold the lease
//!   ([`deferred`]: the reaper that frees it when the last importer
//!   closed; `hip-vmm-fd` allocations use the same leases and deferral).
//!
//! The `DeviceIpc` methods in `backend.rs` call the methods here for `hipMalloc` memory
//! and `hip-ipc-mem` tokens.

use std::ops::Range;
use std::sync::Arc;

use devipc_core::own_memory;
use devipc_core::{
    Allocation, BackendKind, DeviceId, DeviceIpc, DevicePtr, Error, HandleId, Mapping, Mechanism,
    MemToken, Result,
};
use devipc_hip_sys::{HIP_IPC_HANDLE_SIZE, HipApi, hipIpcMemHandle_t};
use devipc_shm::lease::{Binding, Lease, held};
use devipc_shm::process::ProcessIdentity;
use devipc_shm::word_file::NAME_LEN;

use crate::backend::{AllocRecord, HipBackend, MappingRecord};
use crate::device::DeviceScope;
use crate::result;

pub(crate) mod deferred;

pub(crate) use deferred::Deferred;

/// What a lease is bound to besides the generation: a hash of the IPC handle it was made
/// for (FNV-1a; the exporter writes it, so a forger cannot make it match another handle).
pub(crate) fn handle_tag(handle: &[u8]) -> u64 {
    devipc_core::identity::fnv1a64(handle)
}

/// `hipFree` of a `hipMalloc` record already taken out of the allocation table (see
/// [`AllocRecord::release`]).
pub(crate) fn free(api: &HipApi, record: &AllocRecord) -> Result<()> {
    let _scope = DeviceScope::bind(api, record.device.as_c_int()?)?;
    // SAFETY: the pointer came from hipMalloc in this backend and is freed once: its
    // record was taken out of the table (and out of the deferred list) by the caller,
    // and nobody maps it any more (its lease is unheld, or HipDeferredFree is off).
    unsafe { result::free(api, record.ptr) }
}

/// `hipIpcCloseMemHandle` of a `hip-ipc-mem` mapping already taken out of the table (the
/// hold on the lease is the caller's to drop, see [`HipBackend::release_mapping`]).
pub(crate) fn close(api: &HipApi, record: &MappingRecord) -> Result<()> {
    let _scope = DeviceScope::bind(api, record.device.as_c_int()?)?;
    // SAFETY: `base` came from hipIpcOpenMemHandle and is closed once: its record
    // was taken out of the table by the caller.
    unsafe { result::ipc_close_mem_handle(api, record.base) }
}

impl HipBackend {
    /// `allocate`: `size` bytes of `hipMalloc` memory on `device`.
    pub(crate) fn allocate_ipc_mem(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let addr = result::malloc(&self.api, size)?;
        let registration = own_memory::register(DevicePtr(addr), size, device);
        let id = self.allocations.insert(AllocRecord {
            device,
            ptr: addr,
            size,
            lease: None,
            vmm: None,
            registration,
        });
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(addr),
            size,
        })
    }

    /// `export` of `range` (checked by the caller) of the `hipMalloc` allocation `id`,
    /// whose pinned record is `record`.
    pub(crate) fn export_ipc_mem(
        &self,
        id: HandleId,
        record: &AllocRecord,
        range: Range<usize>,
    ) -> Result<MemToken> {
        let handle = self.ipc_handle(record.device, record.ptr)?;
        let lease = self.export_lease(id, handle_tag(&handle.to_bytes()))?;
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(lease.name());
        self.mem_token(
            Mechanism::HipIpcMem,
            record.device,
            payload,
            record.size,
            range,
            id.get(),
        )
    }

    /// The lease of allocation `id`, created (bound to its generation) by its first export.
    /// `tag` names the object the lease is for (see [`handle_tag`]; for VMM memory the
    /// exported fd's identity).
    pub(crate) fn export_lease(&self, id: HandleId, tag: u64) -> Result<Arc<Lease>> {
        self.allocations.with(id, |record| match &record.lease {
            Some(lease) => Ok(lease.clone()),
            None => {
                let lease = held::create_tagged(id.get(), tag)?;
                record.lease = Some(lease.clone());
                Ok(lease)
            }
        })?
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

    /// `import` of a `hip-ipc-mem` token on `device` (see the module docs).
    pub(crate) fn import_ipc_mem(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcMem)?;
        let dev = self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it).
        let home = self.home_device(token.device(), token.physical_device())?;
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
        if payload.len() != HIP_IPC_HANDLE_SIZE + NAME_LEN {
            return Err(Error::invalid_token(format!(
                "a hip-ipc-mem payload is {} bytes (handle and lease), not {}",
                HIP_IPC_HANDLE_SIZE + NAME_LEN,
                payload.len()
            )));
        }
        let (handle, lease_name) = payload.split_at(HIP_IPC_HANDLE_SIZE);
        let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
        bytes.copy_from_slice(handle);
        if let Some(home) = home.filter(|&home| home != device) {
            // Runtimes before the lazy flag took effect (rocm-systems PR #817) need peer
            // access enabled explicitly for a cross-device open. A device this process does
            // not see cannot be named: the open is left to the runtime (and its flag).
            self.enable_peer_access(device, home)?;
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
                    pid_ns: u32::try_from(token.origin().host.pid_namespace).unwrap_or(0),
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
            vmm: None,
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
}
