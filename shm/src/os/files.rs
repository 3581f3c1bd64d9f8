//! File calls on descriptors `std` owns: advisory locks (`flock`, and `fcntl` record locks
//! for liveness beacons), allocating a file's backing store (`posix_fallocate`) and opening
//! a directory by path only (`O_PATH`).

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

/// A write lock over the whole file.
fn whole_file_write_lock() -> libc::flock {
    // SAFETY: `struct flock` is plain data; all-zero is a valid value (l_start 0, l_len 0:
    // the whole file), and the fields set below make it a write lock.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock
}

/// Takes a classic POSIX record lock (`fcntl(F_SETLK, F_WRLCK)`) over all of `file`,
/// without waiting (`EAGAIN`/`EACCES` when another process holds one). The lock belongs
/// to the calling *process*: the kernel drops it when the process dies (whatever its pid
/// namespace), when it closes *any* descriptor of the file, and at `exec` of a `O_CLOEXEC`
/// descriptor; a `fork`ed child does not inherit it.
pub fn record_lock(file: &File) -> io::Result<()> {
    let lock = whole_file_write_lock();
    loop {
        // SAFETY: the fd is owned by `file`; `lock` is a valid `struct flock` that lives
        // for the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Whether some process or open file description holds a lock on `file` that would
/// conflict with a write lock over all of it, asked with `fcntl(F_OFD_GETLK)`: an
/// open-file-description query, which (unlike `F_GETLK`) also sees the classic locks of
/// the calling process itself, and takes no lock.
pub fn record_lock_held(file: &File) -> io::Result<bool> {
    let mut lock = whole_file_write_lock();
    // SAFETY: the fd is owned by `file`; `lock` is a valid, writable `struct flock` (with
    // l_pid 0, as F_OFD_GETLK requires) that lives for the call.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
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
