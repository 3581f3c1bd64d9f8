//! devipc: share device memory and synchronisation objects between processes, with one
//! API over Huawei Ascend NPUs (ACL runtime) and AMD GPUs (HIP).
//!
//! A producer allocates or names device memory, exports it as a
//! [`MemToken`], sends the token to a peer over any channel, grants
//! the peer, and the peer imports a mapping of the same memory. Signals
//! ([`SignalToken`]) order the two sides. The [`rendezvous`] module does the exchange
//! over a Unix socket ([`SharedBuffer::share`], [`Runtime::connect`]), checking the peer's
//! credentials. Frameworks write this once and pick backends with cargo features:
//!
//! | feature | backend | vendor library (found at run time) |
//! |---|---|---|
//! | `ascend` (default) | [`raw::Backend::Ascend`] | `libascendcl.so` / `libacl_rt.so` |
//! | `hip` (default) | [`raw::Backend::Hip`] | `libamdhip64.so` |
//!
//! `DEVIPC_BACKEND` (`ascend|hip|emulated-ascend|emulated-hip|auto`) picks the backend for
//! [`Runtime::from_env`].
//!
//! # The safe API and the raw layer
//!
//! The crate root is the safe API: [`Runtime`], the buffers ([`SharedBuffer`],
//! [`ImportedBuffer`], and the [`DeviceBuffer`] trait for code generic over both),
//! [`Signal`], the tokens, the options ([`ExportOptions`], [`ShareOptions`],
//! [`ConnectOptions`], [`BackendChoice`]), what a backend reports ([`BackendInfo`],
//! [`Capabilities`]) and [`Error`]. Its types check
//! every range, keep what they use alive and release it on drop. The trait layer they are
//! built on ([`DeviceIpc`](raw::DeviceIpc), the [`Backend`](raw::Backend) enum, the
//! plain-data handles and the token builders) is in [`raw`], for the calls the safe API
//! does not wrap; [`Runtime::backend`] reaches it.
//!
//! A few plain-data types are at the root because the safe API takes or returns them:
//! [`DeviceId`], [`ProcessId`] (whom [`SharedBuffer::grant`] lets in), [`DevicePtr`]
//! ([`SharedBuffer::ptr`], [`Runtime::export_external`]; an address, never dereferenced by
//! safe code) and [`RawStream`] ([`Signal::notify_on`]; also in [`raw`]).
//!
//! Layers: this crate (safe API, dispatch) → `devipc-core` (trait, tokens, errors) →
//! `devipc-ascend` / `devipc-hip` (vendor C ABI, or the devipc emulator).

#[cfg(not(any(feature = "ascend", feature = "hip")))]
compile_error!(
    "devipc: no backend enabled. Enable at least one of the features `ascend` and `hip` \
     (both are on by default; with `default-features = false`, add `features = [\"hip\"]` or \
     `features = [\"ascend\"]`)."
);

/// The README's Rust code blocks, compiled as doctests (`cargo test --doc`) so that they
/// keep up with the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod backend;
mod buffer;
mod import_cache;
mod imported;
mod local_exports;
pub mod raw;
#[cfg(test)]
mod recording_backend;
pub mod rendezvous;
mod runtime;
mod selection;
mod shared;
mod signal;

pub use buffer::DeviceBuffer;
pub use devipc_core::{
    AllocateOptions, BackendAttempt, BackendInfo, BackendKind, Capabilities, DeviceId, DevicePtr,
    DeviceUuid, Error, ErrorKind, ExportOptions, ExportedFrom, LibrarySource, LoadAttempt,
    MemToken, PciBusId, PhysicalDevice, PidValidation, ProcessId, RawStream, Result,
    RuntimeVersion, SignalToken,
};
pub use imported::ImportedBuffer;
pub use rendezvous::{
    ConnectOptions, Connected, PeerCredentials, PeerInfo, PidCheck, ShareOptions, ShareServer,
};
pub use runtime::Runtime;
pub use selection::{BACKEND_ENV, BackendChoice, DEFAULT_KIND};
pub use shared::SharedBuffer;
pub use signal::Signal;
