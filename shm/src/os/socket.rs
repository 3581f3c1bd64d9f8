//! Unix-socket calls the facade's rendezvous needs and `std` does not offer on stable:
//! the kernel-verified credentials of a peer (`SO_PEERCRED`), sending without `SIGPIPE`,
//! waiting for readiness with a timeout (`poll`) and connecting without waiting on a full
//! listener.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// The credentials of the process at the other end of a Unix socket, as the kernel
/// recorded them (`SO_PEERCRED`, see `unix(7)`): for a connected client, the process that
/// called `connect`; for the client's view of a server, the process that called `listen`.
///
/// The kernel fills these in; the peer cannot forge them. The pid is translated into the
/// reader's pid namespace, and is 0 when the peer's process is not visible there (it lives
/// in a sibling or parent namespace). The uid and gid are likewise translated into the
/// reader's user namespace (the overflow id, usually 65534, when unmapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerCred {
    /// The peer's process id in this pid namespace; 0 when not visible here.
    pub pid: u32,
    /// The peer's effective user id at `connect`/`listen` time.
    pub uid: u32,
    /// The peer's effective group id at `connect`/`listen` time.
    pub gid: u32,
}

/// Reads the peer's credentials of a connected Unix stream socket (`getsockopt` with
/// `SOL_SOCKET`/`SO_PEERCRED`).
pub fn peer_credentials(socket: &impl AsFd) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is borrowed from a live socket for the duration of the call; `cred`
    // and `len` are valid, writable and live across the call, and `len` holds the size of
    // the buffer `cred` points to, so the kernel writes at most that many bytes.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_PEERCRED returned {len} bytes, expected a struct ucred"),
        ));
    }
    Ok(PeerCred {
        pid: u32::try_from(cred.pid).unwrap_or(0),
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// Sends bytes on a connected stream socket with `MSG_NOSIGNAL`: a peer that has gone away
/// gives `EPIPE` as an error instead of raising `SIGPIPE`, whose default action would kill
/// a host process (a C or Python program embedding devipc) that does not ignore it.
/// Returns how many bytes were sent; the socket's send timeout (`SO_SNDTIMEO`) applies.
pub fn send_nosignal(socket: &impl AsFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: the fd is borrowed from a live socket for the call; the pointer and
        // length describe the readable slice `buf`, which the kernel only reads.
        let n = unsafe {
            libc::send(
                socket.as_fd().as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Waits until `fd` is readable (for a listening socket: a connection is pending), for
/// at most `timeout` (`None`: no limit). Returns `Ok(false)` when the time ran out.
/// `EINTR` restarts the wait with the time that is left.
pub fn wait_readable(fd: &impl AsFd, timeout: Option<Duration>) -> io::Result<bool> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let millis: libc::c_int = match deadline {
            None => -1,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                // Round up, so a sub-millisecond remainder still waits instead of spinning.
                let ms = left.as_nanos().div_ceil(1_000_000);
                libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
            }
        };
        let mut pfd = libc::pollfd {
            fd: fd.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid, writable pollfd for the duration of the call (nfds
        // = 1), and its fd is borrowed from a live descriptor.
        let rc = unsafe { libc::poll(&mut pfd, 1, millis) };
        if rc > 0 {
            return Ok(true);
        }
        if rc == 0 {
            return Ok(false);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// One descriptor for [`poll`]: which readiness to wait for, and what the kernel reported.
///
/// Layout-compatible with `struct pollfd` (`repr(transparent)`), so a slice of these is
/// handed to the kernel as is; the lifetime keeps the descriptor open while it is polled.
#[repr(transparent)]
#[derive(Debug)]
pub struct PollFd<'fd> {
    raw: libc::pollfd,
    _fd: std::marker::PhantomData<std::os::fd::BorrowedFd<'fd>>,
}

impl<'fd> PollFd<'fd> {
    /// Watches `fd` for readability (incoming data, a pending connection, or the peer
    /// closing) when `read`, and for room to write when `write`.
    pub fn new(fd: std::os::fd::BorrowedFd<'fd>, read: bool, write: bool) -> Self {
        let mut events = 0;
        if read {
            events |= libc::POLLIN;
        }
        if write {
            events |= libc::POLLOUT;
        }
        PollFd {
            raw: libc::pollfd {
                fd: fd.as_raw_fd(),
                events,
                revents: 0,
            },
            _fd: std::marker::PhantomData,
        }
    }

    /// Whether the last [`poll`] reported anything for this descriptor: the readiness
    /// asked for, or a hang-up or error (which the next read or write reports).
    pub fn is_ready(&self) -> bool {
        self.raw.revents != 0
    }
}

/// Waits until at least one of `fds` is ready (`poll(2)`), for at most `timeout` (`None`:
/// no limit). Returns how many are ready (0 when the time ran out); each entry's
/// [`PollFd::is_ready`] says which. `EINTR` restarts the wait with the time that is left.
pub fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    let nfds = libc::nfds_t::try_from(fds.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors"))?;
    loop {
        let millis: libc::c_int = match deadline {
            None => -1,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                // Round up, so a sub-millisecond remainder still waits instead of spinning.
                let ms = left.as_nanos().div_ceil(1_000_000);
                libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
            }
        };
        // SAFETY: `PollFd` is `repr(transparent)` over `libc::pollfd`, so `fds` is a valid,
        // writable array of `nfds` pollfds for the duration of the call; every fd in it is
        // borrowed (the lifetime on `PollFd`) from a descriptor that stays open meanwhile.
        let rc = unsafe { libc::poll(fds.as_mut_ptr().cast::<libc::pollfd>(), nfds, millis) };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Connects a Unix stream socket to `path` without waiting for the listener: when its
/// queue of pending connections is full, gives an error of kind `WouldBlock` at once,
/// where a blocking `connect` (std's `UnixStream::connect`) waits without a limit until
/// the listener accepts. The stream returned is in blocking mode. `path` must fit in
/// `sun_path` (107 bytes), else `InvalidInput`.
pub fn connect_unix_nonblocking(
    path: &std::path::Path,
) -> io::Result<std::os::unix::net::UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: `sockaddr_un` is plain C data (an integer and a byte array), for which all
    // zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a Unix socket path must be shorter than {} bytes and contain no NUL",
                addr.sun_path.len()
            ),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // The path and its NUL (the rest of `sun_path` is zero already).
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
    // SAFETY: socket() takes no pointers; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor socket() just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    loop {
        // SAFETY: the fd is live for the call; `addr` is a valid `sockaddr_un` that
        // outlives it, and `len` does not exceed its size (checked above).
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>(),
                len as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}
