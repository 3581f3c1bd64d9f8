//! The HIP VMM subset (issue 15): physical allocations (`hipMemCreate`), address
//! reservations, mappings and access, and their sharing between processes as a POSIX file
//! descriptor (`hipMemExportToShareableHandle` / `hipMemImportFromShareableHandle`).
//!
//! It sits beside [`super::memory`] (the `hipMalloc` memory) and feeds the same copy
//! routines: [`copy_operand`], [`memset`] and [`address_range`] answer for VMM ranges.
//!
//! # Model
//!
//! - **Physical allocation** = a `Memory` object of the state directory (charged to the
//!   device's `DEVIPC_EMU_MEM_LIMIT`, held per process, reclaimed by gc when its holders
//!   died), marked as VMM memory with its requested handle type in the object's `aux`
//!   word ([`VMM_MARK`]). Its data is the object's `<id>.seg` file on the state
//!   directory's tmpfs: a named memfd. The handle (`hipMemGenericAllocationHandle_t`) is a
//!   process-local table entry holding the open file and a reference count, as CLR's
//!   `hip::GenericAllocation`: `hipMemCreate` / import and every `hipMemMap` take a
//!   reference, `hipMemRelease` and `hipMemUnmap` drop one; at zero this process's hold
//!   on the object goes. `hipMemRetainAllocationHandle` returns the handle and takes none
//!   (CLR; CUDA's retain does).
//! - **Export** (POSIX fd) = a NEW file descriptor (a `dup` of the handle's open file),
//!   written to the caller's `int`: the real runtime's dma-buf fd. Passing it to another
//!   process (`SCM_RIGHTS`, `pidfd_getfd`) is the caller's job.
//! - **Import** = the fd is resolved to the object by its `/proc/self/fd` link (the
//!   segment file of this state directory, same inode), the importing process becomes a
//!   holder, and the new handle maps the memory through its own dup of the fd. The
//!   `osHandle` convention follows the emulated version ([`versions::import_fd_by_value`]).
//!   The fd may be closed right after the import.
//! - **Reservation** = a real `PROT_NONE` range ([`Reservation`], shared with the ACL
//!   emulation); **map** = the allocation's file placed at the address with `MAP_FIXED`
//!   (the first `size` bytes; `offset` must be 0); **unmap** puts `PROT_NONE` back.
//! - **Access** = per mapping and device, `ProtNone` after `hipMemMap` (as on the real
//!   runtime, which maps without access); `hipMemcpy`/`hipMemset` on a range the calling
//!   thread's device has no access to are refused with `hipErrorIllegalAddress` and a
//!   violation record ([`rules::VMM_ACCESS_REQUIRED`]), where a GPU would fault. From
//!   ROCm 7.12 `hipMemSetAccess` also takes a host descriptor
//!   ([`rules::VMM_HOST_ACCESS_ACCEPTED`]); the CPU can always read and write a mapping
//!   here (it is mapped read-write into the process), so that grant is checked, accepted
//!   and not recorded (`hipMemGetAccess` takes only device locations, as in CLR).
//! - **Fabric handles** (`hipMemHandleTypeFabric`, HIP 7) are not modelled: `hipMemCreate`
//!   refuses them with `hipErrorNotSupported`, as ROCm 7.2's release does (field notes
//!   2026-11).
//!
//! Granularity: 2 MiB minimum and recommended (the emulator's choice; the ACL emulation
//! uses the same), for sizes, reservations and maps.
//!
//! Concurrency: the reservations and mappings of the process are behind one mutex; the
//! registry is never called while it is held. A copy keeps the mapping's in-flight token;
//! `hipMemUnmap` synchronises the devices' streams (as CLR does) and waits for in-flight
//! copies before unmapping.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use devipc_hip_sys::*;
use devipc_shm::os;

use super::errors::{Failure, HipResult};
use super::runtime::{config, current_device, me, ordinal_or_invalid, physical_of, state};
use super::{rules, stream, versions};
use crate::error::EmuError;
use crate::local::{ForkGuard, ForkLocal, HandleTable};
use crate::state::layout::{ObjectFile, parse_object_file};
use crate::state::{NewObject, ObjectId, ObjectKind, Reservation, Vendor, violations};

mod share;
pub(crate) use share::{OsHandle, RETAINS_OF_MALLOC_MEMORY, export, import, properties, retain};

/// Allocation granularity (minimum and recommended) of every device: 2 MiB.
pub(crate) const GRANULARITY: usize = 2 << 20;

/// Marks a `Memory` object's `aux` word as a VMM physical allocation (`"VMM"` in the top
/// bytes); the low 32 bits hold its `requestedHandleType`.
pub(crate) const VMM_MARK: u64 = 0x564d_4d00_0000_0000;
const MARK_MASK: u64 = 0xffff_ff00_0000_0000;

/// The properties of an allocation, whatever the version's `hipMemAllocationProp` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prop {
    /// `type`.
    pub alloc_type: hipMemAllocationType,
    /// `requestedHandleType`.
    pub handle_type: hipMemAllocationHandleType,
    /// `location.type`.
    pub location_type: hipMemLocationType,
    /// `location.id`.
    pub location_id: i32,
}

impl Prop {
    /// From the ROCm 5.3+ layout.
    pub fn from_current(p: &hipMemAllocationProp) -> Prop {
        Prop {
            alloc_type: p.r#type,
            handle_type: p.requestedHandleType,
            location_type: p.location.r#type,
            location_id: p.location.id,
        }
    }

    /// In the ROCm 5.3+ layout.
    pub fn to_current(self) -> hipMemAllocationProp {
        hipMemAllocationProp {
            r#type: self.alloc_type,
            requestedHandleType: self.handle_type,
            location: hipMemLocation {
                r#type: self.location_type,
                id: self.location_id,
            },
            ..hipMemAllocationProp::zeroed()
        }
    }
}

/// A handle of this process (`hipMemGenericAllocationHandle_t`).
#[derive(Debug, Clone)]
struct Physical {
    id: ObjectId,
    device: u32,
    size: usize,
    handle_type: hipMemAllocationHandleType,
    file: Arc<File>,
    /// References: the creating/importing call and mappings (a retain takes none, as in
    /// CLR).
    refs: u32,
}

static PHYSICAL: HandleTable<Physical> =
    HandleTable::new("hipMemGenericAllocationHandle_t", 0x5e11);

/// One `hipMemMap` mapping.
#[derive(Debug)]
struct Mapping {
    handle: usize,
    id: ObjectId,
    device: u32,
    len: usize,
    file: Arc<File>,
    /// Base of the reservation holding it.
    reservation: usize,
    /// Access per device (absent: `ProtNone`).
    access: BTreeMap<u32, hipMemAccessFlags>,
    /// Cloned by every copy using the mapping; unmap waits until it is unique.
    in_flight: Arc<()>,
}

#[derive(Debug)]
struct Reserved {
    range: Reservation,
}

#[derive(Debug, Default)]
struct Vmm {
    reservations: BTreeMap<usize, Reserved>,
    maps: BTreeMap<usize, Mapping>,
}

/// A forked child starts without reservations or mappings (its parent's are forgotten:
/// see [`crate::local`]).
static VMM: ForkLocal<Vmm> = ForkLocal::new(|inherited| {
    std::mem::forget(inherited);
    Vmm {
        reservations: BTreeMap::new(),
        maps: BTreeMap::new(),
    }
});

fn vmm() -> ForkGuard<'static, Vmm> {
    VMM.lock()
}

/// Fails with `code` for `rule` unless `DEVIPC_EMU_BREAK_RULE` switched it off.
fn refuse(code: hipError_t, rule: &'static str, message: impl Into<String>) -> HipResult<()> {
    if rules::enforced(rule) {
        Err(Failure::rule(code, rule, message))
    } else {
        Ok(())
    }
}

/// `hipErrorInvalidValue` for a malformed argument.
fn bad_arg(message: impl Into<String>) -> Failure {
    Failure::rule(hipErrorInvalidValue, rules::VMM_ARGS_VALID, message)
}

fn handle_gone(handle: usize) -> Failure {
    Failure::rule(
        hipErrorInvalidValue,
        rules::VMM_HANDLE_VALID,
        format!("{handle:#x} is not a live hipMemGenericAllocationHandle_t of this process"),
    )
}

fn physical(handle: usize) -> HipResult<Physical> {
    PHYSICAL.get(handle).map_err(|_| handle_gone(handle))
}

/// Checks a `prop` for `hipMemCreate` / `hipMemGetAllocationGranularity`; the device.
fn check_prop(prop: &Prop) -> HipResult<u32> {
    if prop.alloc_type != hipMemAllocationTypePinned
        || prop.location_type != hipMemLocationTypeDevice
    {
        refuse(
            hipErrorInvalidValue,
            rules::VMM_PROP_PINNED_DEVICE,
            format!(
                "prop.type {} must be hipMemAllocationTypePinned and prop.location.type {} hipMemLocationTypeDevice",
                prop.alloc_type, prop.location_type
            ),
        )?;
    }
    state()?;
    physical_of(prop.location_id).ok_or_else(|| {
        Failure::new(
            hipErrorInvalidDevice,
            format!(
                "prop.location.id {} is not one of this process's devices",
                prop.location_id
            ),
        )
    })
}

/// `hipMemGetAllocationGranularity(prop, option)`.
pub(crate) fn granularity(
    prop: &Prop,
    option: hipMemAllocationGranularity_flags,
) -> HipResult<usize> {
    if option != hipMemAllocationGranularityMinimum
        && option != hipMemAllocationGranularityRecommended
    {
        return Err(bad_arg(format!(
            "option {option} is not Minimum or Recommended"
        )));
    }
    // CLR refuses a device out of range with hipErrorInvalidValue here.
    check_prop(prop).map_err(|f| {
        if f.code == hipErrorInvalidDevice {
            Failure::new(hipErrorInvalidValue, f.message)
        } else {
            f
        }
    })?;
    Ok(GRANULARITY)
}

fn open_segment(path: &Path) -> HipResult<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| EmuError::io("open", path, e).into())
}

/// `hipMemCreate(size, prop, flags)`: the new handle.
pub(crate) fn create(size: usize, prop: &Prop, flags: u64) -> HipResult<usize> {
    if size == 0 || flags != 0 {
        return Err(bad_arg(format!(
            "size {size:#x} must be non-zero and flags {flags:#x} 0"
        )));
    }
    let device = check_prop(prop)?;
    if prop.handle_type != hipMemHandleTypeNone
        && prop.handle_type != hipMemHandleTypePosixFileDescriptor
    {
        let why = if prop.handle_type == hipMemHandleTypeFabric {
            "hipMemHandleTypeFabric is not supported (ROCm 7.2's hipMemCreate refuses it; the emulator has no fabric model)"
        } else {
            "only hipMemHandleTypeNone and hipMemHandleTypePosixFileDescriptor are supported"
        };
        refuse(
            hipErrorNotSupported,
            rules::VMM_HANDLE_TYPE_SUPPORTED,
            format!("requestedHandleType {:#x}: {why}", prop.handle_type),
        )?;
    }
    if size % GRANULARITY != 0 {
        refuse(
            hipErrorInvalidValue,
            rules::VMM_GRANULARITY_ALIGNED,
            format!("size {size:#x} is not a multiple of the granularity {GRANULARITY:#x}"),
        )?;
    }
    let state = state()?;
    let reg = state.registry();
    let mut spec = NewObject::memory(Vendor::Hip, device, size as u64);
    spec.aux = VMM_MARK | (prop.handle_type as u32 as u64);
    let created = reg.create(spec)?;
    let id = created.meta.id();
    drop(created);
    let made = open_segment(&state.dir().join(&ObjectFile::Segment.name(id))).and_then(|file| {
        Ok(PHYSICAL.insert(Physical {
            id,
            device,
            size,
            handle_type: prop.handle_type,
            file: Arc::new(file),
            refs: 1,
        })?)
    });
    if made.is_err() {
        let _ = reg.release(id, me()?);
    }
    made
}

/// Drops one reference of `handle`; at zero the handle goes and so does this process's
/// hold on the memory.
fn unref(handle: usize) -> HipResult<()> {
    let last = PHYSICAL
        .with(handle, |p| {
            p.refs = p.refs.saturating_sub(1);
            p.refs == 0
        })
        .map_err(|_| handle_gone(handle))?;
    if last {
        let p = PHYSICAL.remove(handle).map_err(|_| handle_gone(handle))?;
        state()?.registry().release(p.id, me()?)?;
    }
    Ok(())
}

/// `hipMemRelease(handle)`.
pub(crate) fn release(handle: usize) -> HipResult<()> {
    physical(handle)?;
    unref(handle)
}

/// `hipMemAddressReserve(size, alignment, addr, flags)`: the base.
pub(crate) fn reserve(size: usize, alignment: usize, _addr: usize, flags: u64) -> HipResult<usize> {
    if flags != 0 || size == 0 {
        return Err(bad_arg(format!(
            "size {size:#x} must be non-zero and flags {flags:#x} 0"
        )));
    }
    if size % GRANULARITY != 0 || (alignment != 0 && !alignment.is_power_of_two()) {
        refuse(
            hipErrorInvalidValue,
            rules::VMM_GRANULARITY_ALIGNED,
            format!(
                "size {size:#x} must be a multiple of the granularity {GRANULARITY:#x} and alignment {alignment:#x} a power of two"
            ),
        )?;
    }
    // `addr` is only a hint (CLR logs when it is not honoured); the emulator ignores it.
    let len = size.max(os::page_size()).next_multiple_of(os::page_size());
    let range = Reservation::new(len, alignment.max(GRANULARITY))
        .map_err(|e| Failure::new(hipErrorOutOfMemory, format!("mmap reservation: {e}")))?;
    let base = range.base();
    vmm().reservations.insert(base, Reserved { range });
    Ok(base)
}

/// `hipMemAddressFree(va, size)`.
pub(crate) fn address_free(va: usize, size: usize) -> HipResult<()> {
    if va == 0 || size == 0 {
        return Err(bad_arg("devPtr is NULL or size is 0"));
    }
    let mut vmm = vmm();
    let Some(r) = vmm.reservations.get(&va) else {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            rules::VMM_MAP_INTO_RESERVATION,
            format!("{va:#x} is not the base of a hipMemAddressReserve range of this process"),
        ));
    };
    let end = va + r.range.len();
    if let Some((at, _)) = vmm.maps.range(va..end).next() {
        let at = *at;
        drop(vmm);
        refuse(
            hipErrorInvalidValue,
            rules::VMM_UNMAP_BEFORE_ADDRESS_FREE,
            format!("the reservation at {va:#x} still maps {at:#x}: hipMemUnmap it first"),
        )?;
        vmm = self::vmm();
        // Broken rule: drop the mappings with the reservation (their references leak).
        let doomed: Vec<usize> = vmm.maps.range(va..end).map(|(a, _)| *a).collect();
        for a in doomed {
            vmm.maps.remove(&a);
        }
    }
    vmm.reservations.remove(&va);
    Ok(())
}

/// `hipMemMap(va, size, offset, handle, flags)`.
pub(crate) fn map(
    va: usize,
    size: usize,
    offset: usize,
    handle: usize,
    flags: u64,
) -> HipResult<()> {
    if va == 0 || handle == 0 || size == 0 || offset != 0 || flags != 0 {
        return Err(bad_arg(format!(
            "ptr {va:#x} and handle {handle:#x} must be non-NULL, size {size:#x} non-zero, offset {offset:#x} and flags {flags:#x} 0"
        )));
    }
    if size % GRANULARITY != 0 {
        refuse(
            hipErrorInvalidValue,
            rules::VMM_GRANULARITY_ALIGNED,
            format!("size {size:#x} is not a multiple of the granularity {GRANULARITY:#x}"),
        )?;
    }
    let p = physical(handle)?;
    let outside = |why: String| {
        Failure::rule(
            hipErrorInvalidValue,
            rules::VMM_MAP_INTO_RESERVATION,
            format!("cannot map {size:#x} bytes at {va:#x}: {why}"),
        )
    };
    if size > p.size {
        return Err(outside(format!(
            "the allocation has only {:#x} bytes",
            p.size
        )));
    }
    let mut vmm = vmm();
    let (&base, reserved) = vmm
        .reservations
        .range(..=va)
        .next_back()
        .ok_or_else(|| outside("no reservation holds it".into()))?;
    let at = va - base;
    let fits = at
        .checked_add(size)
        .is_some_and(|end| end <= reserved.range.len());
    if !fits || va % os::page_size() != 0 {
        return Err(outside("not a page aligned part of one reservation".into()));
    }
    if let Some((other, m)) = vmm.maps.range(..va + size).next_back() {
        if other + m.len > va {
            return Err(Failure::rule(
                hipErrorInvalidValue,
                rules::VMM_MAP_INTO_RESERVATION,
                format!("{va:#x}..+{size:#x} overlaps the mapping at {other:#x}"),
            ));
        }
    }
    PHYSICAL
        .with(handle, |p| p.refs += 1)
        .map_err(|_| handle_gone(handle))?;
    let reserved = vmm.reservations.get(&base).expect("found above");
    if let Err(e) = reserved.range.map_file(at, &p.file, size) {
        drop(vmm);
        let _ = unref(handle);
        return Err(Failure::new(hipErrorMapFailed, format!("mmap: {e}")));
    }
    vmm.maps.insert(
        va,
        Mapping {
            handle,
            id: p.id,
            device: p.device,
            len: size,
            file: p.file.clone(),
            reservation: base,
            access: BTreeMap::new(),
            in_flight: Arc::new(()),
        },
    );
    Ok(())
}

/// The mappings `va..va+size` covers exactly (whole mappings, contiguous, starting at
/// `va`), or the rule's failure.
fn whole_mappings(vmm: &Vmm, va: usize, size: usize) -> HipResult<Vec<usize>> {
    let mut found = Vec::new();
    let mut at = va;
    let end = va
        .checked_add(size)
        .ok_or_else(|| bad_arg("size overflows"))?;
    while at < end {
        match vmm.maps.get(&at) {
            Some(m) if at + m.len <= end => {
                found.push(at);
                at += m.len;
            }
            _ => {
                return Err(Failure::rule(
                    hipErrorInvalidValue,
                    rules::VMM_WHOLE_MAPPINGS,
                    format!(
                        "{va:#x}..+{size:#x} is not a run of whole hipMemMap mappings (nothing mapped at, or a mapping running past, {at:#x})"
                    ),
                ));
            }
        }
    }
    Ok(found)
}

/// `hipMemUnmap(va, size)`.
pub(crate) fn unmap(va: usize, size: usize) -> HipResult<()> {
    if va == 0 || size == 0 {
        return Err(bad_arg("ptr is NULL or size is 0"));
    }
    let devices = {
        let vmm = vmm();
        let found = whole_mappings(&vmm, va, size)?;
        let mut devices: Vec<u32> = Vec::new();
        for a in &found {
            let m = &vmm.maps[a];
            devices.push(m.device);
            devices.extend(m.access.keys().copied());
        }
        devices.sort_unstable();
        devices.dedup();
        devices
    };
    // CLR synchronises every device with access before unmapping.
    for d in devices {
        stream::synchronize_device(d)?;
    }
    let mut handles = Vec::new();
    loop {
        let mut vmm = vmm();
        let found = whole_mappings(&vmm, va, size)?;
        if found
            .iter()
            .any(|a| Arc::strong_count(&vmm.maps[a].in_flight) > 1)
        {
            // A synchronous copy of another thread still uses it.
            drop(vmm);
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for a in found {
            let m = vmm.maps.remove(&a).expect("found above");
            let r = &vmm.reservations[&m.reservation];
            r.range
                .unmap(a - m.reservation, m.len)
                .map_err(|e| EmuError::sys("munmap", e))?;
            handles.push(m.handle);
        }
        break;
    }
    for h in handles {
        unref(h)?;
    }
    Ok(())
}

/// `hipMemSetAccess(va, size, descs)`. A host descriptor (from ROCm 7.12,
/// [`rules::VMM_HOST_ACCESS_ACCEPTED`]) is checked and accepted but changes nothing: the
/// process's mappings are always CPU-accessible, and `hipMemGetAccess` takes only device
/// locations (as in CLR).
pub(crate) fn set_access(va: usize, size: usize, descs: &[hipMemAccessDesc]) -> HipResult<()> {
    if va == 0 || size == 0 || descs.is_empty() {
        return Err(bad_arg("ptr is NULL, size is 0 or count is 0"));
    }
    state()?;
    let known = [
        hipMemAccessFlagsProtNone,
        hipMemAccessFlagsProtRead,
        hipMemAccessFlagsProtReadWrite,
    ];
    let version = config()?.hip_version;
    let mut granted = Vec::with_capacity(descs.len());
    for d in descs {
        if d.location.r#type == hipMemLocationTypeHost {
            if !versions::host_access_descriptor(version) {
                return Err(Failure::rule(
                    hipErrorInvalidValue,
                    rules::VMM_HOST_ACCESS_ACCEPTED,
                    format!(
                        "access descriptor {d:?}: HIP {version} has no host location (hipMemLocationTypeHost is accepted from ROCm 7.12)"
                    ),
                ));
            }
            if !rules::enforced(rules::VMM_HOST_ACCESS_ACCEPTED) {
                // Broken rule: refused as before 7.12.
                return Err(Failure::rule(
                    hipErrorInvalidValue,
                    rules::VMM_HOST_ACCESS_ACCEPTED,
                    format!("access descriptor {d:?}: the host location is refused"),
                ));
            }
            if !known.contains(&d.flags) {
                return Err(bad_arg(format!(
                    "access descriptor {d:?}: flags must be None, Read or ReadWrite"
                )));
            }
            continue;
        }
        match physical_of(d.location.id) {
            Some(device)
                if d.location.r#type == hipMemLocationTypeDevice && known.contains(&d.flags) =>
            {
                granted.push((device, d.flags))
            }
            _ => {
                return Err(bad_arg(format!(
                    "access descriptor {d:?}: location must be a device (or, from ROCm 7.12, the host) and flags None, Read or ReadWrite"
                )));
            }
        }
    }
    let mut vmm = vmm();
    for a in whole_mappings(&vmm, va, size)? {
        let m = vmm.maps.get_mut(&a).expect("found above");
        for &(device, flags) in &granted {
            m.access.insert(device, flags);
        }
    }
    Ok(())
}

/// `hipMemGetAccess(location, va)`: the flags.
pub(crate) fn get_access(location: &hipMemLocation, va: usize) -> HipResult<u64> {
    state()?;
    let device = physical_of(location.id)
        .filter(|_| location.r#type == hipMemLocationTypeDevice)
        .ok_or_else(|| {
            bad_arg(format!(
                "location {location:?} is not one of this process's devices"
            ))
        })?;
    let vmm = vmm();
    let (_, m) = mapping_at(&vmm, va).ok_or_else(|| {
        bad_arg(format!(
            "{va:#x} is not inside a hipMemMap mapping of this process"
        ))
    })?;
    Ok(m.access
        .get(&device)
        .copied()
        .unwrap_or(hipMemAccessFlagsProtNone) as u64)
}

fn mapping_at(vmm: &Vmm, addr: usize) -> Option<(usize, &Mapping)> {
    let (&base, m) = vmm.maps.range(..=addr).next_back()?;
    (addr < base + m.len).then_some((base, m))
}

// ---------------------------------------------------------------------------------------
// What the rest of the surface asks about VMM ranges.

/// Keeps a mapping in place while a copy uses it.
#[derive(Debug, Clone)]
pub(crate) struct InFlight(#[allow(dead_code)] Arc<()>);

/// Whether `addr` is inside a VMM mapping of this process.
pub(crate) fn is_mapped(addr: usize) -> bool {
    mapping_at(&vmm(), addr).is_some()
}

/// Base and length of the mapping holding `addr` (what `hipMemGetAddressRange` reports).
pub(crate) fn address_range(addr: usize) -> Option<(usize, usize)> {
    mapping_at(&vmm(), addr).map(|(base, m)| (base, m.len))
}

/// The device of the mapping holding `addr`.
pub(crate) fn device_of(addr: usize) -> Option<u32> {
    mapping_at(&vmm(), addr).map(|(_, m)| m.device)
}

/// For a copy operand inside a VMM mapping: checks the bounds and the calling thread's
/// device's access; `None` when `addr` is not VMM memory.
pub(crate) fn copy_operand(
    addr: usize,
    len: usize,
    write: bool,
    what: &str,
) -> Option<HipResult<InFlight>> {
    let (base, len_ok, access, id, mapping_device, token) = {
        let vmm = vmm();
        let (base, m) = mapping_at(&vmm, addr)?;
        (
            base,
            len <= base + m.len - addr,
            m.access.clone(),
            m.id,
            m.device,
            m.in_flight.clone(),
        )
    };
    Some((|| {
        if !len_ok {
            return Err(Failure::invalid_value(format!(
                "{what} {addr:#x}..+{len:#x} runs past the end of the mapping at {base:#x}"
            )));
        }
        let state = state()?;
        let device = current_device(state).unwrap_or(mapping_device);
        let flags = access
            .get(&device)
            .copied()
            .unwrap_or(hipMemAccessFlagsProtNone);
        let allowed = if write {
            flags == hipMemAccessFlagsProtReadWrite
        } else {
            flags & hipMemAccessFlagsProtRead != 0
        };
        if !allowed && rules::enforced(rules::VMM_ACCESS_REQUIRED) {
            let message = format!(
                "{what} {addr:#x}: device {device} has access {flags} to the mapping at {base:#x} (call hipMemSetAccess first); a GPU would fault"
            );
            let _ = violations::record(state.dir(), rules::VMM_ACCESS_REQUIRED, id, &message);
            return Err(Failure::rule(
                hipErrorIllegalAddress,
                rules::VMM_ACCESS_REQUIRED,
                message,
            ));
        }
        Ok(InFlight(token))
    })())
}

/// `hipMemset` of a VMM range: fills through the allocation's file. `None` when `addr` is
/// not VMM memory.
pub(crate) fn memset(addr: usize, value: u8, len: usize) -> Option<HipResult<()>> {
    let keep = copy_operand(addr, len, true, "destination")?;
    let file = {
        let vmm = vmm();
        mapping_at(&vmm, addr).map(|(base, m)| (m.file.clone(), addr - base))
    };
    Some(keep.and_then(|_keep| {
        let (file, offset) = file.ok_or_else(|| Failure::invalid_value("unmapped concurrently"))?;
        const CHUNK: usize = 64 << 10;
        let fill = vec![value; CHUNK.min(len)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(fill.len());
            file.write_all_at(&fill[..n], (offset + done) as u64)
                .map_err(|e| EmuError::sys("pwrite", e))?;
            done += n;
        }
        Ok(())
    }))
}
