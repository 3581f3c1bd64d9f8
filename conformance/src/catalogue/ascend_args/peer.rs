//! Ascend peer access: a device is not its own peer, and the device topology decides
//! which peers can be enabled and imported on.

use devipc_ascend_sys::consts::{
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};

use super::{A, TWO_DEVICES};
use crate::catalogue::ascend::{key_exported, key_release};
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};

/// The peer-access rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.peer.distinct-devices",
        A,
        "aclrtDeviceEnablePeerAccess to the current device itself is refused; to another \
         device it succeeds",
        "CANN RT-DOC 04 device management (peerDeviceId must differ from the current device); \
         api-facts A.10",
        Expect::Refused,
        TWO_DEVICES,
        peer_distinct,
    ),
    vendor(
        "ascend.peer.topology-respected",
        A,
        "peer access between two devices aclrtDeviceCanAccessPeer reports as unconnected is \
         refused, by aclrtDeviceEnablePeerAccess and by a key import with ENABLE_PEER_ACCESS; \
         between connected devices both succeed",
        "CANN RT-DOC 04 (aclrtDeviceCanAccessPeer before aclrtDeviceEnablePeerAccess); \
         RT-DOC 11-07; api-facts A.10, C.4",
        Expect::Refused,
        TWO_DEVICES,
        peer_topology,
    ),
];

fn peer_distinct(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let seen = ctx.refused(
        "aclrtDeviceEnablePeerAccess(0) on device 0",
        a.enable_peer(0),
    )?;
    a.enable_peer(1)
        .step("aclrtDeviceEnablePeerAccess(1) on device 0")?;
    Ok(format!("{seen}; peer access to device 1 succeeds"))
}

fn peer_topology(ctx: &mut Ctx) -> Verdict {
    let devices = ctx.probe.devices as i32;
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let mut unconnected = None;
    let mut connected = None;
    for d in 1..devices {
        if a.can_access_peer(0, d).step("aclrtDeviceCanAccessPeer")? {
            connected.get_or_insert(d);
        } else {
            unconnected.get_or_insert(d);
        }
    }
    let Some(far) = unconnected else {
        return Err(Stop::Skip(format!(
            "needs a device that cannot peer with device 0 (all {devices} can)"
        )));
    };
    let refused = ctx.refused(
        &format!("aclrtDeviceEnablePeerAccess({far}) on device 0"),
        a.enable_peer(far),
    )?;
    // A key of device-0 memory imported on the unconnected device with ENABLE_PEER_ACCESS.
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    let mut b = ctx.acl_peer("far-importer")?;
    b.set_device(far as u32).step("peer aclrtSetDevice")?;
    let far_import = b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS);
    if far_import.is_ok() {
        let _ = b.key_close(&key);
    }
    let import = ctx.refused(
        &format!("key import with ENABLE_PEER_ACCESS on device {far}"),
        far_import,
    )?;
    let mut control = String::from("no connected device to compare");
    if let Some(near) = connected {
        a.enable_peer(near)
            .step("aclrtDeviceEnablePeerAccess to a connected device")?;
        b.set_device(near as u32).step("peer aclrtSetDevice")?;
        b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
            .step("key import with ENABLE_PEER_ACCESS on a connected device")?;
        b.key_close(&key).step("importer close")?;
        control = format!("device {near} (connected) succeeds in both");
    }
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!("device {far}: {refused}; {import}; {control}"))
}
