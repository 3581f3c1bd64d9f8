//! Tokens: what crosses the process boundary.
//!
//! A [`MemToken`] or [`SignalToken`] is a value a user sends to a peer over any channel
//! (socket, pipe, environment variable, JSON). It is self-describing so that a receiver
//! can never misread one vendor handle as another: it carries the backend and a
//! [`Mechanism`] tag next to the vendor payload, the producer's identity (pid, pid
//! namespace, host boot id), the exported range and a generation.
//!
//! # Wire format
//!
//! The byte and text forms (format version 3; version 2 is still read) are specified in
//! [`wire`], beside the code that writes and reads them.

use std::fmt;

use crate::backend_kind::BackendKind;
use crate::error::{Error, Result};
use crate::identity::HostIdentity;
use crate::ids::{DeviceId, ProcessId};
use crate::physical::PhysicalDevice;

// The byte and text forms (`to_bytes`, `to_text`, `FromStr`, `Display`) and the layout
// constants are in `wire.rs`; `Debug`, with the payload in hex, in `debug.rs`.
mod debug;
pub mod wire;

pub use wire::{
    FORMAT_VERSION, MAX_BINARY_LEN, MAX_PAYLOAD, MAX_TEXT_LEN, OLDEST_READABLE_VERSION, TEXT_PREFIX,
};

/// How a token's vendor payload is to be interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mechanism {
    /// Ascend VMM shareable handle (`aclrtMemExportToShareableHandle`): u64 payload.
    AscendVmm,
    /// Ascend IPC memory key (`aclrtIpcMemGetExportKey`): 65-byte key payload.
    AscendIpcKey,
    /// Ascend IPC Notify key (`aclrtNotifyGetExportKey`): 65-byte key payload.
    AscendNotify,
    /// HIP IPC memory handle (`hipIpcGetMemHandle`): 64-byte handle payload.
    HipIpcMem,
    /// HIP IPC event handle plus devipc's sequence word (`hipIpcGetEventHandle`).
    HipIpcEvent,
    /// HIP virtual-memory allocation (`hipMemCreate` + `hipMemMap`) shared as a POSIX file
    /// descriptor (`hipMemExportToShareableHandle`). The fd itself cannot be in a token:
    /// it travels beside it (see [`Mechanism::carries_fd`]).
    HipVmmFd,
}

impl Mechanism {
    /// Every mechanism, in wire-code order.
    pub const ALL: [Mechanism; 6] = [
        Mechanism::AscendVmm,
        Mechanism::AscendIpcKey,
        Mechanism::AscendNotify,
        Mechanism::HipIpcMem,
        Mechanism::HipIpcEvent,
        Mechanism::HipVmmFd,
    ];

    /// Stable name, e.g. `ascend-vmm`.
    pub const fn name(self) -> &'static str {
        match self {
            Mechanism::AscendVmm => "ascend-vmm",
            Mechanism::AscendIpcKey => "ascend-ipc-key",
            Mechanism::AscendNotify => "ascend-notify",
            Mechanism::HipIpcMem => "hip-ipc-mem",
            Mechanism::HipIpcEvent => "hip-ipc-event",
            Mechanism::HipVmmFd => "hip-vmm-fd",
        }
    }

    /// The backend whose runtime understands the payload.
    pub const fn backend(self) -> BackendKind {
        match self {
            Mechanism::AscendVmm | Mechanism::AscendIpcKey | Mechanism::AscendNotify => {
                BackendKind::Ascend
            }
            Mechanism::HipIpcMem | Mechanism::HipIpcEvent | Mechanism::HipVmmFd => BackendKind::Hip,
        }
    }

    /// Whether the vendor object is named by a process-local file descriptor, which the
    /// importer must obtain beside the token: over a Unix socket (`SCM_RIGHTS`, as the
    /// rendezvous does) or from the exporter with `pidfd_getfd`.
    pub const fn carries_fd(self) -> bool {
        matches!(self, Mechanism::HipVmmFd)
    }

    /// Whether the payload names a signal (otherwise it names memory).
    pub const fn is_signal(self) -> bool {
        matches!(self, Mechanism::AscendNotify | Mechanism::HipIpcEvent)
    }

    const fn wire(self) -> u8 {
        match self {
            Mechanism::AscendVmm => 1,
            Mechanism::AscendIpcKey => 2,
            Mechanism::AscendNotify => 3,
            Mechanism::HipIpcMem => 4,
            Mechanism::HipIpcEvent => 5,
            Mechanism::HipVmmFd => 6,
        }
    }

    fn from_wire(code: u8) -> Option<Self> {
        Mechanism::ALL.into_iter().find(|m| m.wire() == code)
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The process that produced a token.
///
/// The pid alone is not an identity: Linux reuses pids, so a token of a process that
/// exited must not be taken for one of a new process with the same pid. The start time
/// (field 22 of `/proc/<pid>/stat`) tells them apart, as devipc's leases do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenOrigin {
    /// The producer's [`ProcessId`] as its backend reports it.
    pub pid: ProcessId,
    /// The producer's start time in clock ticks since boot; 0 when unknown.
    pub start_time: u64,
    /// The producer's host boot and pid namespace.
    pub host: HostIdentity,
}

impl TokenOrigin {
    /// The current process, with `pid` as the backend reports it.
    pub fn current(pid: ProcessId) -> Self {
        TokenOrigin {
            pid,
            start_time: crate::identity::current_start_time(),
            host: HostIdentity::current(),
        }
    }
}

/// Fields shared by both token kinds.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Common {
    /// The format version it was read in (or [`FORMAT_VERSION`] when built here); it is
    /// written back in the same version, so a relay does not change a token it forwards.
    version: u8,
    mechanism: Mechanism,
    emulated: bool,
    device: DeviceId,
    physical: PhysicalDevice,
    origin: TokenOrigin,
    generation: u64,
    payload: Vec<u8>,
}

impl Common {
    fn validate(&self, want_signal: bool) -> Result<()> {
        if self.mechanism.is_signal() != want_signal {
            let (want, got) = if want_signal {
                ("signal", "memory")
            } else {
                ("memory", "signal")
            };
            return Err(Error::invalid_token(format!(
                "mechanism {} names {got}, but a {want} token was expected",
                self.mechanism
            )));
        }
        if self.payload.is_empty() || self.payload.len() > MAX_PAYLOAD {
            return Err(Error::invalid_token(format!(
                "vendor payload is {} bytes; it must be 1..={MAX_PAYLOAD}",
                self.payload.len()
            )));
        }
        Ok(())
    }

    /// A token built from parts: the current version.
    fn new(
        mechanism: Mechanism,
        emulated: bool,
        device: DeviceId,
        physical: PhysicalDevice,
        origin: TokenOrigin,
        generation: u64,
        payload: Vec<u8>,
    ) -> Self {
        Common {
            version: FORMAT_VERSION,
            mechanism,
            emulated,
            device,
            physical,
            origin,
            generation,
            payload,
        }
    }

    /// The same fields, written in format `version` (version 2 has no physical identity).
    fn in_version(&self, version: u8) -> Result<Common> {
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::invalid_argument(format!(
                "format version {version} cannot be written: this devipc writes versions \
                 {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
            )));
        }
        let mut common = self.clone();
        common.version = version;
        if version < 3 {
            common.physical = PhysicalDevice::UNKNOWN;
        }
        Ok(common)
    }

    fn identity(&self) -> TokenIdentity {
        TokenIdentity {
            mechanism: self.mechanism,
            emulated: self.emulated,
            origin: self.origin,
            payload: self.payload.clone(),
        }
    }
}

/// Identity of the vendor handle behind a token: mechanism, producer and payload,
/// ignoring the range and the generation.
///
/// Two tokens with equal identities carry the same vendor handle from the same producer,
/// so an importer may reuse one import for both (the import cache key) when their
/// generations are also equal; a different generation means the producer freed the
/// object and the runtime reused the handle for a new one (the cached import is stale).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenIdentity {
    mechanism: Mechanism,
    emulated: bool,
    origin: TokenOrigin,
    payload: Vec<u8>,
}

impl TokenIdentity {
    /// The producer of the handle.
    pub fn origin(&self) -> TokenOrigin {
        self.origin
    }
}

/// Everything a [`MemToken`] carries, as plain public fields for building one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MemTokenParts {
    /// How to read `payload`; must be a memory mechanism.
    pub mechanism: Mechanism,
    /// Produced by the emulator (a real runtime must refuse it, and vice versa).
    pub emulated: bool,
    /// The exporter's device, as the exporter numbers it.
    pub device: DeviceId,
    /// The exporter's device's physical identity ([`PhysicalDevice::UNKNOWN`] when the
    /// runtime cannot tell).
    pub physical: PhysicalDevice,
    /// The exporting process.
    pub origin: TokenOrigin,
    /// Generation of the exported object (tells a reused handle from the original).
    pub generation: u64,
    /// Size in bytes of the exported vendor object (allocation or physical handle).
    pub object_size: u64,
    /// Offset of the shared range within the object.
    pub offset: u64,
    /// Length of the shared range; at least 1.
    pub len: u64,
    /// The vendor's handle or key, binary safe, 1..=256 bytes.
    pub payload: Vec<u8>,
}

/// A shareable description of exported device memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemToken {
    common: Common,
    object_size: u64,
    offset: u64,
    len: u64,
}

impl MemToken {
    /// Builds a token, validating that the parts are consistent.
    pub fn new(parts: MemTokenParts) -> Result<Self> {
        let token = MemToken {
            common: Common::new(
                parts.mechanism,
                parts.emulated,
                parts.device,
                parts.physical,
                parts.origin,
                parts.generation,
                parts.payload,
            ),
            object_size: parts.object_size,
            offset: parts.offset,
            len: parts.len,
        };
        token.validate()?;
        Ok(token)
    }

    fn validate(&self) -> Result<()> {
        self.common.validate(false)?;
        if self.len == 0 {
            return Err(Error::invalid_token("shared range is empty"));
        }
        match self.offset.checked_add(self.len) {
            Some(end) if end <= self.object_size => Ok(()),
            _ => Err(Error::invalid_token(format!(
                "range {}+{} exceeds the exported object of {} bytes",
                self.offset, self.len, self.object_size
            ))),
        }
    }

    /// The backend that can import it.
    pub fn backend(&self) -> BackendKind {
        self.common.mechanism.backend()
    }
    /// How the payload is to be read.
    pub fn mechanism(&self) -> Mechanism {
        self.common.mechanism
    }
    /// Whether the emulator produced it.
    pub fn emulated(&self) -> bool {
        self.common.emulated
    }
    /// The exporter's device, as the exporter numbers it: under another visibility mask
    /// the same device has another index (see [`MemToken::physical_device`]).
    pub fn device(&self) -> DeviceId {
        self.common.device
    }
    /// The physical identity of the exporter's device ([`PhysicalDevice::UNKNOWN`] for a
    /// version 2 token, or when the exporter's runtime could not tell).
    pub fn physical_device(&self) -> &PhysicalDevice {
        &self.common.physical
    }
    /// The wire format version it was read in, or the current one for a token made here.
    pub fn format_version(&self) -> u8 {
        self.common.version
    }
    /// The same token, written in wire format `version` (2 or 3): for peers that still run
    /// an older devipc during an upgrade. Version 2 cannot carry the physical identity, so
    /// it is dropped.
    pub fn in_format_version(&self, version: u8) -> Result<MemToken> {
        Ok(MemToken {
            common: self.common.in_version(version)?,
            ..self.clone()
        })
    }
    /// The exporting process.
    pub fn origin(&self) -> TokenOrigin {
        self.common.origin
    }
    /// Generation of the exported object.
    pub fn generation(&self) -> u64 {
        self.common.generation
    }
    /// Size of the exported vendor object.
    pub fn object_size(&self) -> u64 {
        self.object_size
    }
    /// Offset of the shared range within the object.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Length of the shared range.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Always false: a token's range has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The vendor payload.
    pub fn payload(&self) -> &[u8] {
        &self.common.payload
    }
    /// Identity of the vendor handle, ignoring the range and generation.
    pub fn identity(&self) -> TokenIdentity {
        self.common.identity()
    }

    /// The same export, narrowed to `offset..offset + len` relative to this token's range.
    pub fn narrow(&self, offset: u64, len: u64) -> Result<MemToken> {
        let inside = offset.checked_add(len).is_some_and(|end| end <= self.len);
        if !inside || len == 0 {
            return Err(Error::invalid_argument(format!(
                "sub-range {offset}+{len} is not inside the token's {} bytes",
                self.len
            )));
        }
        let mut t = self.clone();
        t.offset += offset;
        t.len = len;
        Ok(t)
    }

    /// Its parts, for building a related token (tests and tools; a token built from
    /// edited parts is as untrusted as any other).
    pub fn to_parts(&self) -> MemTokenParts {
        MemTokenParts {
            mechanism: self.common.mechanism,
            emulated: self.common.emulated,
            device: self.common.device,
            physical: self.common.physical,
            origin: self.common.origin,
            generation: self.common.generation,
            object_size: self.object_size,
            offset: self.offset,
            len: self.len,
            payload: self.common.payload.clone(),
        }
    }

    /// The token's range as byte offsets in an object that is really `object_size` bytes
    /// (as the runtime reports it at import). A token is untrusted input: its own
    /// `object_size` is a claim, and a range beyond the real object is refused.
    pub fn range_within(&self, object_size: usize) -> Result<std::ops::Range<usize>> {
        let start = usize::try_from(self.offset).ok();
        let end = start
            .zip(usize::try_from(self.len).ok())
            .and_then(|(s, l)| s.checked_add(l));
        match (start, end) {
            (Some(start), Some(end)) if end <= object_size => Ok(start..end),
            _ => Err(Error::invalid_token(format!(
                "range {}+{} does not fit the exported object, which is {object_size} bytes \
                 (the token claims {}): forged or corrupted",
                self.offset, self.len, self.object_size
            ))),
        }
    }
}

/// Everything a [`SignalToken`] carries, as plain public fields for building one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SignalTokenParts {
    /// How to read `payload`; must be a signal mechanism.
    pub mechanism: Mechanism,
    /// Produced by the emulator.
    pub emulated: bool,
    /// The exporter's device, as the exporter numbers it.
    pub device: DeviceId,
    /// The exporter's device's physical identity.
    pub physical: PhysicalDevice,
    /// The exporting process.
    pub origin: TokenOrigin,
    /// Generation of the exported signal.
    pub generation: u64,
    /// The vendor's key or handle (plus backend data), 1..=256 bytes.
    pub payload: Vec<u8>,
}

/// A shareable description of an exported signal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignalToken {
    common: Common,
}

impl SignalToken {
    /// Builds a token, validating that the parts are consistent.
    pub fn new(parts: SignalTokenParts) -> Result<Self> {
        let common = Common::new(
            parts.mechanism,
            parts.emulated,
            parts.device,
            parts.physical,
            parts.origin,
            parts.generation,
            parts.payload,
        );
        common.validate(true)?;
        Ok(SignalToken { common })
    }

    /// The backend that can import it.
    pub fn backend(&self) -> BackendKind {
        self.common.mechanism.backend()
    }
    /// How the payload is to be read.
    pub fn mechanism(&self) -> Mechanism {
        self.common.mechanism
    }
    /// Whether the emulator produced it.
    pub fn emulated(&self) -> bool {
        self.common.emulated
    }
    /// The exporter's device, as the exporter numbers it: under another visibility mask
    /// the same device has another index (see [`MemToken::physical_device`]).
    pub fn device(&self) -> DeviceId {
        self.common.device
    }
    /// The physical identity of the exporter's device ([`PhysicalDevice::UNKNOWN`] for a
    /// version 2 token, or when the exporter's runtime could not tell).
    pub fn physical_device(&self) -> &PhysicalDevice {
        &self.common.physical
    }
    /// The wire format version it was read in, or the current one for a token made here.
    pub fn format_version(&self) -> u8 {
        self.common.version
    }
    /// The same token, written in wire format `version` (2 or 3): see
    /// [`MemToken::in_format_version`].
    pub fn in_format_version(&self, version: u8) -> Result<SignalToken> {
        Ok(SignalToken {
            common: self.common.in_version(version)?,
        })
    }
    /// The exporting process.
    pub fn origin(&self) -> TokenOrigin {
        self.common.origin
    }
    /// Generation of the exported signal.
    pub fn generation(&self) -> u64 {
        self.common.generation
    }
    /// The vendor payload.
    pub fn payload(&self) -> &[u8] {
        &self.common.payload
    }
    /// Identity of the exported signal.
    pub fn identity(&self) -> TokenIdentity {
        self.common.identity()
    }
}

/// What both token kinds say about where they were exported: the backend, the producer
/// and its device. Lets code place either kind (e.g. `Runtime::local_device_of`).
pub trait ExportedFrom: sealed::Sealed {
    /// The backend that can import it.
    fn backend(&self) -> BackendKind;
    /// How the payload is to be read.
    fn mechanism(&self) -> Mechanism;
    /// Whether the emulator produced it.
    fn emulated(&self) -> bool;
    /// The exporting process.
    fn origin(&self) -> TokenOrigin;
    /// The exporter's device, as the exporter numbers it.
    fn device(&self) -> DeviceId;
    /// The physical identity of the exporter's device.
    fn physical_device(&self) -> &PhysicalDevice;
}

mod sealed {
    /// Only the two token kinds are [`ExportedFrom`](super::ExportedFrom).
    pub trait Sealed {}
    impl Sealed for super::MemToken {}
    impl Sealed for super::SignalToken {}
}

macro_rules! exported_from {
    ($t:ty) => {
        impl ExportedFrom for $t {
            fn backend(&self) -> BackendKind {
                <$t>::backend(self)
            }
            fn mechanism(&self) -> Mechanism {
                <$t>::mechanism(self)
            }
            fn emulated(&self) -> bool {
                <$t>::emulated(self)
            }
            fn origin(&self) -> TokenOrigin {
                <$t>::origin(self)
            }
            fn device(&self) -> DeviceId {
                <$t>::device(self)
            }
            fn physical_device(&self) -> &PhysicalDevice {
                <$t>::physical_device(self)
            }
        }
    };
}
exported_from!(MemToken);
exported_from!(SignalToken);

#[cfg(test)]
use wire::crc32;
#[cfg(test)]
mod tests;
