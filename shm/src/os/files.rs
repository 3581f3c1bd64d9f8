//! File calls on descriptors `std` owns: advisory locks (`flock`), allocating a file's
//! backing store (`posix_fallocate`) and opening a directory by path only (`O_PATH`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Whether a `flock` is shared (readers) or exclusive (one writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlockMode {
    /// `LOCK_SH`: any number of shared holders, no exclusive holder.
    Shared,
    /// `LOCK_EX`: a single holder.
    Exclusive,
}

/// `flock(fd, LOCK_SH|LOCK_EX)`, retried on `EINTR`. With `block == false` it adds
/// `LOCK_NB` and returns `Ok(false)` when another open file description holds the lock.
pub fn flock(file: &File, mode: FlockMode, block: bool) -> io::Result<bool> {
    let mut op = match mode {
        FlockMode::Shared => libc::LOCK_SH,
        FlockMode::Exclusive => libc::LOCK_EX,
    };
    if !block {
        op |= libc::LOCK_NB;
    }
    loop {
        // SAFETY: the fd is owned by `file` and open for the duration of the call; flock
        // has no memory-safety preconditions.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !block => return Ok(false),
            _ => return Err(err),
        }
    }
}

/// `flock(fd, LOCK_UN)`. Closing the last fd of the open file description also unlocks.
pub fn funlock(file: &File) -> io::Result<()> {
    // SAFETY: the fd is owned by `file`; flock has no memory-safety preconditions.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Allocates the backing store of `file` for `len` bytes (`posix_fallocate`), so that a
/// full tmpfs reports `ENOSPC` here instead of `SIGBUS` on first touch of a mapping.
pub fn fallocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length exceeds off_t"))?;
    loop {
        // SAFETY: the fd is owned by `file`; posix_fallocate has no memory-safety
        // preconditions and returns an errno value instead of setting errno.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            // Filesystems without fallocate support: fall back to a sparse file.
            libc::EOPNOTSUPP => return file.set_len(len as u64),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// Opens the directory at `path` for naming things inside it (`O_PATH | O_DIRECTORY`):
/// needs no read permission on the directory, only search permission on the way to it.
/// A Unix socket whose path is too long for `sun_path` is then reachable as
/// `/proc/self/fd/<fd>/<name>`.
pub fn open_directory_path(path: &std::path::Path) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(path)?;
    Ok(dir.into())
}
