//! Tokens: what crosses the process boundary.
//!
//! A [`MemToken`] or [`SignalToken`] is a value a user sends to a peer over any channel
//! (socket, pipe, environment variable, JSON). It is self-describing so that a receiver
//! can never misread one vendor handle as another: it carries the backend and a
//! [`Mechanism`] tag next to the vendor payload, the producer's identity (pid, pid
//! namespace, host boot id), the exported range and a generation.
//!
//! # Wire format, version 2
//!
//! Little-endian, fixed header, then the payload, then a CRC-32 (IEEE) of everything
//! before it:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `DVIP` |
//! | 4 | 1 | format version (2) |
//! | 5 | 1 | kind: 1 memory, 2 signal |
//! | 6 | 1 | backend: 1 ascend, 2 hip |
//! | 7 | 1 | mechanism tag ([`Mechanism`]) |
//! | 8 | 1 | flags: bit 0 = produced by the emulator; other bits must be 0 |
//! | 9 | 1 | reserved, 0 |
//! | 10 | 2 | payload length, 1..=256 |
//! | 12 | 4 | device id |
//! | 16 | 4 | producer pid |
//! | 20 | 8 | producer pid-namespace inode |
//! | 28 | 8 | producer host boot-id hash |
//! | 36 | 8 | producer start time (clock ticks since boot; 0 = unknown) |
//! | 44 | 8 | generation |
//! | 52 | 8 | memory only: size of the exported vendor object |
//! | 60 | 8 | memory only: offset of the range within it |
//! | 68 | 8 | memory only: length of the range |
//! | 52 or 76 | n | vendor payload (binary safe) |
//! | end - 4 | 4 | CRC-32 of all preceding bytes |
//!
//! Version 2 added the producer's start time: with the pid it names one process even
//! after the pid is reused. Version 1 tokens are refused with a reason.
//!
//! The text form is `devipc2:` followed by the binary form in URL-safe base64 without
//! padding, so it survives shells, URLs, JSON and environment variables.
//!
//! Parsing is total: any byte or text string gives a token or
//! [`Error::InvalidToken`] with a reason. Lengths are bounded before anything is
//! allocated, and every single-bit corruption is caught by the CRC.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::{Error, Result};
use crate::identity::HostIdentity;
use crate::ids::{BackendKind, DeviceId, ProcessId};

/// Prefix of the text form; the digit is the format version.
pub const TEXT_PREFIX: &str = "devipc2:";
/// The wire format version this crate writes and reads.
pub const FORMAT_VERSION: u8 = 2;
/// Largest vendor payload a token may carry.
pub const MAX_PAYLOAD: usize = 256;

const MAGIC: [u8; 4] = *b"DVIP";
const KIND_MEM: u8 = 1;
const KIND_SIGNAL: u8 = 2;
const FLAG_EMULATED: u8 = 0x01;
const COMMON_HEADER: usize = 52;
const MEM_HEADER: usize = COMMON_HEADER + 24;
const CRC_LEN: usize = 4;
/// Largest binary token.
pub const MAX_BINARY_LEN: usize = MEM_HEADER + MAX_PAYLOAD + CRC_LEN;
/// Largest text token.
pub const MAX_TEXT_LEN: usize = TEXT_PREFIX.len() + MAX_BINARY_LEN.div_ceil(3) * 4;

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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Common {
    mechanism: Mechanism,
    emulated: bool,
    device: DeviceId,
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

    fn write_header(&self, out: &mut Vec<u8>, kind: u8) {
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.push(kind);
        out.push(self.mechanism.backend().wire());
        out.push(self.mechanism.wire());
        out.push(if self.emulated { FLAG_EMULATED } else { 0 });
        out.push(0);
        // validate() bounds the payload to MAX_PAYLOAD, which fits u16.
        out.extend_from_slice(&(self.payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.device.0.to_le_bytes());
        out.extend_from_slice(&self.origin.pid.0.to_le_bytes());
        out.extend_from_slice(&self.origin.host.pid_namespace.to_le_bytes());
        out.extend_from_slice(&self.origin.host.boot_id_hash.to_le_bytes());
        out.extend_from_slice(&self.origin.start_time.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemTokenParts {
    /// How to read `payload`; must be a memory mechanism.
    pub mechanism: Mechanism,
    /// Produced by the emulator (a real runtime must refuse it, and vice versa).
    pub emulated: bool,
    /// The exporter's device.
    pub device: DeviceId,
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
            common: Common {
                mechanism: parts.mechanism,
                emulated: parts.emulated,
                device: parts.device,
                origin: parts.origin,
                generation: parts.generation,
                payload: parts.payload,
            },
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
    /// The exporter's device.
    pub fn device(&self) -> DeviceId {
        self.common.device
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

    /// Binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MEM_HEADER + self.common.payload.len() + CRC_LEN);
        self.common.write_header(&mut out, KIND_MEM);
        out.extend_from_slice(&self.object_size.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        finish(out, &self.common.payload)
    }

    /// Parses the binary form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = parse_frame(bytes, KIND_MEM)?;
        let common = r.common()?;
        let token = MemToken {
            common,
            object_size: r.u64(),
            offset: r.u64(),
            len: r.u64(),
        };
        token.validate()?;
        Ok(token)
    }

    /// Text form: `devipc2:` + URL-safe base64.
    pub fn to_text(&self) -> String {
        to_text(&self.to_bytes())
    }

    /// Parses the text form.
    pub fn from_text(text: &str) -> Result<Self> {
        MemToken::from_bytes(&from_text(text)?)
    }
}

/// Everything a [`SignalToken`] carries, as plain public fields for building one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignalTokenParts {
    /// How to read `payload`; must be a signal mechanism.
    pub mechanism: Mechanism,
    /// Produced by the emulator.
    pub emulated: bool,
    /// The exporter's device.
    pub device: DeviceId,
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
        let common = Common {
            mechanism: parts.mechanism,
            emulated: parts.emulated,
            device: parts.device,
            origin: parts.origin,
            generation: parts.generation,
            payload: parts.payload,
        };
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
    /// The exporter's device.
    pub fn device(&self) -> DeviceId {
        self.common.device
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

    /// Binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(COMMON_HEADER + self.common.payload.len() + CRC_LEN);
        self.common.write_header(&mut out, KIND_SIGNAL);
        finish(out, &self.common.payload)
    }

    /// Parses the binary form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = parse_frame(bytes, KIND_SIGNAL)?;
        let common = r.common()?;
        common.validate(true)?;
        Ok(SignalToken { common })
    }

    /// Text form: `devipc2:` + URL-safe base64.
    pub fn to_text(&self) -> String {
        to_text(&self.to_bytes())
    }

    /// Parses the text form.
    pub fn from_text(text: &str) -> Result<Self> {
        SignalToken::from_bytes(&from_text(text)?)
    }
}

macro_rules! text_traits {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_text())
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                <$t>::from_text(s)
            }
        }
    };
}
text_traits!(MemToken);
text_traits!(SignalToken);

/// Appends the payload and the CRC.
fn finish(mut out: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    out.extend_from_slice(payload);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn to_text(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(MAX_TEXT_LEN);
    s.push_str(TEXT_PREFIX);
    URL_SAFE_NO_PAD.encode_string(bytes, &mut s);
    s
}

fn from_text(text: &str) -> Result<Vec<u8>> {
    let text = text.trim();
    if text.len() > MAX_TEXT_LEN {
        return Err(Error::invalid_token(format!(
            "text is {} characters, longer than any token ({MAX_TEXT_LEN})",
            text.len()
        )));
    }
    let body = match text.strip_prefix(TEXT_PREFIX) {
        Some(body) => body,
        None if text.starts_with("devipc1:") => {
            return Err(Error::invalid_token(format!(
                "a `devipc1:` token was made by an older devipc (format version 1, without \
                 the producer's start time); this devipc reads `{TEXT_PREFIX}` tokens: export \
                 it again"
            )));
        }
        None if text.starts_with("devipc") => {
            return Err(Error::invalid_token(format!(
                "unsupported text format; this devipc reads `{TEXT_PREFIX}` tokens"
            )));
        }
        None => {
            return Err(Error::invalid_token(format!(
                "text does not start with `{TEXT_PREFIX}`"
            )));
        }
    };
    URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|e| Error::invalid_token(format!("bad base64 after `{TEXT_PREFIX}`: {e}")))
}

/// Checks magic, version, kind, lengths and CRC; returns a reader positioned after the
/// common prefix bytes (at offset 4).
fn parse_frame(bytes: &[u8], want_kind: u8) -> Result<Reader<'_>> {
    if bytes.len() < 12 {
        return Err(Error::invalid_token(format!(
            "{} bytes is shorter than any token header",
            bytes.len()
        )));
    }
    if bytes[..4] != MAGIC {
        return Err(Error::invalid_token("bad magic: not a devipc token"));
    }
    if bytes[4] != FORMAT_VERSION {
        let hint = if bytes[4] < FORMAT_VERSION {
            "; it was made by an older devipc: export it again"
        } else {
            "; it was made by a newer devipc"
        };
        return Err(Error::invalid_token(format!(
            "format version {} is not supported (this devipc reads version {FORMAT_VERSION}){hint}",
            bytes[4]
        )));
    }
    let header = match bytes[5] {
        KIND_MEM => MEM_HEADER,
        KIND_SIGNAL => COMMON_HEADER,
        other => return Err(Error::invalid_token(format!("unknown token kind {other}"))),
    };
    if bytes[5] != want_kind {
        let (want, got) = if want_kind == KIND_MEM {
            ("memory", "signal")
        } else {
            ("signal", "memory")
        };
        return Err(Error::invalid_token(format!(
            "this is a {got} token, not a {want} token"
        )));
    }
    let payload_len = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    if payload_len == 0 || payload_len > MAX_PAYLOAD {
        return Err(Error::invalid_token(format!(
            "payload length {payload_len} is outside 1..={MAX_PAYLOAD}"
        )));
    }
    let expected = header + payload_len + CRC_LEN;
    if bytes.len() != expected {
        return Err(Error::invalid_token(format!(
            "token is {} bytes but its header says {expected} (truncated or trailing data)",
            bytes.len()
        )));
    }
    let (body, crc) = bytes.split_at(expected - CRC_LEN);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32(body) != stored {
        return Err(Error::invalid_token(
            "checksum mismatch: the token was corrupted or edited",
        ));
    }
    Ok(Reader {
        bytes: body,
        pos: 6,
        header,
        payload_len,
    })
}

/// Sequential little-endian reader over a frame whose length is already checked.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    header: usize,
    payload_len: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[self.pos..self.pos + N]);
        self.pos += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    /// Reads bytes 6..52 and the payload.
    fn common(&mut self) -> Result<Common> {
        let backend_code = self.u8();
        let mechanism_code = self.u8();
        let flags = self.u8();
        let reserved = self.u8();
        let _payload_len = self.take::<2>();
        let backend = BackendKind::from_wire(backend_code)
            .ok_or_else(|| Error::invalid_token(format!("unknown backend code {backend_code}")))?;
        let mechanism = Mechanism::from_wire(mechanism_code).ok_or_else(|| {
            Error::invalid_token(format!("unknown mechanism code {mechanism_code}"))
        })?;
        if mechanism.backend() != backend {
            return Err(Error::invalid_token(format!(
                "mechanism {mechanism} does not belong to backend {backend}"
            )));
        }
        if flags & !FLAG_EMULATED != 0 || reserved != 0 {
            return Err(Error::invalid_token(format!(
                "reserved flag bits set (flags {flags:#04x}, reserved {reserved:#04x})"
            )));
        }
        let device = DeviceId(self.u32());
        let pid = ProcessId(self.u32());
        let host = HostIdentity {
            pid_namespace: self.u64(),
            boot_id_hash: self.u64(),
        };
        let start_time = self.u64();
        let generation = self.u64();
        let payload = self.bytes[self.header..self.header + self.payload_len].to_vec();
        Ok(Common {
            mechanism,
            emulated: flags & FLAG_EMULATED != 0,
            device,
            origin: TokenOrigin {
                pid,
                start_time,
                host,
            },
            generation,
            payload,
        })
    }
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320). Bitwise: tokens are tiny.
fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |mut crc, &b| {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
        crc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> TokenOrigin {
        TokenOrigin {
            pid: ProcessId(4242),
            start_time: 987_654,
            host: HostIdentity {
                pid_namespace: 4026531836,
                boot_id_hash: 0x1234_5678_9abc_def0,
            },
        }
    }

    fn mem() -> MemToken {
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::AscendIpcKey,
            emulated: true,
            device: DeviceId(1),
            origin: origin(),
            generation: 7,
            object_size: 4096,
            offset: 512,
            len: 1024,
            payload: b"key\0with\0nul".to_vec(),
        })
        .unwrap()
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn golden_layout_is_stable() {
        let bytes = mem().to_bytes();
        assert_eq!(
            &bytes[..12],
            &[b'D', b'V', b'I', b'P', 2, 1, 1, 2, 1, 0, 12, 0]
        );
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 4242);
        assert_eq!(
            u64::from_le_bytes(bytes[36..44].try_into().unwrap()),
            987_654
        );
        assert_eq!(u64::from_le_bytes(bytes[44..52].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(bytes[60..68].try_into().unwrap()), 512);
        assert_eq!(&bytes[76..88], b"key\0with\0nul");
        assert_eq!(bytes.len(), 76 + 12 + 4);
    }

    #[test]
    fn round_trips_and_keeps_nul_bytes() {
        let t = mem();
        assert_eq!(MemToken::from_bytes(&t.to_bytes()).unwrap(), t);
        let text = t.to_text();
        assert!(text.starts_with("devipc2:"));
        assert!(
            text[8..]
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_eq!(text.parse::<MemToken>().unwrap(), t);
        assert_eq!(format!("  {t}\n").parse::<MemToken>().unwrap(), t);
        assert_eq!(t.payload(), b"key\0with\0nul");
    }

    #[test]
    fn rejects_inconsistent_parts() {
        let mut parts = MemTokenParts {
            mechanism: Mechanism::HipIpcEvent,
            emulated: false,
            device: DeviceId(0),
            origin: origin(),
            generation: 1,
            object_size: 10,
            offset: 0,
            len: 10,
            payload: vec![1; 64],
        };
        assert!(matches!(
            MemToken::new(parts.clone()),
            Err(Error::InvalidToken { .. })
        ));
        parts.mechanism = Mechanism::HipIpcMem;
        assert!(MemToken::new(parts.clone()).is_ok());
        parts.offset = 1;
        assert!(MemToken::new(parts.clone()).is_err());
        parts.offset = 0;
        parts.len = 0;
        assert!(MemToken::new(parts.clone()).is_err());
        parts.len = 10;
        parts.payload = vec![0; MAX_PAYLOAD + 1];
        assert!(MemToken::new(parts.clone()).is_err());
        parts.payload.clear();
        assert!(MemToken::new(parts).is_err());
    }

    #[test]
    fn memory_and_signal_tokens_are_not_interchangeable() {
        let s = SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::AscendNotify,
            emulated: false,
            device: DeviceId(0),
            origin: origin(),
            generation: 3,
            payload: vec![b'n'; 65],
        })
        .unwrap();
        let err = MemToken::from_bytes(&s.to_bytes()).unwrap_err().to_string();
        assert!(err.contains("signal token, not a memory token"), "{err}");
        let err = SignalToken::from_text(&mem().to_text())
            .unwrap_err()
            .to_string();
        assert!(err.contains("memory token, not a signal token"), "{err}");
        assert_eq!(SignalToken::from_text(&s.to_text()).unwrap(), s);
    }

    #[test]
    fn narrow_keeps_identity_and_checks_bounds() {
        let t = mem();
        let n = t.narrow(100, 24).unwrap();
        assert_eq!((n.offset(), n.len()), (612, 24));
        assert_eq!(n.identity(), t.identity());
        assert_eq!(n.generation(), t.generation());
        assert!(t.narrow(1000, 25).is_err());
        assert!(t.narrow(0, 0).is_err());
        assert!(t.narrow(u64::MAX, 2).is_err());
    }

    #[test]
    fn reasons_name_the_problem() {
        let reason = |r: Result<MemToken>| r.unwrap_err().to_string();
        assert!(reason(MemToken::from_text("hello")).contains("does not start with"));
        assert!(reason(MemToken::from_text("devipc9:AAAA")).contains("unsupported text format"));
        let old = reason(MemToken::from_text("devipc1:AAAA"));
        assert!(old.contains("older devipc"), "{old}");
        assert!(reason(MemToken::from_text("devipc2:***")).contains("bad base64"));
        let mut b = mem().to_bytes();
        b[4] = 1;
        let v1 = reason(MemToken::from_bytes(&b));
        assert!(
            v1.contains("format version 1") && v1.contains("older devipc"),
            "{v1}"
        );
        let mut b = mem().to_bytes();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(reason(MemToken::from_bytes(&b)).contains("checksum"));
        let long = format!("devipc2:{}", "A".repeat(MAX_TEXT_LEN));
        assert!(reason(MemToken::from_text(&long)).contains("longer than any token"));
    }
}
