//! HIP runtime queries that need no device (api-facts B.1-B.5): the runtime version,
//! error names and `hipInit` flags, so a machine with the runtime but no GPU still checks
//! something real.

use devipc_hip_sys::{hipErrorInvalidValue, ipc_mem_lazy_enable_peer_access};

use super::{H, INVALID_VALUE};
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::Failure;

/// The runtime-query rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.runtime.version-reported",
        H,
        "hipRuntimeGetVersion works without a device and writes HIP_VERSION (major * 10^7 + \
         minor * 10^5 + patch); a NULL pointer is hipErrorInvalidValue",
        "HIP header hip_runtime_api.h (hipRuntimeGetVersion); api-facts B.2, B.3; DESIGN 8",
        Expect::Behaviour,
        &[Need::LibraryOnly],
        runtime_version,
    ),
    vendor(
        "hip.error.names-match-codes",
        H,
        "hipGetErrorName gives the documented name of every code the IPC rules rely on, and \
         hipErrorUnknown for a code the runtime does not define",
        "HIP header hip_runtime_api.h (hipError_t); api-facts B.5",
        Expect::Behaviour,
        &[Need::LibraryOnly],
        error_names,
    ),
    vendor(
        "hip.init.flags-must-be-zero",
        H,
        "hipInit accepts only flags == 0; anything else is hipErrorInvalidValue",
        "api-facts B.1; CLR hipamd/src/hip_context.cpp (hipInit)",
        INVALID_VALUE,
        &[],
        init_flags,
    ),
];

fn runtime_version(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let v = h.version().step("hipRuntimeGetVersion")?;
    let decoded = devipc_core::RuntimeVersion::from_hip_encoded(v)
        .ok_or_else(|| Stop::fail(format!("hipRuntimeGetVersion wrote {v}")))?;
    ensure(decoded.major >= 4, || {
        format!("runtime version {decoded} ({v}) is older than any HIP with IPC")
    })?;
    let null = h.version_null();
    match null {
        Err(Failure::Vendor { code, .. }) if code == hipErrorInvalidValue => {}
        other => {
            return Err(Stop::fail(format!(
                "hipRuntimeGetVersion(NULL) gave {other:?}, expected hipErrorInvalidValue"
            )));
        }
    }
    Ok(format!(
        "HIP {decoded} ({v}); lazy-enable flag {}; NULL is hipErrorInvalidValue",
        ipc_mem_lazy_enable_peer_access(v)
    ))
}

fn error_names(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    // The codes devipc's IPC paths and rules name (api-facts B.5), defined since HIP 4.
    const CODES: &[i32] = &[
        0, 1, 2, 9, 17, 100, 101, 201, 205, 400, 500, 600, 704, 705, 801, 999,
    ];
    let mut wrong = Vec::new();
    for &code in CODES {
        let want = devipc_hip_sys::error_name(code).unwrap_or("?");
        let got = h.error_name(code).step("hipGetErrorName")?;
        if got != want {
            wrong.push(format!("{code}: runtime says {got}, devipc says {want}"));
        }
    }
    let unknown = h.error_name(123_456).step("hipGetErrorName(123456)")?;
    if unknown != "hipErrorUnknown" {
        wrong.push(format!(
            "123456: runtime says {unknown}, expected hipErrorUnknown"
        ));
    }
    if !wrong.is_empty() {
        return Err(Stop::fail(wrong.join("; ")));
    }
    Ok(format!(
        "{} codes named as documented; unknown codes are hipErrorUnknown",
        CODES.len()
    ))
}

fn init_flags(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let seen = ctx.refused("hipInit(1)", h.init(1))?;
    h.init(0).step("hipInit(0)")?;
    Ok(format!("{seen}; hipInit(0) succeeds"))
}
