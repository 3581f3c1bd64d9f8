//! Emulated device memory: `<id>.seg` files in the state directory, mapped `MAP_SHARED`.
//!
//! A [`Segment`] is the open backing file of one object; [`Segment::map`] gives a
//! [`SharedMapping`] whose host address is what the surfaces hand out as the "device
//! pointer". Every process that maps the same segment sees the same bytes, which is how an
//! importer reads what the exporter wrote. For the VMM APIs, [`Segment::map_into`] places
//! the file at a fixed offset of an address [`Reservation`].
//!
//! Segments are created only by the registry (`Registry::create`), which charges device
//! memory and writes the metadata in the same critical section, and unlinked only when the
//! object is freed, which happens when its last holder releases it: existing mappings of
//! a freed object stay valid until dropped, as nobody else can reach them.
//!
//! # Revocation
//!
//! Where a vendor frees memory that other processes still map (HIP's `hipFree` by the
//! exporter, Ascend's block free under a live key), real hardware faults or corrupts; the
//! emulator makes it observable: `Segment::revoke` truncates the file to zero bytes, so
//! every host access through any process's mapping raises `SIGBUS`, and
//! [`SharedMapping::check_live`] (called by [`SharedMapping::read_at`] / `write_at` and by
//! the surfaces before their copies) refuses with [`EmuError::Revoked`] instead of
//! touching the pages. Revocation is the only way a segment file shrinks.
//!
//! A check alone would race: a revocation between the check and the copy faults the
//! copier (audit N14). So a copy holds a [`LivePin`] ([`SharedMapping::pin_live`]): a
//! shared `flock` on the segment file, taken before the length is checked and held until
//! the copy is done; `Segment::revoke` takes the exclusive lock before it truncates, so it
//! waits for the copies in flight, and a copy that comes after finds the file truncated
//! and fails with [`EmuError::Revoked`]. [`SharedMapping::read_at`] / `write_at` pin
//! themselves; the surfaces pin every device operand of a copy around it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use devipc_shm::os::{self, MappedRegion};

use super::dir::EmuDir;
use super::ids::ObjectId;
use super::layout::{LEDGER, ObjectFile};
use super::ledger::EPOCH_OFFSET;
use super::lock::{FileLock, LockMode};
use crate::error::EmuError;

pub use devipc_shm::os::Reservation;

/// The open backing file of an object's data.
#[derive(Debug)]
pub struct Segment {
    id: ObjectId,
    file: File,
    len: usize,
    path: PathBuf,
}

impl Segment {
    /// Creates `<id>.seg` of `len` bytes, zero-filled, with its backing store allocated.
    /// Fails if it already exists. Only the registry calls this.
    pub(crate) fn create(dir: &EmuDir, id: ObjectId, len: usize) -> Result<Segment, EmuError> {
        if len == 0 {
            return Err(EmuError::InvalidArgument("segment length 0".into()));
        }
        let path = dir.join(&ObjectFile::Segment.name(id));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| EmuError::io("create", &path, e))?;
        if let Err(e) = os::fallocate(&file, len as u64) {
            let _ = std::fs::remove_file(&path);
            return Err(match e.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EFBIG) => EmuError::HostOutOfMemory {
                    requested: len as u64,
                    source: e,
                },
                _ => EmuError::io("fallocate", &path, e),
            });
        }
        Ok(Segment {
            id,
            file,
            len,
            path,
        })
    }

    /// Opens the existing segment of object `id`. A missing file is
    /// [`EmuError::NoSuchObject`] (the object was freed).
    pub fn open(dir: &EmuDir, id: ObjectId) -> Result<Segment, EmuError> {
        let path = dir.join(&ObjectFile::Segment.name(id));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => EmuError::NoSuchObject { id, foreign: false },
                _ => EmuError::io("open", &path, e),
            })?;
        let len = file
            .metadata()
            .map_err(|e| EmuError::io("fstat", &path, e))?
            .len();
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| EmuError::Corrupt {
                path: path.clone(),
                reason: format!("segment length {len}"),
            })?;
        Ok(Segment {
            id,
            file,
            len,
            path,
        })
    }

    /// The object this segment belongs to.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: empty segments are never created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maps the whole segment read-write, shared, at an address the kernel picks.
    pub fn map(&self) -> Result<SharedMapping, EmuError> {
        let region = MappedRegion::map_file(&self.file, self.len)
            .map_err(|e| EmuError::io("mmap", &self.path, e))?;
        let epoch = match self.path.parent() {
            Some(dir) => RevocationEpoch::of(dir),
            None => RevocationEpoch(None),
        };
        Ok(SharedMapping {
            id: self.id,
            region,
            path: self.path.clone(),
            epoch,
            seen: AtomicU64::new(NEVER_CHECKED),
        })
    }

    /// Maps the whole segment at `reservation.base() + offset` (page aligned, inside the
    /// reservation), replacing what was mapped there. Undo with
    /// [`Reservation::unmap`]`(offset, segment.len())`.
    pub fn map_into(&self, reservation: &Reservation, offset: usize) -> Result<usize, EmuError> {
        reservation
            .map_file(offset, &self.file, self.len)
            .map_err(|e| match e.kind() {
                io::ErrorKind::InvalidInput => EmuError::InvalidArgument(format!(
                    "cannot map {} bytes at offset {offset:#x} of a {:#x}-byte reservation",
                    self.len,
                    reservation.len()
                )),
                _ => EmuError::io("mmap", &self.path, e),
            })?;
        Ok(reservation.base() + offset)
    }

    /// Revokes the pages of object `id` for every process: truncates `<id>.seg` to zero
    /// bytes, so host access through any mapping faults (`SIGBUS`) and
    /// [`SharedMapping::check_live`] refuses. `Ok(false)` if the file was already gone.
    /// Only the registry calls this ([`super::Registry::revoke`]).
    pub(crate) fn revoke(dir: &EmuDir, id: ObjectId) -> Result<bool, EmuError> {
        let path = dir.join(&ObjectFile::Segment.name(id));
        let file = match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(EmuError::io("open", &path, e)),
        };
        // Wait for the copies in flight (each holds a shared lock: LivePin), and keep new
        // ones out until the pages are gone; they then find the file truncated.
        let locked = FileLock::acquire(file, &path, LockMode::Exclusive)?;
        locked
            .file()
            .set_len(0)
            .map_err(|e| EmuError::io("truncate", &path, e))?;
        Ok(true)
    }

    /// Removes `<id>.seg`; `Ok(false)` if it was already gone. Only the registry calls
    /// this, when the object is freed.
    pub(crate) fn unlink(dir: &EmuDir, id: ObjectId) -> Result<bool, EmuError> {
        remove_if_exists(dir.join(&ObjectFile::Segment.name(id)))
    }
}

/// Removes a file, treating "already gone" as `Ok(false)`.
pub(crate) fn remove_if_exists(path: PathBuf) -> Result<bool, EmuError> {
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(EmuError::io("unlink", path, e)),
    }
}

/// The state directory's revocation epoch: the ledger's word at
/// [`super::ledger::EPOCH_OFFSET`], mapped once per process and directory. A revocation
/// makes it odd, truncates, and makes it even again ([`RevocationEpoch::begin`] /
/// [`RevocationEpoch::end`]); a mapping that checked its pages at an even epoch need not
/// ask the file again until the epoch moves. Without a mapping of the word (the ledger
/// could not be mapped) every check asks the file.
#[derive(Debug, Clone)]
pub(crate) struct RevocationEpoch(Option<Arc<MappedRegion>>);

impl RevocationEpoch {
    /// The epoch of the state directory `dir`, mapped on first use.
    pub(crate) fn of(dir: &std::path::Path) -> RevocationEpoch {
        // Per process (fork-safe); a child keeps its copies of the parent's mappings
        // (shared mappings of the same files) when it can.
        static WORDS: devipc_core::PerProcess<Vec<(PathBuf, Arc<MappedRegion>)>> =
            devipc_core::PerProcess::new(|inherited| inherited.unwrap_or_default());
        let mut words = WORDS.lock();
        if let Some((_, w)) = words.iter().find(|(d, _)| d == dir) {
            return RevocationEpoch(Some(w.clone()));
        }
        let mapped = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir.join(LEDGER))
            .and_then(|file| MappedRegion::map_file(&file, EPOCH_OFFSET + 4));
        match mapped {
            Ok(region) => {
                let region = Arc::new(region);
                words.push((dir.to_path_buf(), region.clone()));
                RevocationEpoch(Some(region))
            }
            Err(_) => RevocationEpoch(None),
        }
    }

    fn word(&self) -> Option<&AtomicU32> {
        self.0.as_ref().and_then(|r| r.atomic_u32(EPOCH_OFFSET))
    }

    /// The current epoch, `None` when unknown.
    fn load(&self) -> Option<u32> {
        self.word().map(|w| w.load(Ordering::SeqCst))
    }

    /// A revocation starts: the epoch becomes odd.
    pub(crate) fn begin(&self) {
        if let Some(w) = self.word() {
            w.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The revocation is done: the epoch becomes even again.
    pub(crate) fn end(&self) {
        if let Some(w) = self.word() {
            w.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A segment's pages kept live for one copy: while it exists no revocation truncates the
/// segment ([`SharedMapping::pin_live`]). Drop it as soon as the copy is done: a revoker
/// waits for it.
#[derive(Debug)]
#[must_use = "the pages are pinned only while the pin is held"]
pub struct LivePin(#[allow(dead_code, reason = "held for its lock")] Option<FileLock>);

/// `seen` before the first check: no epoch equals it, so the first check asks the file.
const NEVER_CHECKED: u64 = u64::MAX;

/// A live mapping of a segment in this process; unmapped on drop.
///
/// The bytes are shared with other processes, so they are copied in and out rather than
/// borrowed; 32-bit words for synchronisation are available as atomics.
#[derive(Debug)]
pub struct SharedMapping {
    id: ObjectId,
    region: MappedRegion,
    /// The segment file's path, to tell a revoked (truncated) segment from a live one
    /// (a path, not an open file: a descriptor per mapping would run into the 1024 limit).
    path: PathBuf,
    /// The directory's revocation epoch, and the even epoch at this mapping's last
    /// successful check: while no revocation happened since, the pages are known to be
    /// live without a system call.
    epoch: RevocationEpoch,
    seen: AtomicU64,
}

impl SharedMapping {
    /// The object this mapping shows.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// The host address of byte 0: the emulated device pointer.
    pub fn addr(&self) -> usize {
        self.region.addr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.region.len()
    }

    /// Always `false`: empty segments are never created.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// Fails with [`EmuError::Revoked`] once the segment was revoked (see the module
    /// docs): the pages are gone and touching them would fault. An atomic load while no
    /// revocation happened in the directory since the last check, else one `fstat`
    /// (a revocation truncates first and bumps the epoch after, so a check that sees the
    /// new epoch sees the truncation).
    pub fn check_live(&self) -> Result<(), EmuError> {
        self.check_live_and(|| Ok(()))
    }

    /// [`SharedMapping::check_live`] plus `also`, a check of an object this mapping
    /// depends on (e.g. the key it was imported by); both are skipped while no revocation
    /// happened since the last time both passed. `also` runs after the epoch is read, so
    /// a revocation it misses moves the epoch and is seen by the next check.
    pub fn check_live_and<E: From<EmuError>>(
        &self,
        also: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        if self.unchanged_since_check() {
            return Ok(());
        }
        let now = self.epoch.load();
        also()?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.len() < self.region.len() as u64 => {
                Err(EmuError::Revoked { id: self.id }.into())
            }
            // Still whole, or unlinked because its object was freed (by this process's
            // own last release: nobody else can revoke it any more).
            result => {
                if let Err(e) = &result
                    && e.kind() != io::ErrorKind::NotFound
                {
                    return Err(EmuError::io(
                        "stat",
                        &self.path,
                        io::Error::new(e.kind(), e.to_string()),
                    )
                    .into());
                }
                if let Some(now) = now
                    && now % 2 == 0
                {
                    self.seen.store(u64::from(now), Ordering::SeqCst);
                }
                Ok(())
            }
        }
    }

    /// Pins the pages live for a copy (see the module docs): a shared lock on the segment
    /// file, held until the [`LivePin`] is dropped, during which no revocation can
    /// truncate it; [`EmuError::Revoked`] if it was truncated before. A segment already
    /// unlinked (its object freed by this process's own last release) can no longer be
    /// revoked and needs no lock. A few system calls (open, flock, fstat, close).
    pub fn pin_live(&self) -> Result<LivePin, EmuError> {
        self.pin_live_and(|| Ok(()))
    }

    /// [`SharedMapping::pin_live`] plus `also`, a check of an object this mapping depends
    /// on (as [`SharedMapping::check_live_and`]), made while the pin is held.
    pub fn pin_live_and<E: From<EmuError>>(
        &self,
        also: impl FnOnce() -> Result<(), E>,
    ) -> Result<LivePin, E> {
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                also()?;
                return Ok(LivePin(None));
            }
            Err(e) => return Err(EmuError::io("open", &self.path, e).into()),
        };
        let lock = FileLock::acquire(file, &self.path, LockMode::Shared)?;
        let len = lock
            .file()
            .metadata()
            .map_err(|e| EmuError::io("fstat", &self.path, e))?
            .len();
        if len < self.region.len() as u64 {
            return Err(EmuError::Revoked { id: self.id }.into());
        }
        also()?;
        Ok(LivePin(Some(lock)))
    }

    /// Whether no revocation of any object of the directory happened since this mapping's
    /// last successful check (one atomic load).
    fn unchanged_since_check(&self) -> bool {
        self.epoch
            .load()
            .is_some_and(|now| now % 2 == 0 && self.seen.load(Ordering::SeqCst) == u64::from(now))
    }

    /// Copies bytes at `offset` into `dst` ([`EmuError::Revoked`] once revoked, never a
    /// fault: the copy holds a [`LivePin`]).
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Result<(), EmuError> {
        let _pin = self.pin_live()?;
        self.region
            .read_at(offset, dst)
            .then_some(())
            .ok_or_else(|| self.out_of_range(offset, dst.len()))
    }

    /// Copies `src` to `offset` (as [`SharedMapping::read_at`]).
    pub fn write_at(&self, offset: usize, src: &[u8]) -> Result<(), EmuError> {
        let _pin = self.pin_live()?;
        self.region
            .write_at(offset, src)
            .then_some(())
            .ok_or_else(|| self.out_of_range(offset, src.len()))
    }

    /// The 32-bit word at `offset` (4-byte aligned) as an atomic shared with every process
    /// mapping this segment: the futex word of [`crate::state::futex`].
    pub fn word(&self, offset: usize) -> Result<&AtomicU32, EmuError> {
        self.region.atomic_u32(offset).ok_or_else(|| {
            EmuError::InvalidArgument(format!(
                "word offset {offset} is misaligned or outside the {}-byte segment {}",
                self.len(),
                self.id
            ))
        })
    }

    fn out_of_range(&self, offset: usize, len: usize) -> EmuError {
        EmuError::InvalidArgument(format!(
            "range {offset:#x}+{len:#x} is outside the {:#x}-byte segment {}",
            self.len(),
            self.id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::state::{NewObject, ProcessIdentity, Registry, Vendor};

    fn registry(name: &str) -> Registry {
        let dir =
            std::env::temp_dir().join(format!("devipc-emu-seg-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Registry::open(&Config::for_dir(dir)).unwrap()
    }

    fn finish(r: Registry, ids: &[ObjectId]) {
        let me = ProcessIdentity::current().unwrap();
        for id in ids {
            r.release(*id, me).unwrap();
        }
        assert_eq!(r.dir().entry_names().unwrap(), ["ledger"]);
        r.dir().clone().remove_all().unwrap();
    }

    #[test]
    fn mappings_of_one_segment_share_bytes() {
        let r = registry("share");
        let c = r.create(NewObject::memory(Vendor::Hip, 0, 10_000)).unwrap();
        let id = c.meta.id();
        let a = c.segment.as_ref().unwrap().map().unwrap();
        let b = r.open_segment(id).unwrap().map().unwrap();
        assert_ne!(a.addr(), b.addr());
        assert_eq!((a.len(), b.len(), b.id()), (10_000, 10_000, id));
        a.write_at(9_996, b"tail").unwrap();
        let mut got = [0u8; 4];
        b.read_at(9_996, &mut got).unwrap();
        assert_eq!(&got, b"tail");
        // Fresh memory is zeroed.
        b.read_at(0, &mut got).unwrap();
        assert_eq!(got, [0; 4]);
        assert!(matches!(
            a.write_at(9_997, b"tail"),
            Err(EmuError::InvalidArgument(_))
        ));
        assert!(matches!(
            b.read_at(usize::MAX, &mut got),
            Err(EmuError::InvalidArgument(_))
        ));
        assert!(a.word(9_996).is_ok());
        assert!(matches!(a.word(9_998), Err(EmuError::InvalidArgument(_))));
        assert!(matches!(a.word(10_000), Err(EmuError::InvalidArgument(_))));
        drop((a, b));
        finish(r, &[id]);
    }

    #[test]
    fn revoked_segments_refuse_every_mapping() {
        let r = registry("revoked");
        let c = r.create(NewObject::memory(Vendor::Hip, 0, 8192)).unwrap();
        let id = c.meta.id();
        let a = c.segment.as_ref().unwrap().map().unwrap();
        let b = r.open_segment(id).unwrap().map().unwrap();
        a.write_at(0, b"live").unwrap();
        // Checked once: the next checks need no system call until a revocation.
        b.check_live().unwrap();
        b.check_live().unwrap();
        r.revoke(id, "test.rule", "revoked by the test").unwrap();
        let records = super::super::violations::read(r.dir()).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].rule, "test.rule");
        std::fs::remove_file(r.dir().join(super::super::violations::VIOLATIONS)).unwrap();
        for m in [&a, &b] {
            assert!(matches!(m.check_live(), Err(EmuError::Revoked { id: i }) if i == id));
            let mut got = [0u8; 4];
            assert!(matches!(
                m.read_at(0, &mut got),
                Err(EmuError::Revoked { .. })
            ));
            assert!(matches!(
                m.write_at(0, b"late"),
                Err(EmuError::Revoked { .. })
            ));
        }
        drop((a, b));
        finish(r.clone(), &[id]);
        // Revoking what is gone is not an error.
        assert!(!Segment::revoke(r.dir(), id).unwrap());
    }

    #[test]
    fn freed_segments_are_gone_but_mappings_stay_valid() {
        let r = registry("freed");
        let c = r.create(NewObject::memory(Vendor::Acl, 1, 4096)).unwrap();
        let id = c.meta.id();
        let map = c.segment.as_ref().unwrap().map().unwrap();
        finish(r.clone(), &[id]);
        assert!(matches!(
            Segment::open(r.dir(), id),
            Err(EmuError::NoSuchObject { .. })
        ));
        // The unlinked file stays mapped until dropped.
        map.write_at(0, b"late").unwrap();
    }

    #[test]
    #[allow(unsafe_code)]
    fn segments_map_into_reservations() {
        let r = registry("reserve");
        let page = devipc_shm::os::page_size();
        let c = r
            .create(NewObject::memory(Vendor::Acl, 0, page as u64))
            .unwrap();
        let id = c.meta.id();
        let seg = c.segment.unwrap();
        let res = Reservation::new(4 * page, 2 << 20).unwrap();
        let at = seg.map_into(&res, 2 * page).unwrap();
        assert_eq!(at, res.base() + 2 * page);
        seg.map().unwrap().write_at(0, b"vmm").unwrap();
        // SAFETY: `at` is mapped read-write to the segment until `unmap` below.
        let first = unsafe { std::ptr::read_volatile(at as *const u8) };
        assert_eq!(first, b'v');
        res.unmap(2 * page, seg.len()).unwrap();
        assert!(matches!(
            seg.map_into(&res, 4 * page),
            Err(EmuError::InvalidArgument(_))
        ));
        assert!(matches!(
            seg.map_into(&res, 1),
            Err(EmuError::InvalidArgument(_))
        ));
        drop((seg, res));
        finish(r, &[id]);
    }
}
