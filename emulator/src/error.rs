//! The emulator's internal error type.
//!
//! Every infrastructure operation returns [`EmuError`]. The vendor surfaces (`acl`,
//! `hip`) never show it to their C callers directly: each maps it to the vendor's numeric
//! code (e.g. `OutOfMemory` to `ACL_ERROR_RT_MEMORY_ALLOCATION` / `hipErrorOutOfMemory`,
//! `NoSuchObject` to an invalid-handle code) and puts its `Display` text into the
//! thread's last-error message ([`crate::local::LastError`]). Nothing here panics on bad
//! input; every refusal is a variant.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::state::dir::DirProblem;
use crate::state::ids::ObjectId;
use crate::state::meta::{ObjectKind, Vendor};
use crate::state::process::ProcessIdentity;

/// Result alias for the emulator infrastructure.
pub type Result<T, E = EmuError> = std::result::Result<T, E>;

/// Everything that can go wrong in the emulator infrastructure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmuError {
    /// An environment variable (or explicit config value) is malformed.
    #[error("invalid {var}={value:?}: {reason}")]
    Config {
        /// The variable, e.g. `DEVIPC_EMU_DEVICES`.
        var: &'static str,
        /// The offending value (lossily converted to UTF-8).
        value: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },

    /// The state directory is unsafe to use.
    #[error("refusing state directory {}: {problem} (set DEVIPC_EMU_DIR to a directory of your own)", path.display())]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Why it is refused.
        problem: DirProblem,
    },

    /// A file operation in the state directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was attempted, e.g. "open", "mmap", "flock".
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A system call without a path failed (futex, mmap of a reservation, getrandom).
    #[error("{op}: {source}")]
    Sys {
        /// The call.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// The process-wide emulator state could not be initialised (bad configuration or an
    /// unusable state directory); `reason` is the original error's message.
    #[error("the emulator is unavailable: {reason}")]
    Unavailable {
        /// Why initialisation failed.
        reason: String,
    },

    /// A state file exists but does not parse or is inconsistent.
    #[error("corrupt state file {}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// No object with this id exists (never created, already freed, or minted by
    /// another state directory).
    #[error("no object {id} in this state directory{}", if *foreign { " (the id belongs to another state directory)" } else { "" })]
    NoSuchObject {
        /// The id looked up.
        id: ObjectId,
        /// Whether the id's salt is not this directory's.
        foreign: bool,
    },

    /// The object's pages were revoked: its owner released it (the vendor's release point
    /// passed) while this process still mapped it. Real hardware faults or reads freed
    /// memory here; see [`crate::state::violations`].
    #[error(
        "object {id} was released by its owner while still mapped here (its pages are revoked)"
    )]
    Revoked {
        /// The object.
        id: ObjectId,
    },

    /// A raw handle value does not encode an object id at all.
    #[error("malformed handle: {reason}")]
    BadHandle {
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The object exists but is of another kind than the operation needs.
    #[error("object {id} is a {vendor} {found}, expected a {expected_vendor} {expected}")]
    WrongKind {
        /// The object.
        id: ObjectId,
        /// The kind the caller asked for.
        expected: ObjectKind,
        /// The vendor the caller asked for.
        expected_vendor: Vendor,
        /// The object's kind.
        found: ObjectKind,
        /// The object's vendor.
        vendor: Vendor,
    },

    /// A process released an object it does not hold.
    #[error("{who} does not hold object {id}")]
    NotHolder {
        /// The object.
        id: ObjectId,
        /// The releasing process.
        who: ProcessIdentity,
    },

    /// The per-device memory limit (`DEVIPC_EMU_MEM_LIMIT`) would be exceeded.
    #[error("device {device} out of memory: {requested} bytes requested, {used} of {limit} in use")]
    OutOfMemory {
        /// The device.
        device: u32,
        /// Bytes asked for.
        requested: u64,
        /// Bytes in use on the device across all processes.
        used: u64,
        /// The limit.
        limit: u64,
    },

    /// The host could not back the segment (tmpfs full: `ENOSPC`).
    #[error("host shared memory exhausted backing {requested} bytes: {source}")]
    HostOutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A device ordinal is outside `0..DEVIPC_EMU_DEVICES`.
    #[error("invalid device {device}: {count} emulated device(s)")]
    InvalidDevice {
        /// The ordinal given.
        device: u32,
        /// Configured device count.
        count: u32,
    },

    /// An argument is out of range (zero size, misaligned offset, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// An address is not inside any range this process registered.
    #[error("address {addr:#x} is not inside any known range")]
    UnknownPointer {
        /// The address.
        addr: usize,
    },

    /// A range to register overlaps one already registered in this process.
    #[error("range {base:#x}+{len:#x} overlaps an existing range")]
    Overlap {
        /// Start of the new range.
        base: usize,
        /// Its length.
        len: usize,
    },

    /// A process-local handle value is unknown (never issued, or already released).
    #[error("unknown {what} handle {value:#x}")]
    UnknownHandle {
        /// Which table, e.g. "notify".
        what: &'static str,
        /// The value given.
        value: usize,
    },

    /// A process-local handle this process inherited through `fork` from its parent,
    /// which created it: a child never acts under its parent's objects ([`crate::local`]).
    #[error(
        "{what} handle {value:#x} was created by process {parent}, this process's parent, \
         before it forked: a forked child cannot use its parent's objects (create its own \
         after initialising afresh)"
    )]
    Forked {
        /// Which table, e.g. "notify".
        what: &'static str,
        /// The value given.
        value: usize,
        /// The pid of the process that created it.
        parent: u32,
    },

    /// A wait did not complete in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),

    /// A fixed bound was hit (trustlist length, holders, id space).
    #[error("limit exceeded: at most {limit} {what}")]
    LimitExceeded {
        /// What ran out.
        what: &'static str,
        /// The bound.
        limit: usize,
    },
}

impl EmuError {
    /// Shorthand for [`EmuError::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        EmuError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`EmuError::Sys`].
    pub(crate) fn sys(op: &'static str, source: io::Error) -> Self {
        EmuError::Sys { op, source }
    }

    /// Whether this is [`EmuError::NoSuchObject`].
    pub fn is_no_such_object(&self) -> bool {
        matches!(self, EmuError::NoSuchObject { .. })
    }
}
