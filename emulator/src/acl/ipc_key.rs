//! Key-based IPC memory: `aclrtIpcMemGetExportKey`, `aclrtIpcMemSetImportPid`,
//! `aclrtIpcMemImportByKey`, `aclrtIpcMemClose` (api-facts A.7, C.4).
//!
//! A key is its own object (kind `MemKey`) naming `offset..offset+size` of an
//! `aclrtMalloc` block; its 65-byte text is `devipc-emu:acl:memkey:<id>` ([`crate::handle`]).
//! The exporter holds the key once; every import holds the key *and* the block, so the
//! object records outlive the exporter's close and free until the importers close (their
//! bytes do not: see close and free below).
//!
//! - export: `len >= 65`, `size > 0`, `flags` 0 or `DISABLE_PID_VALIDATION` (0x1)
//!   (107000 each, documented); `devPtr..devPtr+size` inside one `aclrtMalloc` block of
//!   this process, page-table aligned at both ends: `devPtr` and `devPtr+size` on a
//!   [`KEY_PAGE`] boundary of the block (`ascend.ipc-key.page-aligned`; the runtime FAQ
//!   "page-table alignment of IPC memory sharing": the IPC interfaces refuse memory that is
//!   not page-table aligned, so that no page is mapped into another process with memory
//!   outside the exported range; exporting 1024 bytes of `aclrtMalloc(1024)` may fail,
//!   4096 bytes of `aclrtMalloc(4096)` succeed). Each export makes a new key.
//! - set pid: a non-empty pid list (107000), added by the exporting process only.
//! - import: `flags` 0 or `ENABLE_PEER_ACCESS` (0x1); the importer's pid on the trustlist
//!   unless `DISABLE_PID_VALIDATION` (the exporting process itself counts as trusted:
//!   RT-SRC's close path handles a key imported in its own exporter); a key owned by
//!   another device than the current one needs `ENABLE_PEER_ACCESS` (which enables peer
//!   access to the owner's device, as the runtime does) or earlier
//!   `aclrtDeviceEnablePeerAccess`. Repeated imports in one process are allowed, each
//!   mapping the block anew at a new address. Memory imported onto another device than
//!   its owner's takes no synchronous copies (see [`super::memory`]).
//! - close: in a process that imported the key, closes one imported address, the oldest
//!   still open (RT-SRC `IpcCloseMemory` unmaps `vaList.front()`:
//!   `ascend.ipc-key.close-unmaps-oldest-import`); otherwise, in the exporter, destroys the
//!   key: new imports are refused. While other processes still map imports (dead
//!   importers do not count) that is the violation RT-DOC 11-07 warns of ("exceptions may
//!   occur"): the emulator records it and the importers' copies fail with 507013, while
//!   their closes still succeed (`ascend.ipc-key.importers-close-first`; switched off, the
//!   importers keep working).
//! - the exporter's `aclrtFree` of the block while other processes map it through a key
//!   frees it under them: its pages are revoked for everyone
//!   (`ascend.ipc-key.free-while-imported`, in [`super::memory`]).
//!
//! Export, import and close need a current device (107002, as RT-SRC).

use std::collections::BTreeMap;
use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_ERROR_RT_DRV_INTERNAL_ERROR;
use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};

use crate::error::EmuError;
use crate::handle::{KEY_LEN, decode_key, encode_key};
use crate::local::{ForkGuard, ForkLocal, forget_inherited};
use crate::state::{NewObject, ObjectFlags, ObjectId, ObjectKind, Vendor};

use super::errors::{AclFailure, AclResult, check};
use super::memory::{Backing, DeviceRange, RANGES};
use super::{device, process_state, rules};

/// The page-table granule an exported key range must be aligned to: the device's normal
/// page (4 KiB; huge pages are 2 MiB or 1 GiB, RT-DOC FAQ on IPC page-table alignment). The
/// emulator does not model which page size a block got, so it checks the smallest.
pub const KEY_PAGE: usize = 4096;

/// What this process did with one key.
#[derive(Debug, Default)]
struct KeyUse {
    /// This process exported the key and has not destroyed it.
    exported: bool,
    /// Addresses of this process's imports, oldest first.
    imports: Vec<usize>,
}

/// This process's keys (a forked child starts with none).
static KEYS: ForkLocal<BTreeMap<ObjectId, KeyUse>> = ForkLocal::new(forget_inherited);

fn keys() -> ForkGuard<'static, BTreeMap<ObjectId, KeyUse>> {
    KEYS.lock()
}

/// Resolves a key's bytes to the key object of this state directory.
fn resolve(key: &[u8]) -> AclResult<ObjectId> {
    let (vendor, kind, id) = decode_key(key)?;
    if (vendor, kind) != (Vendor::Acl, ObjectKind::MemKey) {
        return Err(AclFailure::rule(
            rules::HANDLE_VALID,
            format!("the key names a {vendor} {kind}, not an ACL IPC memory key"),
        ));
    }
    Ok(process_state::registry()?.resolve(id.raw())?)
}

/// `aclrtIpcMemGetExportKey`: the key's 65 bytes (NUL padded).
pub fn export(dev_ptr: usize, size: usize, len: usize, flags: u64) -> AclResult<[u8; KEY_LEN]> {
    if len < ACL_IPC_KEY_LEN {
        return Err(AclFailure::rule(
            rules::KEY_MIN_LEN,
            format!("key buffer len {len} is shorter than {ACL_IPC_KEY_LEN}"),
        ));
    }
    if size == 0 {
        return Err(AclFailure::rule(rules::KEY_SIZE_NONZERO, "size is 0"));
    }
    check(
        flags & !ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0,
        rules::KEY_FLAGS,
        || format!("flags {flags:#x} is not DEFAULT (0) or DISABLE_PID_VALIDATION (0x1)"),
    )?;
    device::require_current("aclrtIpcMemGetExportKey")?;
    let block = RANGES
        .resolve(dev_ptr)
        .filter(|r| dev_ptr.checked_add(size).is_some_and(|end| end <= r.end()))
        .and_then(|r| match r.value.backing {
            Backing::Malloc { id, .. } => Some((r.base, id)),
            _ => None,
        });
    let Some((base, block_id)) = block else {
        return Err(AclFailure::rule(
            rules::KEY_MALLOC_ONLY,
            format!(
                "{size:#x} bytes at {dev_ptr:#x} are not inside one aclrtMalloc block of this process"
            ),
        ));
    };
    let offset = dev_ptr - base;
    let page = KEY_PAGE;
    check(offset % page != 0, rules::KEY_PAGE_ALIGNED, || {
        format!(
            "{dev_ptr:#x} (offset {offset:#x} in its block) is not page-table aligned ({page:#x})"
        )
    })?;
    check((offset + size) % page != 0, rules::KEY_PAGE_ALIGNED, || {
        format!(
            "the range ends at offset {:#x} of its block, which is not page-table aligned \
             ({page:#x}): the last page would be shared with memory outside the range",
            offset + size
        )
    })?;
    let reg = process_state::registry()?;
    let parent = reg.get_expect(block_id, Vendor::Acl, ObjectKind::Memory)?;
    let mut spec = NewObject::mem_key(Vendor::Acl, parent.info(), offset as u64, size as u64);
    if flags & ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0 {
        spec.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
    }
    let key = reg.create(spec)?.meta.id();
    keys().entry(key).or_default().exported = true;
    Ok(encode_key(Vendor::Acl, ObjectKind::MemKey, key))
}

/// `aclrtIpcMemSetImportPid` (`pids` is non-empty).
pub fn set_pids(key: &[u8], pids: &[i32]) -> AclResult<()> {
    let id = resolve(key)?;
    let me = process_state::me()?;
    process_state::registry()?.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::MemKey)?;
        check(m.info().exporter != me, rules::ONLY_EXPORTER_TRUSTS, || {
            format!(
                "only the exporting process (pid {}) sets the key's trustlist",
                m.info().exporter.pid
            )
        })?;
        Ok(m.trust(pids)?)
    })
}

/// `aclrtIpcMemImportByKey`: the imported address.
pub fn import(key: &[u8], flags: u64) -> AclResult<usize> {
    check(
        flags & !ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS != 0,
        rules::KEY_FLAGS,
        || format!("flags {flags:#x} is not DEFAULT (0) or ENABLE_PEER_ACCESS (0x1)"),
    )?;
    let current = device::require_current("aclrtIpcMemImportByKey")?;
    let id = resolve(key)?;
    let me = process_state::me()?;
    let reg = process_state::registry()?;
    if !rules::enforced(rules::KEY_REPEAT_IMPORT)
        && keys().get(&id).is_some_and(|k| !k.imports.is_empty())
    {
        return Err(AclFailure {
            code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
            rule: Some(rules::KEY_REPEAT_IMPORT),
            message: "this process already imported the key (repeat imports are switched off by DEVIPC_EMU_BREAK_RULE)".into(),
        });
    }
    let peer_flag = flags & ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS != 0;
    let (memory, offset, size, owner) = reg.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::MemKey)?;
        let info = *m.info();
        // Destroyed by its exporter, or gone with it (a dead exporter's hold was reclaimed
        // on this touch; the driver destroys the names of a process that exits).
        if m.flags.contains(ObjectFlags::CLOSED) || m.hold_count(info.exporter) == 0 {
            return Err(unknown_key());
        }
        let trusted = info.exporter == me || m.is_trusted(me.pid);
        check(!trusted, rules::KEY_TRUSTLIST, || {
            format!(
                "pid {} is not on the key's trustlist (aclrtIpcMemSetImportPid), and the key was not exported with DISABLE_PID_VALIDATION",
                me.pid
            )
        })?;
        check(
            info.device != current && !peer_flag && !device::peer_enabled(current, info.device),
            rules::KEY_CROSS_DEVICE,
            || {
                format!(
                    "the memory is on device {} and the current device is {current}: pass ENABLE_PEER_ACCESS or enable peer access {current} -> {} first",
                    info.device, info.device
                )
            },
        )?;
        if info.device != current && peer_flag {
            // ENABLE_PEER_ACCESS enables peer access, which the topology may not allow.
            device::check_topology(current, info.device)?;
        }
        let parent = info.parent.ok_or_else(|| EmuError::InvalidArgument("key without memory".into()))?;
        m.add_holder(me)?;
        Ok::<_, AclFailure>((parent, info.offset, info.size, info.device))
    })?;
    if owner != current && peer_flag {
        device::enable_peer(current, owner);
    }
    let undo_key = |e: AclFailure| {
        let _ = reg.release(id, me);
        e
    };
    let block = reg.acquire(memory, me).map_err(|e| undo_key(e.into()))?;
    let undo_both = |e: AclFailure| {
        let _ = reg.release(memory, me);
        undo_key(e)
    };
    if block.flags.contains(ObjectFlags::REVOKED) {
        // The exporter freed the block under earlier importers: nothing to map.
        return Err(undo_both(AclFailure::rule(
            rules::HANDLE_VALID,
            "the block under the key was freed by its exporter",
        )));
    }
    let mapping = reg
        .open_segment(memory)
        .and_then(|s| s.map())
        .map_err(|e| undo_both(e.into()))?;
    let (offset, size) = match (usize::try_from(offset), usize::try_from(size)) {
        (Ok(o), Ok(s)) if o.checked_add(s).is_some_and(|end| end <= mapping.len()) => (o, s),
        _ => {
            return Err(undo_both(
                EmuError::InvalidArgument("key range outside its block".into()).into(),
            ));
        }
    };
    let addr = mapping.addr() + offset;
    let range = DeviceRange {
        device: owner,
        backing: Backing::KeyImport {
            key: id,
            memory,
            imported_on: current,
            mapping: Arc::new(mapping),
        },
    };
    RANGES
        .insert(addr, size, range)
        .map_err(|e| undo_both(e.into()))?;
    keys().entry(id).or_default().imports.push(addr);
    Ok(addr)
}

/// What `aclrtIpcMemClose` does in this process.
enum Close {
    /// Unmap the import at this address.
    Import(usize),
    /// Destroy the exported key.
    Destroy,
}

/// `aclrtIpcMemClose`.
pub fn close(key: &[u8]) -> AclResult<()> {
    device::require_current("aclrtIpcMemClose")?;
    let id = resolve(key)?;
    let me = process_state::me()?;
    let reg = process_state::registry()?;
    let action = {
        let mut keys = keys();
        match keys.get_mut(&id) {
            Some(k) => match take_import(&mut k.imports) {
                Some(addr) => Close::Import(addr),
                None if k.exported => Close::Destroy,
                None => {
                    keys.remove(&id);
                    return Err(unknown_key());
                }
            },
            None => return Err(unknown_key()),
        }
    };
    match action {
        Close::Import(addr) => {
            let removed = RANGES.remove(addr);
            forget_if_unused(id);
            let memory = match removed.map(|r| r.value.backing) {
                Some(Backing::KeyImport { memory, .. }) => Some(memory),
                _ => None,
            };
            // Release both holds even if one fails (the key may have been destroyed by an
            // exporter that did not wait: rule switched off).
            let key_released = reg.release(id, me);
            if let Some(memory) = memory {
                reg.release(memory, me)?;
            }
            key_released?;
            Ok(())
        }
        Close::Destroy => {
            // The key is destroyed: nobody imports it any more. Importers that still map
            // it keep their holds, so their own closes succeed.
            let others = reg.update(id, |m| {
                let others: u32 = m
                    .holders()
                    .iter()
                    .filter(|h| h.process != me)
                    .map(|h| h.count)
                    .sum();
                m.flags.insert(ObjectFlags::CLOSED);
                m.remove_holder(me)?;
                Ok::<_, AclFailure>(others)
            });
            if let Some(k) = keys().get_mut(&id) {
                k.exported = false;
            }
            forget_if_unused(id);
            let others = others?;
            if others > 0 && rules::enforced(rules::KEY_IMPORTERS_CLOSE_FIRST) {
                // Undefined on a device ("exceptions may occur"): the importers' copies
                // now fail, and the violation is recorded.
                reg.revoke(
                    id,
                    rules::KEY_IMPORTERS_CLOSE_FIRST,
                    &format!(
                        "the exporter destroyed the key while {others} import(s) by other processes were still open"
                    ),
                )?;
            }
            Ok(())
        }
    }
}

/// The import an `aclrtIpcMemClose` closes: the oldest (`vaList.front()` in the runtime),
/// or with `ascend.ipc-key.close-unmaps-oldest-import` switched off the newest.
fn take_import(imports: &mut Vec<usize>) -> Option<usize> {
    if imports.is_empty() {
        None
    } else if rules::enforced(rules::KEY_CLOSE_OLDEST) {
        Some(imports.remove(0))
    } else {
        imports.pop()
    }
}

fn forget_if_unused(id: ObjectId) {
    let mut keys = keys();
    if keys
        .get(&id)
        .is_some_and(|k| !k.exported && k.imports.is_empty())
    {
        keys.remove(&id);
    }
}

fn unknown_key() -> AclFailure {
    AclFailure::rule(
        rules::HANDLE_VALID,
        "the key was neither exported nor imported by this process (or is already closed)",
    )
}
