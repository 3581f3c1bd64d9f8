//! The byte and text encodings of tokens: the layout, its constants, `to_bytes` /
//! `from_bytes`, `to_text` / `from_text` and the `Display` / `FromStr` they back, framing,
//! CRC, the text prefix and the physical identity block. A token read here is checked as
//! one built from parts (`validate` in `token.rs`).
//!
//! # Format version 3
//!
//! Little-endian, fixed header, then the payload, then a CRC-32 (IEEE) of everything
//! before it:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `DVIP` |
//! | 4 | 1 | format version (3; 2 is still read) |
//! | 5 | 1 | kind: 1 memory, 2 signal |
//! | 6 | 1 | backend: 1 ascend, 2 hip |
//! | 7 | 1 | mechanism tag ([`Mechanism`]) |
//! | 8 | 1 | flags: bit 0 = produced by the emulator; other bits must be 0 |
//! | 9 | 1 | reserved, 0 |
//! | 10 | 2 | payload length, 1..=256 |
//! | 12 | 4 | device id (the producer's index, under the producer's visibility mask) |
//! | 16 | 4 | producer pid |
//! | 20 | 8 | producer pid-namespace inode |
//! | 28 | 8 | producer host boot-id hash |
//! | 36 | 8 | producer start time (clock ticks since boot; 0 = unknown) |
//! | 44 | 8 | generation |
//! | 52 | 32 | version 3 only: the device's [`PhysicalDevice`] identity (below) |
//! | 84 (v2: 52) | 8 | memory only: size of the exported vendor object |
//! | 92 (v2: 60) | 8 | memory only: offset of the range within it |
//! | 100 (v2: 68) | 8 | memory only: length of the range |
//! | 84 or 108 (v2: 52 or 76) | n | vendor payload (binary safe) |
//! | end - 4 | 4 | CRC-32 of all preceding bytes |
//!
//! The physical identity block (offsets relative to 52):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | known fields: bit 0 PCI bus id, bit 1 UUID, bit 2 physical id; others 0 |
//! | 1 | 3 | reserved, 0 |
//! | 4 | 4 | PCI domain |
//! | 8 | 1 | PCI bus |
//! | 9 | 1 | PCI device (0..=31) |
//! | 10 | 1 | PCI function (0..=7) |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 4 | physical id |
//! | 16 | 16 | UUID |
//!
//! A field that is not known is all zeros, so one token has one encoding.
//!
//! Version 2 added the producer's start time: with the pid it names one process even
//! after the pid is reused. Version 3 added the physical device identity, so an importer
//! under another visibility mask finds the exporter's device. Version 2 tokens are still
//! read (their identity is [`PhysicalDevice::UNKNOWN`]) and import as before; version 1
//! tokens are refused with a reason (their pid cannot be told from a reused one).
//!
//! The text form is `devipc3:` (for version 2, `devipc2:`) followed by the binary form in
//! URL-safe base64 without padding, so it survives shells, URLs, JSON and environment
//! variables; the prefix's digit must match the version inside.
//!
//! Parsing is total: any byte or text string gives a token or
//! [`Error::InvalidToken`] with a reason. Lengths are bounded before anything is
//! allocated, and every single-bit corruption is caught by the CRC.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{Common, Mechanism, MemToken, SignalToken, TokenOrigin};
use crate::backend_kind::BackendKind;
use crate::error::{Error, Result};
use crate::identity::HostIdentity;
use crate::ids::{DeviceId, ProcessId};
use crate::physical::{DeviceUuid, PciBusId, PhysicalDevice};

/// Prefix of the text form this crate writes; the digit is the format version.
pub const TEXT_PREFIX: &str = "devipc3:";
/// The wire format version this crate writes.
pub const FORMAT_VERSION: u8 = 3;
/// The oldest wire format version this crate still reads (without a physical identity).
pub const OLDEST_READABLE_VERSION: u8 = 2;
/// Largest vendor payload a token may carry.
pub const MAX_PAYLOAD: usize = 256;

const MAGIC: [u8; 4] = *b"DVIP";
const KIND_MEM: u8 = 1;
const KIND_SIGNAL: u8 = 2;
const FLAG_EMULATED: u8 = 0x01;
/// The header both kinds share, up to and including the generation.
const ORIGIN_HEADER: usize = 52;
/// The physical identity block of version 3.
const PHYSICAL_BLOCK: usize = 32;
const PHYSICAL_PCI: u8 = 0x01;
const PHYSICAL_UUID: u8 = 0x02;
const PHYSICAL_ID: u8 = 0x04;
const COMMON_HEADER: usize = ORIGIN_HEADER + PHYSICAL_BLOCK;
const MEM_FIELDS: usize = 24;
const MEM_HEADER: usize = COMMON_HEADER + MEM_FIELDS;
const CRC_LEN: usize = 4;
/// Largest binary token.
pub const MAX_BINARY_LEN: usize = MEM_HEADER + MAX_PAYLOAD + CRC_LEN;
/// Largest text token.
pub const MAX_TEXT_LEN: usize = TEXT_PREFIX.len() + MAX_BINARY_LEN.div_ceil(3) * 4;

impl MemToken {
    /// Binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.common.header_len() + MEM_FIELDS + self.common.payload.len() + CRC_LEN,
        );
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

    /// Text form: `devipc3:` (a version 2 token: `devipc2:`) + URL-safe base64.
    pub fn to_text(&self) -> String {
        to_text(self.common.version, &self.to_bytes())
    }

    /// Parses the text form.
    pub fn from_text(text: &str) -> Result<Self> {
        MemToken::from_bytes(&from_text(text)?)
    }
}

impl SignalToken {
    /// Binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(self.common.header_len() + self.common.payload.len() + CRC_LEN);
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

    /// Text form: `devipc3:` (a version 2 token: `devipc2:`) + URL-safe base64.
    pub fn to_text(&self) -> String {
        to_text(self.common.version, &self.to_bytes())
    }

    /// Parses the text form.
    pub fn from_text(text: &str) -> Result<Self> {
        SignalToken::from_bytes(&from_text(text)?)
    }
}

/// `Display` writes the text form, `FromStr` parses it: `token.to_string()` and
/// `text.parse::<MemToken>()`.
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

impl Common {
    /// Length of the header before the kind's own fields.
    fn header_len(&self) -> usize {
        common_header_len(self.version)
    }

    /// Writes the header both kinds share: bytes 0..52, then (version 3) the physical
    /// identity block.
    fn write_header(&self, out: &mut Vec<u8>, kind: u8) {
        out.extend_from_slice(&MAGIC);
        out.push(self.version);
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
        if self.version >= 3 {
            write_physical(out, &self.physical);
        }
    }
}

/// Appends the payload and the CRC.
fn finish(mut out: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    out.extend_from_slice(payload);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The text form of `bytes`: the prefix of `version`, then URL-safe base64.
fn to_text(version: u8, bytes: &[u8]) -> String {
    let mut s = String::with_capacity(MAX_TEXT_LEN);
    s.push_str(&text_prefix(version));
    URL_SAFE_NO_PAD.encode_string(bytes, &mut s);
    s
}

/// `devipc<version>:`.
fn text_prefix(version: u8) -> String {
    format!("devipc{version}:")
}

/// The bytes of a text token: checks its length, prefix and base64, and that the
/// prefix's version is the one inside.
fn from_text(text: &str) -> Result<Vec<u8>> {
    let text = text.trim();
    if text.len() > MAX_TEXT_LEN {
        return Err(Error::invalid_token(format!(
            "text is {} characters, longer than any token ({MAX_TEXT_LEN})",
            text.len()
        )));
    }
    let readable = (OLDEST_READABLE_VERSION..=FORMAT_VERSION)
        .find_map(|v| text.strip_prefix(&text_prefix(v)).map(|body| (v, body)));
    let (version, body) = match readable {
        Some(found) => found,
        None if text.starts_with("devipc1:") => {
            return Err(Error::invalid_token(format!(
                "a `devipc1:` token was made by an older devipc (format version 1, without \
                 the producer's start time); this devipc reads `devipc2:` and \
                 `{TEXT_PREFIX}` tokens: export it again"
            )));
        }
        None if text.starts_with("devipc") => {
            return Err(Error::invalid_token(format!(
                "unsupported text format; this devipc reads `devipc2:` and `{TEXT_PREFIX}` \
                 tokens"
            )));
        }
        None => {
            return Err(Error::invalid_token(format!(
                "text does not start with `{TEXT_PREFIX}` (or `devipc2:`)"
            )));
        }
    };
    let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|e| {
        Error::invalid_token(format!("bad base64 after `{}`: {e}", text_prefix(version)))
    })?;
    match bytes.get(4) {
        Some(&inside) if inside != version && bytes.get(..4) == Some(&MAGIC[..]) => {
            Err(Error::invalid_token(format!(
                "the text prefix says format version {version} but the token inside is \
                 version {inside}: edited"
            )))
        }
        _ => Ok(bytes),
    }
}

/// Length of the header both kinds share, in format `version`.
fn common_header_len(version: u8) -> usize {
    if version >= 3 {
        COMMON_HEADER
    } else {
        ORIGIN_HEADER
    }
}

/// Appends the 32-byte physical identity block (version 3).
fn write_physical(out: &mut Vec<u8>, physical: &PhysicalDevice) {
    let mut known = 0u8;
    let mut block = [0u8; PHYSICAL_BLOCK];
    if let Some(pci) = physical.pci_bus_id {
        known |= PHYSICAL_PCI;
        block[4..8].copy_from_slice(&pci.domain.to_le_bytes());
        block[8] = pci.bus;
        block[9] = pci.device;
        block[10] = pci.function;
    }
    if let Some(id) = physical.physical_id {
        known |= PHYSICAL_ID;
        block[12..16].copy_from_slice(&id.to_le_bytes());
    }
    if let Some(uuid) = physical.uuid {
        known |= PHYSICAL_UUID;
        block[16..32].copy_from_slice(&uuid.0);
    }
    block[0] = known;
    out.extend_from_slice(&block);
}

/// Reads the physical identity block; every byte of a field that is not known, and every
/// reserved byte, must be zero (one token, one encoding).
fn read_physical(block: [u8; PHYSICAL_BLOCK]) -> Result<PhysicalDevice> {
    let known = block[0];
    if known & !(PHYSICAL_PCI | PHYSICAL_UUID | PHYSICAL_ID) != 0 || block[1..4] != [0; 3] {
        return Err(Error::invalid_token(format!(
            "reserved bits set in the physical device identity (known-fields byte {known:#04x})"
        )));
    }
    let zero = |range: std::ops::Range<usize>| block[range].iter().all(|&b| b == 0);
    let pci = if known & PHYSICAL_PCI != 0 {
        if block[11] != 0 {
            return Err(Error::invalid_token(
                "reserved byte set in the physical device identity",
            ));
        }
        let domain = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
        Some(
            PciBusId::new(domain, block[8], block[9], block[10])
                .map_err(|e| Error::invalid_token(format!("physical device identity: {e}")))?,
        )
    } else if zero(4..12) {
        None
    } else {
        return Err(Error::invalid_token(
            "the physical device identity has PCI bytes but says no PCI bus id is known",
        ));
    };
    let physical_id = if known & PHYSICAL_ID != 0 {
        Some(u32::from_le_bytes([
            block[12], block[13], block[14], block[15],
        ]))
    } else if zero(12..16) {
        None
    } else {
        return Err(Error::invalid_token(
            "the physical device identity has a physical id but says none is known",
        ));
    };
    let uuid = if known & PHYSICAL_UUID != 0 {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&block[16..32]);
        Some(DeviceUuid::from_runtime(bytes).ok_or_else(|| {
            Error::invalid_token("the physical device identity has an all-zero UUID")
        })?)
    } else if zero(16..32) {
        None
    } else {
        return Err(Error::invalid_token(
            "the physical device identity has UUID bytes but says no UUID is known",
        ));
    };
    Ok(PhysicalDevice {
        pci_bus_id: pci,
        uuid,
        physical_id,
    })
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
    let version = bytes[4];
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        let hint = if version < OLDEST_READABLE_VERSION {
            "; it was made by an older devipc: export it again"
        } else {
            "; it was made by a newer devipc"
        };
        return Err(Error::invalid_token(format!(
            "format version {version} is not supported (this devipc reads versions \
             {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}){hint}"
        )));
    }
    let header = match bytes[5] {
        KIND_MEM => common_header_len(version) + MEM_FIELDS,
        KIND_SIGNAL => common_header_len(version),
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
        version,
        header,
        payload_len,
    })
}

/// Sequential little-endian reader over a frame whose length is already checked.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    version: u8,
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

    /// Reads bytes 6..52, the physical identity (version 3) and the payload.
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
        let physical = if self.version >= 3 {
            read_physical(self.take())?
        } else {
            PhysicalDevice::UNKNOWN
        };
        let payload = self.bytes[self.header..self.header + self.payload_len].to_vec();
        Ok(Common {
            version: self.version,
            physical,
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
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |mut crc, &b| {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
        crc
    })
}
