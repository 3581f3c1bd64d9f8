//! Ascend trustlist ownership: only the exporter of a VMM shareable handle, an IPC key or
//! a notify key may set its trustlist.

use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use super::{A, BLOCK};
use crate::catalogue::ascend::{peer_on, trust};
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::VendorClient;

/// The trustlist-ownership rule.
pub(super) static RULES: &[Rule] = &[vendor(
    "ascend.ipc.only-exporter-sets-trustlist",
    A,
    "only the exporter sets a trustlist: an importer's aclrtMemSetPidToShareableHandle, \
         aclrtIpcMemSetImportPid and aclrtNotifySetImportPid are refused, while the \
         exporter's succeed",
    "api-facts C.4, C.5, C.6 (in the documented flows the exporter grants)",
    Expect::Refused,
    &[Need::EmulatorOnly(
        "the vendor's flows have the exporter grant, but no document says another \
             process's grant is refused",
    )],
    only_exporter_trusts,
)];

fn only_exporter_trusts(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    a.set_device(0).step("aclrtSetDevice")?;
    let pid = peer_on(&mut b, 0)?;
    // VMM shareable handle.
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    let sh = a.vmm_export(vmm.phys, 0).step("export")?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("the exporter's aclrtMemSetPidToShareableHandle")?;
    let phys = b.vmm_import(sh, 0).step("import")?;
    let vmm_seen = ctx.refused(
        "the importer's aclrtMemSetPidToShareableHandle",
        b.vmm_set_pid(sh, &trust(pid)),
    )?;
    b.phys_free(phys).step("importer free")?;
    a.vmm_free(vmm).step("free")?;
    // IPC key.
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("aclrtIpcMemGetExportKey")?;
    a.key_set_pid(&key, &trust(pid))
        .step("the exporter's aclrtIpcMemSetImportPid")?;
    b.key_import(&key, 0).step("key import")?;
    let key_seen = ctx.refused(
        "the importer's aclrtIpcMemSetImportPid",
        b.key_set_pid(&key, &trust(pid)),
    )?;
    b.key_close(&key).step("importer close")?;
    a.key_close(&key).step("exporter close")?;
    a.free(p).step("aclrtFree")?;
    // Notify.
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let nkey = a
        .notify_export(n, ACL_IPC_KEY_LEN, 0)
        .step("aclrtNotifyGetExportKey")?;
    a.notify_set_pid(n, &trust(pid))
        .step("the exporter's aclrtNotifySetImportPid")?;
    let nb = b.notify_import(&nkey, 0).step("notify import")?;
    let notify_seen = ctx.refused(
        "the importer's aclrtNotifySetImportPid",
        b.notify_set_pid(nb, &trust(pid)),
    )?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "{vmm_seen}; {key_seen}; {notify_seen}; the exporter's grants succeed"
    ))
}
