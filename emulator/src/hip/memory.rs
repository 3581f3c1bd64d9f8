//! Device memory of this process: `hipMalloc`, `hipFree`, `hipMemcpy`, `hipMemset`,
//! `hipMemGetAddressRange`.
//!
//! An allocation is a `Memory` object of the state directory (its bytes charged to the
//! device's `DEVIPC_EMU_MEM_LIMIT` across all processes; over the limit is
//! `hipErrorOutOfMemory`), mapped `MAP_SHARED` into this process. The mapping's host
//! address is the "device pointer": emulated device memory is host-addressable, so
//! `hipMemcpy` of every kind is a plain copy. Every mapped range, allocated here or opened
//! with `hipIpcOpenMemHandle` ([`super::ipc_mem`]), is in [`RANGES`], so interior
//! pointers resolve to their allocation and unknown pointers are refused instead of
//! dereferenced (the host side of a copy is the caller's responsibility, as in C).
//!
//! `hipMalloc(ptr, 0)` succeeds and writes NULL, as CLR does. `hipFree(NULL)` succeeds.
//! `hipFree` of an exported allocation releases it, as HIP does: new opens are refused
//! ([`super::rules::MEM_OPEN_AFTER_FREE_REJECTED`]), and if another process still has it
//! open, its pages are revoked for everyone and the violation is recorded
//! ([`super::rules::MEM_FREE_WHILE_OPENED`]); the importers' closes still succeed.
// Matching on the vendor's constants keeps their C names.
#![allow(non_upper_case_globals)]

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use devipc_hip_sys::*;

use super::errors::{Failure, HipResult};
use super::host::{HOST, HostAlloc};
use super::rules::{self, MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND, MEM_FREE_WHILE_OPENED};
use super::runtime::{current_device, me, ordinal_or_invalid, state};
use super::{versions, vmm};
use crate::error::EmuError;
use crate::local::{LocalRange, RangeMap};
use crate::state::{LivePin, NewObject, ObjectFlags, ObjectId, SharedMapping, Vendor};

/// How a range came to be mapped in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `hipMalloc` in this process.
    Allocation,
    /// `hipIpcOpenMemHandle` in this process.
    Import,
}

/// A mapped device range of this process.
#[derive(Debug, Clone)]
pub(crate) struct Mapped {
    /// The `Memory` object.
    pub id: ObjectId,
    /// Allocation or import.
    pub role: Role,
    /// The device it was allocated on (`hipMalloc`) or opened on (`hipIpcOpenMemHandle`),
    /// as `hipPointerGetAttributes` reports it.
    pub device: u32,
    /// Keeps the mapping alive while any operation uses it; unmapped with the last clone.
    pub mapping: Arc<SharedMapping>,
}

/// Every device range mapped in this process.
pub(crate) static RANGES: RangeMap<Mapped> = RangeMap::new();

/// `hipMalloc(size)` on the current device: the new base, or 0 for `size == 0`.
pub(crate) fn malloc(size: usize) -> HipResult<usize> {
    if size == 0 {
        return Ok(0);
    }
    let state = state()?;
    let device = current_device(state)?;
    let reg = state.registry();
    let created = reg.create(NewObject::memory(Vendor::Hip, device, size as u64))?;
    let id = created.meta.id();
    let mapped = created
        .segment
        .as_ref()
        .ok_or_else(|| Failure::new(hipErrorUnknown, "memory object without a segment"))
        .and_then(|seg| Ok(seg.map()?))
        .and_then(|mapping| {
            let base = mapping.addr();
            RANGES.insert(
                base,
                size,
                Mapped {
                    id,
                    role: Role::Allocation,
                    device,
                    mapping: Arc::new(mapping),
                },
            )?;
            Ok(base)
        });
    if mapped.is_err() {
        // Best effort: the allocation is useless without its mapping.
        let _ = reg.release(id, me()?);
    }
    mapped
}

/// `hipFree(ptr)`: unmaps an allocation of this process and drops this process's hold.
pub(crate) fn free(ptr: usize) -> HipResult<()> {
    if ptr == 0 {
        return Ok(());
    }
    let hit = RANGES.resolve(ptr).ok_or_else(|| {
        Failure::invalid_value(format!("{ptr:#x} is not device memory of this process"))
    })?;
    if hit.value.role != Role::Allocation {
        return Err(Failure::invalid_value(format!(
            "{ptr:#x} was opened with hipIpcOpenMemHandle; close it with hipIpcCloseMemHandle"
        )));
    }
    if hit.base != ptr {
        return Err(Failure::invalid_value(format!(
            "{ptr:#x} is {:#x} bytes into the allocation at {:#x}; hipFree takes the base",
            ptr - hit.base,
            hit.base
        )));
    }
    let state = state()?;
    let me = me()?;
    // Whoever removes the range frees it (a concurrent hipFree of the same pointer fails).
    let removed = RANGES
        .remove(ptr)
        .ok_or_else(|| Failure::invalid_value(format!("{ptr:#x} was freed concurrently")))?;
    drop(removed);
    let id = hit.value.id;
    let opened_elsewhere = state.registry().update(id, |m| {
        // New opens of the handle are refused.
        m.flags.insert(ObjectFlags::CLOSED);
        m.remove_holder(me)?;
        Ok::<_, EmuError>(!m.holders().is_empty())
    })?;
    if opened_elsewhere && rules::enforced(MEM_FREE_WHILE_OPENED) {
        // HIP frees the memory now; the importers' mappings point at nothing.
        state.registry().revoke(
            id,
            MEM_FREE_WHILE_OPENED,
            &format!("hipFree({ptr:#x}) while another process has the allocation open"),
        )?;
    }
    Ok(())
}

/// What keeps a copy operand mapped until the copy is done.
#[derive(Debug)]
enum Keep {
    /// Device memory (an allocation or an IPC mapping).
    Device(Arc<SharedMapping>),
    /// `hipHostMalloc` memory.
    Host(#[allow(dead_code)] Arc<HostAlloc>),
    /// A `hipMemMap` mapping ([`super::vmm`]).
    Vmm(#[allow(dead_code)] vmm::InFlight),
}

/// A validated copy: the device operands lie inside live mappings, kept alive by
/// `_keep` until the copy is done (also when it runs later, on a held stream).
#[derive(Debug)]
pub(crate) struct CopyPlan {
    /// Destination address.
    pub dst: usize,
    /// Source address.
    pub src: usize,
    /// Bytes to copy.
    pub len: usize,
    _keep: Vec<Keep>,
}

/// A copy operand the device reaches: device memory of this process, or `hipHostMalloc`
/// memory (CLR finds a memory object for both and copies whatever the kind says).
fn copy_operand(addr: usize, len: usize, what: &str) -> HipResult<Keep> {
    if let Some(vmm) = vmm::copy_operand(addr, len, what == "destination", what) {
        return vmm.map(Keep::Vmm);
    }
    if RANGES.resolve(addr).is_none() {
        if let Some(hit) = HOST.resolve(addr) {
            if len > hit.end() - addr {
                return Err(Failure::invalid_value(format!(
                    "{what} {addr:#x}..+{len:#x} runs past the end of its host allocation"
                )));
            }
            return Ok(Keep::Host(hit.value));
        }
    }
    let mapping = device_span(addr, len, what)?.value.mapping;
    // Freed under us by its exporter: the device would fault here.
    mapping.check_live()?;
    Ok(Keep::Device(mapping))
}

/// A device span `addr..addr+len` of this process.
fn device_span(addr: usize, len: usize, what: &str) -> HipResult<LocalRange<Mapped>> {
    RANGES.resolve_span(addr, len).map_err(|e| match e {
        EmuError::UnknownPointer { .. } => Failure::invalid_value(format!(
            "{what} {addr:#x} is not device memory of this process"
        )),
        other => Failure::invalid_value(format!("{what}: {other}")),
    })
}

impl CopyPlan {
    /// Fails if a device operand was revoked since the plan was made; else pins their
    /// pages live until the returned pins are dropped, so a revocation during the copy
    /// waits for it instead of faulting it (audit N14).
    pub(crate) fn pin_live(&self) -> HipResult<Vec<LivePin>> {
        let mut pins = Vec::new();
        for keep in &self._keep {
            if let Keep::Device(mapping) = keep {
                pins.push(mapping.pin_live()?);
            }
        }
        Ok(pins)
    }
}

/// Validates `hipMemcpy(dst, src, len, kind)`; `None` when there is nothing to copy.
pub(crate) fn plan_memcpy(
    dst: usize,
    src: usize,
    len: usize,
    kind: hipMemcpyKind,
) -> HipResult<Option<CopyPlan>> {
    let version = super::runtime::config()?.hip_version;
    // Which operands the kind says are on the device; `None`: inferred (hipMemcpyDefault).
    let (dst_dev, src_dev) = match kind {
        hipMemcpyHostToHost => (Some(false), Some(false)),
        hipMemcpyHostToDevice => (Some(true), Some(false)),
        hipMemcpyDeviceToHost => (Some(false), Some(true)),
        hipMemcpyDeviceToDevice => (Some(true), Some(true)),
        hipMemcpyDeviceToDeviceNoCU if version.at_least(6, 1) => (Some(true), Some(true)),
        hipMemcpyDefault => (None, None),
        other => {
            return Err(Failure::new(
                hipErrorInvalidMemcpyDirection,
                format!("copy kind {other} is not a hipMemcpyKind of HIP {version}"),
            ));
        }
    };
    if len == 0 {
        return Ok(None);
    }
    if dst == 0 || src == 0 {
        return Err(Failure::invalid_value("NULL pointer with a non-zero size"));
    }
    let mut keep = Vec::new();
    for (addr, on_device, what) in [(dst, dst_dev, "destination"), (src, src_dev, "source")] {
        let check = match on_device {
            Some(d) => d,
            None => {
                RANGES.resolve(addr).is_some()
                    || HOST.resolve(addr).is_some()
                    || vmm::is_mapped(addr)
            }
        };
        if check {
            keep.push(copy_operand(addr, len, what)?);
        }
    }
    Ok(Some(CopyPlan {
        dst,
        src,
        len,
        _keep: keep,
    }))
}

/// Checks the arguments of `hipMemset(dst, _, len)`.
pub(crate) fn check_memset(dst: usize, len: usize) -> HipResult<()> {
    if len == 0 {
        return Ok(());
    }
    if dst == 0 {
        return Err(Failure::invalid_value("NULL destination"));
    }
    if let Some(vmm) = vmm::copy_operand(dst, len, true, "destination") {
        return vmm.map(drop);
    }
    device_span(dst, len, "destination").map(drop)
}

/// `hipMemset(dst, value, len)`: fills device memory with the low byte of `value`.
pub(crate) fn memset(dst: usize, value: c_int, len: usize) -> HipResult<()> {
    if len == 0 {
        return Ok(());
    }
    if dst == 0 {
        return Err(Failure::invalid_value("NULL destination"));
    }
    if let Some(done) = vmm::memset(dst, value as u8, len) {
        return done;
    }
    let hit = device_span(dst, len, "destination")?;
    const CHUNK: usize = 64 << 10;
    let fill = vec![value as u8; CHUNK.min(len)];
    let mut offset = hit.offset_of(dst);
    let mut left = len;
    while left > 0 {
        let n = left.min(fill.len());
        hit.value.mapping.write_at(offset, &fill[..n])?;
        offset += n;
        left -= n;
    }
    Ok(())
}

/// `hipMemGetAddressRange(ptr)`: base and size of the allocation (device or
/// `hipHostMalloc`) containing `ptr`; for VMM memory the `hipMemMap` mapping
/// ([`rules::VMM_ADDRESS_RANGE_IS_MAPPING`]). An unknown pointer is `hipErrorNotFound` from ROCm
/// 6.0 ([`versions::address_range_not_found`]), `hipErrorInvalidDevicePointer` before.
pub(crate) fn address_range(ptr: usize) -> HipResult<(usize, usize)> {
    if let Some(hit) = HOST.resolve(ptr) {
        return Ok((hit.base, hit.len));
    }
    if rules::enforced(rules::VMM_ADDRESS_RANGE_IS_MAPPING) {
        if let Some(range) = vmm::address_range(ptr) {
            return Ok(range);
        }
    }
    match RANGES.resolve(ptr) {
        Some(hit) => Ok((hit.base, hit.len)),
        None => {
            let message = format!("{ptr:#x} is inside no allocation of this process");
            let version = super::runtime::config()?.hip_version;
            if versions::address_range_not_found(version)
                && rules::enforced(MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND)
            {
                Err(Failure::rule(
                    hipErrorNotFound,
                    MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
                    message,
                ))
            } else {
                Err(Failure::new(hipErrorInvalidDevicePointer, message))
            }
        }
    }
}

/// `hipPointerGetAttributes(ptr)` in the emulated version's numbering.
///
/// Device memory (`hipMalloc`, IPC mappings): type Device, the allocation's (or the
/// opening) device as this process's ordinal (`hipInvalidDeviceId` for a device its masks
/// hide: an imported VMM allocation of such a device; the emulator's choice, issue 16),
/// `devicePointer = ptr`, no host pointer. `hipHostMalloc` memory: type
/// Host, `hostPointer = devicePointer = ptr` (emulated devices address host memory
/// directly), the `hipHostMalloc` flags as `allocationFlags` (CLR 6.x; 5.2 reported its
/// internal buffer flags there, which the emulator does not model). Nothing the runtime
/// knows: from ROCm 6.0 success with type Unregistered and `device = hipInvalidDeviceId`,
/// before `hipErrorInvalidValue` ([`versions::pointer_attributes_v6`]); a NULL `ptr` is
/// treated the same (CLR 6.x accepts it, 5.2 refuses it).
pub(crate) fn pointer_attributes(ptr: usize) -> HipResult<hipPointerAttribute_t> {
    let version = super::runtime::config()?.hip_version;
    let encoded = version.encoded();
    let type_of = |kind: MemoryKind| {
        memory_type_value(kind, encoded).ok_or_else(|| {
            Failure::new(
                hipErrorUnknown,
                format!("HIP {version} has no hipMemoryType for {kind:?}"),
            )
        })
    };
    let mut attrs = hipPointerAttribute_t::zeroed();
    if ptr != 0 {
        if let Some(hit) = HOST.resolve(ptr) {
            attrs.r#type = type_of(MemoryKind::Host)?;
            attrs.device = ordinal_or_invalid(hit.value.device)?;
            attrs.devicePointer = ptr as *mut c_void;
            attrs.hostPointer = ptr as *mut c_void;
            attrs.allocationFlags = hit.value.flags;
            return Ok(attrs);
        }
        if let Some(hit) = RANGES.resolve(ptr) {
            attrs.r#type = type_of(MemoryKind::Device)?;
            attrs.device = ordinal_or_invalid(hit.value.device)?;
            attrs.devicePointer = ptr as *mut c_void;
            return Ok(attrs);
        }
        if let Some(device) = vmm::device_of(ptr) {
            attrs.r#type = type_of(MemoryKind::Device)?;
            attrs.device = ordinal_or_invalid(device)?;
            attrs.devicePointer = ptr as *mut c_void;
            return Ok(attrs);
        }
    }
    if versions::pointer_attributes_v6(version) {
        attrs.r#type = type_of(MemoryKind::Unregistered)?;
        attrs.device = hipInvalidDeviceId;
        Ok(attrs)
    } else {
        Err(Failure::invalid_value(format!(
            "{ptr:#x} is not memory allocated or mapped by HIP in this process"
        )))
    }
}

/// `hipPointerGetAttribute(HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE, ptr)`: 1 for
/// `hipMalloc` memory (and IPC mappings of it), 0 for VMM mappings and `hipHostMalloc`
/// memory; unknown memory is `hipErrorInvalidValue`. Before ROCm 7.12 the attribute is
/// `hipErrorNotSupported` ([`versions::legacy_ipc_attribute`]).
pub(crate) fn pointer_attribute(attribute: hipPointer_attribute, ptr: usize) -> HipResult<i64> {
    let version = super::runtime::config()?.hip_version;
    let unknown = || {
        Failure::invalid_value(format!(
            "{ptr:#x} is not memory allocated or mapped by HIP in this process"
        ))
    };
    match attribute {
        HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE => {
            if !versions::legacy_ipc_attribute(version) {
                return Err(Failure::new(
                    hipErrorNotSupported,
                    format!(
                        "HIP {version} does not answer HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE (from 7.12)"
                    ),
                ));
            }
            if vmm::is_mapped(ptr) || HOST.resolve(ptr).is_some() {
                Ok(0)
            } else if RANGES.resolve(ptr).is_some() {
                Ok(1)
            } else {
                Err(unknown())
            }
        }
        HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL => {
            if let Some(d) = vmm::device_of(ptr) {
                Ok(i64::from(ordinal_or_invalid(d)?))
            } else if let Some(hit) = RANGES.resolve(ptr) {
                Ok(i64::from(ordinal_or_invalid(hit.value.device)?))
            } else {
                Err(unknown())
            }
        }
        HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR | HIP_POINTER_ATTRIBUTE_RANGE_SIZE => {
            let (base, len) = vmm::address_range(ptr)
                .or_else(|| RANGES.resolve(ptr).map(|h| (h.base, h.len)))
                .ok_or_else(unknown)?;
            Ok(if attribute == HIP_POINTER_ATTRIBUTE_RANGE_SIZE {
                len as i64
            } else {
                base as i64
            })
        }
        other => Err(Failure::new(
            hipErrorNotSupported,
            format!("hipPointerGetAttribute({other}) is not emulated"),
        )),
    }
}
