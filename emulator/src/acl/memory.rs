//! `aclrtMalloc` memory, the map of this process's device address ranges, and the checks
//! behind `aclrtMemcpy`, `aclrtMemcpyAsync`, `aclrtMemset` and `aclrtMemGetAddressRange`.
//!
//! Device memory is a segment of the state directory mapped `MAP_SHARED`; its host
//! address is the "device pointer". Every device range this process can address is in
//! [`RANGES`]: `aclrtMalloc` blocks, addresses imported by IPC key, and VMM mappings. The
//! map lets interior pointers resolve to their allocation, bounds copies, and rejects
//! unknown pointers before anything is dereferenced.
//!
//! - `aclrtMalloc(size)` allocates `size` rounded up to 32 bytes plus 32 bytes of padding
//!   on the current device, as the vendor header describes; that block size is what is
//!   charged to the device's limit (`DEVIPC_EMU_MEM_LIMIT`, shared by all processes:
//!   207001 `ACL_ERROR_RT_MEMORY_ALLOCATION` beyond it) and what
//!   `aclrtMemGetAddressRange` reports. The policy must be a known
//!   `aclrtMemMallocPolicy` (optionally or-ed with its flag bits); page kinds make no
//!   difference to host memory. Blocks start page aligned.
//! - `aclrtMallocHost(size)` gives page-aligned host memory of `size` rounded up to 32
//!   ([`HOST`]), `aclrtFreeHost` takes its base back; both need a current device. It is
//!   host memory for copies, and `aclrtMemGetAddressRange` reports its blocks.
//! - `aclrtFree` takes the base of a block allocated by this process. Memory exported by
//!   key stays alive while importers hold it (see [`super::ipc_key`]).
//! - `aclrtMemcpy(dst, destMax, src, count, kind)`: `count <= destMax`; device operands
//!   must lie inside one range, or inside `aclrtMapMem` mappings that follow each other
//!   without a gap in one reservation (the address-contiguous memory reserve + map exists
//!   for; torch_npu copies tensors that span several pages of an expandable segment as one
//!   pointer: `ascend.vmm.copy-spans-contiguous-mappings`); a span that reaches an unmapped
//!   hole or the end of its reservation is refused (`ascend.mem.copy-within-bounds`), and
//!   every mapping it covers must allow the access; `kind` must match which operands are device memory
//!   (`ACL_MEMCPY_DEFAULT` infers it). Copies run synchronously. Host operands are the
//!   caller's memory and are not checked (the vendor's contract).
//! - `aclrtMemcpyAsync(dst, destMax, src, count, kind, stream)`: the same checks, plus a
//!   valid stream (NULL is the default stream). The copy is a task of the stream (see
//!   [`super::stream`]): done before the call returns on an idle stream, else when the
//!   stream reaches it; the checks run again then, and a failure (memory freed or revoked in
//!   the meantime) is reported by the next `aclrtSynchronizeStream`.
//! - `aclrtMemset(ptr, maxCount, value, count)`: `count <= maxCount`; like the vendor it
//!   decides from the address whether `ptr` is device memory (bounded by its range) or
//!   host memory.
//!
//! - Memory imported by IPC key and used from another device than its owner's (the
//!   importing thread's current device differs from the exporter's) accepts only
//!   asynchronous device-to-device copies (RT-DOC 11-07, api-facts C.4): `aclrtMemcpy`
//!   of any kind on it fails, and so does `aclrtMemcpyAsync` of a host kind or
//!   `ACL_MEMCPY_DEFAULT`; `aclrtMemcpyAsync` of a device-to-device kind
//!   (`ACL_MEMCPY_DEVICE_TO_DEVICE`, `..._INNER_...`, `..._INTER_...`) is allowed
//!   (`ascend.ipc-key.cross-device-copy-restricted`). On the owner's device the
//!   restrictions do not apply. `aclrtMemset` is not restricted.

use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_ERROR_RT_SYS_DMA;
use devipc_ascend_sys::types::{
    ACL_MEM_ACCESS_USER_SPACE_READONLY, ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH, ACL_MEM_TYPE_LOW_BAND_WIDTH, ACL_MEMCPY_DEFAULT,
    ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READ,
    ACL_RT_MEM_ACCESS_FLAGS_READWRITE, aclrtMemAccessFlags, aclrtMemMallocPolicy, aclrtMemcpyKind,
};

use crate::error::EmuError;
use crate::local::{LocalRange, RangeMap};
use crate::state::{LivePin, NewObject, ObjectFlags, ObjectId, SharedMapping, Vendor};

use super::errors::{AclFailure, AclResult, check};
use super::{device, process_state, rules, vmm};

/// What backs one device range of this process.
#[derive(Debug, Clone)]
pub enum Backing {
    /// An `aclrtMalloc` block: memory object `id`, mapped by `mapping`.
    Malloc {
        /// The memory object.
        id: ObjectId,
        /// Keeps the block mapped while anyone uses the range.
        mapping: Arc<SharedMapping>,
    },
    /// An address returned by `aclrtIpcMemImportByKey`.
    KeyImport {
        /// The key object (destroyed early by its exporter: see
        /// [`rules::KEY_IMPORTERS_CLOSE_FIRST`]).
        key: ObjectId,
        /// The memory object the key names.
        memory: ObjectId,
        /// The importing thread's current device (the range's `device` is the owner's).
        imported_on: u32,
        /// The importer's mapping of the whole block.
        mapping: Arc<SharedMapping>,
    },
    /// An `aclrtMapMem` mapping inside a reservation.
    Vmm {
        /// The `aclrtDrvMemHandle` mapped.
        handle: usize,
        /// The base of the reservation the mapping lies in.
        reservation: usize,
        /// Access set by `aclrtMemSetAccess` (READWRITE until then).
        access: aclrtMemAccessFlags,
    },
}

/// One device range: its device and backing.
#[derive(Debug, Clone)]
pub struct DeviceRange {
    /// The device the memory belongs to.
    pub device: u32,
    /// What backs it.
    pub backing: Backing,
}

/// Every device range this process can address.
pub static RANGES: RangeMap<DeviceRange> = RangeMap::new();

/// Blocks of `aclrtMallocHost` of this process: page-locked host memory on a device, here
/// plain host memory (the entry point allocates and frees it). Not device memory: copies
/// treat it as host memory; `aclrtMemGetAddressRange` reports its blocks (RT-DOC 11-04).
pub static HOST: RangeMap<()> = RangeMap::new();

/// Alignment of `aclrtMallocHost` blocks: a page.
pub const HOST_ALIGN: usize = 4096;

/// Checks `aclrtMallocHost(size)` and returns the block size: `size` rounded up to 32 (the
/// runtime's `HostMalloc`). Needs a current device (the runtime allocates through the
/// current context).
pub fn check_malloc_host(size: usize) -> AclResult<usize> {
    if size == 0 {
        return Err(AclFailure::rule(rules::PARAM_SIZE_NONZERO, "size is 0"));
    }
    device::require_current("aclrtMallocHost")?;
    size.checked_next_multiple_of(32).ok_or_else(|| {
        AclFailure::code(
            devipc_ascend_sys::codes::ACL_ERROR_RT_MEMORY_ALLOCATION,
            format!("size {size} is too large"),
        )
    })
}

/// Records a block `aclrtMallocHost` allocated.
pub fn register_host(addr: usize, len: usize) -> AclResult<()> {
    Ok(HOST.insert(addr, len, ())?)
}

/// `aclrtFreeHost`: forgets the block at `addr` and returns its length for the entry point
/// to free; 107000 unless `addr` is the base of an `aclrtMallocHost` block of this process.
pub fn unregister_host(addr: usize) -> AclResult<usize> {
    device::require_current("aclrtFreeHost")?;
    HOST.remove(addr).map(|r| r.len).ok_or_else(|| {
        AclFailure::rule(
            rules::MEM_KNOWN_POINTER,
            format!("{addr:#x} is not the base of an aclrtMallocHost block of this process"),
        )
    })
}

/// The block size `aclrtMalloc(size)` allocates: `size` rounded up to 32, plus 32.
pub fn malloc_block_size(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(32)?.checked_add(32)
}

fn check_policy(policy: aclrtMemMallocPolicy) -> AclResult<()> {
    let flags = ACL_MEM_TYPE_LOW_BAND_WIDTH
        | ACL_MEM_TYPE_HIGH_BAND_WIDTH
        | ACL_MEM_ACCESS_USER_SPACE_READONLY;
    let base = policy & !flags;
    check(
        !(0..=ACL_MEM_MALLOC_HUGE1G_ONLY_P2P).contains(&base),
        rules::PARAM_ENUM_VALUE,
        || format!("{policy:#x} is not an aclrtMemMallocPolicy"),
    )
}

/// `aclrtMalloc`: returns the block's address.
pub fn malloc(size: usize, policy: aclrtMemMallocPolicy) -> AclResult<usize> {
    if size == 0 {
        return Err(AclFailure::rule(rules::PARAM_SIZE_NONZERO, "size is 0"));
    }
    check_policy(policy)?;
    let device = device::require_current("aclrtMalloc")?;
    let block = malloc_block_size(size).ok_or_else(|| {
        AclFailure::rule(rules::MEM_DEVICE_LIMIT, format!("size {size} is too large"))
    })?;
    let reg = process_state::registry()?;
    let created = reg.create(NewObject::memory(Vendor::Acl, device, block as u64))?;
    let id = created.meta.id();
    let me = process_state::me()?;
    let mapped = created
        .segment
        .as_ref()
        .ok_or_else(|| {
            AclFailure::code(
                devipc_ascend_sys::codes::ACL_ERROR_RT_INTERNAL_ERROR,
                "memory without a segment",
            )
        })
        .and_then(|s| Ok(s.map()?));
    let mapping = match mapped {
        Ok(m) => Arc::new(m),
        Err(e) => {
            let _ = reg.release(id, me);
            return Err(e);
        }
    };
    let addr = mapping.addr();
    let range = DeviceRange {
        device,
        backing: Backing::Malloc { id, mapping },
    };
    if let Err(e) = RANGES.insert(addr, block, range) {
        let _ = reg.release(id, me);
        return Err(e.into());
    }
    Ok(addr)
}

/// `aclrtFree`.
pub fn free(ptr: usize) -> AclResult<()> {
    let block = RANGES.get(ptr).and_then(|r| match r.value.backing {
        Backing::Malloc { id, .. } => Some(id),
        _ => None,
    });
    let Some(id) = block else {
        let what = match RANGES.resolve(ptr).map(|r| r.value.backing) {
            Some(Backing::KeyImport { .. }) => {
                "memory imported by key (close it with aclrtIpcMemClose)"
            }
            Some(Backing::Vmm { .. }) => "a VMM mapping (unmap it with aclrtUnmapMem)",
            Some(Backing::Malloc { .. }) => "inside an aclrtMalloc block, not its base",
            None => "not device memory of this process",
        };
        return Err(AclFailure::rule(
            rules::MEM_KNOWN_POINTER,
            format!("{ptr:#x} is {what}"),
        ));
    };
    // Unmap (once no copy in flight holds the mapping) before giving up the hold.
    drop(RANGES.remove(ptr));
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let imported_elsewhere = reg.update(id, |m| {
        m.remove_holder(me)?;
        Ok::<_, EmuError>(!m.holders().is_empty())
    })?;
    if imported_elsewhere && rules::enforced(rules::KEY_FREE_WHILE_IMPORTED) {
        // Other processes map it through a key: the runtime frees it under them.
        reg.revoke(
            id,
            rules::KEY_FREE_WHILE_IMPORTED,
            &format!("aclrtFree({ptr:#x}) while another process maps the block through a key"),
        )?;
    }
    Ok(())
}

/// Refuses a device access to pages that are gone for this process: a block its owner
/// freed under a key import ([`rules::KEY_FREE_WHILE_IMPORTED`]: the segment is revoked),
/// or an import whose key its exporter destroyed first
/// ([`rules::KEY_IMPORTERS_CLOSE_FIRST`]). Otherwise pins the pages live until the copy
/// is done, so a revocation meanwhile waits for it instead of faulting it (audit N14);
/// `None` for VMM mappings, which are never revoked.
fn pin_not_revoked(backing: &Backing) -> AclResult<Option<LivePin>> {
    match backing {
        Backing::Malloc { mapping, .. } => Ok(Some(mapping.pin_live()?)),
        Backing::KeyImport { key, mapping, .. } => {
            let pin = mapping.pin_live()?;
            // The key's metadata is read only after a revocation in the directory
            // (revoking the key moves the epoch too), not on every copy.
            mapping.check_live_and(|| {
                let destroyed = match process_state::registry()?.get(*key) {
                    Ok(meta) => meta.flags.contains(ObjectFlags::REVOKED),
                    Err(EmuError::NoSuchObject { .. }) => true,
                    Err(e) => return Err(e.into()),
                };
                if destroyed {
                    return Err(AclFailure::code(
                        ACL_ERROR_RT_SYS_DMA,
                        "the exporter destroyed the key (aclrtIpcMemClose) while this import \
                         was still mapped",
                    ));
                }
                Ok(())
            })?;
            Ok(Some(pin))
        }
        Backing::Vmm { .. } => Ok(None),
    }
}

/// `aclrtMemGetAddressRange`: base and size of the range containing `ptr`.
pub fn address_range(ptr: usize) -> AclResult<(usize, usize)> {
    let device = RANGES.resolve(ptr).map(|r| (r.base, r.len));
    let host = || HOST.resolve(ptr).map(|r| (r.base, r.len));
    device.or_else(host).ok_or_else(|| {
        AclFailure::rule(
            rules::MEM_KNOWN_POINTER,
            format!("{ptr:#x} is not device or aclrtMallocHost memory of this process"),
        )
    })
}

/// A device operand's mapping, and its pages pinned live (not for VMM mappings) until the
/// copy is done.
type Kept = (Arc<SharedMapping>, Option<LivePin>);

/// A validated copy or fill: holds what keeps its device operands mapped (and their pages
/// live) until dropped.
#[derive(Debug)]
pub struct Validated {
    _mappings: Vec<Kept>,
    _vmm: vmm::MappingGuard,
}

/// Which call touches an operand, for the cross-device key import restriction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// `aclrtMemset`: not restricted.
    Fill,
    /// `aclrtMemcpy`: restricted whatever the kind.
    SyncCopy,
    /// `aclrtMemcpyAsync` of this kind: allowed for the device-to-device kinds only.
    AsyncCopy(aclrtMemcpyKind),
}

impl Access {
    /// Whether the access is refused on a key import used from another device.
    fn cross_device_refused(self) -> bool {
        match self {
            Access::Fill => false,
            Access::SyncCopy => true,
            Access::AsyncCopy(kind) => !is_device_to_device(kind),
        }
    }
}

/// Whether `kind` is one of the explicit device-to-device copy kinds.
fn is_device_to_device(kind: aclrtMemcpyKind) -> bool {
    matches!(
        kind,
        ACL_MEMCPY_DEVICE_TO_DEVICE
            | ACL_MEMCPY_INNER_DEVICE_TO_DEVICE
            | ACL_MEMCPY_INTER_DEVICE_TO_DEVICE
    )
}

/// The device range containing `addr`, with `addr..addr+len` checked for bounds, for the
/// access of every VMM mapping it covers (`write`), and for the cross-device key import
/// restriction (`access`); `None` for host memory. A span may run on from one `aclrtMapMem`
/// mapping into the next mapping of the same reservation that starts exactly where it ends
/// (`ascend.vmm.copy-spans-contiguous-mappings`), and so on; anything else past the end of
/// the range is out of bounds.
fn device_operand(
    addr: usize,
    len: usize,
    write: bool,
    access: Access,
    keep: &mut Vec<Kept>,
) -> AclResult<Option<LocalRange<DeviceRange>>> {
    let Some(hit) = RANGES.resolve(addr) else {
        return Ok(None);
    };
    let Some(end) = addr.checked_add(len) else {
        return Err(AclFailure::rule(
            rules::MEM_COPY_BOUNDS,
            format!("{len:#x} bytes at {addr:#x} wrap around the address space"),
        ));
    };
    let mut piece = hit.clone();
    loop {
        check_piece(&piece, addr, write, access, keep)?;
        if end <= piece.end() {
            return Ok(Some(hit));
        }
        piece = next_contiguous_mapping(&piece).ok_or_else(|| {
            let why = match piece.value.backing {
                Backing::Vmm { .. } => {
                    "into an unmapped hole or out of the reservation of the mapping"
                }
                _ => "past the end of the device range",
            };
            AclFailure::rule(
                rules::MEM_COPY_BOUNDS,
                format!(
                    "{len:#x} bytes at {addr:#x} run {why} {:#x}+{:#x}",
                    piece.base, piece.len
                ),
            )
        })?;
    }
}

/// The `aclrtMapMem` mapping that continues `piece` without a gap in the same reservation,
/// when `piece` is one and copies may span mappings.
fn next_contiguous_mapping(piece: &LocalRange<DeviceRange>) -> Option<LocalRange<DeviceRange>> {
    let Backing::Vmm { reservation, .. } = piece.value.backing else {
        return None;
    };
    let next = RANGES.get(piece.end())?;
    let same =
        matches!(next.value.backing, Backing::Vmm { reservation: r, .. } if r == reservation);
    (same && rules::enforced(rules::VMM_COPY_SPANS_MAPPINGS)).then_some(next)
}

/// Checks the access to one range a copy or fill touches (`addr` is where the operand
/// starts, for messages) and keeps its mapping alive for the copy.
fn check_piece(
    hit: &LocalRange<DeviceRange>,
    addr: usize,
    write: bool,
    access: Access,
    keep: &mut Vec<Kept>,
) -> AclResult<()> {
    let pin = pin_not_revoked(&hit.value.backing)?;
    match &hit.value.backing {
        Backing::Malloc { mapping, .. } => keep.push((mapping.clone(), pin)),
        Backing::KeyImport {
            mapping,
            imported_on,
            ..
        } => {
            let owner = hit.value.device;
            check(
                access.cross_device_refused() && *imported_on != owner,
                rules::KEY_CROSS_DEVICE_COPY,
                || {
                    let refused = match access {
                        Access::AsyncCopy(kind) => {
                            format!("aclrtMemcpyAsync of kind {kind} is not device to device")
                        }
                        _ => "aclrtMemcpy is synchronous".to_owned(),
                    };
                    format!(
                        "{addr:#x} is memory of device {owner} imported by key on device {imported_on}: \
                         across devices the vendor allows only asynchronous device-to-device copies \
                         of it (no host copies, no ACL_MEMCPY_DEFAULT, no synchronous aclrtMemcpy), \
                         and {refused}"
                    )
                },
            )?;
            keep.push((mapping.clone(), pin));
        }
        Backing::Vmm { access, .. } => {
            let allowed = if write {
                *access == ACL_RT_MEM_ACCESS_FLAGS_READWRITE
            } else {
                access & ACL_RT_MEM_ACCESS_FLAGS_READ != 0
            };
            check(!allowed, rules::VMM_ACCESS_RESPECTED, || {
                format!(
                    "the mapping at {:#x} has access {access:#x}: it cannot be {}",
                    hit.base,
                    if write { "written" } else { "read" }
                )
            })?;
        }
    }
    Ok(())
}

/// Checks `aclrtMemcpy(dst, destMax, src, count, kind)` (`asynchronous` false) or
/// `aclrtMemcpyAsync` with the same arguments (`asynchronous` true; the caller checks the
/// stream).
pub fn check_copy(
    dst: usize,
    dest_max: usize,
    src: usize,
    count: usize,
    kind: aclrtMemcpyKind,
    asynchronous: bool,
) -> AclResult<Validated> {
    if count > dest_max {
        return Err(AclFailure::rule(
            rules::MEM_COPY_BOUNDS,
            format!("count {count} exceeds destMax {dest_max}"),
        ));
    }
    let expected = match kind {
        ACL_MEMCPY_HOST_TO_HOST => Some((false, false)),
        ACL_MEMCPY_HOST_TO_DEVICE | ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE => Some((true, false)),
        ACL_MEMCPY_DEVICE_TO_HOST => Some((false, true)),
        ACL_MEMCPY_DEVICE_TO_DEVICE
        | ACL_MEMCPY_INNER_DEVICE_TO_DEVICE
        | ACL_MEMCPY_INTER_DEVICE_TO_DEVICE => Some((true, true)),
        ACL_MEMCPY_DEFAULT => None,
        other => {
            return Err(AclFailure::rule(
                rules::PARAM_ENUM_VALUE,
                format!("{other} is not an aclrtMemcpyKind"),
            ));
        }
    };
    let access = if asynchronous {
        Access::AsyncCopy(kind)
    } else {
        Access::SyncCopy
    };
    let guard = vmm::mapping_guard();
    let mut keep = Vec::new();
    let d = device_operand(dst, count, true, access, &mut keep)?;
    let s = device_operand(src, count, false, access, &mut keep)?;
    if let Some((dst_dev, src_dev)) = expected {
        let side = |dev: bool| if dev { "device" } else { "host" };
        check(
            (d.is_some(), s.is_some()) != (dst_dev, src_dev),
            rules::MEM_COPY_KIND,
            || {
                format!(
                    "kind {kind} copies {} to {}, but src {src:#x} is {} memory and dst {dst:#x} is {} memory",
                    side(src_dev),
                    side(dst_dev),
                    side(s.is_some()),
                    side(d.is_some()),
                )
            },
        )?;
    }
    Ok(Validated {
        _mappings: keep,
        _vmm: guard,
    })
}

/// Checks `aclrtMemset(ptr, maxCount, value, count)`.
pub fn check_fill(ptr: usize, max_count: usize, count: usize) -> AclResult<Validated> {
    if count > max_count {
        return Err(AclFailure::rule(
            rules::MEM_COPY_BOUNDS,
            format!("count {count} exceeds maxCount {max_count}"),
        ));
    }
    let guard = vmm::mapping_guard();
    let mut keep = Vec::new();
    device_operand(ptr, count, true, Access::Fill, &mut keep)?;
    Ok(Validated {
        _mappings: keep,
        _vmm: guard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_follow_the_header() {
        assert_eq!(malloc_block_size(1), Some(64));
        assert_eq!(malloc_block_size(32), Some(64));
        assert_eq!(malloc_block_size(33), Some(96));
        assert_eq!(malloc_block_size(4096), Some(4128));
        assert_eq!(malloc_block_size(usize::MAX), None);
    }

    #[test]
    fn only_async_device_to_device_copies_pass_a_cross_device_key_import() {
        assert!(!Access::Fill.cross_device_refused());
        assert!(Access::SyncCopy.cross_device_refused());
        for kind in [
            ACL_MEMCPY_DEVICE_TO_DEVICE,
            ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
            ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
        ] {
            assert!(!Access::AsyncCopy(kind).cross_device_refused(), "{kind}");
        }
        for kind in [
            ACL_MEMCPY_HOST_TO_HOST,
            ACL_MEMCPY_HOST_TO_DEVICE,
            ACL_MEMCPY_DEVICE_TO_HOST,
            ACL_MEMCPY_DEFAULT,
            ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
        ] {
            assert!(Access::AsyncCopy(kind).cross_device_refused(), "{kind}");
        }
    }

    #[test]
    fn spans_stay_in_their_reservation() {
        // Fake, never dereferenced ranges far from anything this test binary maps.
        let base = 0x7e00_0000_0000_usize;
        let vmm = |reservation| DeviceRange {
            device: 0,
            backing: Backing::Vmm {
                handle: 1,
                reservation,
                access: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
            },
        };
        let page = 0x1000;
        RANGES.insert(base, page, vmm(base)).unwrap();
        RANGES.insert(base + page, page, vmm(base)).unwrap();
        // Adjacent in addresses, but another reservation.
        RANGES
            .insert(base + 2 * page, page, vmm(base + 2 * page))
            .unwrap();
        let span = |addr, len| device_operand(addr, len, true, Access::Fill, &mut Vec::new());
        assert_eq!(span(base, 2 * page).unwrap().unwrap().base, base);
        assert_eq!(span(base + 10, 2 * page - 10).unwrap().unwrap().base, base);
        let err = span(base, 2 * page + 1).unwrap_err();
        assert_eq!(err.rule, Some(rules::MEM_COPY_BOUNDS), "{err:?}");
        assert!(span(base + 2 * page, page).is_ok());
        assert!(span(base + 2 * page, page + 1).is_err());
        assert!(span(base, usize::MAX).is_err());
        for b in [base, base + page, base + 2 * page] {
            RANGES.remove(b);
        }
    }

    #[test]
    fn policies() {
        assert!(check_policy(0).is_ok());
        assert!(
            check_policy(ACL_MEM_MALLOC_HUGE1G_ONLY_P2P | ACL_MEM_TYPE_HIGH_BAND_WIDTH).is_ok()
        );
        assert!(check_policy(8).is_err());
        assert!(check_policy(-1).is_err());
    }
}
