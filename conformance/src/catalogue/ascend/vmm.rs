//! Ascend VMM shareable-handle rules (api-facts A.6, C.5): export, trustlist, import and
//! lifetime of physical memory shared through `aclrtMemExportToShareableHandle`.

use devipc_ascend_sys::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_INVALID_DEVICEID};
use devipc_ascend_sys::consts::{
    ACL_RT_VMM_EXPORT_FLAG_DEFAULT, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};

use super::{
    A, CHECK, CROSS_DEVICE_UNDOCUMENTED, TWO_DEVICES, exported, import_map, peer_on, trust,
    unmap_free,
};
use crate::catalogue::{Step, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::{Pids, VendorClient};

/// The VMM shareable-handle rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.vmm.export-import-shares-memory",
        A,
        "a physical allocation exported with aclrtMemExportToShareableHandle and imported by a \
         trusted process maps the same bytes in both, in both directions",
        "CANN RT-DOC 11-04 virtual memory management (documented flow); api-facts C.5",
        Expect::Behaviour,
        &[],
        vmm_shares_memory,
    ),
    vendor(
        "ascend.vmm.trustlist-required",
        A,
        "with DEFAULT flags only processes set by aclrtMemSetPidToShareableHandle may import; \
         after the exporter adds the importer, its import succeeds",
        "CANN RT-DOC 11-04; api-facts A.6, C.5",
        Expect::Refused,
        &[],
        vmm_trustlist,
    ),
    vendor(
        "ascend.vmm.disable-pid-validation",
        A,
        "a handle exported with ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION (0x1) is importable \
         by any process without a trustlist",
        "CANN RT-DOC 11-04; api-facts A.6 (ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)",
        Expect::Behaviour,
        &[],
        vmm_disable_pid_validation,
    ),
    vendor(
        "ascend.vmm.same-process-import-rejected",
        A,
        "aclrtMemImportFromShareableHandle in the process that exported the handle is refused \
         (only cross-process use is supported)",
        "CANN RT-DOC 11-04 virtual memory management; api-facts C.5",
        Expect::Refused,
        &[],
        vmm_same_process,
    ),
    vendor(
        "ascend.vmm.one-import-per-process",
        A,
        "a process imports a shareable handle once: a second import in the same process is \
         refused (no one-to-many mapping on the import side)",
        "CANN RT-DOC 11-04; api-facts C.5 (one-to-one mapping)",
        Expect::Refused,
        &[],
        vmm_double_import,
    ),
    vendor(
        "ascend.vmm.one-export-per-handle",
        A,
        "a physical handle is exported once: exporting the same handle again is refused",
        "CANN RT-DOC 11-04; api-facts C.5 (one-to-one mapping)",
        Expect::Refused,
        &[],
        vmm_double_export,
    ),
    vendor(
        "ascend.vmm.device-range-checked",
        A,
        "aclrtMemImportFromShareableHandle with a device id outside 0..count fails with \
         ACL_ERROR_RT_INVALID_DEVICEID",
        "api-facts A.6, A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)",
        Expect::Code(
            "ACL_ERROR_RT_INVALID_DEVICEID",
            ACL_ERROR_RT_INVALID_DEVICEID,
        ),
        &[],
        vmm_device_range,
    ),
    vendor(
        "ascend.vmm.lifetime-until-all-freed",
        A,
        "physical memory lives until every process that allocated or imported it called \
         aclrtFreePhysical: the importer keeps reading and writing after the exporter freed",
        "CANN RT-DOC 11-04 (memory is released when all processes freed it); api-facts C.5",
        Expect::Behaviour,
        &[],
        vmm_lifetime,
    ),
    vendor(
        "ascend.vmm.cross-device-import-with-peer-access",
        A,
        "with aclrtDeviceEnablePeerAccess to the exporter's device, a process imports and maps a \
         shareable handle on another device and sees the bytes",
        "CANN RT-DOC 11-04 (cross-device use needs peer access); api-facts C.5, A.10",
        Expect::Behaviour,
        TWO_DEVICES,
        vmm_cross_device,
    ),
    vendor(
        "ascend.vmm.cross-device-needs-peer-access",
        A,
        "importing a shareable handle on another device without peer access is refused",
        "CANN RT-DOC 11-04; api-facts C.5",
        Expect::Refused,
        &[
            Need::Devices(2),
            Need::EmulatorOnly(CROSS_DEVICE_UNDOCUMENTED),
        ],
        vmm_cross_device_without_peer,
    ),
    vendor(
        "ascend.vmm.set-pid-needs-pids",
        A,
        "aclrtMemSetPidToShareableHandle rejects a NULL pid array and a pid count of 0 with \
         ACL_ERROR_INVALID_PARAM",
        "api-facts A.6 (RT-SRC memory.cpp)",
        Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM),
        &[],
        vmm_set_pid_args,
    ),
];

fn vmm_shares_memory(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("aclrtMemSetPidToShareableHandle")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("importer read")?,
        &pattern(1, CHECK),
    )?;
    b.write(va + 128, &pattern(2, 64)).step("importer write")?;
    same_bytes(
        "exporter reads the importer's bytes",
        &a.read(vmm.va + 128, 64).step("exporter read")?,
        &pattern(2, 64),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("freeing the allocation")?;
    Ok(format!(
        "{} bytes shared both ways through shareable handle {sh:#x}",
        vmm.size
    ))
}

fn vmm_trustlist(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    let seen = ctx.refused("import without the trustlist", b.vmm_import(sh, 0))?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("aclrtMemSetPidToShareableHandle")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "granted importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; after the grant the import succeeds"))
}

fn vmm_disable_pid_validation(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok("an ungranted process imported the 0x1-flagged handle".into())
}

fn vmm_same_process(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &Pids::List(vec![me, pid]))
        .step("trusting this process and the peer")?;
    let result = a.vmm_import(sh, 0);
    if let Ok(phys) = result {
        let _ = a.phys_free(phys);
    }
    let seen = ctx.refused("import in the exporting process", result)?;
    // Positive control: the same import from another process succeeds.
    let phys = b.vmm_import(sh, 0).step("the peer's import")?;
    b.phys_free(phys).step("the peer's free")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!(
        "{seen}; the same import in another process succeeds"
    ))
}

fn vmm_double_import(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let first = b.vmm_import(sh, 0).step("first import")?;
    let second = b.vmm_import(sh, 0);
    if let Ok(p) = second {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused("second import in the same process", second)?;
    b.phys_free(first).step("freeing the first import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(seen)
}

fn vmm_double_export(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let seen = ctx.refused(
        "second export of the same handle",
        a.vmm_export(vmm.phys, ACL_RT_VMM_EXPORT_FLAG_DEFAULT),
    )?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("first export gave {sh:#x}; {seen}"))
}

fn vmm_device_range(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let count = b.device_count().step("aclrtGetDeviceCount")?;
    let result = b.vmm_import(sh, count as i32);
    if let Ok(p) = result {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused(&format!("import on device {count} of {count}"), result)?;
    let phys = b.vmm_import(sh, 0).step("import on device 0")?;
    b.phys_free(phys).step("free the import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; on device 0 the import succeeds"))
}

fn vmm_lifetime(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    a.vmm_free(vmm)
        .step("the exporter's unmap and aclrtFreePhysical")?;
    same_bytes(
        "importer reads after the exporter freed",
        &b.read(va, CHECK).step("read after the exporter's free")?,
        &pattern(1, CHECK),
    )?;
    b.write(va, &pattern(3, CHECK))
        .step("write after the exporter's free")?;
    same_bytes(
        "importer reads back its write",
        &b.read(va, CHECK).step("read back")?,
        &pattern(3, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    Ok("the import stayed usable after the exporter freed its handle".into())
}

fn vmm_cross_device(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    b.enable_peer(0)
        .step("aclrtDeviceEnablePeerAccess(1 -> 0)")?;
    let (phys, va) = import_map(&mut b, sh, 1, vmm.size)?;
    same_bytes(
        "device-1 importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok("imported on device 1 from device 0 with peer access".into())
}

fn vmm_cross_device_without_peer(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let result = b.vmm_import(sh, 1);
    if let Ok(p) = result {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused("import on device 1 without peer access", result)?;
    b.enable_peer(0)
        .step("aclrtDeviceEnablePeerAccess(1 -> 0)")?;
    let phys = b
        .vmm_import(sh, 1)
        .step("import on device 1 with peer access")?;
    b.phys_free(phys).step("free the import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; with peer access the import succeeds"))
}

fn vmm_set_pid_args(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let null = ctx.refused("NULL pid array", a.vmm_set_pid(sh, &Pids::Null))?;
    let empty = ctx.refused("pidNum 0", a.vmm_set_pid(sh, &Pids::List(Vec::new())))?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    a.vmm_set_pid(sh, &trust(me))
        .step("aclrtMemSetPidToShareableHandle with one pid")?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{null}; {empty}; one pid succeeds"))
}
