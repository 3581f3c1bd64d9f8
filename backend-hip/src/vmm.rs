//! HIP virtual memory shared as a file descriptor: the `hip-vmm-fd` mechanism.
//!
//! Sits beside `ipc_mem.rs` (legacy `hipMalloc` memory and `hipIpc*` handles): the
//! `DeviceIpc` methods in `backend.rs` choose the mechanism per allocation (made by
//! `allocate_with`, or found behind a framework pointer with
//! `hipMemRetainAllocationHandle`) and call the methods here. The flow (api-facts C.1):
//!
//! - **allocate**: `hipMemGetAllocationGranularity`, `hipMemCreate` asking for
//!   `hipMemHandleTypePosixFileDescriptor` (the property block in the runtime's layout),
//!   `hipMemAddressReserve`, `hipMemMap`, `hipMemSetAccess` for the device ([`VmmRange`]).
//! - **export**: `hipMemExportToShareableHandle` gives a dma-buf fd, which the exporter
//!   keeps open for as long as it exports the memory ([`ExportedFd`]); the token's
//!   payload ([`VmmPayload`], `vmm/payload.rs`) names that fd's number in the exporter,
//!   the open file's identity (`st_dev`/`st_ino`), whether an importer may fetch it with
//!   `pidfd_getfd`, and the lease importers hold (the same lease machinery as legacy
//!   memory, `ipc_mem/deferred.rs`). `export_fd` hands out a dup of the exported fd.
//! - **import** (`vmm/import.rs`): the fd arrives beside the token (`SCM_RIGHTS`) or is fetched from the
//!   exporter (`pidfd_open` + start-time check + `pidfd_getfd`); it must be the open file
//!   the token names, its own size (the dma-buf's, never the token's claim) bounds the
//!   view, then `hipMemImportFromShareableHandle` (fd by pointer before ROCm 7.1, by value
//!   from 7.1), reserve, map the whole handle, set access; the fd is closed only after
//!   `hipMemSetAccess` (rocm-systems #8304: the import is deferred until then).
//! - **release** (free, close): unmap, free the address range, release the handle, in
//!   that order, resumable where a step failed ([`VmmRange::release`]).

use std::fs::File;
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use devipc_core::own_memory;
use devipc_core::{
    Allocation, BackendKind, DeviceId, DevicePtr, Error, HandleId, Mechanism, MemToken, Result,
};
use devipc_hip_sys::{
    HipApi, hipMemAccessDesc, hipMemAccessFlagsProtReadWrite, hipMemAllocationGranularityMinimum,
    hipMemAllocationProp, hipMemAllocationTypePinned, hipMemGenericAllocationHandle_t,
    hipMemHandleTypePosixFileDescriptor, hipMemLocation, hipMemLocationTypeDevice,
};

use crate::backend::{AllocRecord, HipBackend};
use crate::device::DeviceScope;
use crate::external::NEXT_EXTERNAL_GENERATION_BASE;
use crate::result;

mod import;
mod payload;

pub(crate) use import::FD_FETCHES;
pub(crate) use payload::{FileIdentity, VmmPayload, real_size};

/// The first runtime whose `hipMemExportToShareableHandle` works (`HIP_VERSION` of ROCm
/// 6.2.0; before, it validates and returns `hipErrorNotSupported`, api-facts B.4).
pub(crate) const VMM_IPC_MIN_VERSION: i32 = 60_200_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether this runtime can share VMM memory as a file descriptor: every VMM function
/// present and ROCm 6.2 or later. The error names the version or the missing functions.
pub(crate) fn check_support(api: &HipApi, version: i32) -> Result<()> {
    let missing: Vec<&str> = api
        .missing_optional()
        .into_iter()
        .filter(|f| devipc_hip_sys::VMM_FUNCTIONS.contains(f))
        .collect();
    if !missing.is_empty() {
        return Err(Error::unsupported(
            BackendKind::Hip,
            format!(
                "the hip-vmm-fd mechanism: this HIP runtime ({}) lacks {}",
                describe_version(version),
                missing.join(", ")
            ),
        ));
    }
    if version < VMM_IPC_MIN_VERSION {
        return Err(Error::unsupported(
            BackendKind::Hip,
            format!(
                "the hip-vmm-fd mechanism on HIP {}: sharing virtual memory as a file \
                 descriptor needs ROCm 6.2 or later (older runtimes answer \
                 hipMemExportToShareableHandle with hipErrorNotSupported); use the \
                 default allocation (hip-ipc-mem) instead",
                describe_version(version)
            ),
        ));
    }
    Ok(())
}

/// Whether this runtime and device share VMM memory as a fabric handle
/// (`hipMemHandleTypeFabric`, HIP 7: 64 bytes, no fd to pass). Probed the way RCCL and
/// MoRI do, by creating one granule for it and exporting it (the capability attribute is
/// not stable across releases, field notes 2026-11); the granule is released again.
/// `false` when any step fails (gfx9 has no fabric support; the emulator has none).
pub(crate) fn probe_fabric(api: &HipApi, version: i32, device: i32) -> bool {
    if check_support(api, version).is_err() {
        return false;
    }
    let r0502 = devipc_hip_sys::mem_allocation_prop_is_r0502(version);
    let mut prop = posix_fd_prop(device);
    prop.requestedHandleType = devipc_hip_sys::hipMemHandleTypeFabric;
    let Ok(granularity) = result::mem_get_allocation_granularity(
        api,
        &prop,
        r0502,
        hipMemAllocationGranularityMinimum,
    ) else {
        return false;
    };
    let Ok(handle) = result::mem_create(api, granularity, &prop, r0502) else {
        return false;
    };
    // SAFETY: the handle was just created and is released once, below.
    let exported = unsafe { result::mem_export_fabric(api, handle) }.is_ok();
    // SAFETY: created above, not mapped, released once here.
    if let Err(e) = unsafe { result::mem_release(api, handle) } {
        log::error!("devipc-hip: releasing the fabric probe's allocation failed: {e}");
    }
    exported
}

fn describe_version(version: i32) -> String {
    devipc_core::RuntimeVersion::from_hip_encoded(version)
        .map_or_else(|| format!("version {version}"), |v| v.to_string())
}

/// The property block of a device's exportable VMM allocations (ROCm 5.3+ layout; the
/// result layer converts it for 5.2).
pub(crate) fn posix_fd_prop(device: i32) -> hipMemAllocationProp {
    hipMemAllocationProp {
        r#type: hipMemAllocationTypePinned,
        requestedHandleType: hipMemHandleTypePosixFileDescriptor,
        location: hipMemLocation {
            r#type: hipMemLocationTypeDevice,
            id: device,
        },
        ..hipMemAllocationProp::zeroed()
    }
}

/// Read and write access for `device`, for `hipMemSetAccess`.
fn access_for(device: i32) -> hipMemAccessDesc {
    hipMemAccessDesc {
        location: hipMemLocation {
            r#type: hipMemLocationTypeDevice,
            id: device,
        },
        flags: hipMemAccessFlagsProtReadWrite,
    }
}

// ---------------------------------------------------------------------------------------
// Records.

/// How far a [`VmmRange`]'s release got (a failed step is retried, the done ones not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Mapped,
    Unmapped,
    AddressFreed,
    Released,
}

/// A physical allocation mapped whole into a reservation of its own, with access set:
/// what `allocate_with` makes and what an import maps. Shared (`Arc`) by the record's
/// clones; released once.
#[derive(Debug)]
pub(crate) struct VmmRange {
    pub(crate) device: DeviceId,
    /// The `hipMemGenericAllocationHandle_t`, as an address.
    handle: usize,
    /// Base of the reservation, which is also the mapping's.
    pub(crate) va: u64,
    /// Size of the physical allocation, the mapping and the reservation.
    pub(crate) size: usize,
    stage: Mutex<Stage>,
}

/// An exported fd the exporter keeps open for the export's lifetime (closed on drop).
#[derive(Debug)]
pub(crate) struct ExportedFd {
    pub(crate) fd: OwnedFd,
    pub(crate) identity: FileIdentity,
}

impl ExportedFd {
    /// Wraps a fresh fd from `hipMemExportToShareableHandle` with its identity. The result
    /// layer made it close-on-exec the moment the runtime returned it (audit N18; a child
    /// the exporter spawns must not inherit the memory); it is set again here, which costs
    /// one `fcntl`, so an `ExportedFd` is close-on-exec whatever made its fd.
    pub(crate) fn new(fd: OwnedFd) -> Result<ExportedFd> {
        result::set_cloexec(&fd)?;
        let fd = File::from(fd);
        let identity = FileIdentity::of(&fd)?;
        Ok(ExportedFd {
            fd: fd.into(),
            identity,
        })
    }

    /// A new descriptor for the same open file (what `export_fd` hands out).
    pub(crate) fn dup(&self) -> Result<OwnedFd> {
        self.fd
            .try_clone()
            .map_err(|e| Error::io("duplicating an exported VMM fd", e))
    }

    /// The fd's number in this process (what the token carries).
    pub(crate) fn raw(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }
}

/// A VMM allocation of `allocate_with`: its mapping, and its exported fd once exported.
#[derive(Debug)]
pub(crate) struct VmmAlloc {
    pub(crate) range: VmmRange,
    exported: Mutex<Option<Arc<ExportedFd>>>,
}

impl VmmAlloc {
    /// The exported fd, made by the first export.
    pub(crate) fn exported(&self, api: &HipApi) -> Result<Arc<ExportedFd>> {
        let mut exported = lock(&self.exported);
        if let Some(e) = exported.as_ref() {
            return Ok(e.clone());
        }
        let _scope = DeviceScope::bind(api, self.range.device.as_c_int()?)?;
        // SAFETY: the handle is live: the allocation's record is pinned by the caller (or
        // taken out of the table by a release that has not released it yet).
        let fd = unsafe {
            result::mem_export_to_shareable_handle(
                api,
                self.range.handle(),
                hipMemHandleTypePosixFileDescriptor,
            )
        }
        .map_err(not_supported_is_unsupported)?;
        let e = Arc::new(ExportedFd::new(fd)?);
        *exported = Some(e.clone());
        Ok(e)
    }

    /// The exported fd if the allocation was exported.
    pub(crate) fn exported_if_any(&self) -> Option<Arc<ExportedFd>> {
        lock(&self.exported).clone()
    }

    /// Unmaps and releases the memory ([`VmmRange::release`]), then closes the exported
    /// fd: from then on `pidfd_getfd` of its number gets nothing (or another file, which
    /// the importer's identity check refuses).
    pub(crate) fn release(&self, api: &HipApi) -> Result<()> {
        self.range.release(api)?;
        lock(&self.exported).take();
        Ok(())
    }
}

/// `hipErrorNotSupported` from an export is the runtime saying it has no VMM IPC.
fn not_supported_is_unsupported(e: Error) -> Error {
    match e {
        Error::Vendor { code, .. } if code == devipc_hip_sys::hipErrorNotSupported => {
            Error::unsupported(
                BackendKind::Hip,
                format!("exporting virtual memory as a file descriptor on this runtime ({e})"),
            )
        }
        e => e,
    }
}

impl VmmRange {
    /// The handle as the runtime's pointer type.
    fn handle(&self) -> hipMemGenericAllocationHandle_t {
        self.handle as hipMemGenericAllocationHandle_t
    }

    /// Maps the whole of `handle` (`size` bytes) on `device` (bound by the caller) into a
    /// new reservation aligned to `alignment` and gives `device`, and `also` when it is
    /// another device, read-write access. On an error whatever this made is undone and
    /// `handle` is released (the range owns it from the call on).
    ///
    /// # Safety
    /// `handle` is a live handle of `size` bytes nobody else releases.
    pub(crate) unsafe fn map_whole(
        api: &HipApi,
        device: DeviceId,
        handle: hipMemGenericAllocationHandle_t,
        size: usize,
        alignment: usize,
        also: DeviceId,
    ) -> Result<VmmRange> {
        let release_handle = |e: Error| {
            // SAFETY: the caller's handle, released once, here, on the error path.
            if let Err(r) = unsafe { result::mem_release(api, handle) } {
                log::error!("devipc-hip: releasing a VMM handle after a failure failed: {r}");
            }
            e
        };
        let dev = device.as_c_int().map_err(release_handle)?;
        let va = result::mem_address_reserve(api, size, alignment).map_err(release_handle)?;
        let free_va = |e: Error| {
            // SAFETY: the reservation made above, with nothing mapped in it, freed once.
            if let Err(r) = unsafe { result::mem_address_free(api, va, size) } {
                log::error!("devipc-hip: freeing a VMM reservation after a failure failed: {r}");
            }
            release_handle(e)
        };
        // SAFETY: the caller's live handle, into the whole fresh reservation.
        unsafe { result::mem_map(api, va, size, handle) }.map_err(free_va)?;
        let range = VmmRange {
            device,
            handle: handle as usize,
            va,
            size,
            stage: Mutex::new(Stage::Mapped),
        };
        let mut descs = vec![access_for(dev)];
        if also != device {
            match also.as_c_int() {
                Ok(other) => descs.push(access_for(other)),
                Err(e) => {
                    if let Err(r) = range.release(api) {
                        log::error!(
                            "devipc-hip: undoing a VMM mapping after a failure failed: {r}"
                        );
                    }
                    return Err(e);
                }
            }
        }
        // SAFETY: exactly what was mapped above.
        if let Err(e) = unsafe { result::mem_set_access(api, va, size, &descs) } {
            if let Err(r) = range.release(api) {
                log::error!("devipc-hip: undoing a VMM mapping after a failure failed: {r}");
            }
            return Err(e);
        }
        Ok(range)
    }

    /// Unmaps, frees the reservation and releases the handle, in that order. A failed step
    /// is returned and retried by the next call; the steps done are not repeated.
    pub(crate) fn release(&self, api: &HipApi) -> Result<()> {
        let mut stage = lock(&self.stage);
        let _scope = DeviceScope::bind(api, self.device.as_c_int()?)?;
        if *stage == Stage::Mapped {
            // SAFETY: the whole mapping `map_whole` made, unmapped once (the stage moves
            // on); the owner's record is out of its table, so nobody uses it any more.
            unsafe { result::mem_unmap(api, self.va, self.size) }?;
            *stage = Stage::Unmapped;
        }
        if *stage == Stage::Unmapped {
            // SAFETY: the reservation `map_whole` made, now unmapped, freed once.
            unsafe { result::mem_address_free(api, self.va, self.size) }?;
            *stage = Stage::AddressFreed;
        }
        if *stage == Stage::AddressFreed {
            // SAFETY: the range's handle, released once (the stage moves on).
            unsafe { result::mem_release(api, self.handle()) }?;
            *stage = Stage::Released;
        }
        Ok(())
    }
}

/// Makes `size` bytes (rounded up to the granularity) of exportable VMM memory on
/// `device`: create, reserve, map, set access, each undone on a later failure.
pub(crate) fn allocate(
    api: &HipApi,
    version: i32,
    device: DeviceId,
    size: usize,
) -> Result<VmmAlloc> {
    let dev = device.as_c_int()?;
    let r0502 = devipc_hip_sys::mem_allocation_prop_is_r0502(version);
    let prop = posix_fd_prop(dev);
    let _scope = DeviceScope::bind(api, dev)?;
    let granularity = granularity(api, dev, r0502)?;
    let rounded = size
        .checked_next_multiple_of(granularity)
        .ok_or_else(|| Error::invalid_argument(format!("{size} bytes cannot be allocated")))?;
    let handle = result::mem_create(api, rounded, &prop, r0502)?;
    // SAFETY: the handle was just created with `rounded` bytes, and is owned by the range.
    let range = unsafe { VmmRange::map_whole(api, device, handle, rounded, granularity, device) }?;
    Ok(VmmAlloc {
        range,
        exported: Mutex::new(None),
    })
}

/// The minimum granularity of exportable VMM allocations on `dev`.
pub(crate) fn granularity(api: &HipApi, dev: i32, r0502: bool) -> Result<usize> {
    let g = result::mem_get_allocation_granularity(
        api,
        &posix_fd_prop(dev),
        r0502,
        hipMemAllocationGranularityMinimum,
    )?;
    if g == 0 || !g.is_power_of_two() {
        return Err(Error::invalid_argument(format!(
            "hipMemGetAllocationGranularity reported {g} for device {dev}"
        )));
    }
    Ok(g)
}

/// First HIP runtime version whose `hipPointerGetAttribute` answers
/// `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE` (7.12; RCCL asks it from
/// `HIP_VERSION >= 71260540`, field notes 2026-11).
const LEGACY_IPC_ATTRIBUTE_SINCE: i32 = 71_260_540;

/// What the runtime's `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE` says of `addr`:
/// `Some(true)` for `hipMalloc` memory, `Some(false)` for VMM (and host) memory, `None`
/// where the runtime does not answer it (before 7.12, or without the call).
pub(crate) fn legacy_ipc_capable(api: &HipApi, version: i32, addr: u64) -> Option<bool> {
    if version < LEGACY_IPC_ATTRIBUTE_SINCE || api.hipPointerGetAttribute.is_none() {
        return None;
    }
    result::pointer_is_legacy_ipc_capable(api, addr).ok()
}

/// Whether `addr` lies in VMM memory: `hipMemRetainAllocationHandle` succeeds only on
/// memory mapped with `hipMemMap`. The retained handle takes no reference (CLR), so
/// nothing is released. A runtime without the call has no VMM memory.
///
/// # Safety
/// `addr` is not `hipMalloc` memory: the runtime answered the legacy-IPC attribute with
/// "not legacy", or refused `hipIpcGetMemHandle` of it. Some ROCm 7.x releases are
/// reported to crash on a retain of `hipMalloc` memory (audit N7; see
/// [`result::mem_retain_allocation_handle`]).
pub(crate) unsafe fn is_vmm_memory(api: &HipApi, addr: u64) -> bool {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { result::mem_retain_allocation_handle(api, addr) }.is_ok()
}

/// A new exported fd for the VMM allocation mapped at `addr`
/// (`hipMemRetainAllocationHandle`, which borrows the creator's handle, then
/// `hipMemExportToShareableHandle`). Refused on runtimes without VMM IPC and for
/// allocations not made exportable as a POSIX fd.
///
/// # Safety
/// `addr` is not `hipMalloc` memory (as for [`is_vmm_memory`]).
pub(crate) unsafe fn export_external(api: &HipApi, version: i32, addr: u64) -> Result<ExportedFd> {
    check_support(api, version)?;
    // The creator's handle, borrowed: a retain takes no reference (CLR), so it is not
    // released here.
    // SAFETY: the caller's guarantee: `addr` is not hipMalloc memory.
    let handle = unsafe { result::mem_retain_allocation_handle(api, addr) }?;
    // SAFETY: the mapping's live handle (the framework keeps it while it maps the
    // memory, which it must while exporting it).
    let prop = unsafe {
        result::mem_get_allocation_properties_from_handle(
            api,
            handle,
            devipc_hip_sys::mem_allocation_prop_is_r0502(version),
        )
    }?;
    if prop.requestedHandleType & hipMemHandleTypePosixFileDescriptor == 0 {
        return Err(Error::unsupported(
            BackendKind::Hip,
            format!(
                "exporting VMM memory created without hipMemHandleTypePosixFileDescriptor \
                 (its requestedHandleType is {:#x}): the framework must ask for it in \
                 hipMemCreate",
                prop.requestedHandleType
            ),
        ));
    }
    // SAFETY: as above.
    let fd = unsafe {
        result::mem_export_to_shareable_handle(api, handle, hipMemHandleTypePosixFileDescriptor)
    }
    .map_err(not_supported_is_unsupported)?;
    ExportedFd::new(fd)
}

impl HipBackend {
    /// `allocate_with` for [`Mechanism::HipVmmFd`]: `size` bytes (rounded up to the
    /// granularity) of exportable VMM memory on `device`.
    pub(crate) fn allocate_vmm(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        self.vmm_fd_support()?;
        let alloc = allocate(&self.api, self.hip_version, device, size)?;
        let (ptr, size) = (alloc.range.va, alloc.range.size);
        let registration = own_memory::register(DevicePtr(ptr), size, device);
        let id = self.allocations.insert(AllocRecord {
            device,
            ptr,
            size,
            lease: None,
            vmm: Some(Arc::new(alloc)),
            registration,
        });
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(ptr),
            size,
        })
    }

    /// `export` of `range` (checked by the caller) of the VMM allocation `id`, whose pinned
    /// record is `record`: the fd, exported once, stays open (in the record) until the
    /// allocation is released.
    pub(crate) fn export_vmm(
        &self,
        id: HandleId,
        record: &AllocRecord,
        vmm: &VmmAlloc,
        range: Range<usize>,
    ) -> Result<MemToken> {
        let exported = vmm.exported(&self.api)?;
        let lease = self.export_lease(id, exported.identity.tag())?;
        let payload = VmmPayload {
            pidfd: true,
            fd: exported.raw(),
            identity: exported.identity,
            lease: *lease.name(),
        };
        self.mem_token(
            Mechanism::HipVmmFd,
            record.device,
            payload.encode(),
            record.size,
            range,
            id.get(),
        )
    }

    /// `export_fd`: a dup of the fd this backend exported for `token` (a `hip-vmm-fd` token
    /// of this process whose allocation, or `export_external` block, is still exported);
    /// the record stays pinned while it is duplicated.
    pub(crate) fn export_vmm_fd(&self, token: &MemToken) -> Result<OwnedFd> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipVmmFd)?;
        if token.origin() != self.origin {
            return Err(Error::invalid_argument(
                "export_fd of a token another process exported: only its exporter has the fd",
            ));
        }
        let payload = VmmPayload::decode(token.payload())?;
        let not_exported = || {
            Error::invalid_argument(format!(
                "this process no longer exports the memory of this hip-vmm-fd token \
                 (generation {}): it was freed or closed, or the token names another object",
                token.generation()
            ))
        };
        let exported = if token.generation() >= NEXT_EXTERNAL_GENERATION_BASE {
            self.external
                .lock()
                .iter()
                .map(|(_, e)| e)
                .find(|e| e.generation == token.generation())
                .and_then(|e| e.vmm.clone())
                .ok_or_else(not_exported)?
        } else {
            let (_, record) = self
                .allocations
                .pin_raw(token.generation())
                .map_err(|_| not_exported())?;
            let exported = record
                .vmm
                .as_ref()
                .and_then(|v| v.exported_if_any())
                .ok_or_else(not_exported)?;
            // Dup while pinned: a free on another thread waits for this.
            if exported.identity != payload.identity {
                return Err(not_exported());
            }
            return exported.dup();
        };
        if exported.identity != payload.identity {
            return Err(not_exported());
        }
        exported.dup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Audit N18: whatever fd the runtime hands over, the one an `ExportedFd` keeps is
    /// close-on-exec (the result layer sets it the moment the runtime returns; this is
    /// the same call on a descriptor made inheritable on purpose).
    #[test]
    fn an_exported_fd_is_close_on_exec() {
        use std::os::fd::{AsRawFd, FromRawFd};
        let file = File::open("/dev/null").unwrap();
        // SAFETY: dup of an open descriptor; the copy (without FD_CLOEXEC, as dup makes
        // it) is owned by the OwnedFd below and by nothing else.
        let inheritable = unsafe {
            let raw = libc::dup(file.as_raw_fd());
            assert!(raw >= 0);
            OwnedFd::from_raw_fd(raw)
        };
        let flags = |fd: i32| {
            // SAFETY: F_GETFD of an open descriptor.
            unsafe { libc::fcntl(fd, libc::F_GETFD) }
        };
        assert_eq!(flags(inheritable.as_raw_fd()) & libc::FD_CLOEXEC, 0);
        let number = inheritable.as_raw_fd();
        let exported = ExportedFd::new(inheritable).unwrap();
        assert_eq!(exported.raw(), number, "the descriptor keeps its number");
        assert_ne!(flags(exported.raw()) & libc::FD_CLOEXEC, 0);
        assert_ne!(
            flags(exported.dup().unwrap().as_raw_fd()) & libc::FD_CLOEXEC,
            0
        );
    }
}
