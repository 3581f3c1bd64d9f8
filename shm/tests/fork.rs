//! Leases across `fork` without `exec` (audit finding N8): a forked child inherits the
//! parent's memory, including the lease registry and the parent's holds, and must use
//! none of it. A test binary of its own with one test: `fork` copies only the calling
//! thread, so the child must not find a lock held by another test's thread.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use devipc_shm::lease::Lease;
use devipc_shm::process::ProcessIdentity;

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("devipc-fork-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    devipc_shm::private_dir::open_private_dir(&p).unwrap()
}

/// What the child checks; its exit status is the number of the first check that failed
/// (0: all passed).
fn in_child(dir: &std::path::Path, parents: &Lease, parent: ProcessIdentity) -> i32 {
    let me = match ProcessIdentity::current() {
        Ok(me) => me,
        Err(_) => return 10,
    };
    if me == parent {
        return 11;
    }
    // Its own lease: in a table of its own, not an entry of the parent's table.
    let Ok(mine) = Lease::create(dir) else {
        return 12;
    };
    if mine.name()[..16] == parents.name()[..16] {
        return 13;
    }
    // Releasing the parent's hold (under the parent's identity, as inherited state would
    // let it) releases nothing.
    parents.release(parent);
    // The parent's lease cannot be revoked or removed from here.
    if parents.revoke() {
        return 14;
    }
    match parents.remove() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
        _ => return 15,
    }
    if parents.release_if_unheld(|| true).is_ok() {
        return 16;
    }
    // Its own lease is its own to end (its table goes with it).
    if mine.remove().is_err() {
        return 17;
    }
    0
}

#[test]
fn a_forked_child_neither_reuses_nor_releases_its_parents_leases() {
    let dir = scratch("lease");
    let parent = ProcessIdentity::current().unwrap();
    let lease = Lease::create(&dir).unwrap();
    lease.acquire(parent).unwrap();
    // A removed entry the parent's registry could hand out next.
    Lease::create(&dir).unwrap().remove().unwrap();

    // SAFETY: the child runs only `in_child` (no other thread of this test binary takes a
    // lock it needs: this is the binary's only test) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            in_child(&dir, &lease, parent)
        }))
        .unwrap_or(99);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if got == pid {
            break;
        }
        assert!(got == 0, "waitpid: {}", io::Error::last_os_error());
        if Instant::now() > deadline {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status),
        "the child died: status {status:#x}"
    );
    let code = libc::WEXITSTATUS(status);
    assert_eq!(
        code, 0,
        "check {code} failed in the forked child (see in_child)"
    );

    // The parent's hold, lease and table are intact.
    assert!(!lease.is_revoked());
    assert!(
        !lease.is_unheld(false),
        "the child released the parent's hold"
    );
    assert_eq!(lease.live_holders(), 1);
    assert!(Lease::open(&dir, lease.name()).is_ok());
    lease.release(parent);
    assert!(lease.is_unheld(false));
    lease.remove().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
