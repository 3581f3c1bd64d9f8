//! Object ids: unique, never reused, and recognisably tied to one state directory.
//!
//! Every shared object in a state directory (memory segment, IPC key, notify, event) has an
//! [`ObjectId`]; it names the object's files (`<id>.meta`, `<id>.lock`, `<id>.seg`) and is
//! what the surfaces encode into the handles they hand out (see [`crate::handle`]), so a
//! handle resolves to its object in O(1) without scanning the directory.
//!
//! Layout of the 64 bits: `salt:24 | counter:40`. The salt is drawn at random when the
//! state directory's ledger is first created and never changes; the counter comes from the
//! ledger under its lock and only grows. So ids are never reused within a directory, and
//! an id minted by another state directory is (with probability 1 - 2^-24) rejected by
//! its salt before any file is touched. The value 0 is never a valid id.

use std::fmt;

/// Number of low bits holding the counter.
pub const COUNTER_BITS: u32 = 40;
/// Largest counter value; the ledger refuses to mint more ids after it.
pub const MAX_COUNTER: u64 = (1 << COUNTER_BITS) - 1;
/// Mask of the salt once shifted down (24 bits).
pub const SALT_MASK: u32 = (1 << (64 - COUNTER_BITS)) - 1;

/// The id of a shared object in a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(u64);

impl ObjectId {
    /// Builds an id from a directory salt (non-zero, 24 bits) and a counter value
    /// (1..=[`MAX_COUNTER`]); `None` when either is out of range.
    pub fn new(salt: u32, counter: u64) -> Option<ObjectId> {
        if salt == 0 || salt > SALT_MASK || counter == 0 || counter > MAX_COUNTER {
            return None;
        }
        Some(ObjectId((u64::from(salt) << COUNTER_BITS) | counter))
    }

    /// Interprets a raw value taken from a handle; `None` for values no directory could
    /// have minted (zero salt or zero counter).
    pub fn from_raw(raw: u64) -> Option<ObjectId> {
        let id = ObjectId(raw);
        (id.salt() != 0 && id.counter() != 0).then_some(id)
    }

    /// The raw 64-bit value, as stored in handles (an Ascend shareable handle is exactly
    /// this value).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The salt of the state directory that minted the id.
    pub fn salt(self) -> u32 {
        (self.0 >> COUNTER_BITS) as u32
    }

    /// The creation counter (ids of one directory order by creation).
    pub fn counter(self) -> u64 {
        self.0 & MAX_COUNTER
    }

    /// Parses the 16-hex-digit form used in file names and key strings.
    pub fn parse_hex(text: &str) -> Option<ObjectId> {
        if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(text, 16)
            .ok()
            .and_then(ObjectId::from_raw)
    }
}

impl fmt::Display for ObjectId {
    /// 16 lower-case hex digits, the form used in file names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips() {
        let id = ObjectId::new(0xabcdef, 42).unwrap();
        assert_eq!(id.salt(), 0xabcdef);
        assert_eq!(id.counter(), 42);
        assert_eq!(id.to_string(), "abcdef000000002a");
        assert_eq!(ObjectId::parse_hex(&id.to_string()), Some(id));
        assert_eq!(ObjectId::from_raw(id.raw()), Some(id));
    }

    #[test]
    fn invalid_values_are_rejected() {
        assert_eq!(ObjectId::new(0, 1), None);
        assert_eq!(ObjectId::new(1 << 24, 1), None);
        assert_eq!(ObjectId::new(1, 0), None);
        assert_eq!(ObjectId::new(1, MAX_COUNTER + 1), None);
        assert!(ObjectId::new(SALT_MASK, MAX_COUNTER).is_some());
        assert_eq!(ObjectId::from_raw(0), None);
        assert_eq!(ObjectId::from_raw(1), None); // zero salt
        assert_eq!(ObjectId::from_raw(1 << 40), None); // zero counter
        assert_eq!(ObjectId::parse_hex("abc"), None);
        assert_eq!(ObjectId::parse_hex("+bcdef000000002a"), None);
        assert_eq!(ObjectId::parse_hex("0000000000000000"), None);
    }
}
