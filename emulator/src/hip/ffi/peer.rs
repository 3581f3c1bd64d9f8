//! Entry points of peer access (safe layer: `peer`): `hipDeviceCanAccessPeer` and
//! `hipDeviceEnablePeerAccess`.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::call;
use crate::hip::peer;

use super::non_null;

/// `hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int
/// peerDeviceId)`: 1 for distinct devices, 0 for the same device.
///
/// # Safety
/// `can_access_peer` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDeviceCanAccessPeer(
    can_access_peer: *mut c_int,
    device_id: c_int,
    peer_device_id: c_int,
) -> hipError_t {
    call("hipDeviceCanAccessPeer", || {
        let out = non_null(can_access_peer, "canAccessPeer")?;
        let can = peer::can_access(device_id, peer_device_id)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(can) };
        Ok(())
    })
}

/// `hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags)`: from the
/// current device, once per process and pair (`hipErrorPeerAccessAlreadyEnabled` after).
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipDeviceEnablePeerAccess(
    peer_device_id: c_int,
    flags: c_uint,
) -> hipError_t {
    call("hipDeviceEnablePeerAccess", || {
        peer::enable(peer_device_id, flags)
    })
}
