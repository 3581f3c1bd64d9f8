//! Ascend device ids and identity (issue 16): `ASCEND_RT_VISIBLE_DEVICES` renumbers the
//! devices a process sees (user ids), the runtime translates user, logical and physical
//! ids, and a device's UUID is the same in every process.
//!
//! The masked peer is started with `ASCEND_RT_VISIBLE_DEVICES=1`: its user device 0 is
//! logical device 1 (the CANN reference of `aclrtGetLogicDevIdByUserDevId`), which is this
//! process's user device 1 when this process has no mask. The functions are CANN 8.x: an
//! older runtime lacks them and the rules are skipped there.

use devipc_ascend_sys::codes::ACL_ERROR_RT_INVALID_DEVICEID;

use super::A;
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::Failure;
use crate::shell::acl::IdTranslation;

/// The device-id rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.device.visible-devices-applied",
        A,
        "a process started with ASCEND_RT_VISIBLE_DEVICES=1 sees one device: its user device 0 \
         is logical device 1 and has the UUID of this process's device 1",
        "CANN reference aclrtGetLogicDevIdByUserDevId (user, logical and physical ids); \
         hicann/runtime rt_utest_runtime.cc (GetVisibleDevices); DESIGN 9",
        Expect::Behaviour,
        &[Need::Devices(2)],
        visible_devices,
    ),
    vendor(
        "ascend.device.id-translation-checked",
        A,
        "user -> logical -> physical and back are consistent for every device of the process, \
         and a user id outside aclrtGetDeviceCount is ACL_ERROR_RT_INVALID_DEVICEID",
        "acl_rt.h (aclrtGetLogicDevIdByUserDevId, aclrtGetUserDevIdByLogicDevId, \
         aclrtGetLogicDevIdByPhyDevId, aclrtGetPhyDevIdByLogicDevId, aclrtDeviceGetUuid); \
         hicann/runtime rt_utest_runtime.cc (RT_ERROR_DEVICE_ID); api-facts A.11",
        Expect::Code(
            "ACL_ERROR_RT_INVALID_DEVICEID",
            ACL_ERROR_RT_INVALID_DEVICEID,
        ),
        &[],
        translation_checked,
    ),
];

/// A runtime without the CANN 8.x functions skips the rule.
fn available<T>(result: Result<T, Failure>, what: &str) -> Result<T, Stop> {
    match result {
        Err(Failure::Harness(why)) if why.contains("lacks") => Err(Stop::Skip(why)),
        other => other.step(what),
    }
}

fn visible_devices(ctx: &mut Ctx) -> Verdict {
    let mut acl = ctx.acl()?;
    let count = acl.device_count().step("aclrtGetDeviceCount")?;
    let uuid1 = available(acl.device_uuid(1), "aclrtDeviceGetUuid(1)")?;
    let logical1 = acl
        .translate_id(IdTranslation::LogicByUser, 1)
        .step("aclrtGetLogicDevIdByUserDevId(1)")?;
    let mut peer = ctx.acl_peer_env("masked", &[("ASCEND_RT_VISIBLE_DEVICES", "1")])?;
    let seen = peer
        .device_count()
        .step("aclrtGetDeviceCount in the masked peer")?;
    ensure(seen == 1, || {
        format!("with ASCEND_RT_VISIBLE_DEVICES=1 the peer sees {seen} device(s) of {count}, not 1")
    })?;
    let logical = peer
        .translate_id(IdTranslation::LogicByUser, 0)
        .step("aclrtGetLogicDevIdByUserDevId(0) in the masked peer")?;
    ensure(logical == 1, || {
        format!("the masked peer's user device 0 is logical {logical}, not 1")
    })?;
    let uuid = peer
        .device_uuid(0)
        .step("aclrtDeviceGetUuid(0) in the masked peer")?;
    ensure(uuid == uuid1, || {
        format!("the masked peer's device 0 has UUID {uuid}, this process's device 1 {uuid1}")
    })?;
    Ok(format!(
        "{count} device(s) here (device 1 is logical {logical1}); the masked peer sees 1, \
         logical 1, UUID {uuid}"
    ))
}

fn translation_checked(ctx: &mut Ctx) -> Verdict {
    let mut acl = ctx.acl()?;
    let count = acl.device_count().step("aclrtGetDeviceCount")? as i32;
    let mut seen = Vec::new();
    for user in 0..count {
        let logical = available(
            acl.translate_id(IdTranslation::LogicByUser, user),
            "aclrtGetLogicDevIdByUserDevId",
        )?;
        let physical = acl
            .translate_id(IdTranslation::PhyByLogic, logical)
            .step("aclrtGetPhyDevIdByLogicDevId")?;
        let back = acl
            .translate_id(IdTranslation::LogicByPhy, physical)
            .step("aclrtGetLogicDevIdByPhyDevId")?;
        let user_back = acl
            .translate_id(IdTranslation::UserByLogic, logical)
            .step("aclrtGetUserDevIdByLogicDevId")?;
        ensure(back == logical && user_back == user, || {
            format!(
                "user {user} -> logical {logical} -> physical {physical} comes back as logical \
                 {back}, user {user_back}"
            )
        })?;
        seen.push(format!("{user}->{logical}->{physical}"));
    }
    let refused = ctx.refused(
        &format!("aclrtGetLogicDevIdByUserDevId({count})"),
        acl.translate_id(IdTranslation::LogicByUser, count),
    )?;
    Ok(format!(
        "user->logical->physical {}; {refused}",
        seen.join(", ")
    ))
}
