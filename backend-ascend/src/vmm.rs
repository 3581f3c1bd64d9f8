//! The `ascend-vmm` mechanism: device memory on ACL through the VMM API, devipc's own
//! allocations shared by shareable handle (allocation, export, grant, import, close).
//!
//! `allocate` is `aclrtMallocPhysical` (size rounded up to the allocation granularity),
//! `aclrtReserveMemAddress`, `aclrtMapMem` and `aclrtMemSetAccess`; `export` is
//! `aclrtMemExportToShareableHandle` (api-facts A.5, A.6, C.5). The runtime keeps **one**
//! shareable handle per physical handle ("exporting the same handle twice is an error"),
//! so the backend exports an allocation once, caches the `u64` it got, and every further
//! export of that allocation, whatever the range, reuses it: tokens of one allocation
//! differ only in their range. The PID-validation flag of that first export is the one
//! the runtime applies; a later export asking for the other setting fails with
//! [`Error::InvalidArgument`] instead of silently getting the first one.
//!
//! An import trusts the exporter, not the token: the exporter writes an
//! export record (`record.rs`) for each shareable handle it creates (its real physical
//! size and the generation its tokens carry) and withdraws it before freeing the
//! allocation. The importer maps the record's size (the runtime requires the map size to
//! equal the physical size), bounds the view by the extent `aclrtMemGetAddressRange`
//! reports for the mapping, and refuses a token whose generation, device or size differs
//! from the record's, or whose record is gone (replay after free: the vendor keeps the
//! memory for importers that mapped it before, but the export is over).
//!
//! Memory the framework allocated itself goes through IPC keys instead, see
//! [`ipc_key`](crate::ipc_key). Host copies of either (`read`/`write`) are in
//! `device.rs`.
//!
//! This module does the mechanism's work for the backend's `DeviceIpc` methods
//! (`allocate`, `free`, `export`, and `grant`/`import` of `ascend-vmm` tokens, which
//! `backend.rs` dispatches here), and holds its records and the releases the backend's
//! `close` and `Drop` share.

use std::ops::Range;

use devipc_ascend_sys::consts::{
    ACL_RT_VMM_EXPORT_FLAG_DEFAULT, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};
use devipc_ascend_sys::types::{
    ACL_HBM_MEM_HUGE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, aclrtMemAccessDesc, aclrtMemLocation,
    aclrtPhysicalMemProp,
};
use devipc_core::physical::visibility_in_force;
use devipc_core::token::MemTokenParts;
use devipc_core::{
    Allocation, BackendKind, DeviceId, DevicePtr, Error, ExportOptions, Mapping, Mechanism,
    MemToken, PidValidation, Pinned, Result,
};

use crate::backend::{AscendBackend, MappingRecord, lock};
use crate::device::DeviceScope;
use crate::device::{CopyRoute, DeviceRange};
use crate::record::{self, ExportRecord, Object};
use crate::result;
use crate::result::optional;
use crate::result::{Rollback, Undo};

/// Granularity assumed when the runtime lacks `aclrtMemGetAllocationGranularity` (the
/// 2024 headers): 2 MiB, the huge-page size of the `ACL_HBM_MEM_HUGE` memory devipc
/// allocates, which every VMM size must be a multiple of.
pub const FALLBACK_GRANULARITY: usize = 2 << 20;

/// The memory kind of devipc's physical allocations: HBM in 2 MiB pages, the kind
/// torch_npu's expandable segments export, and a value every header since 2024 knows
/// (the newer `ACL_MEM_HUGE` is absent from the 2024 header).
pub const MEM_ATTR: i32 = ACL_HBM_MEM_HUGE;

/// The VMM objects behind an allocation or a VMM import, and how far their teardown got
/// (so a release that fails midway can be retried from where it stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VmmObjects {
    pub(crate) device: DeviceId,
    /// The `aclrtDrvMemHandle`, as an address.
    pub(crate) phys: usize,
    /// The reserved and mapped virtual address.
    pub(crate) va: u64,
    /// The physical size (a multiple of the granularity).
    pub(crate) size: usize,
    pub(crate) stage: Teardown,
}

/// How far a [`VmmObjects`] teardown got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// Nothing released yet.
    Mapped,
    /// `aclrtUnmapMem` done.
    Unmapped,
    /// `aclrtReleaseMemAddress` done too; only `aclrtFreePhysical` is left.
    AddressReleased,
}

/// The one shareable handle of an allocation and the validation it was exported with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shareable {
    pub(crate) handle: u64,
    pub(crate) validation: PidValidation,
    /// The generation the allocation's tokens carry (its handle id).
    pub(crate) generation: u64,
    /// Whether the export record importers check is in place ([`record`]);
    /// a failed publish is retried by the next export.
    pub(crate) published: bool,
}

/// What the backend keeps for an [`Allocation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllocRecord {
    pub(crate) vmm: VmmObjects,
    pub(crate) shared: Option<Shareable>,
}

/// The physical-memory properties of devipc's allocations on `device`.
fn physical_prop(device: u32) -> aclrtPhysicalMemProp {
    aclrtPhysicalMemProp {
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: MEM_ATTR,
        location: aclrtMemLocation {
            id: device,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        },
        reserve: 0,
    }
}

impl AscendBackend {
    /// `allocate`: `aclrtMallocPhysical` of `size` rounded up to the granularity, then
    /// reserved, mapped and made accessible on `device` (see the module docs).
    pub(crate) fn allocate_vmm(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut prop = physical_prop(device.0);
        let granularity = self.granularity(&mut prop)?;
        let size = size.checked_next_multiple_of(granularity).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{size} bytes rounded up to the granularity {granularity} overflow"
            ))
        })?;
        let mut rollback = Rollback::new(&self.api);
        let phys = result::malloc_physical(&self.api, size, &prop)?;
        rollback.push(Undo::FreePhysical(phys));
        // SAFETY: `phys` was just allocated with `size` bytes and is not mapped.
        let va = unsafe { self.reserve_and_map(&mut rollback, phys, size, device) }?;
        rollback.commit();
        let record = AllocRecord {
            vmm: VmmObjects {
                device,
                phys,
                va,
                size,
                stage: Teardown::Mapped,
            },
            shared: None,
        };
        let id = self.allocations.insert(record);
        devipc_core::own_memory::register(DevicePtr(va), size, device);
        self.add_range(
            va,
            DeviceRange {
                end: va + size as u64,
                device,
                route: CopyRoute::Direct,
            },
        );
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(va),
            size,
        })
    }

    /// `free`: the allocation's export record withdrawn, then unmapped, released and freed
    /// ([`AscendBackend::release_allocation`]); on a failure the record goes back into the
    /// table, so the caller may retry.
    pub(crate) fn free_vmm(&self, alloc: Allocation) -> Result<()> {
        self.allocation(&alloc)?;
        let mut record = self.allocations.remove(alloc.id)?;
        self.release_allocation(&mut record).inspect_err(|_| {
            self.allocations.restore(alloc.id, record);
        })
    }

    /// `export`: the allocation's one shareable handle (`aclrtMemExportToShareableHandle`,
    /// created by the first export and cached), its export record published, and a token
    /// for `range` of it.
    pub(crate) fn export_vmm(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        let record = self.allocation(alloc)?;
        Allocation::check_range(&range, record.vmm.size)?;
        optional!(self.api, aclrtMemExportToShareableHandle)?;
        let _exporting = lock(&self.export_lock);
        // Re-read under the lock: another thread may have exported meanwhile.
        let shared = self.allocations.get(alloc.id)?.shared;
        let shared = match shared {
            Some(s) if s.validation == opts.validation => s,
            Some(s) => {
                return Err(Error::invalid_argument(format!(
                    "allocation {} was first exported with PID validation {:?}; ACL allows one \
                     shareable handle per physical allocation, so a later export cannot ask for \
                     {:?}: allocate separate memory for it",
                    alloc.id, s.validation, opts.validation
                )));
            }
            None => {
                let flags = match opts.validation {
                    PidValidation::Trustlist => ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
                    PidValidation::AnyProcess => ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                };
                let _scope = DeviceScope::bind(&self.api, record.vmm.device.as_c_int()?)?;
                // SAFETY: the physical handle is live (its record is in the table and the
                // export lock is held).
                let handle = unsafe {
                    result::mem_export_to_shareable_handle(&self.api, record.vmm.phys, flags)
                }?;
                let shared = Shareable {
                    handle,
                    validation: opts.validation,
                    generation: alloc.id.get(),
                    published: false,
                };
                self.allocations
                    .with(alloc.id, |r| r.shared = Some(shared))?;
                shared
            }
        };
        if !shared.published {
            // Under the export lock, so a concurrent free (which withdraws) cannot
            // interleave with the table update below.
            let mine =
                ExportRecord::mine(shared.generation, record.vmm.size, record.vmm.device, None)?;
            record::publish(Object::Vmm(shared.handle, self.origin()?.into()), &mine)?;
            let marked = self.allocations.with(alloc.id, |r| {
                if let Some(s) = r.shared.as_mut() {
                    s.published = true;
                }
            });
            if marked.is_err() {
                // Freed meanwhile by another thread: leave no record of it behind.
                record::withdraw(
                    Object::Vmm(shared.handle, self.origin()?.into()),
                    shared.generation,
                );
            }
            marked?;
        }
        let handle = shared.handle;
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::AscendVmm,
            emulated: self.info.source.is_emulated(),
            device: record.vmm.device,
            physical: self.token_physical(record.vmm.device),
            origin: self.origin()?,
            generation: shared.generation,
            object_size: record.vmm.size as u64,
            offset: range.start as u64,
            len: (range.end - range.start) as u64,
            payload: handle.to_le_bytes().to_vec(),
        })
    }

    /// `grant` of an `ascend-vmm` token (`aclrtMemSetPidToShareableHandle`): only this
    /// backend's live export. `dev` is the token's device, checked; `pids` the peers as the
    /// runtime takes them.
    pub(crate) fn grant_vmm(&self, token: &MemToken, dev: i32, pids: &mut [i32]) -> Result<()> {
        let handle = vmm_payload(token)?;
        optional!(self.api, aclrtMemSetPidToShareableHandle)?;
        // Only this backend's live export may be granted: the shareable handle is passed
        // to the runtime, which must never see a freed one (nor one whose value a later
        // allocation reuses). The pin keeps a `free` on another thread from releasing it
        // meanwhile.
        let not_ours = || {
            Error::invalid_argument(
                "only the process that exported memory can grant it, and this backend did not \
                 export this token's allocation (or freed it)",
            )
        };
        if token.origin() != self.origin()? {
            return Err(not_ours());
        }
        let (_, record) = self
            .allocations
            .pin_raw(token.generation())
            .map_err(|_| not_ours())?;
        if record.shared.map(|s| s.handle) != Some(handle) {
            return Err(not_ours());
        }
        // The runtime rejects an empty list (pidNum must be > 0); granting nobody is a no-op.
        if pids.is_empty() {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::mem_set_pid_to_shareable_handle(&self.api, handle, pids)
    }

    /// `import` of an `ascend-vmm` token on `device` (checked): the shareable handle
    /// imported, reserved, mapped and made accessible, with the size and generation the
    /// exporter's record names. `home` is the exporter's device as this process numbers
    /// it, `None` when this process does not see it.
    pub(crate) fn import_vmm(
        &self,
        token: &MemToken,
        device: DeviceId,
        home: Option<DeviceId>,
    ) -> Result<Mapping> {
        let handle = vmm_payload(token)?;
        // The size is the exporter's record of its physical allocation, never the token's
        // claim (see `record`); the runtime requires the map size to equal the physical
        // size, and reports the mapped extent afterwards.
        let object = Object::Vmm(handle, token.origin().into());
        let recorded = || {
            record::verify(
                object,
                record::read(object)?,
                token.generation(),
                token.device(),
                token.object_size(),
            )
        };
        let size = recorded()?;
        token.range_within(size)?;
        optional!(self.api, aclrtMemImportFromShareableHandle)?;
        // VMM memory of another device needs peer access (api-facts C.5), which cannot be
        // enabled with a device this process does not see.
        let home = home.ok_or_else(|| Error::DeviceNotVisible {
            device: *token.physical_device(),
            visibility: visibility_in_force(BackendKind::Ascend),
        })?;
        if home != device {
            self.enable_peer(device, home)?;
        }
        let dev = device.as_c_int()?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut rollback = Rollback::new(&self.api);
        // The exporter may free the allocation between the record check above and the
        // import: the runtime then refuses the dead handle, which is reported as the
        // replay it is (the record is gone) rather than as a vendor error.
        let phys = result::mem_import_from_shareable_handle(&self.api, handle, dev)
            .map_err(|e| recorded().err().unwrap_or(e))?;
        rollback.push(Undo::FreePhysical(phys));
        // SAFETY: `phys` was just imported and is not mapped; `size` is the exporter's
        // physical size (its record), which the runtime requires the map to cover.
        let va = unsafe { self.reserve_and_map(&mut rollback, phys, size, device) }?;
        let extent = self.runtime_extent(va).map_or(size, |s| s.min(size));
        // Checked before anything is committed, so a refusal releases what was mapped.
        token.range_within(extent)?;
        // Still the export the token names: had the exporter freed it and a new export
        // reused the handle's value meanwhile, the record's generation would differ, and
        // this mapping would be someone else's memory.
        recorded()?;
        rollback.commit();
        let vmm = VmmObjects {
            device,
            phys,
            va,
            size,
            stage: Teardown::Mapped,
        };
        let id = self.mappings.insert(MappingRecord::Vmm(vmm));
        self.add_range(
            va,
            DeviceRange {
                end: va + size as u64,
                device,
                route: CopyRoute::Direct,
            },
        );
        Mapping::for_token(id, device, DevicePtr(va), extent, token).inspect_err(|_| {
            // Not reached (the range was checked above); never leave a mapping behind.
            if let Ok(mut record) = self.mappings.remove(id) {
                let _ = self.release_mapping(&mut record);
            }
        })
    }

    /// The VMM allocation granularity for `prop` (minimum: what `aclrtMapMem` requires),
    /// or [`FALLBACK_GRANULARITY`] when the runtime cannot tell. The thread's device must
    /// be bound.
    pub(crate) fn granularity(&self, prop: &mut aclrtPhysicalMemProp) -> Result<usize> {
        if self.api.aclrtMemGetAllocationGranularity.is_none() {
            return Ok(FALLBACK_GRANULARITY);
        }
        let granularity = result::mem_get_allocation_granularity(
            &self.api,
            prop,
            ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
        )?;
        if granularity == 0 {
            return Err(Error::invalid_argument(
                "aclrtMemGetAllocationGranularity reported a granularity of 0",
            ));
        }
        Ok(granularity)
    }

    /// Reserves `size` bytes of address space, maps `phys` there and grants `device`
    /// read-write access (when the runtime has `aclrtMemSetAccess`; without it the mapping
    /// device has access by default). Each step is pushed onto `rollback`. The device must
    /// be bound.
    ///
    /// # Safety
    /// `phys` is a live physical handle of `size` bytes (`aclrtMallocPhysical` or
    /// `aclrtMemImportFromShareableHandle`), not mapped elsewhere by this operation.
    unsafe fn reserve_and_map(
        &self,
        rollback: &mut Rollback<'_>,
        phys: usize,
        size: usize,
        device: DeviceId,
    ) -> Result<u64> {
        // Alignment 0: the default.
        let va = result::reserve_mem_address(&self.api, size, 0)?;
        rollback.push(Undo::ReleaseAddress(va));
        // SAFETY: `va` was reserved above for `size` bytes and is not mapped; the caller
        // guarantees that `phys` is a live handle of `size` bytes.
        unsafe { result::map_mem(&self.api, va, size, phys) }?;
        rollback.push(Undo::Unmap(va));
        if self.api.aclrtMemSetAccess.is_some() {
            let mut desc = aclrtMemAccessDesc {
                flags: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
                location: aclrtMemLocation {
                    id: device.0,
                    r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                },
                rsv: [0; 12],
            };
            // SAFETY: `va`/`size` are exactly the range mapped above.
            unsafe {
                result::mem_set_access(&self.api, va, size, std::slice::from_mut(&mut desc))
            }?;
        }
        Ok(va)
    }

    /// Unmaps, releases and frees an allocation already taken out of the table. On an
    /// error `record` says how far it got, so the caller can put it back and retry.
    ///
    /// The export record goes first: from then on a token of the allocation, replayed,
    /// no longer imports (the memory itself lives on until importers free it, as ACL
    /// documents, but no new importer gets it).
    pub(crate) fn release_allocation(&self, record: &mut AllocRecord) -> Result<()> {
        if let Some(shared) = record.shared.as_mut().filter(|s| s.published) {
            // The origin was read when the record was published (it is cached since).
            if let Ok(origin) = self.origin() {
                record::withdraw(Object::Vmm(shared.handle, origin.into()), shared.generation);
            }
            shared.published = false;
        }
        self.release_vmm(&mut record.vmm)
    }

    /// Unmap, release the address, free the physical handle (api-facts A.5: unmap before
    /// releasing the address), resuming from `vmm.stage`.
    pub(crate) fn release_vmm(&self, vmm: &mut VmmObjects) -> Result<()> {
        let _scope = DeviceScope::bind(&self.api, vmm.device.as_c_int()?)?;
        if vmm.stage == Teardown::Mapped {
            Undo::Unmap(vmm.va).run(&self.api)?;
            vmm.stage = Teardown::Unmapped;
            self.remove_range(vmm.va);
            // No longer devipc memory (export_external); a mapping was never registered.
            devipc_core::own_memory::unregister(DevicePtr(vmm.va));
        }
        if vmm.stage == Teardown::Unmapped {
            Undo::ReleaseAddress(vmm.va).run(&self.api)?;
            vmm.stage = Teardown::AddressReleased;
        }
        Undo::FreePhysical(vmm.phys).run(&self.api)
    }

    /// The record behind `alloc`, checked against what the caller holds, and pinned: a
    /// `free` of a clone of the handle on another thread waits until it is dropped.
    pub(crate) fn allocation(&self, alloc: &Allocation) -> Result<Pinned<'_, AllocRecord>> {
        let record = self.allocations.pin(alloc.id)?;
        let vmm = record.vmm;
        alloc.check_matches(DevicePtr(vmm.va), vmm.size, vmm.device)?;
        Ok(record)
    }

    /// The size of the block the runtime reports at `base` (`aclrtMemGetAddressRange`),
    /// when it has the call and reports a block starting exactly there. The device must be
    /// bound. Used to bound a fresh mapping by what the runtime mapped.
    pub(crate) fn runtime_extent(&self, base: u64) -> Option<usize> {
        let (found, size) = result::query_address_range(&self.api, base)?;
        (found == base && size > 0).then_some(size)
    }
}

/// The shareable handle of an `ascend-vmm` token.
fn vmm_payload(token: &MemToken) -> Result<u64> {
    let bytes: [u8; 8] = token
        .payload()
        .try_into()
        .map_err(|_| Error::invalid_token("an ascend-vmm payload is 8 bytes"))?;
    Ok(u64::from_le_bytes(bytes))
}
