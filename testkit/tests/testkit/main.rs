//! The testkit's integration tests, in one test binary (issue 14): one module per topic.
//! Children run the `child_role` test of the module that starts them, which libtest
//! names `<module>::child_role` ([`devipc_testkit::child_entry`]).

// The shell's device masks never reach these tests (tested in `masks`).
devipc_testkit::hermetic_device_masks!();

mod harness;
mod masks;
mod skip;
