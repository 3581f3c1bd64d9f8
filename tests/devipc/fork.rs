//! `fork` without `exec` after a runtime started (Python's default start method on Linux
//! before 3.14), with real processes on both emulated backends:
//!
//! - the child's use of anything it inherited (the runtime, a buffer, an import, a
//!   signal) is refused with `Error::InheritedAcrossFork`, and dropping it there releases
//!   nothing of the parent's;
//! - a fresh runtime in the child works and names the child, not the parent, in its
//!   tokens; it imports the parent's exports as any other process does;
//! - the child's own leases never take the parent's entries: the parent's free still
//!   waits for the child's import (HIP defers the free, Ascend refuses `framework_free`),
//!   and completes once the child is gone; the emulator records no violation.
//!
//! The fork happens in a testkit child (this binary re-run), so libtest's other threads
//! are not copied into the forked process.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use devipc::raw::Backend;
use devipc::rendezvous::{ShareOptions, ShareServer};
use devipc::{BackendKind, DeviceId, Error, ExportOptions, MemToken, Runtime};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

const LEN: usize = 64 << 10;

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        match role {
            "forker-hip" => forker(BackendKind::Hip, parent),
            "forker-ascend" => forker(BackendKind::Ascend, parent),
            "busy-forker-hip" => busy_forker(BackendKind::Hip, parent),
            "busy-forker-ascend" => busy_forker(BackendKind::Ascend, parent),
            other => return Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

#[test]
fn hip_a_forked_child_refuses_inherited_objects_and_works_with_its_own_runtime() {
    run(BackendKind::Hip);
}

#[test]
fn ascend_a_forked_child_refuses_inherited_objects_and_works_with_its_own_runtime() {
    run(BackendKind::Ascend);
}

/// Forks while other threads of the parent are inside devipc (and the emulator): a lock
/// they held at the fork stays locked in the child, which must still open a runtime of
/// its own and use it without waiting for that lock.
#[test]
fn hip_a_child_forked_beside_busy_threads_does_not_hang() {
    run_role(BackendKind::Hip, "busy-forker-hip");
}

#[test]
fn ascend_a_child_forked_beside_busy_threads_does_not_hang() {
    run_role(BackendKind::Ascend, "busy-forker-ascend");
}

fn run(kind: BackendKind) {
    let role = match kind {
        BackendKind::Hip => "forker-hip",
        _ => "forker-ascend",
    };
    run_role(kind, role);
}

fn run_role(kind: BackendKind, role: &str) {
    let root = TestRoot::new(&format!("{role}-{kind}"));
    let mut child = Child::spawn(&child_entry(), role, &root, &[]);
    assert_eq!(child.expect("done"), "ok");
    child.wait_success();
    root.assert_emulator_clean();
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..4096u32)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

fn e2s(e: Error) -> String {
    format!("{} ({})", e, e.kind())
}

/// Runs in the testkit child: sets up a runtime, forks, and checks both sides.
fn forker(kind: BackendKind, parent: &Parent) -> Result<(), String> {
    let rt = Runtime::emulated(kind).map_err(e2s)?;
    let buf = rt.allocate(DeviceId(0), LEN).map_err(e2s)?;
    buf.write(0, &pattern(1)).map_err(e2s)?;
    let token = buf.export(ExportOptions::any_process()).map_err(e2s)?;
    let block = devipc::testing::framework_malloc(&rt, DeviceId(0), LEN).map_err(e2s)?;
    let external = rt
        .export_external(DeviceId(0), block, LEN, ExportOptions::any_process())
        .map_err(e2s)?;
    let signal = rt.create_signal(DeviceId(0)).map_err(e2s)?;
    // A rendezvous server (over a buffer of its own): the child must neither serve its
    // socket nor remove it.
    let served = rt.allocate(DeviceId(0), 4096).map_err(e2s)?;
    let socket = std::path::PathBuf::from(
        std::env::var_os("DEVIPC_RUNTIME_DIR").ok_or("no DEVIPC_RUNTIME_DIR")?,
    )
    .join("fork-test.sock");
    let server = served
        .share(&socket, ShareOptions::default())
        .map_err(e2s)?;

    let (mut to_child, child_end) = UnixStream::pair().map_err(|e| e.to_string())?;
    // SAFETY: this process runs one test thread (libtest's main thread waits for it);
    // the child only runs devipc calls and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(to_child);
        let inherited = Inherited {
            rt: &rt,
            buf: &buf,
            token: &token,
            external: &external,
            signal: &signal,
            server: &server,
        };
        let code = in_child(kind, &inherited, child_end);
        // Everything inherited is dropped on the way out (by `in_child`'s caller frame
        // now): it must release nothing of the parent's.
        drop((rt, buf, signal, server, served));
        // SAFETY: ends the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    drop(child_end);
    let mut from_child = BufReader::new(to_child.try_clone().map_err(|e| e.to_string())?);
    let mut line = String::new();
    from_child.read_line(&mut line).map_err(|e| e.to_string())?;
    let report = line.trim_end();
    if report != "holding" {
        reap(pid);
        return Err(format!("the forked child reported: {report:?}"));
    }

    // After the fork, the parent exports `other`; the child imports it and only then
    // exports a buffer of its own: had the child taken its lease entry from its copy of
    // the parent's table bookkeeping, both leases would share one entry, and the child's
    // new lease would reset the count that holds `other`.
    let other = rt.allocate(DeviceId(0), LEN).map_err(e2s)?;
    other.write(0, &pattern(3)).map_err(e2s)?;
    let other_token = other.export(ExportOptions::any_process()).map_err(e2s)?;
    to_child
        .write_all(format!("{}\n", other_token.to_text()).as_bytes())
        .map_err(|e| e.to_string())?;
    line.clear();
    from_child.read_line(&mut line).map_err(|e| e.to_string())?;
    if line.trim_end() != "holding other" {
        reap(pid);
        return Err(format!("the forked child reported: {:?}", line.trim_end()));
    }

    // The child holds imports of `buf`, `other` and the external block. The parent's
    // frees must wait for it (HIP defers, checked past the reaper's liveness pass), and
    // `framework_free` of the block is refused.
    drop((buf, other));
    if let Backend::Hip(hip) = rt.backend() {
        std::thread::sleep(Duration::from_millis(600));
        if hip.deferred_frees() != 2 {
            return Err(format!(
                "the parent's frees did not wait for its forked child's imports: {} of 2 \
                 deferred",
                hip.deferred_frees()
            ));
        }
    }
    // SAFETY: `block` came from framework_malloc of `rt` on device 0 and no view of it
    // remains in this process.
    if unsafe { devipc::testing::framework_free(&rt, DeviceId(0), block) }.is_ok() {
        return Err("framework_free went through under the child's import".into());
    }
    // The parent's signal still works.
    signal.notify().map_err(e2s)?;
    signal.wait(Some(Duration::from_secs(5))).map_err(e2s)?;

    to_child.write_all(b"go\n").map_err(|e| e.to_string())?;
    let status = reap(pid);
    if status != 0 {
        let mut rest = String::new();
        let _ = from_child.read_to_string(&mut rest);
        return Err(format!("the forked child exited with {status}: {rest}"));
    }
    // With the child gone, the deferred free runs and the block can be freed.
    if let Backend::Hip(hip) = rt.backend() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while hip.deferred_frees() != 0 {
            if Instant::now() > deadline {
                return Err("the deferred free never ran after the child left".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // SAFETY: as above; refused frees left the block allocated.
        match unsafe { devipc::testing::framework_free(&rt, DeviceId(0), block) } {
            Ok(()) => break,
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "framework_free still refused after the child left: {e}"
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    // The child dropped its copy of the server: the socket is still the parent's.
    if !socket.exists() {
        return Err("the forked child's drop removed the parent's rendezvous socket".into());
    }
    match server.accept_timeout(Duration::from_millis(10)) {
        Err(Error::Timeout { .. }) => {}
        other => return Err(format!("the parent's server after the fork: {other:?}")),
    }
    drop((server, served, signal, rt));
    parent.say("done", "ok");
    Ok(())
}

/// Forks children while three threads loop through devipc (allocate, export, import,
/// free; signals; copies whose requests and streams the drainer finishes); each child opens a runtime of its own and uses it, under an alarm.
fn busy_forker(kind: BackendKind, parent: &Parent) -> Result<(), String> {
    const CHILDREN: usize = 24;
    let rt = Runtime::emulated(kind).map_err(e2s)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|t| {
            let (rt, stop) = (rt.clone(), stop.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let mut rounds = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if t == 2 {
                        data_plane_round(&rt)?;
                    } else if t == 0 {
                        let buf = rt.allocate(DeviceId(0), 4096).map_err(e2s)?;
                        let token = buf.export(ExportOptions::any_process()).map_err(e2s)?;
                        let view = rt.import(&token, DeviceId(0)).map_err(e2s)?;
                        view.write(0, b"busy").map_err(e2s)?;
                    } else {
                        let sig = rt.create_signal(DeviceId(0)).map_err(e2s)?;
                        sig.export(ExportOptions::any_process()).map_err(e2s)?;
                        sig.notify().map_err(e2s)?;
                        sig.wait(Some(Duration::from_secs(5))).map_err(e2s)?;
                    }
                    rounds += 1;
                }
                Ok(rounds)
            })
        })
        .collect();
    let mut failures = Vec::new();
    for i in 0..CHILDREN {
        std::thread::sleep(Duration::from_millis(3));
        // SAFETY: the child runs devipc calls under an alarm and leaves with `_exit`; the
        // point of the test is that the other threads' locks do not follow it.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: a plain alarm: a hung child dies of SIGALRM instead of hanging the test.
            unsafe { libc::alarm(20) };
            let code = match child_round(kind) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: ends the forked child without the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        let status = reap(pid);
        if status != 0 {
            failures.push(format!(
                "child {i}: {}",
                if status == 128 + libc::SIGALRM {
                    "hung (killed by its alarm)".to_owned()
                } else {
                    format!("exit {status}")
                }
            ));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in busy {
        t.join().map_err(|_| "a busy thread panicked")??;
    }
    drop(rt);
    if !failures.is_empty() {
        return Err(format!(
            "{} of {CHILDREN} forked children failed: {failures:?}",
            failures.len()
        ));
    }
    parent.say("done", "ok");
    Ok(())
}

/// Copies on a held stream, the request dropped unfinished (to the drainer), the stream
/// released and dropped (destroyed by the drainer): the drainer's state is what a fork
/// may catch mid-use.
fn data_plane_round(rt: &Runtime) -> Result<(), String> {
    let a = rt.allocate(DeviceId(0), 4096).map_err(e2s)?;
    let b = rt.allocate(DeviceId(0), 4096).map_err(e2s)?;
    let stream = rt.create_stream(DeviceId(0)).map_err(e2s)?;
    devipc::testing::hold_stream(&stream).map_err(e2s)?;
    let copy = stream
        .copy(
            &b.span(0..4096).map_err(e2s)?,
            &a.span(0..4096).map_err(e2s)?,
        )
        .map_err(e2s)?;
    drop(copy);
    devipc::testing::release_stream(&stream).map_err(e2s)?;
    drop(stream);
    if devipc::testing::wait_for_drained(Duration::from_secs(10)) {
        Ok(())
    } else {
        Err("the drainer did not release the dropped request and stream".into())
    }
}

/// A forked child's work with a runtime of its own.
fn child_round(kind: BackendKind) -> Result<(), String> {
    let rt = Runtime::emulated(kind).map_err(e2s)?;
    let buf = rt.allocate(DeviceId(0), 4096).map_err(e2s)?;
    let token = buf.export(ExportOptions::any_process()).map_err(e2s)?;
    let view = rt.import(&token, DeviceId(0)).map_err(e2s)?;
    view.write(0, b"child").map_err(e2s)?;
    let sig = rt.create_signal(DeviceId(0)).map_err(e2s)?;
    sig.export(ExportOptions::any_process()).map_err(e2s)?;
    sig.notify().map_err(e2s)?;
    sig.wait(Some(Duration::from_secs(5))).map_err(e2s)?;
    data_plane_round(&rt)
}

/// Waits for the forked child; its exit code, or 128 + signal.
fn reap(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// The forked child's checks; reports "holding" (or what failed) to `parent`, holds its
/// imports until the parent writes a line, returns the exit code.
fn in_child(kind: BackendKind, inherited: &Inherited<'_>, parent: UnixStream) -> i32 {
    let Ok(mut report) = parent.try_clone() else {
        return 2;
    };
    let mut go = BufReader::new(parent);
    let result = child_checks(kind, inherited).and_then(|held| {
        let _ = report.write_all(b"holding\n");
        let (own, mut views) = held;
        let mut line = String::new();
        let _ = go.read_line(&mut line);
        let other: MemToken = line.trim_end().parse().map_err(e2s)?;
        let view = own.import(&other, DeviceId(0)).map_err(e2s)?;
        let mut got = vec![0u8; 4096];
        view.read(0, &mut got).map_err(e2s)?;
        if got != pattern(3) {
            return Err("the child read other bytes than the parent wrote".into());
        }
        views.push(view);
        // Now a buffer of its own, exported (a lease of its own), and its tokens name
        // this process.
        let mine = own.allocate(DeviceId(0), LEN).map_err(e2s)?;
        let mine_token = mine.export(ExportOptions::any_process()).map_err(e2s)?;
        if mine_token.origin().pid.0 != std::process::id() || mine_token.origin() == other.origin()
        {
            return Err(format!(
                "the child's token names {:?}, not the child (pid {}); the parent's is {:?}",
                mine_token.origin(),
                std::process::id(),
                other.origin()
            ));
        }
        Ok((own, mine, views))
    });
    match result {
        Ok(held) => {
            let _ = report.write_all(b"holding other\n");
            let mut line = String::new();
            let _ = go.read_line(&mut line);
            drop(held);
            0
        }
        Err(e) => {
            let _ = report.write_all(format!("{}\n", e.replace('\n', " ")).as_bytes());
            1
        }
    }
}

/// What the child keeps while the parent checks its frees wait: its runtime and imports.
type Held = (Runtime, Vec<devipc::ImportedBuffer>);

/// What the forked child inherited from the parent's side of the test.
struct Inherited<'a> {
    rt: &'a Runtime,
    buf: &'a devipc::SharedBuffer,
    token: &'a MemToken,
    external: &'a MemToken,
    signal: &'a devipc::Signal,
    server: &'a ShareServer,
}

fn child_checks(kind: BackendKind, inherited_objects: &Inherited<'_>) -> Result<Held, String> {
    let Inherited {
        rt,
        buf,
        token,
        external,
        signal,
        server,
    } = *inherited_objects;
    let inherited = |what: &str, r: Result<(), Error>| match r {
        Err(Error::InheritedAcrossFork {
            creator, current, ..
        }) if current == std::process::id() && creator != current => Ok(()),
        Err(e) => Err(format!(
            "{what}: expected inherited_across_fork, got {}",
            e2s(e)
        )),
        Ok(()) => Err(format!("{what}: an inherited object worked in the child")),
    };
    let mut scratch = [0u8; 16];
    if rt.is_usable_here() {
        return Err("the inherited runtime says it is usable here".into());
    }
    inherited("allocate", rt.allocate(DeviceId(0), LEN).map(drop))?;
    inherited("export", buf.export(ExportOptions::any_process()).map(drop))?;
    inherited("read", buf.read(0, &mut scratch))?;
    inherited("write", buf.write(0, &scratch))?;
    inherited("import", rt.import(token, DeviceId(0)).map(drop))?;
    inherited("create_signal", rt.create_signal(DeviceId(0)).map(drop))?;
    inherited("notify", signal.notify())?;
    inherited("generations", signal.generations().map(drop))?;
    inherited(
        "accept",
        server.accept_timeout(Duration::from_millis(10)).map(drop),
    )?;

    // A runtime of its own works.
    let own = Runtime::emulated(kind).map_err(e2s)?;
    if !own.is_usable_here() {
        return Err("a fresh runtime says it is not usable here".into());
    }
    // It imports the parent's exports as any other process does.
    let view = own.import(token, DeviceId(0)).map_err(e2s)?;
    let mut got = vec![0u8; 4096];
    view.read(0, &mut got).map_err(e2s)?;
    if got != pattern(1) {
        return Err("the child read other bytes than the parent wrote".into());
    }
    let ext_view = own.import(external, DeviceId(0)).map_err(e2s)?;
    Ok((own, vec![view, ext_view]))
}
