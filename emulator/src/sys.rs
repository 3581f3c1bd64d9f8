//! The emulator's system calls: `devipc-shm`'s [`sys`](devipc_shm::sys) module, shared with
//! the HIP backend and the facade. See there for the safe wrappers it provides.
pub use devipc_shm::sys::*;
