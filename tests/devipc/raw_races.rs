//! The raw layer's handles are plain data and can be cloned, so one thread can release a
//! handle while another still uses a clone of it. A release waits for the calls already
//! using the object (the backends pin their records, `devipc_core::HandleTable::pin`):
//! no vendor object is destroyed under a call, and a call that starts after the release
//! began gets `UnknownHandle`, never a vendor error about a dead object. A wait on a
//! signal being destroyed gives up with `UnknownHandle` rather than hold the destroy up
//! until a notify nobody will send.
//!
//! Each backend runs in a child process (the emulator's configuration is the child's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use devipc::raw::DeviceIpc;
use devipc::{BackendKind, DeviceId, Error, ExportOptions, RawStream, Runtime};
use devipc_testkit::{Child, TestRoot, child_entry};

const KIND_ENV: &str = "RAW_RACES_TEST_KIND";
/// The wait's limit (it should end long before, when the signal is destroyed), and when
/// the other thread destroys the signal.
const WAIT: Duration = Duration::from_secs(10);
const DESTROY_AFTER: Duration = Duration::from_millis(100);
/// Rounds of export racing free.
const ROUNDS: usize = 200;

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let kind: BackendKind = std::env::var(KIND_ENV)
            .map_err(|e| e.to_string())?
            .parse()
            .map_err(|e: Error| e.to_string())?;
        let rt = Runtime::emulated(kind).map_err(|e| e.to_string())?;
        match role {
            "destroy-during-wait" => destroy_during_wait(&rt, parent),
            "free-during-export" => free_during_export(&rt, parent),
            "grant-after-free" => grant_after_free(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

/// One thread waits (with a limit of [`WAIT`]) on a clone of a signal handle; the other
/// destroys the signal meanwhile. Reports `<wait ended µs> <destroy ended µs>` since the
/// start, the wait's outcome and that of a notify afterwards.
fn destroy_during_wait(rt: &Runtime, parent: &devipc_testkit::Parent) -> Result<(), String> {
    let backend = rt.backend();
    let handle = backend
        .create_signal(DeviceId(0))
        .map_err(|e| e.to_string())?;
    let clone = handle.clone();
    let start = Instant::now();
    let (waited, wait_ended, destroyed, destroy_ended) = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let r = backend.wait(&clone, RawStream::DEFAULT, Some(WAIT));
            (r, start.elapsed())
        });
        std::thread::sleep(DESTROY_AFTER);
        let destroyed = backend.destroy_signal(handle);
        let destroy_ended = start.elapsed();
        let (waited, wait_ended) = waiter.join().expect("waiter thread");
        (waited, wait_ended, destroyed, destroy_ended)
    });
    destroyed.map_err(|e| format!("destroy_signal: {e}"))?;
    let outcome = match waited {
        Err(Error::UnknownHandle { kind: "signal", .. }) => "unknown".to_owned(),
        other => format!("{other:?}"),
    };
    let after = match backend.notify(&clone, RawStream::DEFAULT) {
        Err(Error::UnknownHandle { .. }) => "unknown".to_owned(),
        other => format!("{other:?}"),
    };
    parent.say(
        "timing",
        &format!(
            "{} {} {outcome} {after}",
            wait_ended.as_micros(),
            destroy_ended.as_micros()
        ),
    );
    Ok(())
}

/// [`ROUNDS`] times: one thread exports a clone of an allocation handle in a loop while
/// the other frees it. Every export either succeeds or finds the handle gone. Reports the
/// number of exports that succeeded and of those refused.
fn free_during_export(rt: &Runtime, parent: &devipc_testkit::Parent) -> Result<(), String> {
    let backend = rt.backend();
    let (mut ok, mut gone) = (0usize, 0usize);
    for _ in 0..ROUNDS {
        let alloc = backend
            .allocate(DeviceId(0), 4096)
            .map_err(|e| e.to_string())?;
        let clone = alloc.clone();
        let exported_once = AtomicBool::new(false);
        let (exports, freed) = std::thread::scope(|s| {
            let exporter = s.spawn(|| {
                let mut seen = Vec::new();
                loop {
                    match backend.export(&clone, 0..4096, ExportOptions::any_process()) {
                        Ok(_) => {
                            seen.push(Ok(()));
                            exported_once.store(true, Ordering::Release);
                        }
                        Err(e) => {
                            seen.push(Err(e));
                            return seen;
                        }
                    }
                }
            });
            // Free while exports are under way (after the first one succeeded).
            let started = Instant::now();
            while !exported_once.load(Ordering::Acquire) && started.elapsed() < WAIT {
                std::thread::yield_now();
            }
            let freed = backend.free(alloc);
            (exporter.join().expect("exporter thread"), freed)
        });
        freed.map_err(|e| format!("free: {e}"))?;
        for export in exports {
            match export {
                Ok(()) => ok += 1,
                Err(Error::UnknownHandle { .. }) => gone += 1,
                Err(e) => return Err(format!("an export racing free failed with {e:?}")),
            }
        }
    }
    parent.say("exports", &format!("{ok} {gone}"));
    Ok(())
}

/// Exports an allocation, frees it, then grants the token: the grant must be refused
/// before the runtime sees the freed object's handle. Reports the grant's outcome.
fn grant_after_free(rt: &Runtime, parent: &devipc_testkit::Parent) -> Result<(), String> {
    let backend = rt.backend();
    let alloc = backend
        .allocate(DeviceId(0), 4096)
        .map_err(|e| e.to_string())?;
    let token = backend
        .export(&alloc, 0..4096, ExportOptions::default())
        .map_err(|e| e.to_string())?;
    backend.free(alloc).map_err(|e| e.to_string())?;
    let outcome = match backend.grant(&token, &[devipc::ProcessId(1)]) {
        Ok(()) => "ok".to_owned(),
        Err(Error::InvalidArgument { .. }) => "refused".to_owned(),
        Err(e) => format!("{e:?}"),
    };
    parent.say("grant", &outcome);
    Ok(())
}

fn run(kind: BackendKind, role: &str) -> (Child, TestRoot) {
    let root = TestRoot::new(&format!("raw-races-{}-{role}", kind.name()));
    let child = Child::build(&child_entry(), role, &root)
        .env(KIND_ENV, kind.name())
        .spawn();
    (child, root)
}

fn a_release_ends_a_wait_on_a_clone(kind: BackendKind) {
    let (mut child, root) = run(kind, "destroy-during-wait");
    let line = child.expect("timing");
    child.wait_success();
    let words: Vec<&str> = line.split(' ').collect();
    let [wait_ended, destroy_ended, outcome, after] = words[..] else {
        panic!("{kind}: unexpected report {line}");
    };
    let wait_ended = Duration::from_micros(wait_ended.parse().unwrap());
    let destroy_ended = Duration::from_micros(destroy_ended.parse().unwrap());
    eprintln!("{kind}: wait ended at {wait_ended:?}, destroy at {destroy_ended:?}");
    // The destroy does not wait for the wait's limit: the wait sees the release begin and
    // gives up (within its poll interval), then the destroy finishes.
    assert_eq!(
        outcome, "unknown",
        "{kind}: a wait on a signal being destroyed ends with UnknownHandle"
    );
    assert!(
        wait_ended >= DESTROY_AFTER && wait_ended < WAIT / 2,
        "{kind}: the wait ended at {wait_ended:?}, not soon after the destroy began at \
         {DESTROY_AFTER:?}"
    );
    assert!(
        destroy_ended >= DESTROY_AFTER && destroy_ended < WAIT / 2,
        "{kind}: the destroy ended at {destroy_ended:?}"
    );
    assert_eq!(after, "unknown", "{kind}: a call after the release");
    root.assert_emulator_clean();
}

fn an_export_racing_free_finds_the_handle_or_its_absence(kind: BackendKind) {
    let (mut child, root) = run(kind, "free-during-export");
    let line = child.expect("exports");
    child.wait_success();
    eprintln!("{kind}: exports that succeeded / found the handle gone: {line}");
    let gone: usize = line.split(' ').nth(1).unwrap().parse().unwrap();
    assert_eq!(
        gone, ROUNDS,
        "{kind}: each round ends with one refused export"
    );
    root.assert_emulator_clean();
}

#[test]
fn hip_destroy_signal_ends_a_wait_on_a_clone() {
    a_release_ends_a_wait_on_a_clone(BackendKind::Hip);
}

#[test]
fn ascend_destroy_signal_ends_a_wait_on_a_clone() {
    a_release_ends_a_wait_on_a_clone(BackendKind::Ascend);
}

#[test]
fn hip_export_racing_free_never_reaches_a_freed_allocation() {
    an_export_racing_free_finds_the_handle_or_its_absence(BackendKind::Hip);
}

#[test]
fn ascend_export_racing_free_never_reaches_a_freed_allocation() {
    an_export_racing_free_finds_the_handle_or_its_absence(BackendKind::Ascend);
}

/// Ascend passes the exported handle to `aclrtMemSetPidToShareableHandle`: a freed one
/// must not reach it (HIP has no access control; its grant checks the token only).
#[test]
fn ascend_grant_after_free_is_refused_before_the_runtime() {
    let (mut child, root) = run(BackendKind::Ascend, "grant-after-free");
    let outcome = child.expect("grant");
    child.wait_success();
    assert_eq!(outcome, "refused");
    root.assert_emulator_clean();
}
