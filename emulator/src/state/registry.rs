//! The cross-process object registry: create, look up, lease and free shared objects.
//!
//! Every shared object (device memory, IPC key, notify, event) is a few files named by its
//! [`ObjectId`] (see [`super::layout`]): `<id>.lock` whose `flock` is the object lock,
//! `<id>.meta` with its [`ObjectMeta`], and optionally `<id>.seg` with its data. A surface
//! encodes the id into the handle it gives out ([`crate::handle`]); resolving a handle is
//! opening two files by name, O(1), with no directory scan.
//!
//! Lease model: an object lives while it has holders ([`ObjectMeta::holders`]). The
//! creator holds it once; each import adds one acquisition for the importing process;
//! each release removes one. When the last acquisition goes, at the end of the operation
//! that removed it, the object is freed: its files are unlinked and its charged bytes are
//! returned to the device. Holders whose process died (pid + start time, or for a process
//! of another pid namespace its liveness beacon in the state directory, see
//! [`ProcessIdentity::is_alive_in`]) are reclaimed whenever the object is next touched by
//! any operation here, and by [`crate::gc`] for objects nobody touches. A process
//! announces its beacon ([`super::process::announce`]) before the registry records it:
//! in [`Registry::create`] and [`Registry::update`], the only ways in.
//!
//! Concurrency: every read-modify-write of an object runs under its exclusive object lock
//! ([`Registry::update`]); metadata is replaced atomically (write `<id>.meta.tmp`, rename),
//! so lock-free readers (gc) see either the old or the new version. Creating and freeing
//! additionally take the ledger lock, always *after* the object lock.

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;

use super::dir::EmuDir;
use super::ids::ObjectId;
use super::layout::ObjectFile;
use super::ledger::{Ledger, LedgerData};
use super::lock::{FileLock, LockMode, OpenMode};
use super::meta::{MAX_META_BYTES, ObjectFlags, ObjectInfo, ObjectKind, ObjectMeta, Vendor};
use super::process::ProcessIdentity;
use super::segment::{Segment, remove_if_exists};
use crate::config::Config;
use crate::error::EmuError;

/// What backs a new object's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// No `<id>.seg` (an IPC key naming another object).
    None,
    /// Device memory: a `size`-byte segment charged to the device's memory limit.
    DeviceMemory,
    /// One page of synchronisation words, not charged (notify, event).
    Words,
}

/// Everything needed to create an object; build with the constructors, then adjust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewObject {
    /// Creating surface.
    pub vendor: Vendor,
    /// Kind.
    pub kind: ObjectKind,
    /// Owning device, `0..devices`.
    pub device: u32,
    /// Size (see [`ObjectInfo::size`]).
    pub size: u64,
    /// Data backing.
    pub backing: Backing,
    /// Initial flags.
    pub flags: ObjectFlags,
    /// Initial surface word.
    pub aux: u64,
    /// Named object, for keys.
    pub parent: Option<ObjectId>,
    /// Offset into `parent`, for keys.
    pub offset: u64,
}

impl NewObject {
    /// Device memory of `size` bytes on `device`, charged to its limit.
    pub fn memory(vendor: Vendor, device: u32, size: u64) -> NewObject {
        NewObject {
            vendor,
            kind: ObjectKind::Memory,
            device,
            size,
            backing: Backing::DeviceMemory,
            flags: ObjectFlags::default(),
            aux: 0,
            parent: None,
            offset: 0,
        }
    }

    /// A key naming `offset..offset+size` of the memory object `parent`.
    pub fn mem_key(vendor: Vendor, parent: &ObjectInfo, offset: u64, size: u64) -> NewObject {
        NewObject {
            vendor,
            kind: ObjectKind::MemKey,
            device: parent.device,
            size,
            backing: Backing::None,
            flags: ObjectFlags::default(),
            aux: 0,
            parent: Some(parent.id),
            offset,
        }
    }

    /// A notify (binary semaphore) on `device`: one page of words, word 0 the notify word.
    pub fn notify(vendor: Vendor, device: u32) -> NewObject {
        NewObject {
            kind: ObjectKind::Notify,
            backing: Backing::Words,
            ..NewObject::memory(vendor, device, 0)
        }
    }

    /// An inter-process event on `device`: one page of words.
    pub fn event(vendor: Vendor, device: u32) -> NewObject {
        NewObject {
            kind: ObjectKind::Event,
            ..NewObject::notify(vendor, device)
        }
    }
}

/// A freshly created object: its metadata and, if it has one, its open segment.
#[derive(Debug)]
pub struct Created {
    /// The metadata as written (the creator holds it once).
    pub meta: ObjectMeta,
    /// The segment, for `DeviceMemory` and `Words` backings.
    pub segment: Option<Segment>,
}

/// The result of [`Registry::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Others (or the caller, `remaining` more times) still hold the object.
    StillHeld {
        /// The caller's remaining acquisitions.
        remaining: u32,
    },
    /// That was the last acquisition: the object was freed.
    Freed,
}

/// What [`Registry::touch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Touched {
    /// Dead holder processes removed.
    pub reclaimed: usize,
    /// Whether the object was freed.
    pub freed: bool,
}

/// The registry of one state directory.
#[derive(Debug, Clone)]
pub struct Registry {
    dir: EmuDir,
    ledger: Ledger,
    devices: u32,
    mem_limit: u64,
}

impl Registry {
    /// Opens the registry of `config.dir` (creating and validating the directory and its
    /// ledger as needed).
    pub fn open(config: &Config) -> Result<Registry, EmuError> {
        let dir = EmuDir::open(&config.dir)?;
        let ledger = Ledger::open(&dir)?;
        Ok(Registry {
            dir,
            ledger,
            devices: config.devices,
            mem_limit: config.mem_limit,
        })
    }

    /// The state directory.
    pub fn dir(&self) -> &EmuDir {
        &self.dir
    }

    /// The ledger (usage snapshot, gc).
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Number of emulated devices.
    pub fn devices(&self) -> u32 {
        self.devices
    }

    /// Per-device memory limit in bytes.
    pub fn mem_limit(&self) -> u64 {
        self.mem_limit
    }

    /// Checks a device ordinal: [`EmuError::InvalidDevice`] unless `< devices`.
    pub fn check_device(&self, device: u32) -> Result<(), EmuError> {
        if device < self.devices {
            Ok(())
        } else {
            Err(EmuError::InvalidDevice {
                device,
                count: self.devices,
            })
        }
    }

    /// Bytes in use on `device` across all processes.
    pub fn used(&self, device: u32) -> Result<u64, EmuError> {
        self.check_device(device)?;
        Ok(self.ledger.snapshot()?.used[device as usize])
    }

    /// Turns a raw id taken from a handle into an [`ObjectId`] of this directory:
    /// [`EmuError::BadHandle`] if no directory could have minted it,
    /// [`EmuError::NoSuchObject`] (`foreign`) if another directory did.
    pub fn resolve(&self, raw: u64) -> Result<ObjectId, EmuError> {
        let id = ObjectId::from_raw(raw).ok_or(EmuError::BadHandle {
            reason: "the value is not an emulator object id",
        })?;
        self.check_salt(id)?;
        Ok(id)
    }

    fn check_salt(&self, id: ObjectId) -> Result<(), EmuError> {
        if id.salt() == self.ledger.salt() {
            Ok(())
        } else {
            Err(EmuError::NoSuchObject { id, foreign: true })
        }
    }

    /// Creates an object held once by the calling process. For `DeviceMemory` the size is
    /// charged to the device first; when that would exceed the limit, a [`crate::gc`] runs
    /// (memory of dead processes is released, as a driver does when a process exits) and
    /// the charge is retried once before failing with [`EmuError::OutOfMemory`].
    pub fn create(&self, spec: NewObject) -> Result<Created, EmuError> {
        match self.create_once(spec.clone()) {
            Err(EmuError::OutOfMemory { .. }) => {
                super::gc::gc(self)?;
                self.create_once(spec)
            }
            other => other,
        }
    }

    fn create_once(&self, spec: NewObject) -> Result<Created, EmuError> {
        let me = super::process::current()?;
        super::process::announce(self.dir.path())?;
        self.check_device(spec.device)?;
        let (segment_len, charged) = match spec.backing {
            Backing::None => (0, 0),
            Backing::DeviceMemory => {
                if spec.size == 0 {
                    return Err(EmuError::InvalidArgument("memory size 0".into()));
                }
                (spec.size, spec.size)
            }
            Backing::Words => (devipc_shm::os::page_size() as u64, 0),
        };
        let seg_len = usize::try_from(segment_len)
            .map_err(|_| EmuError::InvalidArgument(format!("size {segment_len} too large")))?;

        let mut ledger = self.ledger.lock()?;
        let id = ledger.mint_id()?;
        if charged > 0 {
            ledger.charge(spec.device, charged, self.mem_limit)?;
        }
        // Persist the id (and charge) before any file named by it exists, so a crash
        // below never lets the id be minted twice; gc repairs the charge if we crash.
        ledger.commit()?;

        let info = ObjectInfo {
            id,
            vendor: spec.vendor,
            kind: spec.kind,
            device: spec.device,
            size: spec.size,
            charged,
            segment_len,
            exporter: me,
            parent: spec.parent,
            offset: spec.offset,
        };
        let meta = ObjectMeta::new(info, spec.flags, spec.aux, me);
        match self.create_files(id, seg_len, &meta) {
            Ok(segment) => Ok(Created { meta, segment }),
            Err(e) => {
                self.remove_files(id);
                if charged > 0 {
                    ledger.release(spec.device, charged)?;
                    ledger.commit()?;
                }
                Err(e)
            }
        }
    }

    fn create_files(
        &self,
        id: ObjectId,
        seg_len: usize,
        meta: &ObjectMeta,
    ) -> Result<Option<Segment>, EmuError> {
        let segment = if seg_len > 0 {
            Some(Segment::create(&self.dir, id, seg_len)?)
        } else {
            None
        };
        let lock_path = self.dir.join(&ObjectFile::Lock.name(id));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&lock_path)
            .map_err(|e| EmuError::io("create", &lock_path, e))?;
        self.write_meta(meta)?;
        Ok(segment)
    }

    /// Best-effort removal of all files of `id` (the caller holds the ledger lock).
    fn remove_files(&self, id: ObjectId) {
        for role in [
            ObjectFile::Meta,
            ObjectFile::MetaTmp,
            ObjectFile::Segment,
            ObjectFile::Lock,
        ] {
            let _ = remove_if_exists(self.dir.join(&role.name(id)));
        }
    }

    /// Reads an object's metadata (reclaiming dead holders, and freeing the object if
    /// none is left, in which case it is [`EmuError::NoSuchObject`]).
    pub fn get(&self, id: ObjectId) -> Result<ObjectMeta, EmuError> {
        self.update(id, |m| Ok::<_, EmuError>(m.clone()))
    }

    /// Like [`Registry::get`], and checks vendor and kind ([`ObjectMeta::expect`]).
    pub fn get_expect(
        &self,
        id: ObjectId,
        vendor: Vendor,
        kind: ObjectKind,
    ) -> Result<ObjectMeta, EmuError> {
        self.update(id, |m| {
            m.expect(vendor, kind)?;
            Ok::<_, EmuError>(m.clone())
        })
    }

    /// The read-modify-write primitive every other operation uses. Under the object's
    /// exclusive lock it reads the metadata, reclaims dead holders, then runs `f`:
    /// - if the reclaim left no holder, the object is freed and `f` is not run
    ///   ([`EmuError::NoSuchObject`]);
    /// - if `f` returns `Ok` and left no holder, the object is freed, otherwise the
    ///   metadata is written back if it changed;
    /// - if `f` returns `Err`, its changes are discarded (the reclaim is kept).
    ///
    /// `f` must be quick and must not call back into the registry for the same object
    /// (that would deadlock on the lock); other objects are fine. This is where a
    /// surface checks its rules atomically with the change they guard, e.g. "trusted and
    /// not the exporter, then add me as a holder".
    pub fn update<R, E>(
        &self,
        id: ObjectId,
        f: impl FnOnce(&mut ObjectMeta) -> Result<R, E>,
    ) -> Result<R, E>
    where
        E: From<EmuError>,
    {
        self.check_salt(id)?;
        // `f` may record this process (an import adds it as a holder).
        super::process::announce(self.dir.path())?;
        let lock = self.lock_object(id)?;
        let mut meta = self.read_meta(id)?;
        let reclaimed = self.reclaim(&mut meta);
        if meta.holders().is_empty() {
            self.free_locked(&lock, &meta)?;
            return Err(EmuError::NoSuchObject { id, foreign: false }.into());
        }
        let before = meta.clone();
        match f(&mut meta) {
            Ok(value) => {
                if meta.holders().is_empty() {
                    self.free_locked(&lock, &meta)?;
                } else if reclaimed > 0 || meta != before {
                    self.write_meta(&meta)?;
                }
                Ok(value)
            }
            Err(e) => {
                if reclaimed > 0 {
                    // Best effort: if this fails the next touch reclaims again.
                    let _ = self.write_meta(&before);
                }
                Err(e)
            }
        }
    }

    /// Reclaims dead holders of `id` and frees it if none is left: what [`crate::gc`]
    /// does to every object.
    pub(crate) fn touch(&self, id: ObjectId) -> Result<Touched, EmuError> {
        self.check_salt(id)?;
        let lock = self.lock_object(id)?;
        let mut meta = self.read_meta(id)?;
        let reclaimed = self.reclaim(&mut meta);
        let freed = meta.holders().is_empty();
        if freed {
            self.free_locked(&lock, &meta)?;
        } else if reclaimed > 0 {
            self.write_meta(&meta)?;
        }
        Ok(Touched { reclaimed, freed })
    }

    /// Drops the holders of `meta` whose process is gone; returns how many.
    fn reclaim(&self, meta: &mut ObjectMeta) -> usize {
        let dir = self.dir.path();
        meta.reclaim(|p| p.is_alive_in(dir))
    }

    /// Adds one acquisition by `who` (an import). Returns the metadata after the change.
    pub fn acquire(&self, id: ObjectId, who: ProcessIdentity) -> Result<ObjectMeta, EmuError> {
        self.update(id, |m| {
            m.add_holder(who)?;
            Ok(m.clone())
        })
    }

    /// Removes one acquisition by `who` (a close/free), freeing the object if it was the
    /// last one.
    pub fn release(&self, id: ObjectId, who: ProcessIdentity) -> Result<Released, EmuError> {
        self.update(id, |m| {
            let remaining = m.remove_holder(who)?;
            Ok(if m.holders().is_empty() {
                Released::Freed
            } else {
                Released::StillHeld { remaining }
            })
        })
    }

    /// Adds pids to the object's trustlist.
    pub fn trust(&self, id: ObjectId, pids: &[i32]) -> Result<(), EmuError> {
        self.update(id, |m| m.trust(pids))
    }

    /// Whether `pid` may import the object ([`ObjectMeta::is_trusted`]).
    pub fn is_trusted(&self, id: ObjectId, pid: i32) -> Result<bool, EmuError> {
        self.update(id, |m| Ok::<_, EmuError>(m.is_trusted(pid)))
    }

    /// The vendor's release point of object `id` passed while other processes still map
    /// it (a broken vendor `rule`): marks it [`ObjectFlags::REVOKED`], revokes its pages
    /// for every process (`Segment::revoke`: host access faults, copies are refused),
    /// and records the violation ([`super::violations`]). The object itself lives on until
    /// its holders release it, so their closes still work. Revoking an object that is
    /// already gone does nothing.
    pub fn revoke(&self, id: ObjectId, rule: &str, message: &str) -> Result<(), EmuError> {
        let revoked = self.update(id, |m| {
            let first = !m.flags.contains(ObjectFlags::REVOKED);
            m.flags.insert(ObjectFlags::REVOKED);
            Ok::<_, EmuError>(first)
        });
        match revoked {
            Ok(first) => {
                // The epoch is odd while the pages go: every check meanwhile asks the file
                // (SharedMapping::check_live); a revoker that dies here leaves it odd,
                // which is slow but never wrong.
                let epoch = super::segment::RevocationEpoch::of(self.dir.path());
                epoch.begin();
                let truncated = Segment::revoke(&self.dir, id);
                epoch.end();
                truncated?;
                if first {
                    super::violations::record(&self.dir, rule, id, message)?;
                }
                Ok(())
            }
            Err(EmuError::NoSuchObject { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Opens the object's segment (the importer then maps it).
    pub fn open_segment(&self, id: ObjectId) -> Result<Segment, EmuError> {
        self.check_salt(id)?;
        Segment::open(&self.dir, id)
    }

    /// Takes the object lock of `id`; [`EmuError::NoSuchObject`] if the object does not
    /// exist or was freed while we waited for the lock.
    fn lock_object(&self, id: ObjectId) -> Result<FileLock, EmuError> {
        let path = self.dir.join(&ObjectFile::Lock.name(id));
        let lock =
            FileLock::open(&path, OpenMode::Existing, LockMode::Exclusive).map_err(
                |e| match e {
                    EmuError::Io { ref source, .. } if source.kind() == io::ErrorKind::NotFound => {
                        EmuError::NoSuchObject { id, foreign: false }
                    }
                    other => other,
                },
            )?;
        if !lock.still_linked()? {
            return Err(EmuError::NoSuchObject { id, foreign: false });
        }
        Ok(lock)
    }

    /// Reads `<id>.meta` without locking (callers hold the object lock, or accept a
    /// snapshot, as gc does). Missing is [`EmuError::NoSuchObject`].
    pub(crate) fn read_meta(&self, id: ObjectId) -> Result<ObjectMeta, EmuError> {
        let path = self.dir.join(&ObjectFile::Meta.name(id));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(EmuError::NoSuchObject { id, foreign: false });
            }
            Err(e) => return Err(EmuError::io("read", &path, e)),
        };
        let corrupt = |reason: String| EmuError::Corrupt {
            path: path.clone(),
            reason,
        };
        if bytes.len() > MAX_META_BYTES {
            return Err(corrupt("metadata file too large".into()));
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| corrupt("not UTF-8".into()))?;
        let meta = ObjectMeta::decode(text).map_err(|e| corrupt(e.to_string()))?;
        if meta.id() != id {
            return Err(corrupt(format!("file of {id} describes {}", meta.id())));
        }
        Ok(meta)
    }

    /// Atomically replaces `<id>.meta` (the caller holds the object lock, or is creating).
    fn write_meta(&self, meta: &ObjectMeta) -> Result<(), EmuError> {
        let id = meta.id();
        let tmp = self.dir.join(&ObjectFile::MetaTmp.name(id));
        let dst = self.dir.join(&ObjectFile::Meta.name(id));
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| EmuError::io("create", &tmp, e))?;
        f.write_all(meta.encode().as_bytes())
            .map_err(|e| EmuError::io("write", &tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &dst).map_err(|e| EmuError::io("rename", &dst, e))
    }

    /// Frees an object whose lock the caller holds: under the ledger lock, unlinks its
    /// metadata first (so waiters on the object lock see it gone), then its other files,
    /// and returns its charge to the device.
    fn free_locked(&self, _lock: &FileLock, meta: &ObjectMeta) -> Result<(), EmuError> {
        let info = meta.info();
        let mut ledger = self.ledger.lock()?;
        remove_if_exists(self.dir.join(&ObjectFile::Meta.name(info.id)))?;
        remove_if_exists(self.dir.join(&ObjectFile::MetaTmp.name(info.id)))?;
        Segment::unlink(&self.dir, info.id)?;
        remove_if_exists(self.dir.join(&ObjectFile::Lock.name(info.id)))?;
        if info.charged > 0 {
            ledger.release(info.device, info.charged)?;
        }
        ledger.commit()
    }

    /// Reads the ledger (gc and tests).
    pub fn ledger_snapshot(&self) -> Result<LedgerData, EmuError> {
        self.ledger.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(name: &str) -> Registry {
        let dir =
            std::env::temp_dir().join(format!("devipc-emu-reg-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = Config::for_dir(dir);
        c.mem_limit = 1 << 20;
        Registry::open(&c).unwrap()
    }

    fn finish(r: Registry) {
        let mut names = r.dir().entry_names().unwrap();
        names.sort();
        assert_eq!(names, vec!["ledger".to_string()]);
        assert_eq!(r.ledger_snapshot().unwrap().used, [0; 64]);
        r.dir().clone().remove_all().unwrap();
    }

    fn dead() -> ProcessIdentity {
        ProcessIdentity {
            pid: 0x7fff_fff0,
            start_time: 1,
            pid_ns: ProcessIdentity::current_pid_ns(),
        }
    }

    #[test]
    fn create_charge_release_free() {
        let r = registry("basic");
        let me = ProcessIdentity::current().unwrap();
        let c = r.create(NewObject::memory(Vendor::Hip, 1, 4096)).unwrap();
        let id = c.meta.id();
        assert_eq!(c.segment.as_ref().unwrap().len(), 4096);
        assert_eq!(r.used(1).unwrap(), 4096);
        assert_eq!(r.used(0).unwrap(), 0);
        assert_eq!(r.get(id).unwrap(), c.meta);
        assert_eq!(r.acquire(id, me).unwrap().hold_count(me), 2);
        assert_eq!(
            r.release(id, me).unwrap(),
            Released::StillHeld { remaining: 1 }
        );
        assert_eq!(r.release(id, me).unwrap(), Released::Freed);
        assert!(r.get(id).unwrap_err().is_no_such_object());
        assert!(r.release(id, me).unwrap_err().is_no_such_object());
        assert!(matches!(
            r.open_segment(id),
            Err(EmuError::NoSuchObject { .. })
        ));
        finish(r);
    }

    #[test]
    fn limits_devices_and_kinds() {
        let r = registry("limits");
        let me = ProcessIdentity::current().unwrap();
        assert!(matches!(
            r.create(NewObject::memory(Vendor::Acl, 2, 1)),
            Err(EmuError::InvalidDevice {
                device: 2,
                count: 2
            })
        ));
        assert!(matches!(
            r.create(NewObject::memory(Vendor::Acl, 0, 0)),
            Err(EmuError::InvalidArgument(_))
        ));
        let a = r
            .create(NewObject::memory(Vendor::Acl, 0, 1 << 19))
            .unwrap();
        let b = r
            .create(NewObject::memory(Vendor::Acl, 0, 1 << 19))
            .unwrap();
        assert!(matches!(
            r.create(NewObject::memory(Vendor::Acl, 0, 1)),
            Err(EmuError::OutOfMemory { device: 0, requested: 1, used, limit })
                if used == 1 << 20 && limit == 1 << 20
        ));
        let n = r.create(NewObject::notify(Vendor::Acl, 0)).unwrap();
        assert_eq!(r.used(0).unwrap(), 1 << 20, "notify words are not charged");
        let k = r
            .create(NewObject::mem_key(Vendor::Acl, a.meta.info(), 4096, 4096))
            .unwrap();
        assert!(k.segment.is_none());
        assert_eq!(k.meta.info().parent, Some(a.meta.id()));
        assert!(matches!(
            r.get_expect(n.meta.id(), Vendor::Acl, ObjectKind::Memory),
            Err(EmuError::WrongKind { .. })
        ));
        assert!(matches!(
            r.get_expect(a.meta.id(), Vendor::Hip, ObjectKind::Memory),
            Err(EmuError::WrongKind { .. })
        ));
        r.get_expect(a.meta.id(), Vendor::Acl, ObjectKind::Memory)
            .unwrap();
        for c in [a, b, n, k] {
            assert_eq!(r.release(c.meta.id(), me).unwrap(), Released::Freed);
        }
        finish(r);
    }

    #[test]
    fn handles_are_checked() {
        let r = registry("resolve");
        let c = r.create(NewObject::event(Vendor::Hip, 0)).unwrap();
        let id = c.meta.id();
        assert_eq!(r.resolve(id.raw()).unwrap(), id);
        assert!(matches!(r.resolve(0), Err(EmuError::BadHandle { .. })));
        let other_salt = if id.salt() == 1 { 2 } else { 1 };
        let foreign = ObjectId::new(other_salt, id.counter()).unwrap();
        assert!(matches!(
            r.resolve(foreign.raw()),
            Err(EmuError::NoSuchObject { foreign: true, .. })
        ));
        let never = ObjectId::new(id.salt(), id.counter() + 1000).unwrap();
        assert!(matches!(
            r.get(never),
            Err(EmuError::NoSuchObject { foreign: false, .. })
        ));
        r.release(id, ProcessIdentity::current().unwrap()).unwrap();
        finish(r);
    }

    #[test]
    fn trustlist_and_failed_updates() {
        let r = registry("trust");
        let c = r.create(NewObject::memory(Vendor::Acl, 0, 64)).unwrap();
        let id = c.meta.id();
        assert!(!r.is_trusted(id, 77).unwrap());
        r.trust(id, &[77, 78]).unwrap();
        assert!(r.is_trusted(id, 78).unwrap());
        // A failing closure changes nothing.
        let err: Result<(), EmuError> = r.update(id, |m| {
            m.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
            Err(EmuError::InvalidArgument("rule says no".into()))
        });
        assert!(err.is_err());
        assert!(!r.is_trusted(id, 5).unwrap());
        r.update(id, |m| {
            m.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
            Ok::<_, EmuError>(())
        })
        .unwrap();
        assert!(r.is_trusted(id, 5).unwrap());
        r.release(id, ProcessIdentity::current().unwrap()).unwrap();
        finish(r);
    }

    #[test]
    fn dead_holders_are_reclaimed_on_touch() {
        let r = registry("reclaim");
        let me = ProcessIdentity::current().unwrap();
        let c = r.create(NewObject::memory(Vendor::Hip, 0, 8192)).unwrap();
        let id = c.meta.id();
        r.acquire(id, dead()).unwrap_or_else(|e| panic!("{e}"));
        // acquire itself touched the object first, so the dead holder is recorded only
        // now; the next touch removes it.
        let m = r.get(id).unwrap();
        assert_eq!(m.holders().len(), 1);
        assert_eq!(m.hold_count(dead()), 0);
        // Now let only the dead process hold it (in one update, since every touch
        // reclaims first): the next touch frees it.
        r.update(id, |m| {
            m.add_holder(dead())?;
            m.remove_holder_entirely(me);
            Ok::<_, EmuError>(())
        })
        .unwrap();
        assert_eq!(r.used(0).unwrap(), 8192);
        assert!(r.get(id).unwrap_err().is_no_such_object());
        assert_eq!(r.used(0).unwrap(), 0);
        finish(r);
    }
}
