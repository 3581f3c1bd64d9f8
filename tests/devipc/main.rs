//! devipc's integration tests, in one test binary (issue 14): one module per topic. One
//! binary links devipc, both backends and the emulator once instead of once per topic.
//!
//! Most topics run real processes: children are this binary re-run on the `child_role`
//! test of the module that starts them, which libtest names `<module>::child_role`
//! ([`devipc_testkit::child_entry`]). A topic module is therefore one file named after
//! the module. Each module needs the features it names (they were the `#![cfg]` of its
//! own test binary before).
//!
//! All topics share one process and libtest's threads now. The parents only orchestrate
//! (runtimes, the emulator's configuration and the environment are the children's), so
//! topics do not share process-wide state; what they share is the machine. The stress
//! topic loads it with 2 x 17 processes, and the topics that measure time
//! (`signal_deadline`'s wait deadlines) must not run beside it: those tests are
//! `#[serial(load)]` (the stress tests `#[parallel(load)]`, beside each other as before).

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

#[cfg(all(feature = "emulator", feature = "ascend"))]
mod ascend_lifetime;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod bounds;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod data_plane;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod data_plane_lifetime;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod external_runtimes;
#[cfg(all(feature = "ascend", feature = "hip", feature = "emulator"))]
mod first_errors;
// Forks a child with a runtime of each emulated backend.
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod fork;
#[cfg(all(feature = "emulator", feature = "hip"))]
mod hip_lifetime;
#[cfg(all(feature = "emulator", feature = "hip"))]
mod hip_vmm_share;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod lifetime;
// The examples run both emulated backends, so they need every backend and the emulator.
// Both emulated backends, so every backend and the emulator.
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod pid_namespace;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod placement;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod quickstart;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod raw_races;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod rendezvous;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod signal_deadline;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod signal_generations;
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod signal_semaphore;
// Both emulated backends, so every backend and the emulator.
#[cfg(all(feature = "emulator", feature = "ascend", feature = "hip"))]
mod stress;
