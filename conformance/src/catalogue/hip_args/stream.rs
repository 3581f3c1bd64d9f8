//! The HIP stream rule added for mutation completeness: `hipStreamWaitEvent`'s flags.

use devipc_hip_sys::{hipErrorInvalidValue, hipEventDisableTiming};

use super::H;
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};

/// The stream rules.
pub static RULES: &[Rule] = &[vendor(
    "hip.stream.wait-event-flags-must-be-zero",
    H,
    "hipStreamWaitEvent with flags 1 is hipErrorInvalidValue; with flags 0 it succeeds",
    "HIP header doc (hipStreamWaitEvent: flags must be 0); api-facts B.3",
    Expect::Code("hipErrorInvalidValue", hipErrorInvalidValue),
    &[],
    stream_wait_flags,
)];

fn stream_wait_flags(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let e = h
        .event_create(hipEventDisableTiming)
        .step("hipEventCreateWithFlags")?;
    h.event_record(e).step("hipEventRecord")?;
    let seen = ctx.refused("hipStreamWaitEvent(NULL, e, 1)", h.stream_wait_event(e, 1))?;
    h.stream_wait_event(e, 0)
        .step("hipStreamWaitEvent(NULL, e, 0)")?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok(format!("{seen}; flags 0 succeed"))
}
