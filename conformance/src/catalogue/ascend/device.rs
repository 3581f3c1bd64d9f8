//! Ascend device and context rules (api-facts A.11, C.4): a thread needs a device
//! context, and device ids are range-checked.

use devipc_ascend_sys::codes::{ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_INVALID_DEVICEID};
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use super::{A, KEY_BLOCK, key_release};
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::VendorClient;

/// The device and context rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.context.set-device-required",
        A,
        "IPC key export from a thread without a device context (no aclrtSetDevice) fails with \
         ACL_ERROR_RT_CONTEXT_NULL",
        "api-facts C.4 (RT-SRC: RT_ERROR_CONTEXT_NULL -> 107002), A.11",
        Expect::Code("ACL_ERROR_RT_CONTEXT_NULL", ACL_ERROR_RT_CONTEXT_NULL),
        &[],
        context_required,
    ),
    vendor(
        "ascend.device.id-range-checked",
        A,
        "aclrtSetDevice with a device id outside 0..aclrtGetDeviceCount fails with \
         ACL_ERROR_RT_INVALID_DEVICEID",
        "api-facts A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)",
        Expect::Code(
            "ACL_ERROR_RT_INVALID_DEVICEID",
            ACL_ERROR_RT_INVALID_DEVICEID,
        ),
        &[],
        device_range,
    ),
];

fn context_required(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    let seen = ctx.refused(
        "export from a thread without a context",
        a.key_export_no_context(p, KEY_BLOCK),
    )?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export from the thread that set the device")?;
    key_release(&mut a, p, &key)?;
    Ok(format!(
        "{seen}; from the thread with a context the export succeeds"
    ))
}

fn device_range(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let count = a.device_count().step("aclrtGetDeviceCount")?;
    let seen = ctx.refused(&format!("aclrtSetDevice({count})"), a.set_device(count))?;
    let last = count
        .checked_sub(1)
        .ok_or_else(|| Stop::fail("no device"))?;
    a.set_device(last)
        .step(&format!("aclrtSetDevice({last})"))?;
    Ok(format!("{seen}; aclrtSetDevice({last}) succeeds"))
}
