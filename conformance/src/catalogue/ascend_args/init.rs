//! Ascend `aclInit`/`aclFinalize` counting (api-facts A.3): a repeated initialise is
//! counted, a repeated finalise is refused.

use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE};

use super::A;
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};

/// The init-counting rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.init.repeat-initialize-counted",
        A,
        "aclInit is reference counted: a second aclInit in the process returns \
         ACL_ERROR_REPEAT_INITIALIZE and counts, so two aclFinalize calls succeed after it",
        "api-facts A.3 (RT-SRC acl.cpp)",
        Expect::Code("ACL_ERROR_REPEAT_INITIALIZE", ACL_ERROR_REPEAT_INITIALIZE),
        &[],
        init_counted,
    ),
    vendor(
        "ascend.init.repeat-finalize",
        A,
        "aclFinalize balancing the process's aclInit succeeds; one more is \
         ACL_ERROR_REPEAT_FINALIZE",
        "api-facts A.3 (RT-SRC acl.cpp)",
        Expect::Code("ACL_ERROR_REPEAT_FINALIZE", ACL_ERROR_REPEAT_FINALIZE),
        &[],
        finalize_repeat,
    ),
];

fn init_counted(ctx: &mut Ctx) -> Verdict {
    // The shell's start called aclInit (the process's first, count 1).
    let mut a = ctx.acl()?;
    let seen = ctx.refused("a second aclInit", a.init())?;
    a.finalize().step("the first aclFinalize")?;
    a.finalize()
        .step("the second aclFinalize (the repeated aclInit must have counted)")?;
    Ok(format!("{seen}; it counted: two aclFinalize calls succeed"))
}

fn finalize_repeat(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.finalize()
        .step("aclFinalize balancing the process's aclInit")?;
    let seen = ctx.refused("aclFinalize once more", a.finalize())?;
    Ok(format!("the balancing aclFinalize succeeds; {seen}"))
}
