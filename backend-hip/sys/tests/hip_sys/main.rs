//! devipc-hip-sys's integration tests, in one test binary (issue 14): one module per
//! topic.

// Not with feature `link`: the exported wrappers would interpose on the linked runtime's
// symbols. Without it they do not reach the runtime `real_runtime` loads (an executable
// does not export them to the dynamic loader).
#[cfg(not(feature = "link"))]
mod macros;
// Only without `link`: the header check needs no runtime.
#[cfg(not(feature = "link"))]
mod headers;
mod real_runtime;
