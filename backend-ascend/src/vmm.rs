//! Device memory on ACL through the VMM API: allocation, shareable-handle export, grant,
//! import and close; host <-> device copies; peer access.
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
//! [`ipc_key`](crate::ipc_key).
//!
//! `read` and `write` are synchronous `aclrtMemcpy` calls, except on memory imported by
//! IPC key and used from another device than the exporter's: the vendor forbids host
//! copies (and synchronous device copies) of it (api-facts C.4: only asynchronous
//! device-to-device copies), so those go through a staging buffer on the importing device
//! (see [`staging`](crate::staging)).
//!
//! This module holds the records the backend keeps and the helpers shared by the
//! `DeviceIpc` methods (in `device_ipc.rs`) and the backend's `Drop`.

use devipc_ascend_sys::types::{
    ACL_HBM_MEM_HUGE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, aclrtMemAccessDesc, aclrtMemLocation,
    aclrtPhysicalMemProp,
};
use devipc_core::{
    Allocation, DeviceId, DevicePtr, Error, MemToken, PidValidation, Pinned, ProcessId, Result,
};

use crate::backend::AscendBackend;
use crate::device::DeviceScope;
use crate::ipc_key::KeyMapping;
use crate::record::{self, Object};
use crate::result;
use crate::rollback::{Rollback, Undo};

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
    /// Whether the export record importers check is in place ([`record`](crate::record));
    /// a failed publish is retried by the next export.
    pub(crate) published: bool,
}

/// What the backend keeps for an [`Allocation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllocRecord {
    pub(crate) vmm: VmmObjects,
    pub(crate) shared: Option<Shareable>,
}

/// What the backend keeps for a [`Mapping`](devipc_core::Mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MappingRecord {
    /// A VMM shareable handle imported, reserved and mapped here.
    Vmm(VmmObjects),
    /// An IPC key imported here.
    Key(KeyMapping),
}

/// The physical-memory properties of devipc's allocations on `device`.
pub(crate) fn physical_prop(device: u32) -> aclrtPhysicalMemProp {
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

/// The `int32_t` pid list the trustlist functions take; an empty list stays empty.
pub(crate) fn pid_args(peers: &[ProcessId]) -> Result<Vec<i32>> {
    peers.iter().map(|p| p.as_c_int()).collect()
}

impl AscendBackend {
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
    pub(crate) unsafe fn reserve_and_map(
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

    /// Releases a mapping already taken out of the table (resumable, like
    /// [`AscendBackend::release_vmm`]).
    pub(crate) fn release_mapping(&self, record: &mut MappingRecord) -> Result<()> {
        match record {
            MappingRecord::Vmm(vmm) => self.release_vmm(vmm),
            MappingRecord::Key(key) => self.release_key_mapping(key),
        }
    }
}

/// The shareable handle of an `ascend-vmm` token.
pub(crate) fn vmm_payload(token: &MemToken) -> Result<u64> {
    let bytes: [u8; 8] = token
        .payload()
        .try_into()
        .map_err(|_| Error::invalid_token("an ascend-vmm payload is 8 bytes"))?;
    Ok(u64::from_le_bytes(bytes))
}
