//! IPC memory handles: `hipIpcGetMemHandle`, `hipIpcOpenMemHandle`, `hipIpcCloseMemHandle`.
//!
//! A `hipIpcMemHandle_t` is the emulator's 64-byte handle ([`crate::handle`]) naming the
//! allocation's `Memory` object, with payload words `[offset, size, exporter pid, 0]`
//! like CLR's `poffset` / `psize` / `owners_process_id`. An interior pointer exports the
//! whole allocation and records its offset; open returns the base
//! ([`rules::MEM_OPEN_RETURNS_BASE`]).
//!
//! Opening makes the process a holder of the object (one acquisition per open), so the
//! memory outlives the exporter's `hipFree`; the mapping is per process and reference
//! counted ([`rules::MEM_OPEN_TWICE_REFCOUNTED`]); the last `hipIpcCloseMemHandle` unmaps
//! it. A process killed while holding is reclaimed by the next touch of the object or by
//! [`crate::gc`].
//!
//! # Versions
//!
//! ROCm 5.6 brought CLR's owner check (opening in the exporting process is
//! `hipErrorInvalidContext`) and `hipErrorInvalidValue` for export and close refusals.
//! Emulating an older version, the exporter's own open maps the allocation a second time
//! (ROCm 5.2 has no owner in its handle and its ROCr attach maps again), export refusals
//! are `hipErrorInvalidDevicePointer` and close refusals `hipErrorInvalidHandle`, the
//! codes ROCm 5.2.3 returns (`super::versions`).
//!
//! # Devices and peer access (a choice)
//!
//! The open maps the memory on the calling thread's current device. When that device
//! differs from the allocation's, the open succeeds without a prior
//! `hipDeviceEnablePeerAccess`: the only accepted `flags` value *is*
//! `hipIpcMemLazyEnablePeerAccess`, whose documented meaning is that the runtime enables
//! peer access as needed, and ROCm maps IPC memory for every GPU agent. The open does not
//! mark peer access as enabled, so an explicit `hipDeviceEnablePeerAccess` afterwards
//! still succeeds once (as on runtimes that ignored the flag, api-facts C.1). What the
//! lazy flag cannot do is connect devices the topology does not (`DEVIPC_EMU_PEERS`): an
//! open on a device that cannot reach the allocation's fails with
//! `hipErrorPeerAccessUnsupported` ([`rules::PEER_TOPOLOGY_RESPECTED`]).

use std::collections::HashMap;
use std::sync::Arc;

use devipc_hip_sys::*;

use super::errors::{Failure, HipResult, Refusal, unopenable_handle};
use super::memory::{Mapped, RANGES, Role};
use super::rules::{
    self, MEM_CLOSE_NON_IPC_POINTER_REJECTED, MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
    MEM_INVALID_HANDLE_REJECTED, MEM_OPEN_AFTER_FREE_REJECTED, MEM_OPEN_IN_EXPORTER_REJECTED,
    MEM_OPEN_RETURNS_BASE, MEM_OPEN_TWICE_REFCOUNTED,
};
use super::runtime::{current_device, me, state};
use super::versions;
use crate::config::HipVersion;
use crate::error::EmuError;
use crate::handle::{Handle64, decode_handle64, encode_handle64};
use crate::local::{ForkGuard, ForkLocal, forget_inherited};
use crate::state::{ObjectFlags, ObjectId, ObjectInfo, ObjectKind, State, Vendor};

/// Payload word of the handle: offset of the exported pointer in the allocation.
const PAYLOAD_OFFSET: usize = 0;
/// Payload word of the handle: size of the allocation.
const PAYLOAD_SIZE: usize = 1;
/// Payload word of the handle: the exporter's pid.
const PAYLOAD_PID: usize = 2;

/// The imports of this process: how many opens each mapped base has, and which base a
/// refcounted object is mapped at.
#[derive(Debug, Default)]
struct Imports {
    by_id: HashMap<ObjectId, usize>,
    opens: HashMap<usize, u32>,
}

/// This process's imports (a forked child starts with none).
static IMPORTS: ForkLocal<Option<Imports>> = ForkLocal::new(forget_inherited);

fn imports() -> ForkGuard<'static, Option<Imports>> {
    IMPORTS.lock()
}

/// The refusal of `hipIpcGetMemHandle` for a pointer the runtime cannot export (unknown,
/// freed, out of bounds, not `hipMalloc` memory): `hipErrorInvalidValue` from ROCm 5.6,
/// `hipErrorInvalidDevicePointer` before ([`versions::clr_ipc_checks`]).
fn cannot_export(version: HipVersion, why: String) -> Failure {
    let code = if versions::clr_ipc_checks(version) {
        hipErrorInvalidValue
    } else {
        hipErrorInvalidDevicePointer
    };
    Failure::new(code, format!("IPC memory creation failed: {why}"))
}

/// `hipIpcGetMemHandle(ptr)`: the handle of the allocation containing `ptr`.
pub(crate) fn get_handle(ptr: usize) -> HipResult<[u8; 64]> {
    if ptr == 0 {
        return Err(Failure::invalid_value("NULL device pointer"));
    }
    let state = state()?;
    let version = state.config().hip_version;
    if super::vmm::is_mapped(ptr) {
        return Err(Failure {
            rule: Some(super::rules::VMM_LEGACY_IPC_REFUSED),
            ..cannot_export(
                version,
                format!(
                    "{ptr:#x} is VMM memory (hipMemMap); export it with hipMemExportToShareableHandle"
                ),
            )
        });
    }
    let hit = RANGES.resolve(ptr).ok_or_else(|| {
        cannot_export(
            version,
            format!("{ptr:#x} is not inside memory allocated with hipMalloc in this process"),
        )
    })?;
    if hit.value.role != Role::Allocation {
        return Err(cannot_export(
            version,
            format!(
                "{ptr:#x} was opened with hipIpcOpenMemHandle; only the exporter's allocation can be exported"
            ),
        ));
    }
    let me = me()?;
    let size = state.registry().update(hit.value.id, |m| {
        m.flags.insert(ObjectFlags::EXPORTED);
        Ok::<_, EmuError>(m.info().size)
    })?;
    let mut payload = [0u64; 4];
    payload[PAYLOAD_OFFSET] = (ptr - hit.base) as u64;
    payload[PAYLOAD_SIZE] = size;
    payload[PAYLOAD_PID] = me.pid as u64;
    Ok(encode_handle64(&Handle64 {
        vendor: Vendor::Hip,
        kind: ObjectKind::Memory,
        id: hit.value.id,
        payload,
    }))
}

/// The refusal for a handle that names nothing openable.
fn invalid_handle(why: impl std::fmt::Display) -> Failure {
    unopenable_handle(MEM_INVALID_HANDLE_REJECTED, "memory", why, |message| {
        Failure::new(
            hipErrorInvalidDevicePointer,
            format!("attach failed: {message}"),
        )
    })
}

/// `hipIpcOpenMemHandle(handle, flags)`: the pointer to write.
pub(crate) fn open(handle: &[u8; 64], flags: u32) -> HipResult<usize> {
    let state = state()?;
    let version = state.config().hip_version;
    let lazy = ipc_mem_lazy_enable_peer_access(version.encoded());
    if flags != lazy && rules::enforced(MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
            format!(
                "flags {flags:#x}: HIP {version} accepts only hipIpcMemLazyEnablePeerAccess = {lazy}"
            ),
        ));
    }
    let h = decode_handle64(handle).map_err(invalid_handle)?;
    if (h.vendor, h.kind) != (Vendor::Hip, ObjectKind::Memory) {
        return Err(invalid_handle(format!(
            "it is a {} {} handle",
            h.vendor, h.kind
        )));
    }
    // The memory is mapped for the current device, which must be valid; any device may
    // open any allocation (see the module docs on peer access).
    let device = current_device(state)?;
    // The owner check exists from ROCm 5.6; 5.2 maps the allocation again (see the rule).
    let owner_check = versions::clr_ipc_checks(version);
    let me = me()?;
    let reg = state.registry();
    let info = reg
        .update(h.id, |m| {
            m.expect(Vendor::Hip, ObjectKind::Memory)?;
            let info = *m.info();
            if h.payload[PAYLOAD_SIZE] != info.size || h.payload[PAYLOAD_OFFSET] >= info.size {
                return Err(Refusal::Hip(invalid_handle(
                    "its size or offset does not match the allocation",
                )));
            }
            // CLR checks the pid in the handle before attaching.
            if info.exporter == me && owner_check && rules::enforced(MEM_OPEN_IN_EXPORTER_REJECTED)
            {
                return Err(Refusal::Hip(Failure::rule(
                    hipErrorInvalidContext,
                    MEM_OPEN_IN_EXPORTER_REJECTED,
                    format!(
                        "this process (pid {}) exported the handle; use the original pointer",
                        me.pid
                    ),
                )));
            }
            // Freed by the exporter (hipFree) or gone with it (the exporter died: its
            // hold was reclaimed on this touch).
            let exporter_gone = m.flags.contains(ObjectFlags::CLOSED)
                || m.hold_count(info.exporter) == 0;
            if exporter_gone && rules::enforced(MEM_OPEN_AFTER_FREE_REJECTED) {
                return Err(Refusal::Hip(Failure::rule(
                    hipErrorInvalidValue,
                    MEM_OPEN_AFTER_FREE_REJECTED,
                    format!(
                        "the exporter ({}) freed the allocation or exited; processes that opened it before keep it, new opens are refused",
                        info.exporter
                    ),
                )));
            }
            if info.device != device {
                super::peer::check_topology(device, info.device).map_err(Refusal::Hip)?;
            }
            m.add_holder(me)?;
            Ok(info)
        })
        .map_err(|r| r.into_failure(invalid_handle))?;
    let base = match map_import(state, &info, device) {
        Ok(base) => base,
        Err(e) => {
            // Undo the acquisition: nothing maps it here.
            let _ = reg.release(info.id, me);
            return Err(e);
        }
    };
    if rules::enforced(MEM_OPEN_RETURNS_BASE) {
        Ok(base)
    } else {
        Ok(base + h.payload[PAYLOAD_OFFSET] as usize)
    }
}

/// Maps `info`'s memory in this process for `device`, or counts one more open of the
/// existing mapping.
fn map_import(state: &State, info: &ObjectInfo, device: u32) -> HipResult<usize> {
    let refcounted = rules::enforced(MEM_OPEN_TWICE_REFCOUNTED);
    let mut guard = imports();
    let imports = guard.get_or_insert_with(Imports::default);
    if refcounted {
        if let Some(&base) = imports.by_id.get(&info.id) {
            if let Some(n) = imports.opens.get_mut(&base) {
                *n += 1;
                return Ok(base);
            }
        }
    }
    let size = usize::try_from(info.size)
        .map_err(|_| Failure::invalid_value("allocation too large for this process"))?;
    let mapping = state.registry().open_segment(info.id)?.map()?;
    let base = mapping.addr();
    RANGES.insert(
        base,
        size,
        Mapped {
            id: info.id,
            role: Role::Import,
            device,
            mapping: Arc::new(mapping),
        },
    )?;
    imports.opens.insert(base, 1);
    if refcounted {
        imports.by_id.insert(info.id, base);
    }
    Ok(base)
}

/// `hipIpcCloseMemHandle(ptr)`: one close of the import containing `ptr`.
pub(crate) fn close(ptr: usize) -> HipResult<()> {
    if ptr == 0 {
        return Err(Failure::invalid_value("NULL device pointer"));
    }
    // ROCm 5.2's IpcDetach failure is hipErrorInvalidHandle; 5.6 checks ipcShared and
    // answers hipErrorInvalidValue (see the rule).
    let code = if versions::clr_ipc_checks(state()?.config().hip_version) {
        hipErrorInvalidValue
    } else {
        hipErrorInvalidHandle
    };
    let not_ipc = |why: String| -> HipResult<()> {
        if rules::enforced(MEM_CLOSE_NON_IPC_POINTER_REJECTED) {
            Err(Failure::rule(code, MEM_CLOSE_NON_IPC_POINTER_REJECTED, why))
        } else {
            Ok(())
        }
    };
    let Some(hit) = RANGES.resolve(ptr) else {
        return not_ipc(format!(
            "{ptr:#x} is not inside memory opened with hipIpcOpenMemHandle"
        ));
    };
    if hit.value.role != Role::Import {
        return not_ipc(format!(
            "{ptr:#x} is hipMalloc memory of this process, not an IPC mapping; use hipFree"
        ));
    }
    let id = hit.value.id;
    let closed = {
        let mut guard = imports();
        let imports = guard.get_or_insert_with(Imports::default);
        match imports.opens.get_mut(&hit.base) {
            None => false,
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    imports.opens.remove(&hit.base);
                    if imports.by_id.get(&id) == Some(&hit.base) {
                        imports.by_id.remove(&id);
                    }
                    RANGES.remove(hit.base);
                }
                true
            }
        }
    };
    if !closed {
        return not_ipc(format!("{ptr:#x} was closed concurrently"));
    }
    drop(hit);
    state()?.registry().release(id, me()?)?;
    Ok(())
}
