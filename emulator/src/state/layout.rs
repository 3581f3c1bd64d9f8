//! File names inside the state directory (pure naming, no I/O).
//!
//! ```text
//! $DEVIPC_EMU_DIR/
//!   ledger                 fixed: id salt + counter + per-device bytes in use
//!   <id>.lock              per object: empty file, its flock is the object lock
//!   <id>.meta              per object: ObjectMeta text, replaced atomically by rename
//!   <id>.meta.tmp          transient: the next <id>.meta being written
//!   <id>.seg               per object with data: device memory or a page of sync words
//!   violations             only after a vendor rule was broken (super::violations)
//! ```
//! `<id>` is the 16-hex-digit [`ObjectId`]. The `ledger` is the only fixed bookkeeping
//! file; a state directory with no live objects and no violation contains nothing else.

use super::ids::ObjectId;

/// Name of the ledger file.
pub const LEDGER: &str = "ledger";

/// The per-object files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectFile {
    /// `<id>.lock`.
    Lock,
    /// `<id>.meta`.
    Meta,
    /// `<id>.meta.tmp`.
    MetaTmp,
    /// `<id>.seg`.
    Segment,
}

impl ObjectFile {
    /// All per-object file roles.
    pub const ALL: [ObjectFile; 4] = [
        ObjectFile::Lock,
        ObjectFile::Meta,
        ObjectFile::MetaTmp,
        ObjectFile::Segment,
    ];

    fn suffix(self) -> &'static str {
        match self {
            ObjectFile::Lock => ".lock",
            ObjectFile::Meta => ".meta",
            ObjectFile::MetaTmp => ".meta.tmp",
            ObjectFile::Segment => ".seg",
        }
    }

    /// The file name of this role for object `id`.
    pub fn name(self, id: ObjectId) -> String {
        format!("{id}{}", self.suffix())
    }
}

/// Splits a directory entry name into an object id and file role; `None` for names the
/// emulator did not create (they are left alone).
pub fn parse_object_file(name: &str) -> Option<(ObjectId, ObjectFile)> {
    let (hex, rest) = name.split_at_checked(16)?;
    let id = ObjectId::parse_hex(hex)?;
    let role = ObjectFile::ALL.into_iter().find(|r| r.suffix() == rest)?;
    Some((id, role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let id = ObjectId::new(7, 9).unwrap();
        for role in ObjectFile::ALL {
            assert_eq!(parse_object_file(&role.name(id)), Some((id, role)));
        }
        assert_eq!(ObjectFile::Segment.name(id), "0000070000000009.seg");
        for other in [
            "ledger",
            "x.meta",
            "0000070000000009",
            "0000070000000009.metax",
            "",
            "é",
        ] {
            assert_eq!(parse_object_file(other), None, "{other}");
        }
    }
}
