//! Cross-process behaviour of the emulator infrastructure, with real processes.
//!
//! Each test starts children with `devipc_testkit` (this test binary re-run on this
//! module's `child_role` test); the child finds its state directory through the real
//! `DEVIPC_EMU_DIR` / `DEVIPC_EMU_MEM_LIMIT` variables ([`State::global`]) and talks to the
//! parent over its stdin/stdout: lines starting with `@@ ` (anything else, such as the
//! test harness's own output, is ignored). Every test uses its own [`TestRoot`] and
//! asserts at the end that the state directory holds nothing but the `ledger` and that no
//! device memory is accounted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::emu_support::{EmuRoot, assert_state_clean, child_entry, identity};
use devipc_emulator::EmuError;
use devipc_emulator::state::futex::wait_until;
use devipc_emulator::state::lock::{FileLock, LockMode, OpenMode};
use devipc_emulator::state::{
    BinarySemaphore, NewObject, ObjectId, ProcessIdentity, Released, State, Vendor,
};
use devipc_testkit::{Child, LONG, Parent, ROLE_ENV, TestRoot};

/// Names the test root for the children (the `counter` role's files live there).
const TEST_ROOT_ENV: &str = "DEVIPC_EMU_TEST_ROOT";

/// Starts a child playing `role` on `root`, with `env` on top.
fn spawn(role: &str, root: &TestRoot, env: &[(&str, String)]) -> Child {
    Child::build(&child_entry(), role, root)
        .env(TEST_ROOT_ENV, root.path())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
}

fn me() -> ProcessIdentity {
    ProcessIdentity::current().unwrap()
}

/// The byte pattern both sides of a transfer agree on.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Child side.

/// Entry point of child processes; a no-op test in the parent run.
#[test]
fn child_role() {
    devipc_testkit::run_child(run_role);
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} not set"))
}

fn env_id(name: &str) -> Result<ObjectId, String> {
    let raw: u64 = env(name)?.parse().map_err(|e| format!("{name}: {e}"))?;
    ObjectId::from_raw(raw).ok_or_else(|| format!("{name}: not an id"))
}

fn e2s(e: EmuError) -> String {
    e.to_string()
}

fn run_role(role: &str, parent: &Parent) -> Result<(), String> {
    let state = State::global().map_err(e2s)?;
    let reg = state.registry();
    let me = ProcessIdentity::current().map_err(|e| e.to_string())?;
    match role {
        // Maps an object, checks the parent's bytes, writes its own.
        "reader" => {
            let id = env_id("ID")?;
            reg.acquire(id, me).map_err(e2s)?;
            let map = reg.open_segment(id).map_err(e2s)?.map().map_err(e2s)?;
            let mut got = vec![0u8; 4096];
            map.read_at(0, &mut got).map_err(e2s)?;
            if got != pattern(7, 4096) {
                return Err("parent's bytes differ".into());
            }
            parent.say("read-ok", "");
            map.write_at(4096, &pattern(9, 4096)).map_err(e2s)?;
            parent.say("wrote", "");
            parent.hear_exactly("release")?;
            drop(map);
            match reg.release(id, me).map_err(e2s)? {
                Released::StillHeld { remaining: 0 } => parent.say("released", ""),
                other => return Err(format!("unexpected {other:?}")),
            }
            Ok(())
        }
        // Read-modify-write of a counter file under a cross-process lock.
        "counter" => {
            let root = PathBuf::from(env(TEST_ROOT_ENV)?);
            let iters: u32 = env("ITERS")?.parse().map_err(|_| "ITERS")?;
            parent.say("ready", "");
            parent.hear_exactly("go")?;
            for _ in 0..iters {
                let _g = FileLock::open(
                    &root.join("counter.lock"),
                    OpenMode::Create,
                    LockMode::Exclusive,
                )
                .map_err(e2s)?;
                append(&root.join("log"), &format!("enter {}\n", me.pid))?;
                let path = root.join("counter");
                let n: u64 = std::fs::read_to_string(&path)
                    .unwrap_or_default()
                    .trim()
                    .parse()
                    .unwrap_or(0);
                std::thread::sleep(Duration::from_millis(2));
                std::fs::write(&path, format!("{}", n + 1)).map_err(|e| e.to_string())?;
                append(&root.join("log"), &format!("exit {}\n", me.pid))?;
            }
            parent.say("done", "");
            Ok(())
        }
        // Becomes a holder, then waits to be killed.
        "holder" => {
            let id = env_id("ID")?;
            reg.acquire(id, me).map_err(e2s)?;
            parent.say("held", "");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        // Allocates device memory, then waits to be killed.
        "allocator" => {
            let size: u64 = env("SIZE")?.parse().map_err(|_| "SIZE")?;
            let c = reg
                .create(NewObject::memory(Vendor::Hip, 0, size))
                .map_err(e2s)?;
            parent.say("allocated", &c.meta.id().raw().to_string());
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        // Notify ping-pong: wait on A, record B, ROUNDS times.
        "ponger" => {
            let (a, b) = (env_id("A")?, env_id("B")?);
            let rounds: u32 = env("ROUNDS")?.parse().map_err(|_| "ROUNDS")?;
            reg.acquire(a, me).map_err(e2s)?;
            reg.acquire(b, me).map_err(e2s)?;
            let ma = reg.open_segment(a).map_err(e2s)?.map().map_err(e2s)?;
            let mb = reg.open_segment(b).map_err(e2s)?.map().map_err(e2s)?;
            let (sa, sb) = (
                BinarySemaphore::new(ma.word(0).map_err(e2s)?),
                BinarySemaphore::new(mb.word(0).map_err(e2s)?),
            );
            parent.say("ready", "");
            for _ in 0..rounds {
                sa.wait_and_reset(Some(LONG)).map_err(e2s)?;
                sb.record().map_err(e2s)?;
            }
            // Then block without timeout on A until the parent records it once more.
            sa.wait_and_reset(None).map_err(e2s)?;
            drop((ma, mb));
            reg.release(a, me).map_err(e2s)?;
            reg.release(b, me).map_err(e2s)?;
            parent.say("done", "");
            Ok(())
        }
        // Acquire/release the same object many times, concurrently with a sibling.
        "churn" => {
            let id = env_id("ID")?;
            let iters: u32 = env("ITERS")?.parse().map_err(|_| "ITERS")?;
            parent.say("ready", "");
            parent.hear_exactly("go")?;
            for i in 0..iters {
                reg.acquire(id, me).map_err(e2s)?;
                if i % 3 == 0 {
                    reg.acquire(id, me).map_err(e2s)?;
                    reg.release(id, me).map_err(e2s)?;
                }
                reg.release(id, me).map_err(e2s)?;
            }
            parent.say("done", "");
            Ok(())
        }
        other => Err(format!("unknown role {other}")),
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn bytes_written_in_one_process_are_read_in_another() {
    let root = TestRoot::new("bytes");
    let state = root.state();
    let reg = state.registry();
    let c = reg
        .create(NewObject::memory(Vendor::Acl, 0, 1 << 20))
        .unwrap();
    let id = c.meta.id();
    let map = c.segment.as_ref().unwrap().map().unwrap();
    map.write_at(0, &pattern(7, 4096)).unwrap();

    let mut child = spawn("reader", &root, &[("ID", id.raw().to_string())]);
    child.expect("read-ok");
    child.expect("wrote");
    let mut got = vec![0u8; 4096];
    map.read_at(4096, &mut got).unwrap();
    assert_eq!(
        got,
        pattern(9, 4096),
        "child's bytes not visible in the parent"
    );
    let holders = reg.get(id).unwrap();
    assert_eq!(holders.hold_count(identity(&child)), 1);
    child.send("release");
    child.expect("released");
    child.wait_success();

    assert_eq!(reg.get(id).unwrap().holders().len(), 1);
    drop(map);
    assert_eq!(reg.release(id, me()).unwrap(), Released::Freed);
    assert_state_clean(&state);
}

#[test]
fn two_processes_contending_on_a_lock_serialize() {
    const ITERS: u32 = 25;
    let root = TestRoot::new("lock");
    let state = root.state();
    let env = [("ITERS", ITERS.to_string())];
    let mut a = spawn("counter", &root, &env);
    let mut b = spawn("counter", &root, &env);
    a.expect("ready");
    b.expect("ready");
    a.send("go");
    b.send("go");
    a.expect("done");
    b.expect("done");
    a.wait_success();
    b.wait_success();

    let count = std::fs::read_to_string(root.path().join("counter")).unwrap();
    assert_eq!(
        count.trim(),
        (2 * ITERS).to_string(),
        "lost updates: no mutual exclusion"
    );
    // The log alternates enter/exit of the same pid: critical sections never overlap.
    let log = std::fs::read_to_string(root.path().join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4 * ITERS as usize);
    let mut pids = std::collections::BTreeSet::new();
    for pair in lines.chunks(2) {
        let enter = pair[0].strip_prefix("enter ").expect(pair[0]);
        let exit = pair[1].strip_prefix("exit ").expect(pair[1]);
        assert_eq!(enter, exit, "critical sections interleaved: {pair:?}");
        pids.insert(enter.to_owned());
    }
    assert_eq!(pids.len(), 2);
    assert_state_clean(&state);
}

#[test]
fn killed_holder_is_reclaimed_by_the_next_touch() {
    let root = TestRoot::new("touch");
    let state = root.state();
    let reg = state.registry();
    let id = reg
        .create(NewObject::memory(Vendor::Hip, 0, 64 << 10))
        .unwrap()
        .meta
        .id();
    let mut child = spawn("holder", &root, &[("ID", id.raw().to_string())]);
    child.expect("held");
    let child_id = identity(&child);
    assert_eq!(reg.get(id).unwrap().hold_count(child_id), 1);

    child.kill(); // SIGKILL, reaped
    let m = reg.get(id).unwrap();
    assert_eq!(
        m.hold_count(child_id),
        0,
        "dead holder not reclaimed on touch"
    );
    assert_eq!(m.holders().len(), 1);

    assert_eq!(reg.release(id, me()).unwrap(), Released::Freed);
    assert_state_clean(&state);
}

#[test]
fn gc_reclaims_a_killed_holder_and_frees_its_object() {
    let root = TestRoot::new("gc");
    let state = root.state();
    let reg = state.registry();
    let kept = reg
        .create(NewObject::notify(Vendor::Acl, 1))
        .unwrap()
        .meta
        .id();
    let id = reg
        .create(NewObject::memory(Vendor::Acl, 1, 256 << 10))
        .unwrap()
        .meta
        .id();
    let mut child = spawn("holder", &root, &[("ID", id.raw().to_string())]);
    child.expect("held");
    // The parent lets go: only the child holds the memory now.
    assert_eq!(
        reg.release(id, me()).unwrap(),
        Released::StillHeld { remaining: 0 }
    );
    assert_eq!(reg.used(1).unwrap(), 256 << 10);

    // Killed and not yet reaped (a zombie): dead all the same.
    child.kill_no_reap();
    let report = state.gc().unwrap();
    assert_eq!(report.objects_scanned, 2, "{report}");
    assert_eq!(report.holders_reclaimed, 1, "{report}");
    assert_eq!(report.objects_freed, 1, "{report}");
    assert!(!report.usage_corrected, "{report}");
    assert_eq!(reg.used(1).unwrap(), 0);
    assert!(reg.get(id).unwrap_err().is_no_such_object());
    // The live object is untouched.
    assert_eq!(reg.get(kept).unwrap().holders().len(), 1);
    child.reap();

    // A second gc finds nothing to do.
    let again = state.gc().unwrap();
    assert_eq!((again.holders_reclaimed, again.objects_freed), (0, 0));
    reg.release(kept, me()).unwrap();
    assert_state_clean(&state);
}

#[test]
fn memory_limit_is_shared_across_processes_and_released_when_a_process_dies() {
    let root = TestRoot::new("oom");
    let mut config = root.config();
    config.mem_limit = 1 << 20;
    let state = State::open(config).unwrap();
    let reg = state.registry();
    let mut child = spawn(
        "allocator",
        &root,
        &[
            ("SIZE", (768u64 << 10).to_string()),
            ("DEVIPC_EMU_MEM_LIMIT", "1M".into()),
        ],
    );
    child.expect("allocated");
    match reg.create(NewObject::memory(Vendor::Hip, 0, 512 << 10)) {
        Err(EmuError::OutOfMemory {
            device: 0,
            used,
            limit,
            ..
        }) => assert_eq!((used, limit), (768 << 10, 1 << 20)),
        other => panic!("expected out of memory, got {other:?}"),
    }
    // Another device has its own budget.
    let other = reg
        .create(NewObject::memory(Vendor::Hip, 1, 512 << 10))
        .unwrap();

    child.kill();
    // The failed charge runs gc, which frees the dead child's memory.
    let c = reg
        .create(NewObject::memory(Vendor::Hip, 0, 512 << 10))
        .unwrap();
    assert_eq!(reg.used(0).unwrap(), 512 << 10);
    reg.release(c.meta.id(), me()).unwrap();
    reg.release(other.meta.id(), me()).unwrap();
    assert_state_clean(&state);
}

#[test]
fn notify_ping_pong_across_processes_and_timeout() {
    const ROUNDS: u32 = 200;
    let root = TestRoot::new("futex");
    let state = root.state();
    let reg = state.registry();
    let a = reg.create(NewObject::notify(Vendor::Acl, 0)).unwrap();
    let b = reg.create(NewObject::notify(Vendor::Acl, 0)).unwrap();
    let ma = a.segment.as_ref().unwrap().map().unwrap();
    let mb = b.segment.as_ref().unwrap().map().unwrap();
    let (sa, sb) = (
        BinarySemaphore::new(ma.word(0).unwrap()),
        BinarySemaphore::new(mb.word(0).unwrap()),
    );
    let mut child = spawn(
        "ponger",
        &root,
        &[
            ("A", a.meta.id().raw().to_string()),
            ("B", b.meta.id().raw().to_string()),
            ("ROUNDS", ROUNDS.to_string()),
        ],
    );
    child.expect("ready");
    let t0 = Instant::now();
    for _ in 0..ROUNDS {
        sa.record().unwrap();
        sb.wait_and_reset(Some(LONG)).unwrap();
    }
    let per_round = t0.elapsed() / ROUNDS;
    eprintln!("notify round trip across processes: {per_round:?}");

    // Timeout path: nobody records B.
    let t1 = Instant::now();
    let r = sb.wait_and_reset(Some(Duration::from_millis(100)));
    assert!(matches!(r, Err(EmuError::Timeout(d)) if d == Duration::from_millis(100)));
    assert!(t1.elapsed() >= Duration::from_millis(100));

    // The child now blocks with no timeout; one more record releases it.
    sa.record().unwrap();
    child.expect("done");
    child.wait_success();
    // Every record was consumed by exactly one wait.
    assert!(!sa.is_set() && !sb.is_set());
    let word: &AtomicU32 = ma.word(0).unwrap();
    assert_eq!(word.load(Ordering::SeqCst), 0);
    assert_eq!(
        wait_until(word, |v| v == 0, Some(Duration::ZERO)).unwrap(),
        0
    );

    drop((ma, mb));
    reg.release(a.meta.id(), me()).unwrap();
    reg.release(b.meta.id(), me()).unwrap();
    assert_state_clean(&state);
}

#[test]
fn concurrent_acquire_release_from_two_processes_loses_no_update() {
    const ITERS: u32 = 60;
    let root = TestRoot::new("churn");
    let state = root.state();
    let reg = state.registry();
    let id = reg
        .create(NewObject::event(Vendor::Hip, 0))
        .unwrap()
        .meta
        .id();
    let env = [("ID", id.raw().to_string()), ("ITERS", ITERS.to_string())];
    let mut a = spawn("churn", &root, &env);
    let mut b = spawn("churn", &root, &env);
    a.expect("ready");
    b.expect("ready");
    a.send("go");
    b.send("go");
    a.expect("done");
    b.expect("done");
    a.wait_success();
    b.wait_success();
    let m = reg.get(id).unwrap();
    assert_eq!(m.holders().len(), 1, "{:?}", m.holders());
    assert_eq!(m.hold_count(me()), 1);
    assert_eq!(reg.release(id, me()).unwrap(), Released::Freed);
    assert_state_clean(&state);
}

#[test]
fn gc_removes_leftovers_of_a_process_killed_mid_operation() {
    let root = TestRoot::new("orphans");
    let state = root.state();
    let reg = state.registry();
    let live = reg.create(NewObject::memory(Vendor::Acl, 0, 8192)).unwrap();
    let live_id = live.meta.id();
    // Simulate a creator killed after writing its segment and lock file but before its
    // metadata, and an updater killed after writing its temporary metadata file.
    let ghost = ObjectId::new(live_id.salt(), live_id.counter() + 100).unwrap();
    for suffix in [".seg", ".lock"] {
        std::fs::write(state.dir().join(&format!("{ghost}{suffix}")), b"x").unwrap();
    }
    std::fs::write(state.dir().join(&format!("{live_id}.meta.tmp")), b"partial").unwrap();
    // And a creator killed after charging but before writing metadata: usage drifted.
    {
        let mut ledger = reg.ledger().lock().unwrap();
        ledger.charge(0, 4096, u64::MAX).unwrap();
        ledger.commit().unwrap();
    }
    // Files the emulator did not create are left alone.
    std::fs::write(state.dir().join("README"), b"not ours").unwrap();

    let report = state.gc().unwrap();
    assert_eq!(report.orphan_files_removed, 3, "{report}");
    assert!(report.usage_corrected, "{report}");
    assert_eq!(reg.used(0).unwrap(), 8192);
    assert_eq!(reg.get(live_id).unwrap(), live.meta);
    std::fs::remove_file(state.dir().join("README")).unwrap();
    drop(live);
    reg.release(live_id, me()).unwrap();
    assert_state_clean(&state);
}

#[test]
fn global_state_follows_the_environment_only_in_children() {
    // The parent never sets DEVIPC_EMU_DIR; children get it per test. Guard against a
    // test accidentally using the user's default directory.
    assert!(
        std::env::var_os(ROLE_ENV).is_some() || std::env::var_os("DEVIPC_EMU_DIR").is_none(),
        "run the tests without DEVIPC_EMU_DIR set"
    );
}
