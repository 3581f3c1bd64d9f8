//! Tests of [`Lease`](super::Lease) and its table: holds, crash recovery, revocation,
//! removal, sweeping and a full table.

use std::path::PathBuf;

use super::table::*;
use super::*;

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("devipc-lease-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    crate::private_dir::open_private_dir(&p).unwrap()
}

fn tables(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(PREFIX)
        })
        .count()
}

#[test]
fn holds_are_counted_per_process_and_released() {
    let dir = scratch("count");
    let lease = Lease::create(&dir).unwrap();
    let me = ProcessIdentity::current().unwrap();
    assert_eq!(lease.live_holders(), 0);
    let other = Lease::open(&dir, lease.name()).unwrap();
    lease.acquire(me).unwrap();
    other.acquire(me).unwrap();
    assert_eq!(lease.live_holders(), 2);
    assert!(!lease.is_unheld(false));
    other.release(me);
    assert_eq!(lease.live_holders(), 1);
    lease.release(me);
    lease.release(me);
    assert_eq!(lease.live_holders(), 0);
    assert!(lease.is_unheld(false));
    assert_eq!(tables(&dir), 1);
    lease.remove().unwrap();
    assert_eq!(
        Lease::open(&dir, lease.name()).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    // The last lease took its table with it.
    assert_eq!(tables(&dir), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dead_holders_do_not_count() {
    let dir = scratch("dead");
    let lease = Lease::create(&dir).unwrap();
    let me = ProcessIdentity::current().unwrap();
    // The same pid with another start time is a process that reused the pid.
    let ghost = ProcessIdentity {
        start_time: me.start_time + 1,
        ..me
    };
    lease.acquire(ghost).unwrap();
    lease
        .acquire(ProcessIdentity {
            pid: 0x7fff_fff0,
            start_time: 1,
            pid_ns: me.pid_ns,
        })
        .unwrap();
    // The counter still counts them; the thorough check does not.
    assert!(!lease.is_unheld(false));
    assert!(lease.is_unheld(true));
    assert_eq!(lease.live_holders(), 0);
    lease.acquire(me).unwrap();
    assert_eq!(lease.live_holders(), 1);
    lease.release(me);
    lease.remove().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
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
    assert_eq!(lease.live_holders(), 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(lease.live_holders(), 0);
    // Its slot was reclaimed.
    let used = lease.table.header(H_SLOTS_USED).load(SeqCst);
    assert!((0..used).all(|s| lease.table.slot(s, S_TAG).load(SeqCst) & 3 == SLOT_FREE));
    lease.remove().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn revoked_and_removed_leases_refuse_holds() {
    let dir = scratch("revoke");
    let lease = Lease::create_bound(&dir, 7).unwrap();
    let me = ProcessIdentity::current().unwrap();
    assert_eq!(
        lease.acquire_checked(me, Some(8)).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    lease.acquire_checked(me, Some(7)).unwrap();
    let seen = lease.release_count();
    assert!(lease.revoke());
    assert_eq!(
        lease.acquire(me).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    // The failed acquire undid its hold: one remains.
    assert_eq!(lease.live_holders(), 1);
    lease.release(me);
    assert_ne!(lease.release_count(), seen, "the release woke the exporter");
    lease
        .wait_for_release(seen, Duration::from_secs(5))
        .unwrap();
    assert!(lease.is_unheld(false));
    lease.remove().unwrap();
    // A new lease reuses the entry with another seq: the old name stays dead.
    let next = Lease::create(&dir).unwrap();
    assert_eq!(next.index, lease.index);
    assert_ne!(next.name(), lease.name());
    assert_eq!(
        Lease::open(&dir, lease.name()).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    next.remove().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
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
    // Refused: the lease stays live.
    lease.acquire(me).unwrap();
    lease.release(me);
    lease.release(me);
    // A failed release keeps the lease, live.
    assert_eq!(lease.release_if_unheld(|| false).unwrap(), Some(false));
    assert!(!lease.is_revoked());
    assert_eq!(lease.release_if_unheld(|| true).unwrap(), Some(true));
    assert_eq!(
        Lease::open(&dir, lease.name()).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        lease.acquire(me).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tables_of_dead_creators_are_swept() {
    let dir = scratch("sweep");
    let mine = Lease::create(&dir).unwrap();
    // A table whose creator no longer exists.
    let orphan = Table::create(&dir).unwrap();
    orphan.header(H_CREATOR_PID).store(0x7fff_fff0, SeqCst);
    std::fs::write(dir.join(format!("{PREFIX}zz")), "not a table").unwrap();
    assert_eq!(sweep_orphans(&dir).unwrap(), 1);
    assert!(!orphan.path.exists());
    assert_eq!(sweep_orphans(&dir).unwrap(), 0);
    mine.remove().unwrap();
    std::fs::remove_file(dir.join(format!("{PREFIX}zz"))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
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
            let held = Lease::open(&dir, lease.name()).unwrap();
            held.acquire(me).unwrap();
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
        lease.release(me);
        lease.remove().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_table_spills_into_another() {
    let dir = scratch("full");
    let leases: Vec<Lease> = (0..ENTRIES + 1)
        .map(|_| Lease::create(&dir).unwrap())
        .collect();
    assert_eq!(tables(&dir), 2);
    for lease in &leases {
        lease.remove().unwrap();
    }
    assert_eq!(tables(&dir), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An exporter that removes a lease someone still holds (it forgets an object it
/// could not release) must not hand its entry to the next lease: the old holder's
/// late release would lower the new lease's count, and the new object would be
/// released under its importer.
#[test]
fn a_late_release_of_a_removed_lease_never_touches_the_next_lease() {
    let dir = scratch("zombie");
    let me = ProcessIdentity::current().unwrap();
    let old = Lease::create(&dir).unwrap();
    let _keep = Lease::create(&dir).unwrap(); // keeps the table alive
    old.acquire(me).unwrap();
    old.remove().unwrap();
    let new = Lease::create(&dir).unwrap();
    new.acquire(me).unwrap();
    old.release(me);
    assert!(!new.is_unheld(false), "the new lease lost its hold");
    assert_eq!(new.live_holders(), 1);
    new.release(me);
    assert!(new.is_unheld(false));
    // Once nobody holds the old lease, its entry is reused (when the table is full).
    new.remove().unwrap();
}

/// Holder slots of killed importers are reclaimed by the next importer that needs
/// one, not only by the exporter's scans: a loop of killed importers cannot fill the
/// table while the exporter keeps its object.
#[test]
fn slots_of_dead_holders_are_reclaimed_when_the_table_is_full() {
    let dir = scratch("full-slots");
    let lease = Lease::create(&dir).unwrap();
    let dead_pid = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        pid
    };
    for i in 0..u64::from(SLOTS) {
        let ghost = ProcessIdentity {
            pid: dead_pid,
            start_time: i,
            pid_ns: ProcessIdentity::current_pid_ns(),
        };
        lease.acquire(ghost).unwrap();
    }
    let me = ProcessIdentity::current().unwrap();
    lease
        .acquire(me)
        .expect("a live importer gets a slot of a dead one");
    assert_eq!(lease.live_holders(), 1);
    lease.release(me);
}

/// A holder count at its maximum (only a corrupted table gets there) refuses the
/// next hold instead of wrapping to 0, which the exporter would read as "unheld".
#[test]
fn the_holder_count_never_wraps_to_unheld() {
    let dir = scratch("wrap");
    let lease = Lease::create(&dir).unwrap();
    lease
        .table
        .entry(lease.index, E_HOLDERS)
        .store(u32::MAX, SeqCst);
    let me = ProcessIdentity::current().unwrap();
    let err = lease.acquire(me).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(!lease.is_unheld(false));
    assert_eq!(lease.live_holders(), 0, "the refused hold left no slot");
    lease.remove().unwrap();
}

#[test]
fn malformed_names_are_errors() {
    let dir = scratch("bad");
    for name in [&b"../x"[..], &[b'g'; NAME_LEN][..], &[b'f'; NAME_LEN][..]] {
        assert_eq!(
            Lease::open(&dir, name).unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "{name:?}"
        );
    }
    // Well-formed, but no such table.
    assert_eq!(
        Lease::open(&dir, &encode(1, 0, 1)).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
