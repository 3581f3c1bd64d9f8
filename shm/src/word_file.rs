//! [`WordFile`]: a small file of 32-bit words that several processes map and futex on.
//!
//! The HIP backend pairs every IPC event with one (DESIGN section 5.5: a HIP event never
//! recorded returns at once, so a word in host shared memory makes `wait` block until the
//! peer's `notify`). The creator names the file with random hex, passes the name to its
//! peers inside a token, and unlinks it when it destroys the object; mappings made before
//! the unlink stay valid.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;

use crate::sys::{self, MappedRegion};

/// Length of a name in bytes (random, hex encoded).
pub const NAME_LEN: usize = 32;

/// A mapped word file.
#[derive(Debug)]
pub struct WordFile {
    path: PathBuf,
    name: [u8; NAME_LEN],
    region: MappedRegion,
}

impl WordFile {
    /// Creates a fresh, zeroed, page-sized word file with a random name in `dir` (which
    /// should come from [`open_private_dir`](crate::private_dir::open_private_dir)).
    pub fn create(dir: &Path) -> io::Result<WordFile> {
        let name = random_name()?;
        let path = dir.join(valid_name(&name)?);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let mapped = file
            .set_len(sys::page_size() as u64)
            .and_then(|()| MappedRegion::map_file(&file, sys::page_size()));
        match mapped {
            Ok(region) => Ok(WordFile { path, name, region }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Maps the existing word file `name` in `dir`. A name that is not [`NAME_LEN`] hex
    /// digits is `InvalidInput`; a file that is gone (its creator destroyed it) is
    /// `NotFound`.
    pub fn open(dir: &Path, name: &[u8]) -> io::Result<WordFile> {
        let name: [u8; NAME_LEN] = name.try_into().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "word file name has the wrong length",
            )
        })?;
        let path = dir.join(valid_name(&name)?);
        let file: File = OpenOptions::new().read(true).write(true).open(&path)?;
        if file.metadata()?.len() < sys::page_size() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "word file is truncated",
            ));
        }
        let region = MappedRegion::map_file(&file, sys::page_size())?;
        Ok(WordFile { path, name, region })
    }

    /// The name to send to peers.
    pub fn name(&self) -> &[u8; NAME_LEN] {
        &self.name
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Word `index` (0-based) of the file.
    pub fn word(&self, index: usize) -> Option<&AtomicU32> {
        self.region.atomic_u32(index.checked_mul(4)?)
    }

    /// Removes the file so no new process can open it; existing mappings stay valid.
    pub fn unlink(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// A fresh random name: [`NAME_LEN`] lower-case hex digits.
pub(crate) fn random_name() -> io::Result<[u8; NAME_LEN]> {
    let mut random = [0u8; NAME_LEN / 2];
    sys::random_bytes(&mut random)?;
    let mut name = [0u8; NAME_LEN];
    for (i, b) in random.iter().enumerate() {
        name[2 * i..2 * i + 2].copy_from_slice(format!("{b:02x}").as_bytes());
    }
    Ok(name)
}

/// The name as a path component: lower-case hex only, so it cannot escape the directory.
pub(crate) fn valid_name(name: &[u8; NAME_LEN]) -> io::Result<&str> {
    if name
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        // All bytes are ASCII, so this cannot fail.
        std::str::from_utf8(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "word file name is not lower-case hex",
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    fn scratch() -> PathBuf {
        let p = std::env::temp_dir().join(format!("devipc-wordfile-{}", std::process::id()));
        crate::private_dir::open_private_dir(&p).unwrap()
    }

    #[test]
    fn create_open_share_and_unlink() {
        let dir = scratch();
        let a = WordFile::create(&dir).unwrap();
        let b = WordFile::open(&dir, a.name()).unwrap();
        a.word(0).unwrap().store(7, Ordering::SeqCst);
        assert_eq!(b.word(0).unwrap().load(Ordering::SeqCst), 7);
        assert!(a.word(sys::page_size() / 4).is_none());
        a.unlink().unwrap();
        a.unlink().unwrap();
        // Mappings survive the unlink; new opens fail.
        b.word(1).unwrap().store(9, Ordering::SeqCst);
        assert_eq!(a.word(1).unwrap().load(Ordering::SeqCst), 9);
        assert_eq!(
            WordFile::open(&dir, a.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn hostile_names_are_refused() {
        let dir = std::env::temp_dir();
        for bad in [
            &b"../../etc/passwd"[..],
            &[b'/'; NAME_LEN][..],
            &[b'A'; NAME_LEN][..],
        ] {
            assert_eq!(
                WordFile::open(&dir, bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
