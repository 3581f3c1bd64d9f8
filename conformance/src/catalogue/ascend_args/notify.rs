//! Ascend notify key flags (api-facts A.8, C.6): the memory flag 0x1 is not a notify
//! flag, on export or on import.

use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};

use super::A;
use crate::catalogue::ascend::peer_on;
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};

/// The notify flag rule.
pub(super) static RULES: &[Rule] = &[vendor(
    "ascend.notify.flags-valid",
    A,
    "the memory flag 0x1 is not a notify flag: aclrtNotifyGetExportKey and \
         aclrtNotifyImportByKey with 0x1 are refused; the export with 0x02 \
         (DISABLE_PID_VALIDATION) and the import with 0 succeed",
    "api-facts A.8, C.6 (the notify flags are 0x02, not 0x1)",
    Expect::Refused,
    &[Need::EmulatorOnly(
        "api-facts A.8 defines only 0x0 and 0x02; no vendor document says 0x1 is refused \
             rather than ignored",
    )],
    notify_flags,
)];

fn notify_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let export = ctx.refused(
        "aclrtNotifyGetExportKey flags 0x1",
        a.notify_export(n, ACL_IPC_KEY_LEN, 1),
    )?;
    let key = a
        .notify_export(
            n,
            ACL_IPC_KEY_LEN,
            ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
        )
        .step("aclrtNotifyGetExportKey flags 0x02")?;
    peer_on(&mut b, 0)?;
    let bad = b.notify_import(&key, 1);
    if let Ok(nb) = bad {
        let _ = b.notify_destroy(nb);
    }
    let import = ctx.refused("aclrtNotifyImportByKey flags 0x1", bad)?;
    // The positive control imports with 0 (0x02, ENABLE_PEER_ACCESS, is the rule
    // ascend.notify.import-flags-0-to-3).
    let nb = b
        .notify_import(&key, 0)
        .step("aclrtNotifyImportByKey flags 0")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "{export}; {import}; the export with 0x02 and the import with 0 succeed"
    ))
}
