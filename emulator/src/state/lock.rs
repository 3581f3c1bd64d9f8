//! RAII `flock` locks for cross-process (and cross-thread) critical sections.
//!
//! A [`FileLock`] owns the open file it locked and unlocks on drop. `flock` locks belong
//! to the *open file description*, so:
//! - two threads of one process exclude each other as long as each opened the file
//!   itself, which [`FileLock::open`] always does (never share a locked `File`);
//! - a process that dies releases its locks automatically (no stale lock files);
//! - lock files are opened per critical section and never kept open, because a `fork`ed
//!   child would share the description and the lock would stop excluding it.
//!
//! Locks are blocking without timeout: critical sections in the emulator are short and
//! never wait on anything but other locks, in the fixed order documented in the crate
//! docs (object lock, then ledger lock).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use devipc_shm::os::{self, FlockMode};

use crate::error::EmuError;

/// Shared (many readers) or exclusive (one writer).
pub type LockMode = FlockMode;

/// How [`FileLock::open`] treats a missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create it (mode 0600) if missing.
    Create,
    /// It must exist; a missing file is `ErrorKind::NotFound`.
    Existing,
}

/// A held `flock` on an open file; released when dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
    mode: LockMode,
}

impl FileLock {
    /// Opens `path` read-write and blocks until the lock is acquired.
    pub fn open(path: &Path, open: OpenMode, mode: LockMode) -> Result<FileLock, EmuError> {
        let file = open_rw(path, open).map_err(|e| EmuError::io("open", path, e))?;
        FileLock::acquire(file, path, mode)
    }

    /// Like [`FileLock::open`] but returns `Ok(None)` at once if another open file
    /// description holds a conflicting lock.
    pub fn try_open(
        path: &Path,
        open: OpenMode,
        mode: LockMode,
    ) -> Result<Option<FileLock>, EmuError> {
        let file = open_rw(path, open).map_err(|e| EmuError::io("open", path, e))?;
        let got = os::flock(&file, mode, false).map_err(|e| EmuError::io("flock", path, e))?;
        Ok(got.then(|| FileLock {
            file,
            path: path.to_owned(),
            mode,
        }))
    }

    /// Locks an already open file (which the caller must not have shared with other
    /// threads or a forked child), blocking until acquired.
    pub fn acquire(file: File, path: &Path, mode: LockMode) -> Result<FileLock, EmuError> {
        os::flock(&file, mode, true).map_err(|e| EmuError::io("flock", path, e))?;
        Ok(FileLock {
            file,
            path: path.to_owned(),
            mode,
        })
    }

    /// The locked file, for reading and writing its contents inside the critical
    /// section.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The path the lock was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mode the lock is held in.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// Whether the path still names the locked file: `false` once another process
    /// unlinked (or replaced) it while we waited, which the registry reads as "the object
    /// was destroyed".
    pub fn still_linked(&self) -> Result<bool, EmuError> {
        use std::os::unix::fs::MetadataExt;
        let mine = self
            .file
            .metadata()
            .map_err(|e| EmuError::io("fstat", &self.path, e))?;
        match std::fs::metadata(&self.path) {
            Ok(now) => Ok(now.dev() == mine.dev() && now.ino() == mine.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(EmuError::io("stat", &self.path, e)),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlock explicitly first so the release
        // does not depend on other fds of the same description. An error here cannot be
        // acted upon and the close below still releases it.
        let _ = os::funlock(&self.file);
    }
}

/// Opens `path` read-write without following a final symlink, creating it with mode
/// 0600 when `open` is [`OpenMode::Create`].
pub(crate) fn open_rw(path: &Path, open: OpenMode) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(open == OpenMode::Create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("devipc-emu-lock-{}-{name}", std::process::id()))
    }

    #[test]
    fn exclusive_excludes_and_shared_shares() {
        let p = path("modes");
        let a = FileLock::open(&p, OpenMode::Create, LockMode::Shared).unwrap();
        let b = FileLock::try_open(&p, OpenMode::Existing, LockMode::Shared).unwrap();
        assert!(b.is_some());
        assert!(
            FileLock::try_open(&p, OpenMode::Existing, LockMode::Exclusive)
                .unwrap()
                .is_none()
        );
        drop((a, b));
        let x = FileLock::try_open(&p, OpenMode::Existing, LockMode::Exclusive).unwrap();
        assert!(x.is_some());
        assert!(
            FileLock::try_open(&p, OpenMode::Existing, LockMode::Shared)
                .unwrap()
                .is_none()
        );
        drop(x);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn threads_of_one_process_exclude_each_other() {
        let p = path("threads");
        let held = FileLock::open(&p, OpenMode::Create, LockMode::Exclusive).unwrap();
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (p, entered) = (p.clone(), entered.clone());
            std::thread::spawn(move || {
                let _g = FileLock::open(&p, OpenMode::Existing, LockMode::Exclusive).unwrap();
                entered.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst));
        drop(held);
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn missing_file_and_unlink_detection() {
        let p = path("unlinked");
        let err = FileLock::open(&p, OpenMode::Existing, LockMode::Shared).unwrap_err();
        assert!(
            matches!(err, EmuError::Io { ref source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        let g = FileLock::open(&p, OpenMode::Create, LockMode::Exclusive).unwrap();
        assert!(g.still_linked().unwrap());
        std::fs::remove_file(&p).unwrap();
        assert!(!g.still_linked().unwrap());
    }
}
