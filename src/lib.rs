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
//! `DEVIPC_BACKEND` ([`BackendChoice::ENV_VAR`]: `ascend|hip|emulated-ascend|emulated-hip|auto`)
//! picks the backend for [`Runtime::from_env`].
//!
//! # Layers
//!
//! - **The crate root** is the safe API, what the README shows: [`Runtime`] (a started
//!   backend), the buffers ([`SharedBuffer`] this process allocated, [`ImportedBuffer`] a
//!   peer's export mapped here, and the sealed [`DeviceBuffer`] trait for code generic
//!   over both), the data plane ([`Stream`], [`DeviceSpan`], [`Request`], [`Event`]:
//!   stream-ordered copies through shared memory), [`Signal`], the tokens ([`MemToken`], [`SignalToken`]), the options
//!   ([`ExportOptions`], [`AllocateOptions`], [`BackendChoice`]), what a backend reports
//!   ([`BackendKind`], [`BackendInfo`], [`Capabilities`]), [`Error`] and [`Result`]. A
//!   few plain-data types are here because the safe API takes or returns them:
//!   [`DeviceId`] (the API takes anything `Into<DeviceId>`, so `rt.allocate(0, len)`
//!   works), [`ProcessId`] (whom [`SharedBuffer::grant`] lets in), [`DevicePtr`]
//!   ([`SharedBuffer::ptr`], [`Runtime::export_external`]; an address, never
//!   dereferenced by safe code) and [`RawStream`] ([`Signal::notify_on`]). Its types
//!   check every range, keep what they use alive and release it on drop.
//! - [`rendezvous`]: the exchange over a Unix socket ([`SharedBuffer::share`],
//!   [`Runtime::connect`]) and its options and peer types.
//! - [`info`]: what devipc reports about backends, devices and tokens (discovery
//!   attempts, library source, versions, physical device identity), for code that
//!   inspects it.
//! - [`testing`]: test aids, e.g. device memory as a framework's allocator makes it, to
//!   try [`Runtime::export_external`] without a framework.
//! - [`raw`]: the trait layer the safe API is built on ([`DeviceIpc`](raw::DeviceIpc), the
//!   [`Backend`](raw::Backend) enum, the plain-data handles and the token builders), for
//!   the calls the safe API does not wrap; [`Runtime::backend`] reaches it.
//!
//! Under this crate: `devipc-core` (the trait, tokens, errors) → `devipc-ascend` /
//! `devipc-hip` (the vendor C ABI, or the devipc emulator).
//!
//! # One round, file by file
//!
//! One round (allocate → export → `to_text` → parse → import → read) runs through three
//! files of this crate: `runtime.rs` ([`Runtime`]: allocate, import, signals; and the
//! [`Backend`](raw::Backend) enum it drives, whose `match` hands each call to the backend
//! compiled in), `buffer.rs` (both buffers, [`DeviceBuffer`] and the one bounds check
//! every copy goes through) and `registry.rs` (the process's live objects by token
//! identity: its own exports, for the same-process shortcut, and the import cache that
//! shares one vendor import per object). Below them, `devipc-core`'s `token.rs` (the
//! token types and their checks), `token/wire.rs` (the bytes and the text: `to_text`,
//! `parse`) and `traits.rs` (the [`DeviceIpc`](raw::DeviceIpc) contract), then the
//! backend's file for the mechanism.
//! Starting a runtime is `selection.rs` ([`Runtime::from_env`], [`BackendChoice`], the
//! backends compiled in); `signal.rs` and the modules above do the rest.

#![cfg_attr(docsrs, feature(doc_cfg))]

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

mod buffer;
mod dispatch;
mod event;
pub mod info;
pub mod raw;
#[cfg(test)]
mod recording_backend;
mod registry;
pub mod rendezvous;
mod request;
mod runtime;
mod selection;
mod signal;
mod span;
mod stream;
pub mod testing;

pub use buffer::{DeviceBuffer, ImportedBuffer, SharedBuffer};
pub use devipc_core::{
    AllocateOptions, BackendInfo, BackendKind, Capabilities, DeviceId, DevicePtr, Error, ErrorKind,
    ExportOptions, MemToken, ProcessId, RawStream, Result, SignalGenerations, SignalToken,
};
pub use event::Event;
pub use request::Request;
pub use runtime::Runtime;
pub use selection::BackendChoice;
pub use signal::Signal;
pub use span::DeviceSpan;
pub use stream::Stream;
