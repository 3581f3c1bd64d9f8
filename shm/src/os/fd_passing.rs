//! Moving file descriptors between processes: over a Unix socket (`SCM_RIGHTS`), and out
//! of another process with `pidfd_open` + `pidfd_getfd` (Linux 5.6+).
//!
//! A HIP virtual-memory allocation is shared as a POSIX fd (`hipMemExportToShareableHandle`),
//! which is only a number in the exporting process: the importer needs its own
//! descriptor for the same open file. The two ways the kernel offers are here; neither
//! needs anything but the fd and a channel (a connected socket) or the right to inspect
//! the exporter (ptrace access, as `pidfd_getfd` requires).

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Most descriptors [`send_with_fds`] sends, or [`recv_with_fds`] accepts, in one message.
pub const MAX_FDS: usize = 8;

/// Room for [`MAX_FDS`] descriptors in a control message, aligned for `cmsghdr`.
#[repr(C)]
union ControlBuffer {
    _align: libc::cmsghdr,
    bytes: [u8; 128],
}

/// Sends `buf` with `fds` attached (`SCM_RIGHTS`, `MSG_NOSIGNAL`) on a connected Unix
/// stream socket. The receiver gets its own descriptors for the same open files; the
/// sender's stay open (close them when done). At least one byte must be sent with the
/// descriptors (a stream socket carries them with data). Returns how many bytes were
/// sent; the descriptors go with the first byte, so a short send still delivered them.
pub fn send_with_fds(socket: &impl AsFd, buf: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if buf.is_empty() || fds.is_empty() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "send_with_fds needs at least one byte and 1..={MAX_FDS} descriptors (got {} \
                 bytes, {} descriptors)",
                buf.len(),
                fds.len()
            ),
        ));
    }
    let payload = fds.len() * size_of::<RawFd>();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    // SAFETY: an all-zero ControlBuffer is valid (plain bytes).
    let mut control: ControlBuffer = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields used are set below.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: `control` is live for the call; `space` fits in it (at most MAX_FDS fds).
    msg.msg_control = unsafe { control.bytes.as_mut_ptr() }.cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` zeroed bytes, room for one header plus the
    // descriptors: CMSG_FIRSTHDR is non-null and CMSG_DATA lies within the buffer.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
        let data = libc::CMSG_DATA(header).cast::<RawFd>();
        for (i, fd) in fds.iter().enumerate() {
            data.add(i).write_unaligned(fd.as_raw_fd());
        }
    }
    loop {
        // SAFETY: the socket is borrowed for the call; `msg` describes the readable
        // `buf` and the control buffer built above, both live for the call.
        let n = unsafe { libc::sendmsg(socket.as_fd().as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Receives bytes into `buf` and the descriptors attached to them (`SCM_RIGHTS`, opened
/// close-on-exec), at most [`MAX_FDS`]. A message that carried more descriptors than fit
/// is an error, and the ones that did arrive are closed. `Ok((0, []))` is the end of the
/// stream.
pub fn recv_with_fds(socket: &impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    // SAFETY: an all-zero ControlBuffer is valid (plain bytes).
    let mut control: ControlBuffer = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields used are set below.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: `control` is live for the call.
    msg.msg_control = unsafe { control.bytes.as_mut_ptr() }.cast();
    // SAFETY: CMSG_SPACE only computes a size; it fits the 128-byte buffer.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) } as _;
    let n = loop {
        // SAFETY: the socket is borrowed for the call; `msg` describes the writable `buf`
        // and the control buffer, both live for the call.
        let n =
            unsafe { libc::recvmsg(socket.as_fd().as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG macros walk the
    // headers it wrote, staying within msg_controllen. Each SCM_RIGHTS descriptor is new
    // in this process and owned by nobody else, so it is wrapped in an OwnedFd once.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        // `fds` (what arrived) is dropped, so closed.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message carried more than {MAX_FDS} descriptors; they were refused"),
        ));
    }
    Ok((n, fds))
}

/// A pidfd for process `pid` (`pidfd_open`, close-on-exec). It names that process for as
/// long as it is open, even after the pid is reused: check the process's identity (e.g.
/// its start time) after opening, not before.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A descriptor in this process for the open file that `target_fd` names in the process
/// of `pidfd` (`pidfd_getfd`, close-on-exec). Needs ptrace access to that process
/// (`PTRACE_MODE_ATTACH_REALCREDS`: the same user and, under Yama's `ptrace_scope` 1, a
/// descendant or a process that allowed us with `PR_SET_PTRACER`); `EPERM` otherwise.
pub fn pidfd_getfd(pidfd: &impl AsFd, target_fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes a pidfd, an fd number of that process and flags, and
    // returns a new fd in this process or -1; the pidfd is borrowed for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_getfd,
            pidfd.as_fd().as_raw_fd(),
            target_fd,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}
