//! The conformance runner's integration tests, in one test binary (issue 14): one module
//! per topic, plus `support`, which runs the `devipc-conformance` binary.
//!
//! Every test runs the runner in child processes, which run the catalogue's rules in
//! theirs; some rules measure waits and timeouts. The tests that run whole catalogues or
//! measure the runner's timeouts (`break_every_rule`, `break_protection`, the full and
//! ROCm 5 runs of `emulated`, `vmm_variant`'s reading of that full run, `selftest`'s
//! hanging children) are `#[serial]`: one at a time, as when each topic was its own
//! binary. The short ones (a rule family, a listing, the real runtimes) are
//! `#[parallel]`: beside each other, never beside a `#[serial]` one.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

mod support;

mod break_every_rule;
mod break_protection;
mod break_rule;
mod emulated;
mod real_runtime;
mod selftest;
mod vmm_variant;
