//! Ascend handle validity: a notify destroyed twice, a physical handle freed twice and an
//! unknown shareable handle are refused (emulator-only: undefined on a real runtime).

use super::{A, UNDEFINED_HANDLES};
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};

/// The handle-validity rule.
pub(super) static RULES: &[Rule] = &[vendor(
    "ascend.handle.valid",
    A,
    "stale or unknown objects are refused: a notify destroyed twice, a physical handle \
         freed twice, an unknown shareable handle; the first destroy and free succeed",
    "api-facts A.11 (DRV_ERROR_INVALID_HANDLE -> 107017)",
    Expect::Refused,
    &[Need::EmulatorOnly(UNDEFINED_HANDLES)],
    handle_valid,
)];

fn handle_valid(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    a.notify_destroy(n).step("the first aclrtDestroyNotify")?;
    let notify = ctx.refused("aclrtDestroyNotify again", a.notify_destroy(n))?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let phys = a.phys_alloc(0, g).step("aclrtMallocPhysical")?;
    a.phys_free(phys).step("the first aclrtFreePhysical")?;
    let freed = ctx.refused("aclrtFreePhysical again", a.phys_free(phys))?;
    let unknown = a.vmm_import(0x7fff_0000_dead_beef, 0);
    if let Ok(p) = unknown {
        let _ = a.phys_free(p);
    }
    let unknown = ctx.refused("import of an unknown shareable handle", unknown)?;
    Ok(format!(
        "{notify}; {freed}; {unknown}; the first destroy and free succeed"
    ))
}
