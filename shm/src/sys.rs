//! Thin, safe wrappers over the few Linux system calls the emulator needs.
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

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64};
use std::time::Duration;

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The size of a memory page in bytes (4096 on x86_64).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; a negative result means "unknown".
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| *s > 0)
        .unwrap_or(4096)
}

/// Rounds `len` up to a multiple of the page size; `None` on overflow.
pub fn page_round_up(len: usize) -> Option<usize> {
    let page = page_size();
    len.checked_add(page - 1).map(|l| l / page * page)
}

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

/// An owned read-write `MAP_SHARED` mapping of a file; unmapped on drop.
///
/// Other processes may map the same file and write it at any time, so the region is never
/// exposed as a Rust slice: bytes go in and out through [`MappedRegion::read_at`] and
/// [`MappedRegion::write_at`], and 32-bit words used for cross-process synchronisation are
/// exposed as [`AtomicU32`].
///
/// The copies are made of relaxed atomic accesses (single bytes up to 8-byte alignment,
/// then aligned `u64`s, then bytes), never of plain loads and stores: another thread may copy into the same bytes or store to one of
/// the words at the same time (the region is `Sync`), and a plain access racing with any
/// other access is undefined behaviour in Rust's memory model. Atomicity is per word, not
/// per copy: concurrent unsynchronised writers still leave a mix of their bytes (torn
/// data, as on a device), but every read returns bytes some writer wrote.
#[derive(Debug)]
pub struct MappedRegion {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain shared memory owned by this value; it has no thread
// affinity, and all access goes through raw copies or atomics.
unsafe impl Send for MappedRegion {}
// SAFETY: `&MappedRegion` only offers atomic accesses to the mapped bytes (the copies of
// `read_at` / `write_at` are word- and byte-sized relaxed atomics, `atomic_u32` hands out
// `AtomicU32`s), so threads sharing it cannot race a plain access against anything.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps the first `len` bytes of `file` read-write and shared, at an address the
    /// kernel chooses. `len` must be non-zero; the file should be at least `len` long
    /// (touching pages beyond its end raises `SIGBUS`, which is why segment files are
    /// never shrunk).
    pub fn map_file(file: &File, len: usize) -> io::Result<MappedRegion> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-length mapping",
            ));
        }
        // SAFETY: a fresh mapping (addr = NULL, no MAP_FIXED) cannot alias any existing
        // Rust object; the fd is valid for the duration of the call.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_fd().as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null address"))?;
        Ok(MappedRegion { addr, len })
    }

    /// The host address of the first byte (the emulated "device pointer").
    pub fn addr(&self) -> usize {
        self.addr.as_ptr() as usize
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: zero-length mappings are refused at creation.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `offset..offset+len` lies inside the region.
    fn contains(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the region. `false` (and no
    /// copy) when the range does not fit.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.contains(offset, dst.len()) {
            return false;
        }
        // SAFETY: the source range is inside the live mapping (checked above), which
        // lives as long as `&self`; `dst` is a distinct Rust slice.
        unsafe { atomic_copy_from(self.addr.as_ptr().add(offset), dst) };
        true
    }

    /// Copies `src` into the region starting at `offset`. `false` (and no copy) when the
    /// range does not fit.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> bool {
        if !self.contains(offset, src.len()) {
            return false;
        }
        // SAFETY: the destination range is inside the live, writable mapping (checked
        // above), which lives as long as `&self`; `src` is a distinct Rust slice.
        unsafe { atomic_copy_into(self.addr.as_ptr().add(offset), src) };
        true
    }

    /// The 32-bit word at `offset` as an atomic, for futex-based synchronisation across
    /// processes. `None` when `offset` is not 4-byte aligned or out of range.
    pub fn atomic_u32(&self, offset: usize) -> Option<&AtomicU32> {
        if offset % 4 != 0 || !self.contains(offset, 4) {
            return None;
        }
        // SAFETY: the word is inside the live mapping, 4-byte aligned (the mapping is
        // page aligned), lives as long as `&self`, and AtomicU32 has the layout of u32;
        // every process touches it only through atomic operations.
        Some(unsafe { AtomicU32::from_ptr(self.addr.as_ptr().add(offset).cast::<u32>()) })
    }
}

/// Copies `dst.len()` bytes of shared memory at `shared` into `dst`, reading the shared
/// side only with relaxed atomic loads: single bytes up to the first 8-byte aligned
/// address, then aligned `u64`s, then the remaining bytes. (`u64`s, not `u32`s, because
/// the atomic loop cannot be vectorised: measured on a 16 MiB copy, `u64`s cost ~10% over
/// `memcpy`, `u32`s ~35%.) Relaxed suffices: the copy orders nothing; callers synchronise
/// through their own atomics (futex words, locks).
///
/// Racing atomics of different sizes (these `u64` loads against an `AtomicU32` store in
/// the same word, or against another copy's byte stores at its edges) are outside the
/// C++/Rust model, which defines only same-size races; no surface copies over its
/// synchronisation words, and every access being atomic excludes the undefined plain
/// data race the previous `memcpy` had.
///
/// # Safety
/// `shared..shared + dst.len()` must be readable memory that nothing accesses except
/// through atomics for the duration of the call.
unsafe fn atomic_copy_from(shared: *const u8, dst: &mut [u8]) {
    let len = dst.len();
    let out = dst.as_mut_ptr();
    let head = shared.align_offset(8).min(len);
    let words = (len - head) / 8;
    let mut i = 0;
    while i < head {
        // SAFETY: `shared + i` is inside the range (caller); `out + i` inside `dst`.
        unsafe { *out.add(i) = AtomicU8::from_ptr(shared.add(i).cast_mut()).load(Relaxed) };
        i += 1;
    }
    for w in 0..words {
        let at = head + 8 * w;
        // SAFETY: `shared + at` is 8-byte aligned (after `head` bytes) and its 8 bytes are
        // inside the range; `out + at..+8` is inside `dst`, written unaligned.
        unsafe {
            let v = AtomicU64::from_ptr(shared.add(at).cast::<u64>().cast_mut()).load(Relaxed);
            out.add(at).cast::<u64>().write_unaligned(v);
        }
    }
    i = head + 8 * words;
    while i < len {
        // SAFETY: as for the head bytes.
        unsafe { *out.add(i) = AtomicU8::from_ptr(shared.add(i).cast_mut()).load(Relaxed) };
        i += 1;
    }
}

/// Copies `src` into shared memory at `shared` with relaxed atomic stores, split as in
/// [`atomic_copy_from`] (bytes, aligned `u64`s, bytes).
///
/// # Safety
/// `shared..shared + src.len()` must be writable memory that nothing accesses except
/// through atomics for the duration of the call.
unsafe fn atomic_copy_into(shared: *mut u8, src: &[u8]) {
    let len = src.len();
    let from = src.as_ptr();
    let head = shared.align_offset(8).min(len);
    let words = (len - head) / 8;
    let mut i = 0;
    while i < head {
        // SAFETY: `shared + i` is inside the range (caller); `from + i` inside `src`.
        unsafe { AtomicU8::from_ptr(shared.add(i)).store(*from.add(i), Relaxed) };
        i += 1;
    }
    for w in 0..words {
        let at = head + 8 * w;
        // SAFETY: `shared + at` is 8-byte aligned and its 8 bytes are inside the range;
        // `from + at..+8` is inside `src`, read unaligned.
        unsafe {
            let v = from.add(at).cast::<u64>().read_unaligned();
            AtomicU64::from_ptr(shared.add(at).cast::<u64>()).store(v, Relaxed);
        }
    }
    i = head + 8 * words;
    while i < len {
        // SAFETY: as for the head bytes.
        unsafe { AtomicU8::from_ptr(shared.add(i)).store(*from.add(i), Relaxed) };
        i += 1;
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: addr/len describe a mapping this value created and exclusively owns;
        // references handed out borrow `self`, so none outlive it.
        unsafe {
            libc::munmap(self.addr.as_ptr().cast(), self.len);
        }
    }
}

/// An owned range of reserved virtual addresses (`PROT_NONE`, no backing), into which
/// whole files can be mapped at fixed offsets and unmapped again, as the VMM APIs
/// (`aclrtReserveMemAddress` + `aclrtMapMem`, `hipMemAddressReserve` + `hipMemMap`) do.
/// The whole range is released on drop.
#[derive(Debug)]
pub struct Reservation {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the reservation is an address range owned by this value, with no thread
// affinity; it never hands out references into the range, only addresses.
unsafe impl Send for Reservation {}
// SAFETY: as above.
unsafe impl Sync for Reservation {}

impl Reservation {
    /// Reserves `len` bytes (rounded up to whole pages) whose base is a multiple of
    /// `align` (a power of two; 0 or anything below the page size means page aligned).
    pub fn new(len: usize, align: usize) -> io::Result<Reservation> {
        let invalid = |what| io::Error::new(io::ErrorKind::InvalidInput, what);
        let page = page_size();
        let len = page_round_up(len)
            .filter(|l| *l > 0)
            .ok_or_else(|| invalid("bad reservation length"))?;
        let align = align.max(page);
        if !align.is_power_of_two() {
            return Err(invalid("alignment is not a power of two"));
        }
        let span = len
            .checked_add(align - page)
            .ok_or_else(|| invalid("reservation length overflows"))?;
        // SAFETY: a fresh anonymous PROT_NONE mapping (no MAP_FIXED) aliases nothing.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let start = raw as usize;
        let base = start.next_multiple_of(align);
        let head = base - start;
        let tail = span - head - len;
        // SAFETY: both trimmed pieces lie inside the span mapped just above and not in
        // [base, base+len), which is what we keep; nothing else refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((base + len) as *mut libc::c_void, tail);
            }
        }
        let base = NonNull::new(base as *mut u8)
            .ok_or_else(|| io::Error::other("mmap returned a null address"))?;
        Ok(Reservation { base, len })
    }

    /// The first reserved address.
    pub fn base(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// The reserved length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: empty reservations are refused at creation.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let page = page_size();
        let fits = offset.checked_add(len).is_some_and(|end| end <= self.len);
        if len == 0 || offset % page != 0 || !fits {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range is empty, not page aligned, or outside the reservation",
            ));
        }
        Ok(())
    }

    /// Maps the first `len` bytes of `file` read-write and shared at `base + offset`,
    /// replacing whatever was mapped there inside this reservation. `offset` must be page
    /// aligned and the range must lie inside the reservation.
    pub fn map_file(&self, offset: usize, file: &File, len: usize) -> io::Result<()> {
        self.check_range(offset, len)?;
        let at = self.base() + offset;
        // SAFETY: MAP_FIXED replaces pages only inside [base, base+len) of this
        // reservation (checked above), which this value owns and never exposes as Rust
        // references; the fd is valid for the call.
        let addr = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Returns `offset..offset+len` of the reservation to the reserved (`PROT_NONE`)
    /// state, dropping any file mapped there. Same range rules as [`Reservation::map_file`].
    pub fn unmap(&self, offset: usize, len: usize) -> io::Result<()> {
        self.check_range(offset, len)?;
        let at = self.base() + offset;
        // SAFETY: as in `map_file`: the replaced pages are inside this reservation, which
        // hands out no references into itself.
        let addr = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: base/len is the range this value owns (including any files mapped into
        // it); no references into it exist.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// What a [`futex_wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexWait {
    /// Woken by a `FUTEX_WAKE` (or spuriously): re-check the word.
    Woken,
    /// The word did not hold the expected value when the kernel checked it.
    ValueChanged,
    /// The timeout elapsed.
    TimedOut,
    /// Interrupted by a signal: re-check the word.
    Interrupted,
}

/// `FUTEX_WAIT` (shared, not `_PRIVATE`, so it pairs with wakers in other processes that
/// map the same file) on `word` while it holds `expected`, for at most `timeout` (`None`:
/// no limit).
pub fn futex_wait(
    word: &AtomicU32,
    expected: u32,
    timeout: Option<Duration>,
) -> io::Result<FutexWait> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the call; `ts_ptr` is null or points to
    // a timespec that outlives the call. FUTEX_WAIT only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc == 0 {
        return Ok(FutexWait::Woken);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) => Ok(FutexWait::ValueChanged),
        Some(libc::ETIMEDOUT) => Ok(FutexWait::TimedOut),
        Some(libc::EINTR) => Ok(FutexWait::Interrupted),
        _ => Err(err),
    }
}

/// `FUTEX_WAKE` (shared): wakes up to `count` waiters on `word` in any process; returns
/// how many were woken.
pub fn futex_wake(word: &AtomicU32, count: i32) -> io::Result<usize> {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not access memory through
    // the remaining (ignored) arguments.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            count,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(len: usize) -> File {
        let path =
            std::env::temp_dir().join(format!("devipc-emu-sys-{}-{}", std::process::id(), len));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&vec![0u8; len]).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    #[test]
    fn region_bounds_are_checked() {
        let f = temp_file(8192);
        let r = MappedRegion::map_file(&f, 8192).unwrap();
        assert!(r.write_at(8188, &[1, 2, 3, 4]));
        assert!(!r.write_at(8189, &[1, 2, 3, 4]));
        assert!(!r.write_at(usize::MAX, &[1]));
        let mut b = [0u8; 4];
        assert!(r.read_at(8188, &mut b));
        assert_eq!(b, [1, 2, 3, 4]);
        assert!(r.atomic_u32(8188).is_some());
        assert!(r.atomic_u32(8190).is_none());
        assert!(r.atomic_u32(8192).is_none());
        assert!(MappedRegion::map_file(&f, 0).is_err());
    }

    #[test]
    fn copies_are_exact_at_every_alignment_and_length() {
        let f = temp_file(256);
        let r = MappedRegion::map_file(&f, 256).unwrap();
        for offset in 0..24 {
            for len in 0..40 {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + offset + 1) as u8).collect();
                assert!(r.write_at(0, &[0xAA; 128]));
                assert!(r.write_at(offset, &data));
                let mut all = [0u8; 128];
                assert!(r.read_at(0, &mut all));
                let mut want = [0xAAu8; 128];
                want[offset..offset + len].copy_from_slice(&data);
                assert_eq!(all, want, "offset {offset} len {len}");
                let mut back = vec![0u8; len];
                assert!(r.read_at(offset, &mut back));
                assert_eq!(back, data, "offset {offset} len {len}");
            }
        }
    }

    /// `MappedRegion` is `Sync`, so copies may race with other copies and with the
    /// `AtomicU32` words of the same region. Before the copies were atomic this was a data
    /// race (a plain `memcpy` against atomic stores), which ThreadSanitizer reports (and
    /// no longer does):
    /// `RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer"
    /// TSAN_OPTIONS=suppressions=$PWD/shm/tsan-std.supp cargo +nightly test -p devipc-shm
    /// --lib --target x86_64-unknown-linux-gnu racing_copies`. In a normal run it checks
    /// that a reader only ever sees whole words some writer stored.
    #[test]
    fn racing_copies_and_atomics_see_only_written_words() {
        use std::sync::atomic::Ordering::Relaxed;
        let f = temp_file(4096);
        let r = MappedRegion::map_file(&f, 4096).unwrap();
        let go = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            s.spawn(|| {
                let w = r.atomic_u32(64).unwrap();
                go.wait();
                for i in 0..2_000u32 {
                    w.store(if i % 2 == 0 { 0x1111_1111 } else { 0x2222_2222 }, Relaxed);
                }
            });
            s.spawn(|| {
                go.wait();
                for n in 0..200 {
                    let fill = [if n % 2 == 0 { 0x33u8 } else { 0x44 }; 4096];
                    assert!(r.write_at(0, &fill[..60]));
                    assert!(r.write_at(68, &fill[68..]));
                }
            });
            go.wait();
            let mut buf = [0u8; 4096];
            for _ in 0..200 {
                assert!(r.read_at(0, &mut buf));
                let word = u32::from_ne_bytes(buf[64..68].try_into().unwrap());
                assert!(
                    [0, 0x1111_1111, 0x2222_2222].contains(&word),
                    "torn word {word:#x}"
                );
            }
        });
    }

    #[test]
    fn reservation_is_aligned_and_maps_files() {
        let align = 2 << 20;
        let res = Reservation::new(3 * page_size(), align).unwrap();
        assert_eq!(res.base() % align, 0);
        let f = temp_file(page_size());
        let region = MappedRegion::map_file(&f, page_size()).unwrap();
        res.map_file(page_size(), &f, page_size()).unwrap();
        region.write_at(0, b"hello");
        let at = (res.base() + page_size()) as *const u8;
        // SAFETY: the page at `at` is mapped read-write to `f` until `unmap` below.
        let first = unsafe { std::ptr::read_volatile(at) };
        assert_eq!(first, b'h');
        res.unmap(page_size(), page_size()).unwrap();
        assert!(res.map_file(1, &f, page_size()).is_err());
        assert!(res.map_file(3 * page_size(), &f, page_size()).is_err());
        assert!(Reservation::new(page_size(), 3 * page_size()).is_err());
    }

    /// Set in a child re-run of this test binary: connect to the socket at this path.
    const PEER_CHILD_ENV: &str = "DEVIPC_SHM_PEER_CHILD_SOCKET";

    #[test]
    fn peer_credentials_of_a_socketpair_are_this_process() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: getegid has no preconditions and cannot fail.
        let gid = unsafe { libc::getegid() };
        let want = PeerCred {
            pid: std::process::id(),
            uid: effective_uid(),
            gid,
        };
        assert_eq!(peer_credentials(&a).unwrap(), want);
        assert_eq!(peer_credentials(&b).unwrap(), want);
        // Not a socket: a typed error, no garbage credentials.
        let f = temp_file(1);
        assert_eq!(
            peer_credentials(&f).unwrap_err().raw_os_error(),
            Some(libc::ENOTSOCK)
        );
    }

    /// The child role of the test below; does nothing unless started by it.
    #[test]
    fn peer_credentials_child_role() {
        let Some(path) = std::env::var_os(PEER_CHILD_ENV) else {
            return;
        };
        let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
        // The parent asks the kernel who we are; the child also reports what the kernel
        // says about the listening parent.
        let server = peer_credentials(&s).unwrap();
        writeln!(s, "{} {}", std::process::id(), server.pid).unwrap();
    }

    #[test]
    fn peer_credentials_name_the_other_process() {
        let dir = std::env::temp_dir().join(format!("devipc-shm-peercred-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "sys::tests::peer_credentials_child_role",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PEER_CHILD_ENV, &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_readable(&listener, Some(Duration::from_secs(60))).unwrap(),
            "the child never connected"
        );
        let (stream, _) = listener.accept().unwrap();
        let cred = peer_credentials(&stream).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut line).unwrap();
        assert!(child.wait().unwrap().success());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cred.pid, child.id());
        assert_eq!(cred.uid, effective_uid());
        assert_eq!(
            line.trim(),
            format!("{} {}", child.id(), std::process::id()),
            "the child's own pid and its view of the listener"
        );
    }

    #[test]
    fn send_nosignal_reports_a_closed_peer_as_an_error() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(send_nosignal(&a, b"hi").unwrap(), 2);
        drop(b);
        // Without MSG_NOSIGNAL this would raise SIGPIPE (ignored by the Rust runtime, so
        // the test checks the error, which is what an embedding host would see too).
        assert_eq!(
            send_nosignal(&a, b"hi").unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
    }

    #[test]
    fn wait_readable_times_out_then_sees_a_pending_connection() {
        let dir = std::env::temp_dir().join(format!("devipc-shm-poll-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let start = std::time::Instant::now();
        assert!(!wait_readable(&listener, Some(Duration::from_millis(50))).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(50));
        let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        assert!(wait_readable(&listener, Some(Duration::ZERO)).unwrap());
        assert!(wait_readable(&listener, None).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn poll_reports_which_descriptors_are_ready() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        let start = std::time::Instant::now();
        let mut fds = [
            PollFd::new(a.as_fd(), true, false),
            PollFd::new(c.as_fd(), true, false),
        ];
        assert_eq!(poll(&mut fds, Some(Duration::from_millis(50))).unwrap(), 0);
        assert!(start.elapsed() >= Duration::from_millis(50));
        (&b).write_all(b"x").unwrap();
        let mut fds = [
            PollFd::new(a.as_fd(), true, false),
            PollFd::new(c.as_fd(), true, false),
        ];
        assert_eq!(poll(&mut fds, None).unwrap(), 1);
        assert!(fds[0].is_ready() && !fds[1].is_ready());
        // Room to write is readiness too; a closed peer shows as ready for reading.
        drop(b);
        let mut fds = [
            PollFd::new(c.as_fd(), false, true),
            PollFd::new(a.as_fd(), true, false),
        ];
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 2);
        assert_eq!(poll(&mut [], Some(Duration::from_millis(1))).unwrap(), 0);
    }

    /// (Filling a listener's queue, which gives `WouldBlock`, takes thousands of
    /// descriptors: the rendezvous tests of the facade do it, away from this crate's test
    /// that counts descriptors.)
    #[test]
    fn connect_unix_nonblocking_connects_blocking_streams() {
        let dir = std::env::temp_dir().join(format!("devipc-shm-connect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        assert_eq!(
            connect_unix_nonblocking(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let s = connect_unix_nonblocking(&path).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(peer_credentials(&accepted).unwrap().pid, std::process::id());
        let mut buf = [0u8; 1];
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let start = std::time::Instant::now();
        let err = std::io::Read::read(&mut &s, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(
            start.elapsed() >= Duration::from_millis(20),
            "the read waited for its timeout: the stream blocks"
        );
        let long = dir.join("x".repeat(200));
        assert_eq!(
            connect_unix_nonblocking(&long).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        // A socket file nobody listens on.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert_eq!(
            connect_unix_nonblocking(&path).unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn open_directory_path_names_a_directory_only() {
        let dir = std::env::temp_dir().join(format!("devipc-shm-odp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("file"), b"x").unwrap();
        let fd = open_directory_path(&dir).unwrap();
        let through = format!("/proc/self/fd/{}/file", fd.as_raw_fd());
        assert_eq!(std::fs::read(through).unwrap(), b"x");
        let err = open_directory_path(&dir.join("file")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn futex_wait_times_out_and_detects_changed_value() {
        let w = AtomicU32::new(5);
        assert_eq!(
            futex_wait(&w, 4, Some(Duration::from_millis(10))).unwrap(),
            FutexWait::ValueChanged
        );
        assert_eq!(
            futex_wait(&w, 5, Some(Duration::from_millis(10))).unwrap(),
            FutexWait::TimedOut
        );
        assert_eq!(futex_wake(&w, 1).unwrap(), 0);
    }
}
