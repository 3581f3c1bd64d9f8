//! devipc-core: the contract every devipc backend implements.
//!
//! This crate sits between the safe `devipc` facade above and the vendor backends
//! (`devipc-ascend`, `devipc-hip`) below. It holds the object-safe [`DeviceIpc`] trait, the
//! plain-data ids and handles that cross it, the versioned token wire format that crosses
//! the process boundary, the [`Error`] type and the [`Capabilities`] a backend reports.
//! Its only FFI is one `pthread_atfork` registration ([`fork::current_pid`], the pid
//! cache every fork check reads); otherwise the only `unsafe` items are contracts
//! (`DeviceIpc::read`/`write`/`copy_async`, the [`RawStream`] constructors) whose callers
//! vouch for raw device pointers or a stream.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]

pub mod backend_kind;
pub mod backoff;
pub mod copy;
pub mod error;
pub mod external_exports;
pub mod fork;
pub mod handle_table;
pub mod handles;
pub mod identity;
pub mod ids;
pub mod info;
pub mod options;
pub mod own_memory;
pub mod physical;
pub mod protection;
pub mod stream;
pub mod token;
pub mod traits;

pub use backend_kind::BackendKind;
pub use copy::{CopyDesc, CopyKind};
pub use error::{BackendAttempt, Error, ErrorKind, LoadAttempt, Result};
pub use fork::{Birth, PerProcess, PerProcessGuard};
pub use handle_table::{HandleTable, Pinned};
pub use handles::{
    Allocation, EventHandle, Mapping, SignalGenerations, SignalHandle, StreamHandle,
};
pub use identity::HostIdentity;
pub use ids::{DeviceId, DevicePtr, HandleId, ProcessId};
pub use info::{BackendInfo, Capabilities, LibrarySource, RuntimeVersion};
pub use options::{AllocateOptions, ExportOptions, PidValidation};
pub use physical::{DeviceUuid, PciBusId, PhysicalDevice, PhysicalDeviceCache};
pub use protection::Protection;
pub use stream::RawStream;
pub use token::{ExportedFrom, Mechanism, MemToken, SignalToken, TokenIdentity, TokenOrigin};
pub use traits::DeviceIpc;
