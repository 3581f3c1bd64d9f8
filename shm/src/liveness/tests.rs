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
/// Set (to `1`) with [`CHILD_DIR_ENV`]: before announcing, register an `atexit` handler
/// that reports `@@exiting` and takes two seconds (a slow teardown: C++ destructors, a
/// framework's exit hooks, while other threads still use what the process imported).
const CHILD_SLOW_EXIT_ENV: &str = "DEVIPC_SHM_BEACON_CHILD_SLOW_EXIT";

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
    if std::env::var_os(CHILD_SLOW_EXIT_ENV).is_some() {
        crate::os::at_exit(slow_exit).unwrap();
    }
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

/// The slow `atexit` handler of [`CHILD_SLOW_EXIT_ENV`].
#[allow(unsafe_code)]
extern "C" fn slow_exit() {
    let line = b"@@exiting\n";
    // SAFETY: writes a static buffer to stdout, then sleeps; both are plain syscalls.
    unsafe {
        libc::write(1, line.as_ptr().cast(), line.len());
        libc::sleep(2);
    }
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
    out: BufReader<ChildStdout>,
}

// The child is returned in the `Holder`; each test waits for it (or kills it).
#[allow(clippy::zombie_processes)]
fn start_holder(dir: &Path, fork: bool) -> Holder {
    start_holder_with(dir, fork, false)
}

#[allow(clippy::zombie_processes)]
fn start_holder_with(dir: &Path, fork: bool, slow_exit: bool) -> Holder {
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
    if slow_exit {
        cmd.env(CHILD_SLOW_EXIT_ENV, "1");
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
                out,
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
    assert_eq!(sweep(&dir).unwrap(), 1, "the dead beacon is swept");
    assert!(!dir.join(beacon_name(&h.who)).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `exit` runs `atexit` handlers while the process's other threads still run (and use
/// what it imported): its beacon must say "alive" until the process is really gone, or a
/// peer in another namespace reclaims (and an exporter frees) memory still in use.
#[test]
fn a_beacon_stays_alive_while_the_process_exits() {
    let dir = scratch("slow-exit");
    let mut h = start_holder_with(&dir, false, true);
    drop(h.child.stdin.take());
    let mut line = String::new();
    loop {
        line.clear();
        assert_ne!(h.out.read_line(&mut line).unwrap(), 0, "no @@exiting");
        if line.contains("@@exiting") {
            break;
        }
    }
    // Inside the two-second handler: the process is still running.
    assert!(read_stat(h.who.pid).unwrap().is_some_and(|s| !s.is_dead()));
    assert!(
        beacon_alive(&dir, &h.who),
        "the beacon said dead while the process was still exiting"
    );
    assert!(h.child.wait().unwrap().success());
    assert!(!beacon_alive(&dir, &h.who), "gone once the process is");
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

/// Set in a child re-run of this test binary: report this process's identity as
/// `@@identity <start time> <start time in /proc/self/stat> <proc is ours: 0|1>`.
const IDENTITY_CHILD_ENV: &str = "DEVIPC_SHM_IDENTITY_CHILD";

/// The child role of [`a_pid_namespace_with_its_parents_proc_knows_its_own_identity`].
#[test]
fn identity_child_role() {
    if std::env::var_os(IDENTITY_CHILD_ENV).is_none() {
        return;
    }
    let me = ProcessIdentity::current().unwrap();
    let own = crate::process::parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap())
        .unwrap()
        .start_time;
    println!(
        "@@identity {} {own} {}",
        me.start_time,
        u8::from(ProcessIdentity::proc_is_ours())
    );
}

/// A process in a pid namespace that kept its parent's `/proc` (`unshare --pid --fork`
/// without `--mount-proc`): `/proc/<getpid()>` is another process there, so its identity
/// must come from `/proc/self`, and it must not judge anyone by a pid lookup in that
/// `/proc`.
#[test]
fn a_pid_namespace_with_its_parents_proc_knows_its_own_identity() {
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "liveness::tests::identity_child_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(IDENTITY_CHILD_ENV, "1")
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        other => {
            let why = format!("unshare --pid --fork is refused here: {other:?}");
            assert!(
                std::env::var("DEVIPC_NO_SKIP").as_deref() != Ok("1"),
                "DEVIPC_NO_SKIP=1 forbids skipping: {why}"
            );
            eprintln!(
                "SKIPPED a_pid_namespace_with_its_parents_proc_knows_its_own_identity: {why}"
            );
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.split_once("@@identity ").map(|(_, r)| r.to_owned()))
        .unwrap_or_else(|| panic!("no identity reported: {text}"));
    let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    assert_eq!(v[0], v[1], "the identity's start time is another process's");
    assert_eq!(
        v[2], 0,
        "a /proc of the parent namespace was taken for its own"
    );
}
