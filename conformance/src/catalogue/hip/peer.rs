//! HIP peer access rules (api-facts B.3): topology, self, flags and enabling twice.

use devipc_hip_sys::{hipErrorInvalidDevice, hipErrorPeerAccessAlreadyEnabled};

use super::{H, INVALID_VALUE, TWO_DEVICES, exported, lazy};
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::VendorClient;

/// The peer access rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.peer.topology-respected",
        H,
        "between two devices hipDeviceCanAccessPeer reports as unconnected, \
         hipDeviceEnablePeerAccess fails with hipErrorPeerAccessUnsupported and a \
         hipIpcOpenMemHandle on the unconnected device is refused; between connected devices \
         both succeed",
        "HIP API reference hipDeviceEnablePeerAccess; api-facts B.3, C.1 (the lazy flag \
         enables peer access on demand, where the topology has it)",
        Expect::Refused,
        TWO_DEVICES,
        peer_topology,
    ),
    vendor(
        "hip.peer.self-is-not-a-peer",
        H,
        "hipDeviceCanAccessPeer(d, d) writes 0, and enabling peer access to the current device \
         is hipErrorInvalidDevice",
        "CLR hipamd/src/hip_peer.cpp; api-facts B.3",
        Expect::Code("hipErrorInvalidDevice", hipErrorInvalidDevice),
        &[],
        peer_self,
    ),
    vendor(
        "hip.peer.enable-flags-must-be-zero",
        H,
        "hipDeviceEnablePeerAccess accepts only flags == 0",
        "HIP header doc (hipDeviceEnablePeerAccess); CLR hip_peer.cpp; api-facts B.3",
        INVALID_VALUE,
        TWO_DEVICES,
        peer_flags,
    ),
    vendor(
        "hip.peer.already-enabled-rejected",
        H,
        "enabling the same peer access twice in one process is hipErrorPeerAccessAlreadyEnabled",
        "HIP header doc (hipDeviceEnablePeerAccess); CLR hip_peer.cpp; api-facts B.3",
        Expect::Code(
            "hipErrorPeerAccessAlreadyEnabled",
            hipErrorPeerAccessAlreadyEnabled,
        ),
        TWO_DEVICES,
        peer_twice,
    ),
];

fn peer_topology(ctx: &mut Ctx) -> Verdict {
    let devices = ctx.probe.devices as i32;
    let mut h = ctx.hip()?;
    let flag = lazy(&mut h)?;
    let mut far = None;
    let mut near = None;
    for d in 1..devices {
        if h.can_access_peer(0, d).step("hipDeviceCanAccessPeer")? {
            near.get_or_insert(d);
        } else {
            far.get_or_insert(d);
        }
    }
    let Some(far) = far else {
        return Err(Stop::Skip(format!(
            "needs a device that cannot peer with device 0 (all {devices} can)"
        )));
    };
    h.set_device(0).step("hipSetDevice(0)")?;
    let enable = ctx.refused(
        &format!("hipDeviceEnablePeerAccess({far}) on device 0"),
        h.enable_peer(far, 0),
    )?;
    let (ptr, handle) = exported(&mut h)?;
    let mut p = ctx.hip_peer("far-importer")?;
    p.set_device(far as u32).step("peer hipSetDevice")?;
    let opened = p.mem_open(&handle, flag);
    if let Ok(q) = opened {
        let _ = p.mem_close(q);
    }
    let open = ctx.refused(&format!("hipIpcOpenMemHandle on device {far}"), opened)?;
    let mut control = String::from("no connected device to compare");
    if let Some(near) = near {
        p.set_device(near as u32).step("peer hipSetDevice")?;
        let q = p
            .mem_open(&handle, flag)
            .step("hipIpcOpenMemHandle on a connected device")?;
        p.mem_close(q).step("close")?;
        control = format!("device {near} (connected) opens it");
    }
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    Ok(format!("device {far}: {enable}; {open}; {control}"))
}

fn peer_self(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let can = h
        .can_access_peer(0, 0)
        .step("hipDeviceCanAccessPeer(0, 0)")?;
    ensure(!can, || "hipDeviceCanAccessPeer(0, 0) wrote 1".into())?;
    let seen = ctx.refused(
        "hipDeviceEnablePeerAccess(0) on device 0",
        h.enable_peer(0, 0),
    )?;
    // Positive control where the machine has a peer: enabling it succeeds.
    if ctx.probe.devices < 2 || !ctx.probe.peer_access {
        return Ok(format!(
            "device 0 is not its own peer; {seen} (no second device for the positive control)"
        ));
    }
    h.enable_peer(1, 0)
        .step("hipDeviceEnablePeerAccess(1) on device 0")?;
    Ok(format!(
        "device 0 is not its own peer; {seen}; peer access to device 1 succeeds"
    ))
}

fn peer_flags(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let seen = ctx.refused("hipDeviceEnablePeerAccess(1, flags 1)", h.enable_peer(1, 1))?;
    h.enable_peer(1, 0)
        .step("hipDeviceEnablePeerAccess(1, 0)")?;
    Ok(format!("{seen}; flags 0 succeed"))
}

fn peer_twice(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    h.enable_peer(1, 0)
        .step("first hipDeviceEnablePeerAccess(1)")?;
    ctx.refused("second hipDeviceEnablePeerAccess(1)", h.enable_peer(1, 0))
}
