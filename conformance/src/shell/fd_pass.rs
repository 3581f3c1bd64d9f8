//! Moving a file descriptor from one shell process to another with `SCM_RIGHTS`, the way
//! applications hand over a HIP VMM export (api-facts C.3 step 3: "`SCM_RIGHTS` or
//! `pidfd_getfd`").
//!
//! The shells talk to their scenario over pipes, which cannot carry descriptors, so the
//! receiving shell binds a datagram socket in the abstract Unix namespace ([`Inbox`], the
//! `fd.listen` command) and tells the scenario its name; the sending shell
//! ([`send`], `fd.send <name> <fd>`) attaches a duplicate of its descriptor to one
//! datagram; the receiver takes it ([`Inbox::recv`], `fd.recv`). The steps are sequential
//! (the datagram waits in the receiver's queue), so one scenario drives both sides. Unlike
//! `pidfd_getfd`, this needs no ptrace permission (Yama `ptrace_scope` does not apply),
//! so the transfer works between sibling peers on any Linux machine; when the socket
//! itself cannot be made, the command fails with the reason and the rule reports a skip.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A bound socket that receives one descriptor per datagram.
#[derive(Debug)]
pub struct Inbox {
    sock: UnixDatagram,
    name: String,
}

impl Inbox {
    /// Binds a new socket under a fresh abstract name (pid and a counter).
    pub fn bind() -> io::Result<Inbox> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "devipc-conformance-fd-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
        let sock = UnixDatagram::bind_addr(&addr)?;
        Ok(Inbox { sock, name })
    }

    /// The abstract name a sender addresses.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Receives one descriptor, waiting at most `timeout`.
    pub fn recv(&self, timeout: Duration) -> io::Result<OwnedFd> {
        self.sock.set_read_timeout(Some(timeout))?;
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: byte.len(),
        };
        // Room for one control message carrying one int, aligned for cmsghdr.
        let mut space = [0u64; 8];
        // SAFETY: a zeroed msghdr is valid; the pointers below point at live locals of the
        // stated lengths.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&space);
        // SAFETY: our socket and a msghdr whose buffers are live for the call.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: msg was filled by recvmsg; CMSG_* walk its control buffer.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            {
                return Err(io::Error::other("the datagram carried no descriptor"));
            }
            let fd: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
            // SAFETY: SCM_RIGHTS installed a new descriptor in this process; we own it.
            Ok(OwnedFd::from_raw_fd(fd))
        }
    }
}

/// Sends a duplicate of `fd` to the [`Inbox`] named `name`.
pub fn send(name: &str, fd: BorrowedFd<'_>) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    sock.connect_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    let mut space = [0u64; 8];
    let raw: libc::c_int = fd.as_raw_fd();
    // SAFETY: a zeroed msghdr is valid; CMSG_* write inside `space`, which is larger than
    // CMSG_SPACE(sizeof(int)); all pointers are to live locals.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), raw);
        if libc::sendmsg(sock.as_raw_fd(), &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_arrives_as_a_new_one_for_the_same_file() {
        let inbox = Inbox::bind().unwrap();
        let path = std::env::temp_dir().join(format!("devipc-fd-pass-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut f = std::fs::File::create_new(&path).unwrap();
        f.write_all(b"shared").unwrap();
        send(inbox.name(), f.as_fd()).unwrap();
        let got = inbox.recv(Duration::from_secs(5)).unwrap();
        assert_ne!(got.as_raw_fd(), f.as_raw_fd());
        let mut g = std::fs::File::from(got);
        g.rewind().unwrap();
        let mut text = String::new();
        g.read_to_string(&mut text).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, "shared");
        // Nothing more was sent: the receive times out.
        assert!(inbox.recv(Duration::from_millis(20)).is_err());
    }
}
