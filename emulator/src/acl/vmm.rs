//! The VMM calls: granularity, physical allocations, address reservations, mappings and
//! access.
//!
//! - Granularity: [`GRANULARITY`] (2 MiB, the huge-page size, as both MINIMUM and
//!   RECOMMENDED) for every supported memory attribute except the 1 GiB page kinds
//!   (`ACL_MEM_HUGE1G`, `ACL_MEM_P2P_HUGE1G`, `ACL_HBM_MEM_HUGE1G`), which report
//!   [`GRANULARITY_1G`].
//! - `aclrtMallocPhysical(size, prop, 0)`: a memory object of `size` bytes on
//!   `prop.location.id`, charged to that device. `prop` is validated as the vendor's
//!   granularity query does (`ascend.vmm.prop-validated`): handle type NONE (or POSIX),
//!   allocation type PINNED, location type DEVICE, and a device memory attribute
//!   (`ACL_MEM_NORMAL`/`HUGE`/`HUGE1G`/`P2P_*`, `ACL_HBM_MEM_HUGE`/`NORMAL`/`HUGE1G`; the
//!   DDR kinds are host-only). `size` must be a multiple of the granularity.
//! - `aclrtReserveMemAddress(size, 0, NULL, flags)`: a `PROT_NONE` host range of `size`
//!   rounded up to the granularity, aligned to it. `flags` is 0 or 1 (the page-type flag
//!   the ACL wrapper accepts "for compatibility with early interfaces", RT-SRC
//!   `aclrtReserveMemAddressImpl`; torch_npu's expandable segments and Mooncake always pass
//!   1), anything else is `ACL_ERROR_INVALID_PARAM`; the emulator makes no difference
//!   between the two. `expectPtr` is experimental in the vendor runtime and not emulated
//!   (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`).
//! - `aclrtMapMem(va, size, 0, handle, 0)`: places the object's segment file at `va`
//!   with `MAP_FIXED` (`size` must equal the physical size, `va` must be a free, page
//!   aligned part of one reservation); the range joins [`super::memory::RANGES`].
//!   `aclrtUnmapMem(va)` puts the pages back to reserved; `aclrtReleaseMemAddress`
//!   needs the reservation's base with nothing mapped in it. As the `aclrtMapMem` reference
//!   says (RT-DOC 11-04), one reservation holds memory of one device only
//!   (`ascend.vmm.reservation-one-device`) and either handles of `aclrtMallocPhysical` or
//!   imported ones, never both (`ascend.vmm.reservation-not-mixed-local-and-imported`);
//!   both are 107000 (the vendor names no code). Mappings that are address-contiguous in one
//!   reservation form one device range for copies
//!   (`ascend.vmm.copy-spans-contiguous-mappings`, see [`super::memory`]).
//! - `aclrtMemSetAccess(va, size, desc, n)`: `va`/`size` must be a mapping; each
//!   descriptor needs known flags and a valid device location; the flags of the
//!   descriptor for the mapping's device become the mapping's access, which copies
//!   respect (`ascend.vmm.access-respected`; mappings start READWRITE, as on runtimes
//!   without `aclrtMemSetAccess`).
//!
//! # Which device ids (issue 16)
//!
//! Every device id here is a *user* id ([`super::visibility`]), translated to the physical
//! id the state directory records: `aclrtMallocPhysical`'s and
//! `aclrtMemGetAllocationGranularity`'s `prop.location.id` and
//! `aclrtMemImportFromShareableHandle`'s `deviceId` (the runtime's `ApiErrorDecorator`
//! converts exactly these with `ChgUserDevIdToDeviceId`, hicann/runtime
//! `src/runtime/feature/src/api_impl/api_error.cc`). `aclrtMemSetAccess` is the exception
//! in that source: its decorator passes the descriptors to the driver (`halMemSetAccess`)
//! unconverted, so `location.id` is a driver (logical) id there, which is why HIXL and
//! Mooncake convert with `aclrtGetLogicDevIdByUserDevId` first; a later runtime
//! (`ApiImplVmm::MemSetAccess`) converts user ids like the other calls. The emulator reads
//! user ids by default and logical ids (any device of the container, listed in
//! `ASCEND_RT_VISIBLE_DEVICES` or not, as the driver would take) with
//! `DEVIPC_EMU_ASCEND_SET_ACCESS_IDS=logical`.
//! - `aclrtFreePhysical(handle)`: gives up this process's hold at once, or at the last
//!   unmap if the handle is still mapped (`ascend.vmm.free-deferred-until-unmapped`).
//!   The memory itself lives until every holder (allocator and importers) freed it
//!   (`ascend.vmm.lifetime-until-all-freed`, see [`super::shareable`]).
//!
//! Concurrency: the reservations and mappings of the process are behind one mutex, which
//! copies also hold ([`mapping_guard`]) so a mapping cannot vanish under a copy. The
//! registry is never called while it is held.

use std::collections::BTreeMap;

use devipc_ascend_sys::codes::ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
use devipc_ascend_sys::types::{
    ACL_HBM_MEM_HUGE, ACL_HBM_MEM_HUGE1G, ACL_HBM_MEM_NORMAL, ACL_MEM_ALLOCATION_TYPE_PINNED,
    ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_HANDLE_TYPE_POSIX, ACL_MEM_HUGE, ACL_MEM_HUGE1G,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_NORMAL, ACL_MEM_P2P_HUGE, ACL_MEM_P2P_HUGE1G,
    ACL_MEM_P2P_NORMAL, ACL_RT_MEM_ACCESS_FLAGS_NONE, ACL_RT_MEM_ACCESS_FLAGS_READ,
    ACL_RT_MEM_ACCESS_FLAGS_READWRITE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, aclrtMemAccessDesc, aclrtMemGranularityOptions,
    aclrtPhysicalMemProp,
};
use devipc_shm::os;

use crate::error::EmuError;
use crate::local::{ForkGuard, ForkLocal, HandleTable};
use crate::state::{NewObject, ObjectId, Reservation, Vendor};

use super::errors::{AclFailure, AclResult, check};
use super::memory::{Backing, DeviceRange, RANGES};
use super::{device, process_state, rules, shareable, visibility};
use crate::config::AscendIdSpace;

/// Allocation granularity (MINIMUM and RECOMMENDED) of every supported memory attribute
/// except the 1 GiB page kinds: 2 MiB.
pub const GRANULARITY: usize = 2 << 20;
/// Allocation granularity of the 1 GiB page kinds.
pub const GRANULARITY_1G: usize = 1 << 30;

/// A physical handle of this process (`aclrtDrvMemHandle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Physical {
    /// The memory object.
    pub id: ObjectId,
    /// The device the handle is on (the importing device for imports).
    pub device: u32,
    /// Size in bytes.
    pub size: usize,
    /// Whether it came from `aclrtMemImportFromShareableHandle`.
    pub imported: bool,
    /// Whether `aclrtFreePhysical` was called (the hold goes at the last unmap).
    pub freed: bool,
    /// Live mappings of the handle in this process.
    pub maps: u32,
}

/// The physical handles of this process.
pub static PHYSICAL: HandleTable<Physical> = HandleTable::new("aclrtDrvMemHandle", 0xac52);

/// One mapping inside a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapped {
    /// Length in bytes.
    len: usize,
    /// The device of the handle mapped.
    device: u32,
    /// Whether the handle came from `aclrtMemImportFromShareableHandle`.
    imported: bool,
}

/// One reservation and what is mapped in it (offset -> mapping).
#[derive(Debug)]
struct Reserved {
    range: Reservation,
    mapped: BTreeMap<usize, Mapped>,
}

/// The reservations of this process, by base address.
#[derive(Debug)]
pub struct VmmState {
    reservations: BTreeMap<usize, Reserved>,
}

/// A forked child starts without reservations (its parent's are forgotten: see
/// [`crate::local`]).
static VMM: ForkLocal<VmmState> = ForkLocal::new(|inherited| {
    std::mem::forget(inherited);
    VmmState {
        reservations: BTreeMap::new(),
    }
});

/// Holds the VMM state: while held, no mapping is added or removed.
pub type MappingGuard = ForkGuard<'static, VmmState>;

/// Locks the VMM state (copies hold this so their operands stay mapped).
pub fn mapping_guard() -> MappingGuard {
    VMM.lock()
}

/// Validates `prop` for a device allocation; returns the device and the granularity.
fn check_prop(prop: &aclrtPhysicalMemProp) -> AclResult<(u32, usize)> {
    let bad = |what: String| check(true, rules::VMM_PROP_VALID, || what);
    if ![ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_HANDLE_TYPE_POSIX].contains(&prop.handleType) {
        bad(format!(
            "handleType {} is not NONE or POSIX",
            prop.handleType
        ))?;
    }
    if prop.allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED {
        bad(format!(
            "allocationType {} is not PINNED",
            prop.allocationType
        ))?;
    }
    if prop.location.r#type != ACL_MEM_LOCATION_TYPE_DEVICE {
        bad(format!(
            "location type {} is not ACL_MEM_LOCATION_TYPE_DEVICE",
            prop.location.r#type
        ))?;
    }
    let huge_1g = [ACL_MEM_HUGE1G, ACL_MEM_P2P_HUGE1G, ACL_HBM_MEM_HUGE1G];
    let supported = [
        ACL_MEM_NORMAL,
        ACL_MEM_HUGE,
        ACL_MEM_P2P_NORMAL,
        ACL_MEM_P2P_HUGE,
        ACL_HBM_MEM_HUGE,
        ACL_HBM_MEM_NORMAL,
    ];
    if !supported.contains(&prop.memAttr) && !huge_1g.contains(&prop.memAttr) {
        bad(format!(
            "memAttr {} is not a device memory attribute (DDR kinds are host-only)",
            prop.memAttr
        ))?;
    }
    let id = i32::try_from(prop.location.id).unwrap_or(-1);
    let device = device::check_id(id)?;
    let granularity = if huge_1g.contains(&prop.memAttr) {
        GRANULARITY_1G
    } else {
        GRANULARITY
    };
    Ok((device, granularity))
}

/// `aclrtMemGetAllocationGranularity`.
pub fn granularity(
    prop: &aclrtPhysicalMemProp,
    option: aclrtMemGranularityOptions,
) -> AclResult<usize> {
    if ![
        ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
        ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
    ]
    .contains(&option)
    {
        return Err(AclFailure::rule(
            rules::PARAM_ENUM_VALUE,
            format!("{option} is not MINIMUM or RECOMMENDED"),
        ));
    }
    Ok(check_prop(prop)?.1)
}

/// `aclrtMallocPhysical`: returns the new handle.
pub fn malloc_physical(size: usize, prop: &aclrtPhysicalMemProp, flags: u64) -> AclResult<usize> {
    check(flags != 0, rules::PARAM_RESERVED_ZERO, || {
        format!("flags is reserved and must be 0, got {flags:#x}")
    })?;
    if size == 0 {
        return Err(AclFailure::rule(rules::PARAM_SIZE_NONZERO, "size is 0"));
    }
    let (device, granularity) = check_prop(prop)?;
    check(size % granularity != 0, rules::VMM_SIZE_GRANULARITY, || {
        format!("size {size:#x} is not a multiple of the granularity {granularity:#x}")
    })?;
    let reg = process_state::registry()?;
    let created = reg.create(NewObject::memory(Vendor::Acl, device, size as u64))?;
    let physical = Physical {
        id: created.meta.id(),
        device,
        size,
        imported: false,
        freed: false,
        maps: 0,
    };
    PHYSICAL.insert(physical).or_else(|e| {
        let _ = reg.release(physical.id, process_state::me()?);
        Err(e.into())
    })
}

/// `aclrtFreePhysical`.
pub fn free_physical(handle: usize) -> AclResult<()> {
    let now = PHYSICAL.with(handle, |p| {
        if p.freed {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                format!("handle {handle:#x} was already freed (it is still mapped)"),
            ));
        }
        p.freed = true;
        Ok((*p, p.maps == 0))
    })??;
    match now {
        (p, true) => {
            PHYSICAL.remove(handle)?;
            shareable::release_hold(&p)
        }
        // Still mapped: the hold goes at the last aclrtUnmapMem.
        (_, false) => Ok(()),
    }
}

/// `aclrtReserveMemAddress`: returns the base.
pub fn reserve(size: usize, alignment: usize, expect: usize, flags: u64) -> AclResult<usize> {
    check(alignment != 0, rules::PARAM_RESERVED_ZERO, || {
        format!("alignment ({alignment:#x}) is reserved and must be 0")
    })?;
    check(flags > 1, rules::PARAM_RESERVED_ZERO, || {
        format!("flags ({flags:#x}) must be 0 or 1 (the page-type flag kept for compatibility)")
    })?;
    if size == 0 {
        return Err(AclFailure::rule(rules::PARAM_SIZE_NONZERO, "size is 0"));
    }
    if expect != 0 {
        return Err(AclFailure::code(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            format!(
                "expectPtr {expect:#x}: requesting an address is experimental in the vendor runtime and not emulated; pass NULL"
            ),
        ));
    }
    let len = size.checked_next_multiple_of(GRANULARITY).ok_or_else(|| {
        AclFailure::rule(
            rules::VMM_MAP_RESERVED,
            format!("size {size:#x} is too large"),
        )
    })?;
    let range =
        Reservation::new(len, GRANULARITY).map_err(|e| EmuError::sys("mmap reservation", e))?;
    let base = range.base();
    mapping_guard().reservations.insert(
        base,
        Reserved {
            range,
            mapped: BTreeMap::new(),
        },
    );
    Ok(base)
}

/// `aclrtReleaseMemAddress`.
pub fn release(va: usize) -> AclResult<()> {
    let mut vmm = mapping_guard();
    let Some(r) = vmm.reservations.get(&va) else {
        return Err(AclFailure::rule(
            rules::VMM_UNMAP_BEFORE_RELEASE,
            format!("{va:#x} is not the base of a reservation of this process"),
        ));
    };
    if !r.mapped.is_empty() {
        return Err(AclFailure::rule(
            rules::VMM_UNMAP_BEFORE_RELEASE,
            format!(
                "the reservation at {va:#x} still has {} mapping(s): aclrtUnmapMem first",
                r.mapped.len()
            ),
        ));
    }
    vmm.reservations.remove(&va);
    Ok(())
}

/// `aclrtMapMem`.
pub fn map(va: usize, size: usize, offset: usize, handle: usize, flags: u64) -> AclResult<()> {
    check(
        offset != 0 || flags != 0,
        rules::PARAM_RESERVED_ZERO,
        || format!("offset ({offset:#x}) and flags ({flags:#x}) are reserved and must be 0"),
    )?;
    let p = PHYSICAL.get(handle)?;
    if p.freed {
        return Err(AclFailure::rule(
            rules::HANDLE_VALID,
            format!("handle {handle:#x} was freed"),
        ));
    }
    if size != p.size {
        return Err(AclFailure::rule(
            rules::VMM_MAP_WHOLE,
            format!(
                "size {size:#x} differs from the physical size {:#x}",
                p.size
            ),
        ));
    }
    let segment = process_state::registry()?.open_segment(p.id)?;
    let mut vmm = mapping_guard();
    let outside = || {
        AclFailure::rule(
            rules::VMM_MAP_RESERVED,
            format!(
                "{size:#x} bytes at {va:#x} are not a free, page aligned part of one reservation"
            ),
        )
    };
    let (&base, reserved) = vmm
        .reservations
        .range_mut(..=va)
        .next_back()
        .ok_or_else(outside)?;
    let at = va - base;
    let fits = at
        .checked_add(size)
        .is_some_and(|end| end <= reserved.range.len());
    let overlaps = reserved
        .mapped
        .range(..at.saturating_add(size))
        .next_back()
        .is_some_and(|(o, m)| o + m.len > at);
    if !fits || at % os::page_size() != 0 || overlaps {
        return Err(outside());
    }
    if let Some(other) = reserved.mapped.values().find(|m| m.device != p.device) {
        check(true, rules::VMM_RESERVATION_ONE_DEVICE, || {
            format!(
                "the reservation at {base:#x} already maps memory of device {}; handle {handle:#x} is on device {}: one reservation is bound to one device's memory",
                other.device, p.device
            )
        })?;
    }
    if reserved.mapped.values().any(|m| m.imported != p.imported) {
        let (this, other) = if p.imported {
            ("imported", "of aclrtMallocPhysical")
        } else {
            ("of aclrtMallocPhysical", "imported")
        };
        check(true, rules::VMM_RESERVATION_NOT_MIXED, || {
            format!(
                "the reservation at {base:#x} already maps handles {other}; handle {handle:#x} is {this}: one reservation is not bound to both kinds"
            )
        })?;
    }
    PHYSICAL.with(handle, |p| {
        if p.freed {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                format!("handle {handle:#x} was freed"),
            ));
        }
        p.maps += 1;
        Ok(())
    })??;
    let undo = |e: AclFailure| {
        let _ = PHYSICAL.with(handle, |p| p.maps -= 1);
        e
    };
    segment
        .map_into(&reserved.range, at)
        .map_err(|e| undo(e.into()))?;
    let range = DeviceRange {
        device: p.device,
        backing: Backing::Vmm {
            handle,
            reservation: base,
            access: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
        },
    };
    if let Err(e) = RANGES.insert(va, size, range) {
        let _ = reserved.range.unmap(at, size);
        return Err(undo(e.into()));
    }
    reserved.mapped.insert(
        at,
        Mapped {
            len: size,
            device: p.device,
            imported: p.imported,
        },
    );
    Ok(())
}

/// `aclrtUnmapMem`.
pub fn unmap(va: usize) -> AclResult<()> {
    let mut vmm = mapping_guard();
    let not_mapped = || {
        AclFailure::rule(
            rules::VMM_MAP_RESERVED,
            format!("{va:#x} is not the address of an aclrtMapMem mapping of this process"),
        )
    };
    let (&base, reserved) = vmm
        .reservations
        .range_mut(..=va)
        .next_back()
        .ok_or_else(not_mapped)?;
    let at = va - base;
    let len = reserved.mapped.get(&at).ok_or_else(not_mapped)?.len;
    reserved
        .range
        .unmap(at, len)
        .map_err(|e| EmuError::sys("munmap", e))?;
    reserved.mapped.remove(&at);
    let removed = RANGES.remove(va);
    drop(vmm);
    let Some(Backing::Vmm { handle, .. }) = removed.map(|r| r.value.backing) else {
        return Ok(());
    };
    let last = PHYSICAL.with(handle, |p| {
        p.maps = p.maps.saturating_sub(1);
        (*p, p.freed && p.maps == 0)
    })?;
    if let (p, true) = last {
        PHYSICAL.remove(handle)?;
        shareable::release_hold(&p)?;
    }
    Ok(())
}

/// `aclrtMemSetAccess`.
pub fn set_access(va: usize, size: usize, descs: &[aclrtMemAccessDesc]) -> AclResult<()> {
    if descs.is_empty() {
        return Err(AclFailure::rule(rules::PARAM_SIZE_NONZERO, "count is 0"));
    }
    let flags_known = [
        ACL_RT_MEM_ACCESS_FLAGS_NONE,
        ACL_RT_MEM_ACCESS_FLAGS_READ,
        ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ];
    let mut granted = Vec::with_capacity(descs.len());
    for d in descs {
        if !flags_known.contains(&d.flags) || d.location.r#type != ACL_MEM_LOCATION_TYPE_DEVICE {
            return Err(AclFailure::rule(
                rules::PARAM_ENUM_VALUE,
                format!(
                    "access descriptor: flags {:#x} must be NONE, READ or READWRITE and location type {} must be DEVICE",
                    d.flags, d.location.r#type
                ),
            ));
        }
        let id = i32::try_from(d.location.id).unwrap_or(-1);
        let device = match process_state::state()?.config().ascend_set_access_ids {
            AscendIdSpace::User => device::check_id(id)?,
            AscendIdSpace::Logical => {
                visibility::view()?.physical_of_logical(id).ok_or_else(|| {
                    AclFailure::rule(
                        rules::DEVICE_ID_RANGE,
                        format!(
                            "location id {id} is not a logical device of this container \
                             (DEVIPC_EMU_ASCEND_SET_ACCESS_IDS=logical)"
                        ),
                    )
                })?
            }
        };
        granted.push((device, d.flags));
    }
    let _vmm = mapping_guard();
    let hit = RANGES
        .get(va)
        .filter(|r| r.len == size && matches!(r.value.backing, Backing::Vmm { .. }))
        .ok_or_else(|| {
            AclFailure::rule(
                rules::VMM_SET_ACCESS_MATCHES,
                format!("{size:#x} bytes at {va:#x} are not an aclrtMapMem mapping"),
            )
        })?;
    if let Some(&(_, flags)) = granted.iter().rev().find(|(d, _)| *d == hit.value.device) {
        RANGES.update(va, |r| {
            if let Backing::Vmm { access, .. } = &mut r.backing {
                *access = flags;
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use devipc_ascend_sys::types::{ACL_DDR_MEM, ACL_MEM_LOCATION_TYPE_HOST, aclrtMemLocation};

    fn prop(mem_attr: i32, location_type: i32) -> aclrtPhysicalMemProp {
        aclrtPhysicalMemProp {
            memAttr: mem_attr,
            location: aclrtMemLocation {
                id: 0,
                r#type: location_type,
            },
            ..Default::default()
        }
    }

    #[test]
    fn prop_kinds() {
        // Needs no state: rejected before the device check.
        let code = |p| check_prop(&p).map(|_| ()).unwrap_err().rule;
        assert_eq!(
            code(prop(ACL_DDR_MEM, ACL_MEM_LOCATION_TYPE_DEVICE)),
            Some(rules::VMM_PROP_VALID)
        );
        assert_eq!(
            code(prop(ACL_MEM_HUGE, ACL_MEM_LOCATION_TYPE_HOST)),
            Some(rules::VMM_PROP_VALID)
        );
    }
}
