//! The emulator's integration tests, in one test binary (issue 14): one module per topic,
//! plus the harnesses they share (`emu_support`, `acl_support`, `hip_support`). One binary
//! links the emulator and the harnesses once instead of once per topic.
//!
//! Children are this binary re-run on one entry test (`devipc_testkit`). Each topic module
//! keeps its own `child_role` entry; with one binary its name is the module path
//! (`acl_basics::child_role`), which the harnesses derive from the module that starts
//! the child ([`emu_support::child_entry`]). A topic module is therefore one file named
//! after the module.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

mod acl_support;
mod emu_support;
mod hip_support;

mod acl_basics;
mod acl_batch;
mod acl_crash_reclaim;
mod acl_events;
mod acl_expandable;
mod acl_ipc_key;
mod acl_notify;
mod acl_notify_rounds;
mod acl_streams;
mod acl_visibility;
mod acl_vmm;
mod cross_process;
mod fork_child;
mod hip_batch;
mod hip_break_rules;
mod hip_crash_reclaim;
mod hip_device_queries;
mod hip_entry_points;
mod hip_events;
mod hip_ipc_memory;
mod hip_runtime;
mod hip_streams;
mod hip_visibility;
mod hip_vmm;
mod revoke_during_copy;
