//! `libdevipc_emulator.so`: the devipc emulator exporting the vendor symbol names.
//!
//! The emulator crate keeps its ACL and HIP functions under mangled Rust names so that
//! linking it never puts `aclInit` or `hipMalloc` into a process's dynamic symbol table
//! (where it could shadow, or be shadowed by, a real runtime). This library is the other
//! form: every function of both vendor lists (`for_each_acl_fn!`, `for_each_hip_fn!`)
//! exported under its vendor name with the C ABI, forwarding to the emulator. Point the
//! backends at it to exercise their `libloading` path without a device:
//!
//! ```text
//! DEVIPC_ASCEND_LIB=target/debug/libdevipc_emulator.so
//! DEVIPC_HIP_LIB=target/debug/libdevipc_emulator.so
//! ```

devipc_ascend_sys::acl_export_c_abi!(emu::acl);
devipc_hip_sys::hip_export_c_abi!(emu::hip);
