//! Shared memory: the page size, [`MappedRegion`] (an owned `MAP_SHARED` mapping of a file,
//! read and written only through atomics) and [`Reservation`] (an owned `PROT_NONE` address
//! range that files are mapped into at fixed offsets).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64};

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

    /// The 64-bit word at `offset` as an atomic (a counter that must not wrap). `None`
    /// when `offset` is not 8-byte aligned or out of range.
    pub fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        if offset % 8 != 0 || !self.contains(offset, 8) {
            return None;
        }
        // SAFETY: the word is inside the live mapping, 8-byte aligned (the mapping is
        // page aligned), lives as long as `&self`, and AtomicU64 has the layout of u64;
        // every process touches it only through atomic operations.
        Some(unsafe { AtomicU64::from_ptr(self.addr.as_ptr().add(offset).cast::<u64>()) })
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
