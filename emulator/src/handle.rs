//! Encoding object ids into the handle formats the vendor APIs hand out (pure logic).
//!
//! A handle crosses the process boundary as bytes the user sends anywhere; the receiving
//! surface decodes it back to an [`ObjectId`] and opens the object's files by name (O(1)).
//! Three shapes cover the vendor APIs:
//!
//! | vendor type | size | encoding |
//! |---|---|---|
//! | Ascend shareable handle (`uint64_t`) | 8 | the raw id ([`ObjectId::raw`]); [`crate::state::Registry::resolve`] checks it |
//! | Ascend IPC memory / notify key (`char[65]`) | 65 | [`encode_key`]: `devipc-emu:<vendor>:<kind>:<16 hex id>` + NUL padding |
//! | HIP `hipIpcMemHandle_t`, `hipIpcEventHandle_t`; Ascend `aclrtIpcEventHandle` | 64 | [`encode_handle64`]: magic, vendor, kind, id, 4 payload words, checksum |
//!
//! The vendor and kind are inside the key and 64-byte handle, so a notify key given to the
//! memory import, or a HIP handle given to ACL, fails at decode time; the registry checks
//! them again against the object's metadata ([`crate::state::ObjectMeta::expect`]).
//! Decoding is total: any bytes give a handle or [`EmuError::BadHandle`] (a zeroed
//! `hipIpcMemHandle_t` included).

use crate::error::EmuError;
use crate::state::ids::ObjectId;
use crate::state::meta::{ObjectKind, Vendor};

/// Length of an Ascend IPC key buffer, including the terminating NUL.
pub const KEY_LEN: usize = 65;
/// Length of a HIP IPC handle (`HIP_IPC_HANDLE_SIZE`) and `aclrtIpcEventHandle`.
pub const HANDLE64_LEN: usize = 64;

const KEY_PREFIX: &str = "devipc-emu:";
const MAGIC: &[u8; 8] = b"DVIPCEMU";
const HANDLE_VERSION: u8 = 1;

fn bad(reason: &'static str) -> EmuError {
    EmuError::BadHandle { reason }
}

/// The 65-byte key for an object: `devipc-emu:<vendor>:<kind>:<16 hex id>`, NUL padded
/// (always NUL terminated; the text is at most 38 bytes).
pub fn encode_key(vendor: Vendor, kind: ObjectKind, id: ObjectId) -> [u8; KEY_LEN] {
    let text = format!("{KEY_PREFIX}{vendor}:{kind}:{id}");
    let mut out = [0u8; KEY_LEN];
    let n = text.len().min(KEY_LEN - 1);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

/// Decodes a key. `bytes` is what the caller's `const char*` holds, read up to and
/// including the first NUL or at most [`KEY_LEN`] bytes; the text ends at the first NUL
/// (or the end of `bytes`) and must be at most 64 bytes.
pub fn decode_key(bytes: &[u8]) -> Result<(Vendor, ObjectKind, ObjectId), EmuError> {
    let text = match bytes.iter().position(|b| *b == 0) {
        Some(nul) => &bytes[..nul],
        None => bytes,
    };
    if text.len() >= KEY_LEN {
        return Err(bad("key is not NUL terminated within 65 bytes"));
    }
    let text = std::str::from_utf8(text).map_err(|_| bad("key is not ASCII"))?;
    let rest = text
        .strip_prefix(KEY_PREFIX)
        .ok_or(bad("not an emulator key"))?;
    let mut parts = rest.split(':');
    let (Some(vendor), Some(kind), Some(id), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(
            "key does not have the form devipc-emu:<vendor>:<kind>:<id>",
        ));
    };
    let vendor = Vendor::from_name(vendor).ok_or(bad("unknown vendor in key"))?;
    let kind = ObjectKind::from_name(kind).ok_or(bad("unknown object kind in key"))?;
    let id = ObjectId::parse_hex(id).ok_or(bad("bad object id in key"))?;
    Ok((vendor, kind, id))
}

/// A decoded 64-byte handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle64 {
    /// Surface that issued it.
    pub vendor: Vendor,
    /// Kind of the object it names.
    pub kind: ObjectKind,
    /// The object.
    pub id: ObjectId,
    /// Surface-defined words (e.g. HIP: offset of the exported pointer in the allocation,
    /// the exporter's pid as the real runtime stores it).
    pub payload: [u64; 4],
}

/// Encodes a 64-byte handle. Layout (little endian):
///
/// ```text
/// 0  8  magic "DVIPCEMU"     16 8  object id
/// 8  1  version (1)          24 32 payload[0..4]
/// 9  1  vendor code          56 8  FNV-1a 64 of bytes 0..56
/// 10 1  kind code
/// 11 5  zero
/// ```
pub fn encode_handle64(h: &Handle64) -> [u8; HANDLE64_LEN] {
    let mut out = [0u8; HANDLE64_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8] = HANDLE_VERSION;
    out[9] = h.vendor.code();
    out[10] = h.kind.code();
    out[16..24].copy_from_slice(&h.id.raw().to_le_bytes());
    for (i, w) in h.payload.iter().enumerate() {
        out[24 + 8 * i..32 + 8 * i].copy_from_slice(&w.to_le_bytes());
    }
    let sum = fnv1a64(&out[..56]);
    out[56..].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Decodes a 64-byte handle; total.
pub fn decode_handle64(bytes: &[u8; HANDLE64_LEN]) -> Result<Handle64, EmuError> {
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    if &bytes[..8] != MAGIC {
        return Err(bad("not an emulator handle (bad magic; zeroed or foreign)"));
    }
    if word(56) != fnv1a64(&bytes[..56]) {
        return Err(bad("handle checksum mismatch (corrupted)"));
    }
    if bytes[8] != HANDLE_VERSION || bytes[11..16].iter().any(|b| *b != 0) {
        return Err(bad("unsupported handle version"));
    }
    let vendor = Vendor::from_code(bytes[9]).ok_or(bad("unknown vendor in handle"))?;
    let kind = ObjectKind::from_code(bytes[10]).ok_or(bad("unknown object kind in handle"))?;
    let id = ObjectId::from_raw(word(16)).ok_or(bad("bad object id in handle"))?;
    let mut payload = [0u64; 4];
    for (i, w) in payload.iter_mut().enumerate() {
        *w = word(24 + 8 * i);
    }
    Ok(Handle64 {
        vendor,
        kind,
        id,
        payload,
    })
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ObjectId {
        ObjectId::new(0xfe_dcba, 0x12_3456_789a).unwrap()
    }

    #[test]
    fn keys_round_trip() {
        let k = encode_key(Vendor::Acl, ObjectKind::Notify, id());
        assert_eq!(k[KEY_LEN - 1], 0);
        let text_len = k.iter().position(|b| *b == 0).unwrap();
        assert_eq!(&k[..text_len], b"devipc-emu:acl:notify:fedcba123456789a");
        assert_eq!(
            decode_key(&k).unwrap(),
            (Vendor::Acl, ObjectKind::Notify, id())
        );
        assert_eq!(
            decode_key(&k[..text_len]).unwrap(),
            (Vendor::Acl, ObjectKind::Notify, id())
        );
        let longest = encode_key(Vendor::Hip, ObjectKind::MemKey, id());
        assert_eq!(decode_key(&longest).unwrap().1, ObjectKind::MemKey);
    }

    #[test]
    fn bad_keys_are_errors() {
        let long = [b'a'; 65];
        for k in [
            &b""[..],
            b"\0",
            b"devipc-emu:",
            b"devipc-emu:acl:notify",
            b"devipc-emu:acl:notify:fedcba123456789a:x",
            b"devipc-emu:cuda:notify:fedcba123456789a",
            b"devipc-emu:acl:blob:fedcba123456789a",
            b"devipc-emu:acl:notify:0000000000000000",
            b"devipc-emu:acl:notify:fedcba123456789",
            b"other:acl:notify:fedcba123456789a",
            b"devipc-emu:acl:notify:\xff\xfe",
            &long[..],
        ] {
            assert!(
                matches!(decode_key(k), Err(EmuError::BadHandle { .. })),
                "{k:?}"
            );
        }
    }

    #[test]
    fn handle64_round_trips_and_detects_damage() {
        let h = Handle64 {
            vendor: Vendor::Hip,
            kind: ObjectKind::Memory,
            id: id(),
            payload: [4096, 1234, 0, u64::MAX],
        };
        let b = encode_handle64(&h);
        assert_eq!(decode_handle64(&b).unwrap(), h);
        assert!(decode_handle64(&[0; 64]).is_err());
        for i in 0..64 {
            let mut d = b;
            d[i] ^= 0x40;
            assert!(decode_handle64(&d).is_err(), "flipped byte {i}");
        }
    }
}
