//! Process identity that survives pid reuse: pid plus the process start time.
//!
//! The registry records who holds a shared object as a [`ProcessIdentity`], reclaimed when
//! its process is gone (pid gone, zombie, or pid reused: the start time differs). The type
//! and `/proc` parsing are `devipc-shm`'s [`process`](devipc_shm::process), shared with
//! devipc's leases; this module adds the emulator's error for the calling process.
//!
//! Pids are those of the pid namespace the emulator runs in; processes sharing one state
//! directory are expected to share a pid namespace (as on a host or in one container).

pub use devipc_shm::process::{ProcessIdentity, StatFields, StatParseError, parse_stat, read_stat};

use crate::error::EmuError;

/// The identity of the calling process (cached; recomputed after `fork`), as an emulator
/// result.
pub fn current() -> Result<ProcessIdentity, EmuError> {
    ProcessIdentity::current().map_err(|e| EmuError::sys("read /proc/self/stat", e))
}
