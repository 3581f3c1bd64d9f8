//! devipc's developer tools, run as `cargo xtask <command>` (the alias is in
//! `.cargo/config.toml`) and used as a library by the tests that need them.
//!
//! Nothing here ships with devipc (`publish = false`) or is needed at run time. The one
//! tool so far is [`acl_headers`]: it fetches the ACL headers that ship in the torch-npu
//! wheel and compiles a C++ check of every declaration of `devipc-ascend-sys` against
//! them. `devipc-ascend-sys`'s test `tests/ascend_sys/abi_headers.rs` runs it on every
//! `cargo test`; [`cli`] is the command line for running it by hand. [`header`] generates
//! the C ABI's header, `include/devipc.h` (`cargo xtask header [--check]`).

pub mod acl_headers;
pub mod cli;
pub mod header;
