//! The raw layer: the backend trait, the backend enum and the plain-data handles that
//! cross it, kept apart from the safe API at the crate root (as `wgpu::hal` is from
//! `wgpu`).
//!
//! The crate root is what applications use: a [`Runtime`](crate::Runtime) and the RAII
//! types made from it ([`SharedBuffer`](crate::SharedBuffer),
//! [`ImportedBuffer`](crate::ImportedBuffer), [`Signal`](crate::Signal)), the tokens,
//! options and [`Error`](crate::Error). Every one of them checks its arguments, keeps
//! what it uses alive, and releases it on drop. This module is what those types are
//! built on, for the calls they do not wrap: a framework exporting through the trait it
//! already holds, a tool matching on the [`Backend`] variant to reach a vendor's function
//! table (`devipc doctor`, the conformance suite), or a new backend's author. Reach it
//! from a runtime with [`Runtime::backend`](crate::Runtime::backend), or wrap a backend
//! you started with [`Runtime::from_backend`](crate::Runtime::from_backend).
//!
//! - [`DeviceIpc`]: the trait every backend implements (defined in `devipc-core`, with
//!   its contract for implementors).
//! - [`Backend`]: one enum over the backends compiled in (features `ascend`, `hip`),
//!   dispatching [`DeviceIpc`] statically.
//! - [`Allocation`], [`Mapping`], [`SignalHandle`] (each named by a [`HandleId`]): the
//!   handles the trait hands out.
//! - [`Mechanism`], [`TokenOrigin`], [`TokenIdentity`], [`HostIdentity`] and the
//!   [`token`] module (builders [`MemTokenParts`], [`SignalTokenParts`], wire-format
//!   limits): what a token is made of.
//! - [`RawStream`]: the caller's vendor stream. The safe
//!   [`Signal::notify_on`](crate::Signal::notify_on) takes one too, so it is also at the
//!   root.
//!
//! # Contract
//!
//! The handles are plain data: they have no `Drop`. Whoever acquires one releases it
//! exactly once with its pair, on the backend that made it: `allocate`/`free`,
//! `export*` + `import`/`close`, `export_external`/`close_external`,
//! `create_signal` or `import_signal`/`destroy_signal`. A handle that is unknown, already
//! released or from another backend gives [`Error::UnknownHandle`](crate::Error::UnknownHandle),
//! never undefined behaviour: handle ids are minted by backends only, so safe code cannot
//! name (and release) memory that another owner, such as a [`SharedBuffer`](crate::SharedBuffer),
//! holds. Nothing here checks a range against what the peer exported, keeps an object
//! mapped while a view of it lives, or shares one vendor import between importers of the
//! same object in the process: the safe types do that, so prefer them where they fit.
//!
//! # What is `unsafe`
//!
//! [`DeviceIpc::read`] and [`DeviceIpc::write`] are `unsafe fn`: they copy to or from a
//! bare device pointer, which the caller vouches for: the whole span lies inside memory
//! this backend instance allocated or mapped (or external memory the caller owns), and
//! stays so until the call returns. The [`RawStream`] constructors
//! ([`RawStream::from_ptr`], [`RawStream::from_raw`]) are `unsafe` because the value is
//! handed to the vendor runtime as a stream pointer, which the runtime dereferences; the
//! caller vouches for a live stream. Everything else here is safe to call: given a
//! stream made that way, [`DeviceIpc::notify`] and [`DeviceIpc::wait`] are safe too.

pub use devipc_core::physical::{PhysicalDeviceCache, visibility_env_vars, visibility_in_force};
pub use devipc_core::token::{self, MemTokenParts, SignalTokenParts};
pub use devipc_core::{
    Allocation, DeviceIpc, HandleId, HostIdentity, Mapping, Mechanism, RawStream, SignalHandle,
    TokenIdentity, TokenOrigin,
};

pub use crate::runtime::Backend;
