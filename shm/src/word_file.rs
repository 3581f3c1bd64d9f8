//! [`WordFile`]: a small file of 32-bit words that several processes map and futex on.
//!
//! The HIP backend pairs every IPC event with one (DESIGN section 5.5: a HIP event never
//! recorded returns at once, so a word in host shared memory makes `wait` block until the
//! peer's `notify`). The creator names the file with random hex, passes the name to its
//! peers inside a token, and unlinks it when it destroys the object; mappings made before
//! the unlink stay valid.
//!
//! The last words of the page record the creator (pid, start time and pid namespace, so
//! [`sweep_orphans`] can tell a crashed creator from a live one in another container) and
//! are not handed out. A file without the format word (written before the pid
//! namespace was recorded) is read as a creator of the caller's own namespace.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::os::{self, MappedRegion};
use crate::process::ProcessIdentity;

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
        let path = dir.join(format!("{PREFIX}{}", valid_name(&name)?));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let mapped = file
            .set_len(os::page_size() as u64)
            .and_then(|()| MappedRegion::map_file(&file, os::page_size()));
        let created = mapped.and_then(|region| {
            let me = ProcessIdentity::current()?;
            // Before the identity is written: processes of other pid namespaces judge the
            // creator by its beacon.
            crate::liveness::announce(dir)?;
            let word = WordFile {
                path: path.clone(),
                name,
                region,
            };
            word.record_creator(me);
            Ok(word)
        });
        if created.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        created
    }

    /// Writes `who` into the creator words (the last words of the page).
    fn record_creator(&self, who: ProcessIdentity) {
        let [format, ns, pid, lo, hi] = creator_words(&self.region);
        pid.store(who.pid as u32, Ordering::Release);
        lo.store(who.start_time as u32, Ordering::Release);
        hi.store((who.start_time >> 32) as u32, Ordering::Release);
        ns.store(who.pid_ns, Ordering::Release);
        format.store(FORMAT_NS, Ordering::Release);
    }

    /// The process that created the file.
    pub fn creator(&self) -> ProcessIdentity {
        let [format, ns, pid, lo, hi] = creator_words(&self.region);
        ProcessIdentity {
            pid: pid.load(Ordering::Acquire) as i32,
            start_time: u64::from(lo.load(Ordering::Acquire))
                | (u64::from(hi.load(Ordering::Acquire)) << 32),
            pid_ns: if format.load(Ordering::Acquire) == FORMAT_NS {
                ns.load(Ordering::Acquire)
            } else {
                ProcessIdentity::current_pid_ns()
            },
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
        let path = dir.join(format!("{PREFIX}{}", valid_name(&name)?));
        let file: File = OpenOptions::new().read(true).write(true).open(&path)?;
        if file.metadata()?.len() < os::page_size() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "word file is truncated",
            ));
        }
        let region = MappedRegion::map_file(&file, os::page_size())?;
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

    /// Word `index` (0-based) of the file, for the caller's use: the last
    /// [`CREATOR_WORDS`] words of the page record the creator and are not handed out.
    pub fn word(&self, index: usize) -> Option<&AtomicU32> {
        if index >= os::page_size() / 4 - CREATOR_WORDS {
            return None;
        }
        self.region.atomic_u32(index.checked_mul(4)?)
    }

    /// The 64-bit word at byte `offset` (8-byte aligned), for counters that must not wrap;
    /// `None` past the words handed out (see [`WordFile::word`]).
    pub fn word64(&self, offset: usize) -> Option<&AtomicU64> {
        if offset.checked_add(8)? > self.usable_bytes() {
            return None;
        }
        self.region.atomic_u64(offset)
    }

    /// Copies `dst.len()` bytes at byte `offset` out of the words handed out; `false` (and
    /// no copy) past them.
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> bool {
        offset
            .checked_add(dst.len())
            .is_some_and(|end| end <= self.usable_bytes())
            && self.region.read_at(offset, dst)
    }

    /// Copies `src` into the words handed out at byte `offset`; `false` (and no copy) past
    /// them.
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> bool {
        offset
            .checked_add(src.len())
            .is_some_and(|end| end <= self.usable_bytes())
            && self.region.write_at(offset, src)
    }

    /// The bytes before the creator words.
    fn usable_bytes(&self) -> usize {
        os::page_size() - 4 * CREATOR_WORDS
    }

    /// Removes the file so no new process can open it; existing mappings stay valid.
    pub fn unlink(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Prefix of word file names.
const PREFIX: &str = "word-";

/// The words at the end of the page that record the creator: a format word
/// ("dewn"), its pid namespace, pid, and start time (low, high).
pub const CREATOR_WORDS: usize = 5;

/// The format word of a file that records its creator's pid namespace ("dewn"). The pid
/// and start time keep their places (the last three words) from before.
const FORMAT_NS: u32 = 0x6e77_6564;

fn creator_words(region: &MappedRegion) -> [&AtomicU32; CREATOR_WORDS] {
    let last = os::page_size() - 4 * CREATOR_WORDS;
    [0, 4, 8, 12, 16].map(|off| {
        region
            .atomic_u32(last + off)
            .expect("a mapping is a whole page")
    })
}

/// Removes the word files in `dir` whose creator is dead: what a crashed creator left
/// behind (mappings other processes still have stay valid). Returns how many it removed;
/// unreadable entries are skipped.
pub fn sweep_orphans(dir: &Path) -> io::Result<usize> {
    crate::private_dir::sweep(dir, PREFIX, |name| {
        let word = WordFile::open(dir, name.as_bytes())?;
        if word.creator().is_alive_in(dir) {
            return Ok(false);
        }
        word.unlink()?;
        Ok(true)
    })
    .inspect(|_| {
        // The beacons of the processes that are gone, after what they recorded.
        let _ = crate::liveness::sweep(dir);
    })
}

/// A fresh random name: [`NAME_LEN`] lower-case hex digits.
pub(crate) fn random_name() -> io::Result<[u8; NAME_LEN]> {
    let mut random = [0u8; NAME_LEN / 2];
    os::random_bytes(&mut random)?;
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
        assert!(a.word(os::page_size() / 4).is_none());
        a.unlink().unwrap();
        a.unlink().unwrap();
        // Mappings survive the unlink; new opens fail.
        b.word(1).unwrap().store(9, Ordering::SeqCst);
        assert_eq!(a.word(1).unwrap().load(Ordering::SeqCst), 9);
        assert_eq!(
            WordFile::open(&dir, a.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn orphans_of_dead_creators_are_swept() {
        let dir =
            std::env::temp_dir().join(format!("devipc-wordfile-sweep-{}", std::process::id()));
        let dir = crate::private_dir::open_private_dir(&dir).unwrap();
        let mine = WordFile::create(&dir).unwrap();
        assert_eq!(mine.creator(), ProcessIdentity::current().unwrap());
        let orphan = WordFile::create(&dir).unwrap();
        orphan.record_creator(ProcessIdentity {
            pid: 0x7fff_fff0,
            start_time: 1 << 40,
            pid_ns: ProcessIdentity::current_pid_ns(),
        });
        assert_eq!(orphan.creator().start_time, 1 << 40);
        assert_eq!(sweep_orphans(&dir).unwrap(), 1);
        assert!(WordFile::open(&dir, orphan.name()).is_err());
        assert!(WordFile::open(&dir, mine.name()).is_ok());
        assert!(
            mine.word(os::page_size() / 4 - CREATOR_WORDS).is_none(),
            "creator words are reserved"
        );
        assert!(mine.word(os::page_size() / 4 - CREATOR_WORDS - 1).is_some());
        // A live creator of another pid namespace is judged by its beacon: this process's
        // identity in another namespace has none, so it is dead there...
        let me = ProcessIdentity::current().unwrap();
        let foreign = WordFile::create(&dir).unwrap();
        foreign.record_creator(ProcessIdentity {
            pid_ns: me.pid_ns.wrapping_add(1),
            ..me
        });
        assert_eq!(sweep_orphans(&dir).unwrap(), 1);
        assert!(WordFile::open(&dir, foreign.name()).is_err());
        // ...and a file of the old format (no pid namespace) is of ours: alive.
        let old = WordFile::create(&dir).unwrap();
        creator_words(&old.region)[0].store(0, Ordering::SeqCst);
        creator_words(&old.region)[1].store(0, Ordering::SeqCst);
        assert_eq!(old.creator(), me);
        assert_eq!(sweep_orphans(&dir).unwrap(), 0);
        old.unlink().unwrap();
        mine.unlink().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
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
