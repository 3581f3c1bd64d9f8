//! VMM IPC (V1): `aclrtMemExportToShareableHandle`, `aclrtMemSetPidToShareableHandle`,
//! `aclrtMemImportFromShareableHandle`, and the release of a physical handle's hold.
//!
//! The shareable handle is the memory object's raw id ([`crate::handle`]). Rules
//! (api-facts A.6, C.5; codes in [`super::rules`]):
//!
//! - export: `handleType` must be `ACL_MEM_HANDLE_TYPE_NONE` (100000); `flags` DEFAULT or
//!   `DISABLE_PID_VALIDATION` (0x1); a handle is exported once, and an imported handle is
//!   not re-exported (`ascend.vmm.one-export-per-handle`);
//! - set pid: a non-empty pid list (100000 otherwise), added to the trustlist by the
//!   exporting process only;
//! - import(handle, deviceId): `deviceId` valid (107001); not in the exporting process
//!   (`ascend.vmm.same-process-import-rejected`); once per process until that import is
//!   freed (`ascend.vmm.one-import-per-process`); the importer's pid on the trustlist
//!   unless exported with `DISABLE_PID_VALIDATION` (`ascend.vmm.trustlist-required`); on a
//!   device other than the exporter's only with peer access from `deviceId` to the
//!   exporter's device enabled in this process
//!   (`ascend.vmm.cross-device-needs-peer-access`). Each check and the new hold happen in
//!   one registry update, atomically.
//! - lifetime: every import holds the memory; `aclrtFreePhysical` in any process gives up
//!   only that process's hold, so memory lives until all freed it
//!   (`ascend.vmm.lifetime-until-all-freed`). With that rule switched off, the exporter's
//!   free destroys the memory for everyone, as a runtime without the rule would.

use std::collections::BTreeMap;

use devipc_ascend_sys::consts::ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
use devipc_ascend_sys::types::{ACL_MEM_HANDLE_TYPE_NONE, aclrtMemHandleType};

use crate::error::EmuError;
use crate::local::{ForkGuard, ForkLocal, forget_inherited};
use crate::state::{ObjectFlags, ObjectId, ObjectKind, Vendor};

use super::errors::{AclFailure, AclResult, check};
use super::vmm::{PHYSICAL, Physical};
use super::{device, process_state, rules};

/// Shareable handles this process imported (or is importing), with how many live
/// imports each has (more than one only with `ascend.vmm.one-import-per-process` off). A
/// forked child starts with none: the one-import rule is per process (audit m9).
static IMPORTED: ForkLocal<BTreeMap<ObjectId, u32>> = ForkLocal::new(forget_inherited);

fn imported() -> ForkGuard<'static, BTreeMap<ObjectId, u32>> {
    IMPORTED.lock()
}

fn forget_import(id: ObjectId) {
    let mut map = imported();
    if let Some(n) = map.get_mut(&id) {
        *n -= 1;
        if *n == 0 {
            map.remove(&id);
        }
    }
}

/// `aclrtMemExportToShareableHandle`: returns the shareable handle.
pub fn export(handle: usize, handle_type: aclrtMemHandleType, flags: u64) -> AclResult<u64> {
    check(
        handle_type != ACL_MEM_HANDLE_TYPE_NONE,
        rules::VMM_HANDLE_TYPE_NONE,
        || format!("handleType {handle_type} is not ACL_MEM_HANDLE_TYPE_NONE"),
    )?;
    check(
        flags & !ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0,
        rules::VMM_EXPORT_FLAGS,
        || format!("flags {flags:#x} is not DEFAULT (0) or DISABLE_PID_VALIDATION (0x1)"),
    )?;
    let p = PHYSICAL.get(handle)?;
    if p.freed {
        return Err(AclFailure::rule(
            rules::HANDLE_VALID,
            format!("handle {handle:#x} was freed"),
        ));
    }
    check(p.imported, rules::VMM_ONE_EXPORT, || {
        format!(
            "handle {handle:#x} was imported from a shareable handle; it cannot be exported again"
        )
    })?;
    process_state::registry()?.update(p.id, |m| {
        check(
            m.flags.contains(ObjectFlags::EXPORTED),
            rules::VMM_ONE_EXPORT,
            || {
                format!(
                    "handle {handle:#x} was already exported as shareable handle {}",
                    p.id.raw()
                )
            },
        )?;
        m.flags.insert(ObjectFlags::EXPORTED);
        if flags & ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0 {
            m.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
        }
        Ok::<_, AclFailure>(())
    })?;
    Ok(p.id.raw())
}

/// `aclrtMemSetPidToShareableHandle` (`pids` is non-empty).
pub fn set_pids(shareable: u64, pids: &[i32]) -> AclResult<()> {
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let id = reg.resolve(shareable)?;
    reg.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::Memory)?;
        if !m.flags.contains(ObjectFlags::EXPORTED) {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                format!("{shareable} is not an exported shareable handle"),
            ));
        }
        check(m.info().exporter != me, rules::ONLY_EXPORTER_TRUSTS, || {
            format!(
                "only the exporting process (pid {}) sets the trustlist of shareable handle {shareable}",
                m.info().exporter.pid
            )
        })?;
        Ok(m.trust(pids)?)
    })
}

/// `aclrtMemImportFromShareableHandle`: returns the new physical handle.
pub fn import(shareable: u64, device_id: i32) -> AclResult<usize> {
    let device = device::check_id_as(device_id, rules::VMM_DEVICE_RANGE)?;
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let id = reg.resolve(shareable)?;
    {
        let mut map = imported();
        let n = map.entry(id).or_insert(0);
        if *n > 0 {
            check(true, rules::VMM_ONE_IMPORT, || {
                format!(
                    "this process already imported shareable handle {shareable} (free that import first)"
                )
            })?;
        }
        *n += 1;
    }
    let result = reg.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::Memory)?;
        if !m.flags.contains(ObjectFlags::EXPORTED) {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                format!("{shareable} is not an exported shareable handle"),
            ));
        }
        let info = *m.info();
        check(info.exporter == me, rules::VMM_SAME_PROCESS, || {
            format!("shareable handle {shareable} was exported by this process (pid {}); import it in another process", me.pid)
        })?;
        check(!m.is_trusted(me.pid), rules::VMM_TRUSTLIST, || {
            format!(
                "pid {} is not on the trustlist of shareable handle {shareable} (set it with aclrtMemSetPidToShareableHandle, or export with DISABLE_PID_VALIDATION)",
                me.pid
            )
        })?;
        check(
            info.device != device && !device::peer_enabled(device, info.device),
            rules::VMM_CROSS_DEVICE,
            || {
                format!(
                    "the memory is on device {} and is imported on device {device}: enable peer access {device} -> {} first",
                    info.device, info.device
                )
            },
        )?;
        m.add_holder(me)?;
        Ok::<_, AclFailure>(info.size)
    });
    let inserted = result.and_then(|size| {
        let physical = Physical {
            id,
            device,
            size: usize::try_from(size).map_err(|_| EmuError::InvalidArgument("size".into()))?,
            imported: true,
            freed: false,
            maps: 0,
        };
        PHYSICAL.insert(physical).map_err(|e| {
            let _ = reg.release(id, me);
            AclFailure::from(e)
        })
    });
    if inserted.is_err() {
        forget_import(id);
    }
    inserted
}

/// Gives up this process's hold of a physical handle's memory (its last use ended:
/// freed and unmapped).
pub fn release_hold(p: &Physical) -> AclResult<()> {
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    if p.imported {
        forget_import(p.id);
    } else if !rules::enforced(rules::VMM_LIFETIME) {
        // Rule switched off: the allocator's free destroys the memory for everyone.
        return Ok(reg.update(p.id, |m| {
            m.clear_holders();
            Ok::<_, EmuError>(())
        })?);
    }
    reg.release(p.id, me)?;
    Ok(())
}
