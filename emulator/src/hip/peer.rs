//! Peer access: `hipDeviceCanAccessPeer` and `hipDeviceEnablePeerAccess`.
//!
//! Which pairs of distinct devices can access each other is configured
//! (`DEVIPC_EMU_PEERS`, default every pair): `hipDeviceCanAccessPeer` reports it, and
//! enabling peer access between unconnected devices fails with
//! `hipErrorPeerAccessUnsupported` ([`rules::PEER_TOPOLOGY_RESPECTED`]). Enabled peer access
//! is per process, from the calling thread's current device to a peer, as in HIP. Opening
//! IPC memory on another device needs no enabled peer access, but connected devices
//! ([`super::ipc_mem`], "Devices and peer access").

use std::collections::BTreeSet;
use std::ffi::{c_int, c_uint};

use devipc_hip_sys::{
    hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorPeerAccessAlreadyEnabled,
    hipErrorPeerAccessUnsupported,
};

use super::errors::{Failure, HipResult};
use super::rules::{
    self, PEER_ALREADY_ENABLED_REJECTED, PEER_ENABLE_FLAGS_MUST_BE_ZERO, PEER_SELF_IS_NOT_A_PEER,
    PEER_TOPOLOGY_RESPECTED,
};
use super::runtime::{current_device, device_arg, state};
use crate::local::{ForkLocal, forget_inherited};

/// `(device, peer)` pairs enabled in this process.
/// A forked child starts with none.
static ENABLED: ForkLocal<BTreeSet<(u32, u32)>> = ForkLocal::new(forget_inherited);

/// `hipDeviceCanAccessPeer(device, peer)`: 1 for distinct connected devices, 0 for the
/// same one or unconnected ones.
pub(crate) fn can_access(device: c_int, peer: c_int) -> HipResult<c_int> {
    let state = state()?;
    let device = device_arg(state, device)?;
    let peer = device_arg(state, peer)?;
    if device == peer {
        return Ok(c_int::from(!rules::enforced(PEER_SELF_IS_NOT_A_PEER)));
    }
    Ok(c_int::from(state.config().peers.can_peer(device, peer)))
}

/// Refuses access from `device` to `peer`'s memory when the configured topology does not
/// connect them (an enable, or an IPC open on another device than the allocation's).
pub(crate) fn check_topology(device: u32, peer: u32) -> HipResult<()> {
    if state()?.config().peers.can_peer(device, peer) || !rules::enforced(PEER_TOPOLOGY_RESPECTED) {
        return Ok(());
    }
    Err(Failure::rule(
        hipErrorPeerAccessUnsupported,
        PEER_TOPOLOGY_RESPECTED,
        format!(
            "devices {device} and {peer} cannot access each other's memory (no P2P link; \
             DEVIPC_EMU_PEERS)"
        ),
    ))
}

/// `hipDeviceEnablePeerAccess(peer, flags)` from the current device.
pub(crate) fn enable(peer: c_int, flags: c_uint) -> HipResult<()> {
    if flags != 0 && rules::enforced(PEER_ENABLE_FLAGS_MUST_BE_ZERO) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            PEER_ENABLE_FLAGS_MUST_BE_ZERO,
            format!("flags {flags:#x}: hipDeviceEnablePeerAccess takes flags = 0"),
        ));
    }
    let state = state()?;
    let device = current_device(state)?;
    let peer = device_arg(state, peer)?;
    if device == peer && rules::enforced(PEER_SELF_IS_NOT_A_PEER) {
        return Err(Failure::rule(
            hipErrorInvalidDevice,
            PEER_SELF_IS_NOT_A_PEER,
            format!("device {device} is the current device, not a peer"),
        ));
    }
    if device != peer {
        check_topology(device, peer)?;
    }
    let newly = ENABLED.lock().insert((device, peer));
    if !newly && rules::enforced(PEER_ALREADY_ENABLED_REJECTED) {
        return Err(Failure::rule(
            hipErrorPeerAccessAlreadyEnabled,
            PEER_ALREADY_ENABLED_REJECTED,
            format!(
                "peer access from device {device} to {peer} is already enabled in this process"
            ),
        ));
    }
    Ok(())
}
