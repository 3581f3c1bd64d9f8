//! devipc-hip's integration tests, in one test binary (issue 14): one module per topic.
//! `emulated` runs its roles in children, this binary re-run on `emulated::child_role`
//! ([`devipc_testkit::child_entry`]); its parent process only orchestrates, so the real
//! runtime `real_runtime` loads in the parent shares nothing with it. `vmm` does the same
//! for the `hip-vmm-fd` mechanism (its own `vmm::child_role`).

mod emulated;
mod real_runtime;
mod support;
mod vmm;
