//! Unix socket paths longer than a socket address holds.
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
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use devipc_shm::os;

/// Longest path `sun_path` holds: 108 bytes with the terminating NUL.
pub(super) const SUN_PATH_MAX: usize = 107;
/// Where the process's descriptors appear as paths.
const PROC_FD: &str = "/proc/self/fd";
/// Longest file name reachable through its directory: `/proc/self/fd/`, a descriptor
/// number of up to 10 digits, `/` and the name must fit in [`SUN_PATH_MAX`].
pub(super) const MAX_NAME: usize = SUN_PATH_MAX - PROC_FD.len() - 1 - 10 - 1;

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
