//! devipc-ascend-sys's integration tests, in one test binary (issue 14): one module per
//! topic. `loader` changes the process environment, so its tests are `#[serial]`;
//! `abi_headers` starts compilers and pip with the environment, so its tests are
//! `#[parallel]` (beside each other, never beside `loader`'s); `macros` and `linked` touch neither.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

mod abi_headers;
#[cfg(feature = "link")]
mod linked;
mod loader;
// Not with feature `link`: the exported wrappers would interpose on the linked runtime's
// symbols.
#[cfg(not(feature = "link"))]
mod macros;
