//! The rendezvous socket file: resolving the path a user gives, binding the socket there
//! (mode set before it appears, replacing only a stale socket), removing it if it is still
//! ours, and reaching paths longer than a socket address holds.
//!
//! `struct sockaddr_un` has room for 107 bytes of path and a NUL (`unix(7)`); `bind` and
//! `connect` take nothing longer (std reports "path must be shorter than SUN_LEN"). The
//! rendezvous reaches a longer path through its directory instead: it opens the directory
//! (`O_PATH`, no read permission needed) and binds or connects to
//! `/proc/self/fd/<fd>/<name>`, which the kernel resolves to the same directory entry, as
//! systemd does for long socket paths. That needs `/proc` and a file name short enough
//! for the whole to fit ([`MAX_NAME`]); anything else is a clear error, never a socket
//! nobody can reach.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use devipc_core::{Error, Result};
use devipc_shm::os;

/// Longest path `sun_path` holds: 108 bytes with the terminating NUL.
pub(super) const SUN_PATH_MAX: usize = 107;
/// Where the process's descriptors appear as paths.
const PROC_FD: &str = "/proc/self/fd";
/// Longest file name reachable through its directory: `/proc/self/fd/`, a descriptor
/// number of up to 10 digits, `/` and the name must fit in [`SUN_PATH_MAX`].
pub(super) const MAX_NAME: usize = SUN_PATH_MAX - PROC_FD.len() - 1 - 10 - 1;

// ---------------------------------------------------------------------------------------
// The socket file: where it goes, binding it, removing it.

/// The absolute path of the socket `path` names (its directory resolved once, so a later
/// `chdir` does not matter), checked to be reachable by a client.
pub(super) fn resolve(path: &Path) -> Result<PathBuf> {
    let shown = path.display();
    let name = path.file_name().ok_or_else(|| {
        Error::invalid_argument(format!("rendezvous path {shown} does not name a file"))
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().map_err(|e| {
        Error::io(
            format!("devipc rendezvous at {shown}: resolving its directory"),
            e,
        )
    })?;
    let path = dir.join(name);
    check_reachable(&path).map_err(|reason| {
        Error::invalid_argument(format!("devipc rendezvous at {}: {reason}", path.display()))
    })?;
    Ok(path)
}

/// Binds a listening socket at the absolute `path` with `mode`, replacing only a stale
/// socket. Returns the listener (non-blocking) and the socket file's identity.
pub(super) fn bind_socket(path: &Path, mode: u32) -> Result<(UnixListener, (u64, u64))> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ctx = format!("devipc rendezvous at {}", path.display());
    let dir = path.parent().unwrap_or(Path::new("/"));

    let stale = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match connect(path) {
            Ok(_) => {
                return Err(Error::io(
                    ctx,
                    io::Error::new(
                        io::ErrorKind::AddrInUse,
                        "another process is serving at this path",
                    ),
                ));
            }
            // A listener whose queue is full: very much alive.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::io(
                    ctx,
                    io::Error::new(
                        io::ErrorKind::AddrInUse,
                        "another process is serving at this path (its queue is full)",
                    ),
                ));
            }
            // Nobody listens: a stale socket, replaced below.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => true,
            Err(e) => {
                return Err(Error::io(format!("{ctx}: checking the existing socket"), e));
            }
        },
        Ok(m) => {
            return Err(Error::io(
                ctx,
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "a {} is in the way; devipc only replaces stale sockets",
                        file_kind(&m.file_type())
                    ),
                ),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(format!("{ctx}: inspecting the path"), e)),
    };

    // Bind under a temporary name and set the mode, then link it to `path`: the socket
    // never appears at `path` with the umask's mode, and linking does not replace a file
    // that appeared meanwhile (only the stale socket found above is removed first).
    let temp = dir.join(format!(
        ".devipc-{}-{}.sock",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    // A leftover of an earlier process with our pid (only ever a socket of ours).
    if std::fs::symlink_metadata(&temp).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(&temp);
    }
    let listener =
        bind(&temp).map_err(|e| Error::io(format!("{ctx}: binding {}", temp.display()), e))?;
    let finish = || -> io::Result<(u64, u64)> {
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode))?;
        let m = std::fs::symlink_metadata(&temp)?;
        listener.set_nonblocking(true)?;
        if stale {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match std::fs::hard_link(&temp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process created a file at this path meanwhile",
                ));
            }
            // A filesystem without hard links: rename instead (it would replace a file
            // that appeared since the check above).
            Err(_) => std::fs::rename(&temp, path)?,
        }
        Ok((m.dev(), m.ino()))
    };
    let result = finish();
    // Gone already after a rename; after a link or a failure, ours to remove.
    if let Err(e) = std::fs::remove_file(&temp)
        && e.kind() != io::ErrorKind::NotFound
    {
        log::warn!(
            "devipc: removing the temporary socket {} failed: {e}",
            temp.display()
        );
    }
    match result {
        Ok(socket_id) => Ok((listener, socket_id)),
        Err(e) => Err(Error::io(format!("{ctx}: creating the socket"), e)),
    }
}

fn file_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

/// Removes the socket file at `path` if it is still the one bound as `socket_id` (device
/// and inode): gone already, or replaced by someone else's file, it is not ours to remove.
pub(super) fn remove_if_ours(path: &Path, socket_id: (u64, u64)) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() && (m.dev(), m.ino()) == socket_id => {
            if let Err(e) = std::fs::remove_file(path)
                && e.kind() != io::ErrorKind::NotFound
            {
                log::warn!(
                    "devipc: removing the rendezvous socket {} failed: {e}",
                    path.display()
                );
            }
        }
        // Gone already, or replaced by someone else's file: not ours to remove.
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Paths longer than a socket address holds.

/// Whether a client can reach a socket at `path`; the error is a sentence saying why not.
pub(super) fn check_reachable(path: &Path) -> Result<(), String> {
    let len = path.as_os_str().len();
    if len <= SUN_PATH_MAX {
        return Ok(());
    }
    let name = path
        .file_name()
        .ok_or_else(|| format!("the path does not name a file ({len} bytes)"))?;
    if name.len() > MAX_NAME {
        return Err(format!(
            "the path ({len} bytes) is too long for a Unix socket address ({SUN_PATH_MAX} \
             bytes), and its file name ({} bytes) too long to reach it through its directory \
             (at most {MAX_NAME} bytes); choose a shorter name or directory",
            name.len()
        ));
    }
    Ok(())
}

/// Connects to the socket at `path`, however long; `WouldBlock` at once when the
/// listener's queue of pending connections is full.
pub(super) fn connect(path: &Path) -> io::Result<UnixStream> {
    with_short_path(path, os::connect_unix_nonblocking)
}

/// Binds a socket at `path`, however long.
pub(super) fn bind(path: &Path) -> io::Result<UnixListener> {
    with_short_path(path, |p| UnixListener::bind(p))
}

/// Runs `f` on a path to the same directory entry as `path` that fits in `sun_path`:
/// `path` itself when it fits, else the entry seen through a descriptor of its directory
/// (open while `f` runs).
fn with_short_path<T>(path: &Path, f: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return f(path);
    }
    check_reachable(path).map_err(|reason| io::Error::new(io::ErrorKind::InvalidInput, reason))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = os::open_directory_path(dir)?;
    let short: PathBuf = [
        Path::new(PROC_FD),
        Path::new(&dir.as_raw_fd().to_string()),
        Path::new(name),
    ]
    .iter()
    .collect();
    match f(&short) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && !Path::new(PROC_FD).is_dir() => {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the path ({} bytes) is too long for a Unix socket address ({SUN_PATH_MAX} \
                     bytes), and {PROC_FD}, through which devipc reaches it, is not mounted",
                    path.as_os_str().len()
                ),
            ))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory whose path is at least `len` bytes long, removed on drop.
    struct LongDir(PathBuf);

    impl LongDir {
        fn new(name: &str, len: usize) -> LongDir {
            let base =
                std::env::temp_dir().join(format!("devipc-rdv-long-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            let mut dir = base.clone();
            while dir.as_os_str().len() < len {
                dir.push("d".repeat(100));
            }
            std::fs::create_dir_all(&dir).unwrap();
            LongDir(base)
        }

        fn deepest(&self) -> PathBuf {
            let mut dir = self.0.clone();
            while let Some(next) = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .find(|e| e.file_type().unwrap().is_dir())
            {
                dir = next.path();
            }
            dir
        }
    }

    impl Drop for LongDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn limits_match_the_socket_address() {
        assert_eq!(MAX_NAME, 82);
        // std agrees on the longest path a socket address holds.
        let dir = LongDir::new("limit", 0);
        let mut at = dir.0.join("s");
        let pad = SUN_PATH_MAX - at.as_os_str().len();
        at.set_file_name("s".repeat(1 + pad));
        assert_eq!(at.as_os_str().len(), SUN_PATH_MAX);
        drop(UnixListener::bind(&at).unwrap());
        let longer = at.with_file_name("s".repeat(2 + pad));
        let err = UnixListener::bind(longer).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }

    #[test]
    fn long_paths_are_bound_and_connected_through_their_directory() {
        let dir = LongDir::new("bind", 300);
        let path = dir.deepest().join("a-socket-whose-path-is-long.sock");
        assert!(path.as_os_str().len() > 300);
        assert!(check_reachable(&path).is_ok());
        let listener = bind(&path).unwrap();
        assert!(
            std::fs::symlink_metadata(&path).is_ok(),
            "bound at the long path itself"
        );
        let _client = connect(&path).unwrap();
        let (_server, _) = listener.accept().unwrap();
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            connect(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "a missing socket is still NotFound"
        );
    }

    #[test]
    fn names_too_long_for_any_address_are_refused() {
        let dir = LongDir::new("name", 0);
        let short = dir.0.join("n".repeat(60));
        assert!(check_reachable(&short).is_ok(), "fits as it is");
        let long = dir.0.join("n".repeat(MAX_NAME + 1));
        let reason = check_reachable(&long).unwrap_err();
        assert!(
            reason.contains("too long for a Unix socket address"),
            "{reason}"
        );
        let err = connect(&long).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(bind(&long).is_err());
        assert!(check_reachable(&dir.0.join("n".repeat(MAX_NAME))).is_ok());
    }
}
