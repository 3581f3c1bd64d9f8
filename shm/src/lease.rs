//! [`Lease`]: a crash-safe list of the processes that hold a shared object.
//!
//! An exporter that must not release an object while importers use it (HIP: `hipFree`
//! before the importers' `hipIpcCloseMemHandle` is undefined behaviour; Ascend IPC keys:
//! importers must close before the exporter) creates a lease file and names it in the
//! token. Each importer adds itself ([`Lease::acquire`]) before it maps the object and
//! removes itself ([`Lease::release`]) after it unmapped it. The exporter asks
//! [`Lease::live_holders`] before releasing.
//!
//! Holders are [`ProcessIdentity`]s (pid + start time) with a count, so an importer that
//! crashed, or a pid reused by another process, is recognised as dead and dropped from the
//! lease the next time anyone reads it: a killed importer can never keep an object alive
//! for ever.
//!
//! The file (`lease-<32 hex>` in a [private directory](crate::private_dir)) holds one line
//! per holder, `<pid> <start time> <count>`, and is read and rewritten under an exclusive
//! `flock` on the file itself.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::process::ProcessIdentity;
use crate::sys::{self, FlockMode};
use crate::word_file::{NAME_LEN, random_name, valid_name};

/// Largest lease file read (a lease lists at most a few thousand holders).
const MAX_LEN: u64 = 1 << 20;
/// Prefix of the line naming the process that created the lease (the exporter).
const CREATOR: &str = "creator ";
/// Prefix of lease file names.
const PREFIX: &str = "lease-";

/// A lease file. The value holds no file descriptor between operations (an importer may
/// hold thousands of leases; descriptors are a scarcer resource than an `open` per
/// operation): each operation opens the file, locks it, and closes it.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    name: [u8; NAME_LEN],
}

impl Lease {
    /// Creates an empty lease with a random name in `dir`.
    pub fn create(dir: &Path) -> io::Result<Lease> {
        let name = random_name()?;
        let path = dir.join(format!("{PREFIX}{}", valid_name(&name)?));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let me = ProcessIdentity::current()?;
        if let Err(e) = writeln!(file, "{CREATOR}{} {}", me.pid, me.start_time) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(Lease { path, name })
    }

    /// The existing lease `name` in `dir`. A malformed name is `InvalidInput`; a lease that
    /// is gone (its object was released) is `NotFound`.
    pub fn open(dir: &Path, name: &[u8]) -> io::Result<Lease> {
        let name: [u8; NAME_LEN] = name.try_into().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "lease name has the wrong length",
            )
        })?;
        let path = dir.join(format!("{PREFIX}{}", valid_name(&name)?));
        std::fs::metadata(&path)?;
        Ok(Lease { path, name })
    }

    /// The name to send to importers.
    pub fn name(&self) -> &[u8; NAME_LEN] {
        &self.name
    }

    /// Adds one hold by `who` (the calling process, normally).
    pub fn acquire(&self, who: ProcessIdentity) -> io::Result<()> {
        self.update(
            |holders| match holders.iter_mut().find(|(p, _)| *p == who) {
                Some((_, n)) => *n += 1,
                None => holders.push((who, 1)),
            },
        )
    }

    /// Removes one hold by `who`; releasing a hold it does not have is a no-op.
    pub fn release(&self, who: ProcessIdentity) -> io::Result<()> {
        self.update(|holders| {
            if let Some(i) = holders.iter().position(|(p, _)| *p == who) {
                holders[i].1 -= 1;
                if holders[i].1 == 0 {
                    holders.remove(i);
                }
            }
        })
    }

    /// The number of holds by live processes, after dropping those of dead ones.
    pub fn live_holders(&self) -> io::Result<u64> {
        let mut live = 0;
        self.update_then(true, |holders| {
            live = holders.iter().map(|(_, n)| n).sum();
            false
        })?;
        Ok(live)
    }

    /// If no live process holds the lease: runs `release` (the exporter's release of the
    /// object) and, when it reports success, deletes the lease, all under the lease's lock,
    /// so no importer can acquire it in between. Returns `Ok(None)` when someone still
    /// holds it (nothing is run), else `Ok(Some(released))`.
    pub fn release_if_unheld(&self, release: impl FnOnce() -> bool) -> io::Result<Option<bool>> {
        let mut outcome = None;
        self.update_then(true, |holders| {
            if holders.is_empty() {
                outcome = Some(release());
            }
            // Unlinked while the lock is still held: an acquirer waiting for the lock
            // then finds the file unlinked and fails with NotFound.
            outcome == Some(true)
        })?;
        Ok(outcome)
    }

    /// Deletes the lease file; importers that try to acquire it afterwards get `NotFound`.
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Reads the holders under the file's lock, applies `change`, and writes the result
    /// back. Holds are taken and dropped by their own (live) processes, so only the
    /// exporter's questions ([`Lease::live_holders`], [`Lease::release_if_unheld`]) pay for
    /// checking the holders' liveness in `/proc` and drop the dead ones.
    fn update(&self, change: impl FnOnce(&mut Vec<(ProcessIdentity, u64)>)) -> io::Result<()> {
        self.update_then(false, |holders| {
            change(holders);
            false
        })
    }

    /// As [`Lease::update`]; when `change` returns true the file is unlinked before the
    /// lock is released.
    fn update_then(
        &self,
        prune: bool,
        change: impl FnOnce(&mut Vec<(ProcessIdentity, u64)>) -> bool,
    ) -> io::Result<()> {
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        sys::flock(&file, FlockMode::Exclusive, true)?;
        // Closing the file (at the end of this function) releases the lock.
        self.update_locked(&file, prune, change)
    }

    /// The body of [`Lease::update_then`], with the file locked.
    fn update_locked(
        &self,
        mut file: &File,
        prune: bool,
        change: impl FnOnce(&mut Vec<(ProcessIdentity, u64)>) -> bool,
    ) -> io::Result<()> {
        if file.metadata()?.nlink() == 0 {
            // Removed since it was opened: the object was released.
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the lease was removed",
            ));
        }
        file.seek(SeekFrom::Start(0))?;
        let mut text = String::new();
        file.take(MAX_LEN).read_to_string(&mut text)?;
        let mut holders = parse(&text)?;
        if prune {
            holders.retain(|(who, _)| who.is_alive());
        }
        if change(&mut holders) {
            return self.remove();
        }
        let mut out = String::new();
        if let Some(creator) = parse_creator(&text) {
            let _ = writeln!(out, "{CREATOR}{} {}", creator.pid, creator.start_time);
        }
        for (who, n) in &holders {
            let _ = writeln!(out, "{} {} {n}", who.pid, who.start_time);
        }
        file.seek(SeekFrom::Start(0))?;
        file.set_len(0)?;
        file.write_all(out.as_bytes())
    }
}

/// Removes the leases in `dir` whose creator (the exporter) is dead: what a crashed
/// exporter left behind. Returns how many it removed; unreadable entries are skipped.
pub fn sweep_orphans(dir: &Path) -> io::Result<usize> {
    crate::private_dir::sweep(dir, PREFIX, |name| {
        let lease = Lease::open(dir, name.as_bytes())?;
        let mut text = String::new();
        File::open(&lease.path)?
            .take(MAX_LEN)
            .read_to_string(&mut text)?;
        if parse_creator(&text).is_some_and(|c| !c.is_alive()) {
            lease.remove()?;
            return Ok(true);
        }
        Ok(false)
    })
}

/// devipc's use of leases, with devipc errors: leases live in the
/// [runtime directory](crate::private_dir::runtime_dir), and the holder is always the
/// calling process.
pub mod held {
    use std::io;
    use std::sync::Arc;

    use devipc_core::{Error, Result};

    use super::Lease;
    use crate::private_dir::{RUNTIME_DIR_ENV, runtime_dir, runtime_dir_for_devipc};
    use crate::process::ProcessIdentity;

    fn io_error(what: &str, e: io::Error) -> Error {
        Error::io(format!("{what} (a devipc lease in {RUNTIME_DIR_ENV})"), e)
    }

    /// A new lease in the runtime directory, for an export.
    pub fn create() -> Result<Arc<Lease>> {
        let dir = runtime_dir_for_devipc()?;
        Lease::create(&dir)
            .map(Arc::new)
            .map_err(|e| io_error("creating a lease", e))
    }

    /// Adds the calling process's hold on the exporter's lease `name` (from a token).
    pub fn hold(name: &[u8]) -> Result<Arc<Lease>> {
        let dir = runtime_dir_for_devipc()?;
        let lease = Lease::open(&dir, name).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::invalid_argument(format!(
                "the exporter already freed this memory (or runs with another {RUNTIME_DIR_ENV})"
            )),
            io::ErrorKind::InvalidInput => {
                Error::invalid_token("malformed lease name in the token")
            }
            _ => io_error("opening a lease", e),
        })?;
        let me = ProcessIdentity::current().map_err(|e| io_error("reading /proc/self/stat", e))?;
        lease.acquire(me).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                Error::invalid_argument("the exporter freed this memory meanwhile")
            }
            _ => io_error("holding a lease", e),
        })?;
        Ok(Arc::new(lease))
    }

    /// Drops the calling process's hold (after its mapping is closed). Failures are
    /// reported on stderr, not returned: the mapping is gone either way, and a dead
    /// process's holds are dropped by the exporter anyway.
    pub fn drop_hold(lease: &Lease) {
        match ProcessIdentity::current().and_then(|me| lease.release(me)) {
            Ok(()) => {}
            // The exporter removed the lease (it was dropped): nothing to release.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("devipc: releasing a lease hold failed: {e}"),
        }
    }

    /// The exporter's own lease `name`, reopened (its holders may have changed since).
    pub fn reopen(name: &[u8]) -> Result<Lease> {
        let dir = runtime_dir_for_devipc()?;
        Lease::open(&dir, name).map_err(|e| io_error("reopening a lease", e))
    }

    /// [`drop_hold`] on the lease `name`; a lease that is gone has no hold to drop.
    pub fn drop_hold_by_name(name: &[u8]) {
        match runtime_dir()
            .map_err(io::Error::other)
            .and_then(|dir| Lease::open(&dir, name))
        {
            Ok(lease) => drop_hold(&lease),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("devipc: releasing a lease hold failed: {e}"),
        }
    }

    /// As [`Lease::release_if_unheld`], with devipc errors: `Ok(None)` while someone holds
    /// it, else the result of `release` (the lease is removed when it succeeded).
    pub fn release_if_unheld<T>(
        lease: &Lease,
        release: impl FnOnce() -> Result<T>,
    ) -> Result<Option<T>> {
        let mut result = None;
        lease
            .release_if_unheld(|| {
                let r = release();
                let ok = r.is_ok();
                result = Some(r);
                ok
            })
            .map_err(|e| io_error("checking a lease", e))?;
        result.transpose()
    }
}

/// The `creator <pid> <start time>` line of a lease, if any.
fn parse_creator(text: &str) -> Option<ProcessIdentity> {
    let line = text.lines().find(|l| l.starts_with(CREATOR))?;
    let mut f = line[CREATOR.len()..].split_ascii_whitespace();
    Some(ProcessIdentity {
        pid: f.next()?.parse().ok()?,
        start_time: f.next()?.parse().ok()?,
    })
}

/// Parses `<pid> <start time> <count>` lines (the `creator` line is not a holder).
fn parse(text: &str) -> io::Result<Vec<(ProcessIdentity, u64)>> {
    let bad = |line: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("malformed lease line {line:?}"),
        )
    };
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(CREATOR))
        .map(|line| {
            let mut f = line.split_ascii_whitespace();
            let mut next = || f.next().ok_or_else(|| bad(line));
            let pid = next()?.parse().map_err(|_| bad(line))?;
            let start_time = next()?.parse().map_err(|_| bad(line))?;
            let count = next()?.parse().map_err(|_| bad(line))?;
            Ok((ProcessIdentity { pid, start_time }, count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("devipc-lease-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        crate::private_dir::open_private_dir(&p).unwrap()
    }

    #[test]
    fn holds_are_counted_per_process_and_released() {
        let dir = scratch("count");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        assert_eq!(lease.live_holders().unwrap(), 0);
        let other = Lease::open(&dir, lease.name()).unwrap();
        lease.acquire(me).unwrap();
        other.acquire(me).unwrap();
        assert_eq!(lease.live_holders().unwrap(), 2);
        other.release(me).unwrap();
        assert_eq!(lease.live_holders().unwrap(), 1);
        lease.release(me).unwrap();
        lease.release(me).unwrap();
        assert_eq!(lease.live_holders().unwrap(), 0);
        lease.remove().unwrap();
        assert_eq!(
            Lease::open(&dir, lease.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn dead_holders_do_not_count() {
        let dir = scratch("dead");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        // The same pid with another start time is a process that reused the pid.
        let ghost = ProcessIdentity {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        lease.acquire(ghost).unwrap();
        lease
            .acquire(ProcessIdentity {
                pid: 0x7fff_fff0,
                start_time: 1,
            })
            .unwrap();
        assert_eq!(lease.live_holders().unwrap(), 0);
        lease.acquire(me).unwrap();
        assert_eq!(lease.live_holders().unwrap(), 1);
        lease.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_killed_holder_is_reclaimed() {
        let dir = scratch("killed");
        let lease = Lease::create(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let who = ProcessIdentity::of_pid(child.id() as i32).unwrap().unwrap();
        lease.acquire(who).unwrap();
        assert_eq!(lease.live_holders().unwrap(), 1);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(lease.live_holders().unwrap(), 0);
        lease.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn release_runs_only_when_unheld_and_removes_the_lease() {
        let dir = scratch("release");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        lease.acquire(me).unwrap();
        let mut ran = false;
        assert_eq!(
            lease
                .release_if_unheld(|| {
                    ran = true;
                    true
                })
                .unwrap(),
            None
        );
        assert!(!ran);
        lease.release(me).unwrap();
        // A failed release keeps the lease.
        assert_eq!(lease.release_if_unheld(|| false).unwrap(), Some(false));
        assert!(Lease::open(&dir, lease.name()).is_ok());
        assert_eq!(lease.release_if_unheld(|| true).unwrap(), Some(true));
        assert_eq!(
            Lease::open(&dir, lease.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // A holder that opened the lease before it was removed cannot acquire it.
        let early = Lease::create(&dir).unwrap();
        let path = early.path.clone();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        early.remove().unwrap();
        drop(file);
        assert_eq!(
            early.acquire(me).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn leases_of_dead_creators_are_swept() {
        let dir = scratch("sweep");
        let mine = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        mine.acquire(me).unwrap();
        let orphan = Lease::create(&dir).unwrap();
        // Rewrite the orphan's creator as a process that no longer exists.
        std::fs::write(&orphan.path, "creator 2147483632 1\n").unwrap();
        assert_eq!(sweep_orphans(&dir).unwrap(), 1);
        assert!(Lease::open(&dir, orphan.name()).is_err());
        // The live creator's lease and its holder line survive, creator line included.
        assert_eq!(mine.live_holders().unwrap(), 1);
        assert_eq!(sweep_orphans(&dir).unwrap(), 0);
        mine.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn held_leases_hold_no_file_descriptors() {
        let dir = scratch("fds");
        let me = ProcessIdentity::current().unwrap();
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        let leases: Vec<Lease> = (0..300)
            .map(|_| {
                let lease = Lease::create(&dir).unwrap();
                lease.acquire(me).unwrap();
                lease
            })
            .collect();
        // Other tests may open a few files meanwhile; 300 leases must not show up.
        assert!(
            fds() < before + 50,
            "leases keep descriptors open: {before} -> {}",
            fds()
        );
        for lease in leases {
            lease.release(me).unwrap();
            lease.remove().unwrap();
        }
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn malformed_files_and_names_are_errors() {
        let dir = scratch("bad");
        let lease = Lease::create(&dir).unwrap();
        std::fs::write(&lease.path, "12 x\n").unwrap();
        assert_eq!(
            lease.live_holders().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            Lease::open(&dir, b"../x").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        lease.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }
}
