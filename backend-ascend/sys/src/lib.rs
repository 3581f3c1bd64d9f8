//! ACL runtime C ABI for devipc: C types, constants, error codes and the [`AclApi`]
//! function table.
//!
//! This is the `sys` layer of the Ascend backend (DESIGN section 1). Above it,
//! `devipc-ascend` wraps every call in a checked-call helper and implements `DeviceIpc`;
//! beside it, `devipc-emulator` implements the same C ABI over host memory. Below it is
//! the vendor library (`libascendcl.so` / `libacl_rt.so`), loaded at run time.
//!
//! - [`types`]: the vendor's C types (handles, enums as C ints, the VMM structs);
//! - [`consts`]: the IPC flags and sizes; [`codes`]: every `aclError` with its name;
//! - [`api`]: the function list [`for_each_acl_fn!`], the [`AclApi`] table generated from
//!   it, [`acl_api_from_module!`] (fill it from the emulator) and [`acl_export_c_abi!`]
//!   (export the vendor names from a cdylib);
//! - [`discovery`]: where the library is looked for, as a pure function of the
//!   environment;
//! - [`abi`]: every declaration as data, which `tests/abi_headers.rs` checks against the
//!   vendor headers (fetched from the `torch-npu` wheel).
//!
//! The table is one type however it is filled (library or emulator), so the code above
//! it is identical in both cases. A missing library or required symbol is an
//! [`Error`](devipc_core::Error), never a panic.

pub mod abi;
pub mod api;
pub mod codes;
pub mod consts;
pub mod discovery;
pub mod types;

pub use api::AclApi;
pub use codes::{error_description, error_name};
