//! devipc-hip's integration tests, in one test binary (issue 14): one module per topic.
//! `emulated` runs its roles in children, this binary re-run on `emulated::child_role`
//! ([`devipc_testkit::child_entry`]); its parent process only orchestrates, so the real
//! runtime `real_runtime` loads in the parent shares nothing with it. `vmm` does the same
//! for the `hip-vmm-fd` mechanism (its own `vmm::child_role`).

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

mod emulated;
mod hardening;
mod real_runtime;
mod support;
mod vmm;
