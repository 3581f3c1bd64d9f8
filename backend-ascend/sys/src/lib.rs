//! ACL runtime C ABI for devipc: C types, constants and the `AclApi` function table.
//!
//! Filled by later work (issue: Ascend backend). The table is filled three ways with one
//! type: libloading from a discovered `libascendcl.so`, or from the devipc emulator.
