//! Process identity that survives pid reuse: pid plus the process start time, in its pid
//! namespace.
//!
//! The registry records who holds a shared object as a [`ProcessIdentity`], reclaimed when
//! its process is gone (pid gone, zombie, or pid reused: the start time differs). The type
//! and `/proc` parsing are `devipc-shm`'s [`process`](devipc_shm::process), shared with
//! devipc's leases; this module adds the emulator's error for the calling process.
//!
//! Processes sharing one state directory may live in different pid namespaces (containers
//! sharing `/dev/shm`): a real driver tracks processes in the kernel and never frees a live
//! process's objects, so neither does the emulator. A process of another namespace is
//! judged by its [liveness beacon](devipc_shm::liveness) in the state directory, which
//! every process announces before the registry records it ([`announce`]).

pub use devipc_shm::process::{ProcessIdentity, StatFields, StatParseError, parse_stat, read_stat};

use crate::error::EmuError;

/// The identity of the calling process (cached; recomputed after `fork`), as an emulator
/// result.
pub fn current() -> Result<ProcessIdentity, EmuError> {
    ProcessIdentity::current().map_err(|e| EmuError::sys("read /proc/self/stat", e))
}

/// Makes the calling process known as alive in the state directory `dir` to processes of
/// other pid namespaces ([`devipc_shm::liveness::announce`]); cheap after the first call.
pub fn announce(dir: &std::path::Path) -> Result<(), EmuError> {
    devipc_shm::liveness::announce(dir)
        .map_err(|e| EmuError::sys("create the liveness beacon in the state directory", e))
}
