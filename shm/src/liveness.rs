//! Liveness beacons: how a process of another pid namespace is known to be alive.
//!
//! Every directory devipc shares between processes (the runtime directory with its lease
//! tables, word files and export records; the emulator's state directory) records
//! processes as [`ProcessIdentity`]s, and reclaims what a dead one left. A pid lookup in
//! `/proc` answers "is it alive" only for a process of the caller's own pid namespace:
//! containers that share `/dev/shm` (`--ipc=host`, the containers of a Kubernetes pod)
//! share these directories but not their pids, and a pid of theirs means nothing (or
//! another process) here. Refusing to share across namespaces would break exactly those
//! deployments, and pidfds cannot be shared through a table in a file. So a process
//! *announces* itself ([`announce`]) in each directory before it records its identity
//! there: it creates a beacon file `alive-<pid ns>-<pid>-<start time>` and holds a classic
//! POSIX record lock on it (`fcntl(F_SETLK, F_WRLCK)`) for the rest of its life. The kernel
//! drops that lock when the process dies, however it dies and whatever namespace the
//! tester is in; a forked child does not inherit it (so a child never keeps its parent
//! "alive"), and the descriptor is `O_CLOEXEC`, so `exec` drops it too.
//!
//! A tester ([`beacon_alive`], used by [`ProcessIdentity::is_alive_in`] for a process of
//! another or an unknown namespace) asks with `F_OFD_GETLK` on a descriptor of its own:
//! locked means alive; a missing or unlocked beacon means dead; any other failure means
//! alive (nothing is reclaimed that cannot be proven dead). A beacon is created under a
//! temporary name, locked, and renamed into place, so it is never seen unlocked while its
//! process lives.
//!
//! One rule follows from classic locks belonging to a process: closing *any* descriptor
//! of a file drops the process's locks on it. So a process never opens its own beacon:
//! testing the caller's own identity answers `true` without looking, and [`sweep`] skips
//! the caller's beacons.
//!
//! A process never removes its own beacon, not even at exit: `exit` runs `atexit` handlers
//! and static destructors while the process's other threads still run and still use what
//! it imported, so a beacon removed there would let a peer in another namespace reclaim
//! (and the exporter free) memory still in use. The lock alone says when the process is
//! gone. The beacons of dead processes are removed by whoever finds them dead: a process
//! that finds another dead ([`ProcessIdentity::is_alive_in`] says no) removes that one's
//! beacon as it reclaims what the dead process left, and [`sweep`], which runs with the
//! other sweeps of a directory, removes the rest.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use devipc_core::fork::{PerProcess, PerProcessGuard, forget_inherited};

use crate::os;
use crate::process::ProcessIdentity;

/// Prefix of beacon file names: `alive-<pid ns>-<pid>-<start time>`.
pub const PREFIX: &str = "alive-";
/// Prefix of a beacon being created (locked, then renamed to its real name).
const TMP_PREFIX: &str = ".alive-tmp-";
/// A temporary beacon older than this was left by a process killed while creating it.
const TMP_MAX_AGE: Duration = Duration::from_secs(60);

/// The beacons this process holds: the process they belong to (a forked child starts
/// afresh: its parent's locks are not its own) and, per directory, the locked file.
struct Announced {
    me: ProcessIdentity,
    beacons: HashMap<PathBuf, File>,
}

/// Per process: a forked child holds none of its parent's locks, so it announces itself
/// anew (the inherited descriptors are leaked, never closed there).
static ANNOUNCED: PerProcess<Option<Announced>> = PerProcess::new(forget_inherited);

fn announced() -> PerProcessGuard<'static, Option<Announced>> {
    ANNOUNCED.lock()
}

/// The file name of `who`'s beacon.
pub fn beacon_name(who: &ProcessIdentity) -> String {
    format!("{PREFIX}{}-{}-{}", who.pid_ns, who.pid, who.start_time)
}

/// The identity a beacon name (without [`PREFIX`]) stands for.
fn parse_name(name: &str) -> Option<ProcessIdentity> {
    let mut parts = name.split('-');
    let pid_ns = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok().filter(|&p: &i32| p > 0)?;
    let start_time = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some(ProcessIdentity {
        pid,
        start_time,
        pid_ns,
    })
}

/// Makes the calling process known as alive in `dir` to processes of other pid
/// namespaces, for the rest of its life: call it before recording the process's identity
/// in anything in `dir`. Idempotent per process and directory (cheap after the first call);
/// a forked child announces itself anew.
pub fn announce(dir: &Path) -> io::Result<()> {
    let me = ProcessIdentity::current()?;
    let mut state = announced();
    if state.as_ref().is_none_or(|a| a.me != me) {
        // First use (a forked child starts with none: its parent's set is leaked there,
        // and its descriptors hold no lock of the child's).
        *state = Some(Announced {
            me,
            beacons: HashMap::new(),
        });
    }
    let Some(state) = state.as_mut() else {
        unreachable!("set above")
    };
    if state.beacons.contains_key(dir) {
        return Ok(());
    }
    let beacon = create_beacon(dir, &me)?;
    state.beacons.insert(dir.to_path_buf(), beacon);
    Ok(())
}

/// Removes the beacon of `who`, a process found dead, from `dir` (best effort; there may
/// be none). Never the caller's own.
pub fn forget_dead(dir: &Path, who: &ProcessIdentity) {
    if !is_me(who) {
        let _ = std::fs::remove_file(dir.join(beacon_name(who)));
    }
}

/// Whether `name` (an entry of a shared directory) is a liveness beacon or one being
/// created: the liveness layer's, not the state of the directory's owner.
pub fn is_beacon_name(name: &str) -> bool {
    name.starts_with(PREFIX) || name.starts_with(TMP_PREFIX)
}

/// Creates, locks and renames into place the beacon of `me` in `dir`.
fn create_beacon(dir: &Path, me: &ProcessIdentity) -> io::Result<File> {
    let mut random = [0u8; 8];
    os::random_bytes(&mut random)?;
    let tmp = dir.join(format!("{TMP_PREFIX}{:016x}", u64::from_le_bytes(random)));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&tmp)?;
    let placed =
        os::record_lock(&file).and_then(|()| std::fs::rename(&tmp, dir.join(beacon_name(me))));
    match placed {
        Ok(()) => Ok(file),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Whether `who` is the calling process (which must never open its own beacon).
pub fn is_me(who: &ProcessIdentity) -> bool {
    if ProcessIdentity::current().is_ok_and(|me| me == *who) {
        return true;
    }
    let pid = std::process::id() as i32;
    announced()
        .as_ref()
        .is_some_and(|a| a.me.pid == pid && a.me == *who)
}

/// Whether `who` holds its beacon in `dir` (see the [module docs](self)): `false` when the
/// beacon is missing or unlocked, `true` when it is locked or cannot be checked. The
/// calling process itself is alive without a look.
pub fn beacon_alive(dir: &Path, who: &ProcessIdentity) -> bool {
    if is_me(who) {
        return true;
    }
    let file = match crate::private_dir::open_regular_file(&dir.join(beacon_name(who))) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    os::record_lock_held(&file).unwrap_or(true)
}

/// Whether the entry `name` of `dir` is the beacon of a process that is gone (never
/// opens the caller's own).
pub fn is_dead_beacon(dir: &Path, name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .and_then(parse_name)
        .is_some_and(|who| !beacon_alive(dir, &who))
}

/// Removes the beacons in `dir` of processes that are dead (their lock is gone), and
/// temporary beacons left by a process killed while creating one. Never opens the
/// caller's own beacons. Returns how many it removed; unreadable entries are skipped.
pub fn sweep(dir: &Path) -> io::Result<usize> {
    let dead = crate::private_dir::sweep(dir, PREFIX, |name| {
        let Some(who) = parse_name(name) else {
            return Ok(false);
        };
        if beacon_alive(dir, &who) {
            return Ok(false);
        }
        std::fs::remove_file(dir.join(format!("{PREFIX}{name}")))?;
        Ok(true)
    })?;
    let stale = crate::private_dir::sweep(dir, TMP_PREFIX, |name| {
        let path = dir.join(format!("{TMP_PREFIX}{name}"));
        let age = std::fs::symlink_metadata(&path)?
            .modified()?
            .elapsed()
            .unwrap_or_default();
        if age < TMP_MAX_AGE {
            return Ok(false);
        }
        std::fs::remove_file(&path)?;
        Ok(true)
    })?;
    Ok(dead + stale)
}

#[cfg(test)]
mod tests;
