//! devipc-ascend's integration tests, in one test binary (issue 14): one module per topic.
//!
//! The topics share one process, and the backend keeps process-wide state (the `aclInit`
//! accounting, the export records it publishes in devipc's runtime directory, the key
//! import queues); `no_runtime` also changes the environment. So every test is
//! `#[serial]` or `#[parallel]`: `fake_runtime` (which drives the backend in this
//! process) and `no_runtime` are `#[serial]`; `emulated` only orchestrates children (this
//! binary re-run on `emulated::child_role`, [`devipc_testkit::child_entry`]), and its
//! tests are `#[parallel]`: beside each other as before, never beside a `#[serial]` one,
//! so its children never see the environment `no_runtime` sets nor the records the fake
//! runtime publishes.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

mod emulated;
mod fake_runtime;
mod no_runtime;
