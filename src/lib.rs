//! devipc: share device memory and synchronisation objects between processes, with one
//! API over Huawei Ascend NPUs (ACL runtime) and AMD GPUs (HIP).
//!
//! A producer allocates or names device memory, exports it as a
//! [`MemToken`], sends the token to a peer over any channel, grants
//! the peer, and the peer imports a mapping of the same memory. Signals
//! ([`SignalToken`]) order the two sides. The [`rendezvous`] module does the exchange
//! over a Unix socket ([`SharedBuffer::share`], [`Runtime::connect`]), checking the peer's
//! credentials. Frameworks write this once against [`DeviceIpc`] and pick backends with
//! cargo features:
//!
//! | feature | backend | vendor library (found at run time) |
//! |---|---|---|
//! | `ascend` (default) | [`Backend::Ascend`] | `libascendcl.so` / `libacl_rt.so` |
//! | `hip` (default) | [`Backend::Hip`] | `libamdhip64.so` |
//!
//! `DEVIPC_BACKEND` (`ascend|hip|emulated-ascend|emulated-hip|auto`) picks the backend for
//! [`Runtime::from_env`].
//!
//! Layers: this crate (safe API, dispatch) → `devipc-core` (trait, tokens, errors) →
//! `devipc-ascend` / `devipc-hip` (vendor C ABI, or the devipc emulator).

#[cfg(not(any(feature = "ascend", feature = "hip")))]
compile_error!(
    "devipc: no backend enabled. Enable at least one of the features `ascend` and `hip` \
     (both are on by default; with `default-features = false`, add `features = [\"hip\"]` or \
     `features = [\"ascend\"]`)."
);

mod backend;
mod import_cache;
mod imported;
mod local_exports;
#[cfg(test)]
mod recording_backend;
pub mod rendezvous;
mod runtime;
mod selection;
mod shared;
mod signal;

pub use backend::Backend;
/// The token wire format (builders, limits, text prefix).
pub use devipc_core::token;
pub use devipc_core::{
    Allocation, BackendInfo, BackendKind, Capabilities, DeviceId, DeviceIpc, DevicePtr, Error,
    ExportOptions, HandleId, HostIdentity, LibrarySource, LoadAttempt, Mapping, Mechanism,
    MemToken, PidValidation, ProcessId, RawStream, Result, RuntimeVersion, SignalHandle,
    SignalToken, TokenIdentity, TokenOrigin,
};
pub use imported::ImportedBuffer;
pub use rendezvous::{
    ConnectOptions, Connected, PeerCredentials, PeerInfo, PidCheck, ShareOptions, ShareServer,
};
pub use runtime::Runtime;
pub use selection::{BACKEND_ENV, BackendChoice, DEFAULT_KIND};
pub use shared::SharedBuffer;
pub use signal::Signal;
