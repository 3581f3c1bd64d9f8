//! devipc's C ABI: `libdevipc.so` (soname `libdevipc.so.0`) and `libdevipc.a`, declared
//! by `include/devipc.h`, which cbindgen generates from this crate (`cargo xtask header`;
//! `cargo xtask header --check` fails when the committed header differs).
//!
//! The ABI is a thin shell over the safe API of the `devipc` crate: every function takes
//! C types, checks them (NULL, UTF-8, option sizes, live handles), calls the safe API and
//! turns its `Result` into a [`devipc_status`](status::devipc_status) plus a thread-local
//! last error. The rules every function follows (the header's preamble states them for C
//! users, from `cbindgen.toml`):
//!
//! - [`boundary`]: each entry point runs under `catch_unwind`; a panic is
//!   `DEVIPC_ERR_PANIC`, never an abort across the boundary.
//! - [`status`]: the status codes: 0 is success, the kinds of devipc's one error table
//!   (`devipc_core::ErrorKind::code`) keep their numbers, and the ABI's own failures
//!   (NULL argument, panic, buffer too small) are negative, so they never collide.
//! - [`last_error`]: the thread's last failure (message, kind, vendor code).
//! - [`handle`]: opaque handles are keys into a table of live objects, never pointers
//!   devipc dereferences: a freed, foreign or wrong-type handle is
//!   `DEVIPC_ERR_UNKNOWN_HANDLE`, and freeing through the handle's own `*_free` call NULLs
//!   the caller's variable, so a second call is a no-op.
//! - [`ffi`]: reading and writing the caller's memory (out-parameters, byte and text
//!   buffers), the only `unsafe` of the crate besides the `extern "C"` signatures.
//!
//! The functions, by group: [`version`], [`status`] / [`last_error`], [`runtime`],
//! [`buffer`] (memory this process allocated), [`import`] (a peer's export mapped here),
//! [`external`] (framework memory), [`token`], [`signal`], [`options`], and the data
//! plane: [`span`], [`stream`], [`request`], [`event`].

#![allow(
    non_camel_case_types,
    reason = "the C types are named as the header names them (devipc_runtime, ...)"
)]

pub mod boundary;
pub mod buffer;
pub mod event;
pub mod external;
pub mod ffi;
pub mod handle;
pub mod import;
pub mod last_error;
pub mod options;
pub mod rendezvous;
pub mod request;
pub mod runtime;
pub mod signal;
pub mod span;
pub mod status;
pub mod stream;
pub mod token;
pub mod version;
