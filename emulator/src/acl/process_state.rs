//! The ACL surface's access to the process-wide emulator state and identity.
//!
//! The surface always works on [`State::global`]: the state directory and configuration
//! of this process's environment (`DEVIPC_EMU_*`, read once). A process whose
//! configuration or state directory is unusable gets `ACL_ERROR_RT_DRV_INTERNAL_ERROR`
//! (507899) from every call that needs them, with the reason in the message.

use super::errors::{AclFailure, AclResult};
use crate::state::{ProcessIdentity, Registry, State};

/// The process-wide emulator state.
pub fn state() -> AclResult<&'static State> {
    State::global().map_err(AclFailure::from)
}

/// The registry of the process-wide state directory.
pub fn registry() -> AclResult<&'static Registry> {
    Ok(state()?.registry())
}

/// The calling process (pid + start time): what holders and exporters record.
pub fn me() -> AclResult<ProcessIdentity> {
    crate::state::process::current().map_err(AclFailure::from)
}

/// Number of devices this process sees (user devices: `ASCEND_RT_VISIBLE_DEVICES` over
/// the container view; see [`super::visibility`]).
pub fn device_count() -> AclResult<u32> {
    Ok(super::visibility::view()?.user_count())
}
