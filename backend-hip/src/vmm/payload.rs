//! The `hip-vmm-fd` token payload ([`VmmPayload`]) and the identity of the open file it
//! names ([`FileIdentity`]): what an importer checks the fd it got against.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use devipc_core::{Error, Result};
use devipc_shm::word_file::NAME_LEN;

/// The identity of an open file: `st_dev` and `st_ino` of `fstat` (a dma-buf has an inode
/// of its own in the kernel's dmabuf filesystem; the emulator's fd is a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileIdentity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileIdentity {
    /// `fstat` of `file`.
    pub(crate) fn of(file: &File) -> Result<FileIdentity> {
        let meta = file
            .metadata()
            .map_err(|e| Error::io("fstat of a VMM file descriptor", e))?;
        Ok(FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// What the export's lease is bound to besides the generation (FNV-1a, as legacy
    /// handles' tags): a token pairing this lease with another object's fd is refused.
    pub(crate) fn tag(&self) -> u64 {
        let mut bytes = Vec::with_capacity(20);
        bytes.extend_from_slice(b"vmfd");
        bytes.extend_from_slice(&self.dev.to_le_bytes());
        bytes.extend_from_slice(&self.ino.to_le_bytes());
        devipc_core::identity::fnv1a64(&bytes)
    }
}

/// `st_size` of `file`, or where `lseek(SEEK_END)` lands when that is 0 (dma-bufs support
/// it; a kernel that reports no size there still answers the seek).
pub(crate) fn real_size(file: &File) -> Result<u64> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io("fstat of a VMM file descriptor", e))?;
    if meta.len() != 0 {
        return Ok(meta.len());
    }
    let mut f = file;
    f.seek(SeekFrom::End(0))
        .map_err(|e| Error::io("lseek(SEEK_END) of a VMM file descriptor", e))
}

/// The `hip-vmm-fd` token payload, [`VmmPayload::LEN`] bytes, little-endian:
///
/// | bytes | field |
/// |---|---|
/// | 0 | format, 1 |
/// | 1 | flags: bit 0 [`VmmPayload::pidfd`] |
/// | 2..4 | 0 (reserved) |
/// | 4..8 | the fd's number in the exporter (`i32`) |
/// | 8..16 | `st_dev` of the exported fd |
/// | 16..24 | `st_ino` of the exported fd |
/// | 24..56 | the export's lease name |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VmmPayload {
    /// The exporter keeps the fd open at `fd` while it exports, and an importer may take a
    /// copy with `pidfd_getfd` (otherwise the fd only comes over a socket).
    pub(crate) pidfd: bool,
    /// The exported fd's number in the exporter's process.
    pub(crate) fd: i32,
    /// The open file the fd names.
    pub(crate) identity: FileIdentity,
    /// The lease importers hold.
    pub(crate) lease: [u8; NAME_LEN],
}

const FORMAT: u8 = 1;
const FLAG_PIDFD: u8 = 0x01;

impl VmmPayload {
    /// Length of the encoded payload.
    pub(crate) const LEN: usize = 24 + NAME_LEN;

    /// The payload bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.push(FORMAT);
        out.push(if self.pidfd { FLAG_PIDFD } else { 0 });
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.fd.to_le_bytes());
        out.extend_from_slice(&self.identity.dev.to_le_bytes());
        out.extend_from_slice(&self.identity.ino.to_le_bytes());
        out.extend_from_slice(&self.lease);
        out
    }

    /// Parses an untrusted payload: exact length, known format and flags, a plausible fd.
    pub(crate) fn decode(bytes: &[u8]) -> Result<VmmPayload> {
        if bytes.len() != Self::LEN {
            return Err(Error::invalid_token(format!(
                "a hip-vmm-fd payload is {} bytes (fd, file identity and lease), not {}",
                Self::LEN,
                bytes.len()
            )));
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        if bytes[0] != FORMAT || bytes[2..4] != [0, 0] || bytes[1] & !FLAG_PIDFD != 0 {
            return Err(Error::invalid_token(format!(
                "unknown hip-vmm-fd payload format {} flags {:#x}",
                bytes[0], bytes[1]
            )));
        }
        let fd = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if fd < 0 {
            return Err(Error::invalid_token(format!(
                "a hip-vmm-fd payload names fd {fd}"
            )));
        }
        let mut lease = [0u8; NAME_LEN];
        lease.copy_from_slice(&bytes[24..]);
        Ok(VmmPayload {
            pidfd: bytes[1] & FLAG_PIDFD != 0,
            fd,
            identity: FileIdentity {
                dev: u64_at(8),
                ino: u64_at(16),
            },
            lease,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VmmPayload {
        VmmPayload {
            pidfd: true,
            fd: 17,
            identity: FileIdentity { dev: 5, ino: 99 },
            lease: *b"0123456789abcdef0123456789abcdef",
        }
    }

    #[test]
    fn payload_round_trips() {
        for pidfd in [true, false] {
            let p = VmmPayload { pidfd, ..sample() };
            let bytes = p.encode();
            assert_eq!(bytes.len(), VmmPayload::LEN);
            assert_eq!(VmmPayload::decode(&bytes).unwrap(), p);
        }
    }

    #[test]
    fn malformed_payloads_are_refused() {
        let good = sample().encode();
        let mut cases: Vec<Vec<u8>> = vec![good[..good.len() - 1].to_vec(), {
            let mut b = good.clone();
            b.push(0);
            b
        }];
        for (at, value) in [(0, 2u8), (1, 0x80), (2, 1), (3, 1), (7, 0x80)] {
            let mut b = good.clone();
            b[at] = value;
            cases.push(b);
        }
        for bad in cases {
            assert!(
                matches!(VmmPayload::decode(&bad), Err(Error::InvalidToken { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn tags_differ_by_identity() {
        let a = FileIdentity { dev: 1, ino: 2 };
        let b = FileIdentity { dev: 1, ino: 3 };
        assert_ne!(a.tag(), b.tag());
        assert_eq!(a.tag(), FileIdentity { dev: 1, ino: 2 }.tag());
    }
}
