//! Thin, safe wrappers over the few Linux system calls (through `libc`) that the emulator,
//! the HIP backend and the facade need, re-exported here from one file per topic: file
//! locks and allocation (`files.rs`), shared mappings (`memory.rs`), `futex(2)`
//! (`futex.rs`), Unix sockets (`socket.rs`) and moving file descriptors between processes
//! (`fd_passing.rs`: `SCM_RIGHTS`, `pidfd_getfd`).
//!
//! This is the only module of the infrastructure that contains `unsafe` code (the crate
//! denies `unsafe_code` everywhere else; the vendor C-ABI surfaces opt back in for their
//! `extern "C"` entry points). Everything above it (`state::*`, `local`) works with safe
//! types: [`MappedRegion`] (an owned `MAP_SHARED` mapping of a file), [`Reservation`] (an
//! owned `PROT_NONE` address range that file mappings can be placed into), `flock`,
//! `futex`, `posix_fallocate`, `getrandom` and friends, plus the socket calls the
//! facade's rendezvous needs and `std` does not offer on stable: the kernel-verified
//! credentials of a Unix-socket peer ([`peer_credentials`], `SO_PEERCRED`), waiting for
//! a pending connection with a timeout ([`wait_readable`], `poll`), waiting on many
//! connections at once ([`poll`]), connecting without waiting on a full listener
//! ([`connect_unix_nonblocking`]), naming a directory for socket paths too long for
//! `sun_path` ([`open_directory_path`]) and sending without `SIGPIPE` ([`send_nosignal`]). Errors are plain
//! [`std::io::Error`]s; callers add the path or operation context.
#![allow(unsafe_code)]

mod fd_passing;
mod files;
mod futex;
mod memory;
mod socket;
#[cfg(test)]
mod tests;

use std::io;

pub use fd_passing::{MAX_FDS, pidfd_getfd, pidfd_open, recv_with_fds, send_with_fds};
pub use files::{
    FlockMode, fallocate, flock, funlock, open_directory_path, record_lock, record_lock_held,
};
pub use futex::{FutexWait, futex_wait, futex_wake};
pub use memory::{MappedRegion, Reservation, page_round_up, page_size};
pub use socket::{
    PeerCred, PollFd, connect_unix_nonblocking, peer_credentials, poll, send_nosignal,
    wait_readable,
};

/// Registers `handler` to run at normal process exit (`atexit(3)`): after `main` returns
/// or on `std::process::exit`, not on a signal or `_exit`. A forked child inherits the
/// registration (handlers must check which process they run in).
pub fn at_exit(handler: extern "C" fn()) -> io::Result<()> {
    // SAFETY: registers a plain `extern "C" fn()`; atexit has no other preconditions.
    if unsafe { libc::atexit(handler) } == 0 {
        Ok(())
    } else {
        Err(io::Error::other("atexit refused the handler"))
    }
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`, blocking until seeded).
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the pointer and length describe the writable slice `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        filled += n as usize;
    }
    Ok(())
}
