//! Who is at the other end: the kernel's record of a socket peer, what the exporter
//! reports about an importer it served, and the checks both sides make on them (see
//! "Who may import" in the [module docs](super)).

use std::io;

use devipc_core::{Error, ProcessId};
use devipc_shm::os;

/// The kernel's record of the process at the other end of the socket (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerCredentials {
    /// Its pid in our pid namespace; 0 when it lives where we cannot see it.
    pub pid: u32,
    /// Its effective uid when it connected (importer) or started listening (exporter).
    pub uid: u32,
    /// Its effective gid at the same moment.
    pub gid: u32,
}

impl From<os::PeerCred> for PeerCredentials {
    fn from(c: os::PeerCred) -> Self {
        PeerCredentials {
            pid: c.pid,
            uid: c.uid,
            gid: c.gid,
        }
    }
}

/// How far the exporter could verify an importer's claimed [`ProcessId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PidCheck {
    /// The claim equals the kernel's pid of the socket peer.
    Verified,
    /// The claim differs from the socket pid and the exporter's backend names processes
    /// by host pid (Ascend in a container), so it could not be checked; accepted on the
    /// uid check alone (see the [module docs](super)).
    Unverified,
}

/// An importer the exporter served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerInfo {
    /// The id the importer claimed, now granted on every handed-out token.
    pub process_id: ProcessId,
    /// What the kernel says about the importer.
    pub credentials: PeerCredentials,
    /// Whether the claim was checked against the kernel's pid.
    pub pid_check: PidCheck,
}

pub(super) fn uid_allowed(uid: u32, own: u32, extra: &[u32]) -> bool {
    uid == own || extra.contains(&uid)
}

/// Checks an importer's claimed id against the kernel's pid of the socket peer.
/// `strict`: the exporter's process ids are kernel pids of this namespace, so the claim
/// must be the peer's pid. Returns the refusal reason.
pub(super) fn check_claim(
    claim: ProcessId,
    peer_pid: u32,
    strict: bool,
) -> std::result::Result<PidCheck, String> {
    if peer_pid != 0 && claim.0 == peer_pid {
        return Ok(PidCheck::Verified);
    }
    if !strict {
        return Ok(PidCheck::Unverified);
    }
    if peer_pid == 0 {
        Err(format!(
            "the importer claims process {claim}, but its pid is not visible in the exporter's pid namespace, so the claim cannot be checked"
        ))
    } else {
        Err(format!(
            "the importer claims process {claim}, but the kernel says it is process {peer_pid}; a process may only ask for itself"
        ))
    }
}

/// A refusal on credentials: [`Error::Io`] of kind `PermissionDenied`.
pub(super) fn denied(context: String, reason: String) -> Error {
    Error::io(
        context,
        io::Error::new(io::ErrorKind::PermissionDenied, reason),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::ShareOptions;

    #[test]
    fn claims_are_checked_against_the_kernel_pid_when_pids_are_kernel_pids() {
        let p = ProcessId(100);
        assert_eq!(check_claim(p, 100, true), Ok(PidCheck::Verified));
        assert_eq!(check_claim(p, 100, false), Ok(PidCheck::Verified));
        let lie = check_claim(p, 101, true).unwrap_err();
        assert!(lie.contains("kernel says it is process 101"), "{lie}");
        let invisible = check_claim(p, 0, true).unwrap_err();
        assert!(invisible.contains("not visible"), "{invisible}");
        // Ascend in a container: the claim is a host pid the kernel does not show us.
        assert_eq!(check_claim(p, 101, false), Ok(PidCheck::Unverified));
        assert_eq!(check_claim(p, 0, false), Ok(PidCheck::Unverified));
    }

    #[test]
    fn uids_must_match_unless_allowed() {
        assert!(uid_allowed(1000, 1000, &[]));
        assert!(!uid_allowed(0, 1000, &[]));
        assert!(!uid_allowed(1001, 1000, &[]));
        assert!(uid_allowed(1001, 1000, &[1001]));
        let opts = ShareOptions::new().allow_uid(5).allow_uid(5);
        assert_eq!(opts.allowed_uids, [5]);
    }
}
