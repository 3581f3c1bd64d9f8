//! Beacons with real processes: a child re-run of this test binary announces itself in a
//! directory, and this process judges it by its beacon alone (as a process of another pid
//! namespace would).

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;
use crate::process::read_stat;

/// Set in a child re-run of this test binary: announce in this directory.
const CHILD_DIR_ENV: &str = "DEVIPC_SHM_BEACON_CHILD_DIR";
/// Set (to `1`) with [`CHILD_DIR_ENV`]: also fork a grandchild that keeps the inherited
/// descriptors (and pauses until killed).
const CHILD_FORK_ENV: &str = "DEVIPC_SHM_BEACON_CHILD_FORK";

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("devipc-beacon-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    crate::private_dir::open_private_dir(&p).unwrap()
}

/// The child role of the tests below; does nothing unless started by them. Announces,
/// reports `@@ready <pid_ns> <pid> <start> <grandchild pid or 0>`, and exits when its
/// stdin ends (or is killed).
#[test]
fn beacon_child_role() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    announce(Path::new(&dir)).unwrap();
    let me = ProcessIdentity::current().unwrap();
    let grandchild = if std::env::var_os(CHILD_FORK_ENV).is_some() {
        fork_pauser()
    } else {
        0
    };
    println!(
        "@@ready {} {} {} {grandchild}",
        me.pid_ns, me.pid, me.start_time
    );
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Forks a child that only pauses (it dies of `SIGALRM` after two minutes at the latest),
/// keeping every descriptor of this process; returns its pid.
#[allow(unsafe_code)]
fn fork_pauser() -> i32 {
    // SAFETY: the child calls only async-signal-safe functions (alarm, pause, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::alarm(120);
            loop {
                libc::pause();
            }
        }
    }
    pid
}

struct Holder {
    child: Child,
    who: ProcessIdentity,
    grandchild: i32,
    _out: BufReader<ChildStdout>,
}

// The child is returned in the `Holder`; each test waits for it (or kills it).
#[allow(clippy::zombie_processes)]
fn start_holder(dir: &Path, fork: bool) -> Holder {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "liveness::tests::beacon_child_role",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_DIR_ENV, dir)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    if fork {
        cmd.env(CHILD_FORK_ENV, "1");
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the holder ended early"
        );
        // libtest prints the test's name on the same line first.
        if let Some((_, rest)) = line.trim().split_once("@@ready ") {
            let v: Vec<i64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
            return Holder {
                who: ProcessIdentity {
                    pid_ns: v[0] as u32,
                    pid: v[1] as i32,
                    start_time: v[2] as u64,
                },
                grandchild: v[3] as i32,
                child,
                _out: out,
            };
        }
    }
}

#[allow(unsafe_code)]
fn kill9(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Waits (bounded) until `pid` is gone or a zombie.
fn wait_dead(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while read_stat(pid).unwrap().is_some_and(|s| !s.is_dead()) {
        assert!(Instant::now() < deadline, "process {pid} did not die");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_beacon_is_alive_while_held_and_dead_after_a_normal_exit() {
    let dir = scratch("exit");
    let mut h = start_holder(&dir, false);
    assert!(dir.join(beacon_name(&h.who)).exists());
    assert!(beacon_alive(&dir, &h.who), "held by a live process");
    // Testing does not take the lock away.
    assert!(beacon_alive(&dir, &h.who));
    assert_eq!(sweep(&dir).unwrap(), 0, "a live beacon is not swept");
    drop(h.child.stdin.take());
    assert!(h.child.wait().unwrap().success());
    assert!(!beacon_alive(&dir, &h.who), "the exit dropped the lock");
    assert!(
        !dir.join(beacon_name(&h.who)).exists(),
        "a normal exit removes the process's beacons"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_beacon_is_dead_after_kill_9() {
    let dir = scratch("kill");
    let mut h = start_holder(&dir, false);
    assert!(beacon_alive(&dir, &h.who));
    kill9(h.who.pid);
    let _ = h.child.wait();
    assert!(
        dir.join(beacon_name(&h.who)).exists(),
        "a killed process leaves its beacon"
    );
    assert!(!beacon_alive(&dir, &h.who));
    assert_eq!(sweep(&dir).unwrap(), 1, "the dead beacon is swept");
    assert!(!dir.join(beacon_name(&h.who)).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_forked_child_does_not_keep_its_parents_beacon_alive() {
    let dir = scratch("fork");
    let mut h = start_holder(&dir, true);
    assert!(h.grandchild > 0);
    assert!(beacon_alive(&dir, &h.who));
    kill9(h.who.pid);
    let _ = h.child.wait();
    // The forked child still runs, with the beacon's descriptor open, but not its lock.
    assert!(
        read_stat(h.grandchild)
            .unwrap()
            .is_some_and(|s| !s.is_dead()),
        "the forked child should still run"
    );
    let dead = !beacon_alive(&dir, &h.who);
    kill9(h.grandchild);
    wait_dead(h.grandchild);
    assert!(dead, "a forked child kept its parent's beacon alive");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_or_unlocked_beacon_is_dead_and_this_process_is_alive() {
    let dir = scratch("missing");
    let me = ProcessIdentity::current().unwrap();
    let other = ProcessIdentity {
        pid: 0x7fff_fff0,
        start_time: 1,
        pid_ns: 7,
    };
    assert!(!beacon_alive(&dir, &other), "no beacon at all");
    std::fs::write(dir.join(beacon_name(&other)), b"").unwrap();
    assert!(!beacon_alive(&dir, &other), "a beacon nobody locks");
    // This process, before and after announcing, without ever opening its own beacon.
    assert!(beacon_alive(&dir, &me));
    announce(&dir).unwrap();
    announce(&dir).unwrap();
    assert!(dir.join(beacon_name(&me)).exists());
    assert!(beacon_alive(&dir, &me));
    assert_eq!(sweep(&dir).unwrap(), 1, "only the unlocked beacon goes");
    assert!(dir.join(beacon_name(&me)).exists());
    // Our lock is intact: another process sees it (a forked child is another process).
    let still_locked = {
        let f = crate::private_dir::open_regular_file(&dir.join(beacon_name(&me))).unwrap();
        // OFD and classic locks conflict within one process too, and this descriptor is
        // kept open to the end of the test, so closing it cannot drop our lock early.
        let held = os::record_lock_held(&f).unwrap();
        std::mem::forget(f);
        held
    };
    assert!(still_locked);
    assert_eq!(
        parse_name("1-2-3"),
        Some(ProcessIdentity {
            pid_ns: 1,
            pid: 2,
            start_time: 3
        })
    );
    for bad in ["1-2", "1-2-3-4", "x-2-3", "1--2-3", "1-0-3"] {
        assert_eq!(parse_name(bad), None, "{bad}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
