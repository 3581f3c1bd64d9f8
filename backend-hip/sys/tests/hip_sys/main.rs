//! devipc-hip-sys's integration tests, in one test binary (issue 14): one module per
//! topic.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

// Not with feature `link`: the exported wrappers would interpose on the linked runtime's
// symbols. Without it they do not reach the runtime `real_runtime` loads (an executable
// does not export them to the dynamic loader).
#[cfg(not(feature = "link"))]
mod macros;
// Only without `link`: the header check needs no runtime.
#[cfg(not(feature = "link"))]
mod headers;
mod real_runtime;
// The hip-over-cuda shim's coverage of the function list (tools/hip-over-cuda, issue 28).
mod shim_coverage;
