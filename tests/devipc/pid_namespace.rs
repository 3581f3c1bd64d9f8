//! Processes of different pid namespaces sharing one runtime and emulator directory, as
//! containers that share `/dev/shm` (`--ipc=host`, the containers of a Kubernetes pod) do
//! (audit finding N1). The host side runs here; the other side runs under
//! `unshare --pid --fork --mount-proc`, where the host's pids mean nothing. Neither side may
//! judge the other dead by a pid lookup of its own:
//!
//! - an importer in another namespace keeps the exporter's (emulated HIP) free deferred,
//!   reads the right bytes throughout, and once it is killed the free completes;
//! - an Ascend import from another namespace finds the exporter's export record alive
//!   (and leaves it), and reads the right bytes after the exporter freed its VMM memory;
//! - a process of another namespace that opens runtimes, creates a signal and exports
//!   once removes none of the host's lease tables, signal words and export records.
//!
//! Needs `unshare` and the right to create a pid namespace (root, as CI runs); elsewhere
//! the tests skip loudly (and fail under `DEVIPC_NO_SKIP=1`).

use std::time::{Duration, Instant};

use devipc::raw::Backend;
use devipc::{BackendKind, DeviceId, Error, ExportOptions, MemToken, Runtime};
use devipc_testkit::{
    Child, MASKS_CLEARED_ENV, Parent, ROLE_ENV, TestRoot, VISIBILITY_ENV_VARS, child_entry,
};

const HIP_LEN: usize = 64 << 10;
/// An Ascend VMM buffer: one 2 MiB granule.
const VMM_LEN: usize = 2 << 20;

fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 11 + 7) as u8).collect()
}

fn e2s(e: Error) -> String {
    e.to_string()
}

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        match role {
            "exporter" => exporter(parent),
            "importer" => importer(parent),
            "host-state" => host_state(parent),
            "bystander" => bystander(parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn kind(name: &str) -> Result<BackendKind, String> {
    match name {
        "hip" => Ok(BackendKind::Hip),
        "ascend" => Ok(BackendKind::Ascend),
        other => Err(format!("unknown backend {other}")),
    }
}

fn deferred(rt: &Runtime) -> String {
    match rt.backend() {
        Backend::Hip(b) => b.deferred_frees().to_string(),
        #[allow(unreachable_patterns)]
        _ => "-".into(),
    }
}

/// Hears its backend, allocates, writes the pattern, exports; `free` drops the buffer
/// (saying the HIP backend's deferred frees), `count` says them again, `exit` leaves.
fn exporter(parent: &Parent) -> Result<(), String> {
    let kind = kind(&parent.hear())?;
    let rt = Runtime::emulated(kind).map_err(e2s)?;
    let len = if kind == BackendKind::Hip {
        HIP_LEN
    } else {
        VMM_LEN
    };
    let buf = rt.allocate(DeviceId(0), len).map_err(e2s)?;
    buf.write(0, &pattern()).map_err(e2s)?;
    let token = buf.export(ExportOptions::any_process()).map_err(e2s)?;
    parent.say("token", &token.to_text());
    let mut buf = Some(buf);
    loop {
        match parent.hear().as_str() {
            "free" => {
                buf = None;
                parent.say("freed", &deferred(&rt));
            }
            "count" => parent.say("count", &deferred(&rt)),
            "exit" => {
                drop(buf);
                return Ok(());
            }
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// Hears its backend and a token, imports it (`imported ok` or the error), then `read`
/// checks the bytes, `exit` leaves.
fn importer(parent: &Parent) -> Result<(), String> {
    let rt = Runtime::emulated(kind(&parent.hear())?).map_err(e2s)?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let view = match rt.import(&token, DeviceId(0)) {
        Ok(view) => {
            parent.say("imported", "ok");
            Some(view)
        }
        Err(e) => {
            parent.say("imported", &format!("{} {e}", e.kind()));
            None
        }
    };
    loop {
        match parent.hear().as_str() {
            "read" => {
                let view = view.as_ref().ok_or("no view")?;
                let mut got = vec![0u8; 4096];
                let outcome = match view.read(0, &mut got) {
                    Ok(()) if got == pattern() => "ok".to_owned(),
                    Ok(()) => "wrong-bytes".to_owned(),
                    Err(e) => format!("{} {e}", e.kind()),
                };
                parent.say("read", &outcome);
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// Keeps one of each piece of host state in the runtime directory: a HIP export (a lease
/// table), a HIP signal (a word file) and an Ascend export (an export record); says the
/// HIP token, then waits for `exit`.
fn host_state(parent: &Parent) -> Result<(), String> {
    let hip = Runtime::emulated(BackendKind::Hip).map_err(e2s)?;
    let ascend = Runtime::emulated(BackendKind::Ascend).map_err(e2s)?;
    let buf = hip.allocate(DeviceId(0), HIP_LEN).map_err(e2s)?;
    buf.write(0, &pattern()).map_err(e2s)?;
    let token = buf.export(ExportOptions::any_process()).map_err(e2s)?;
    let signal = hip.create_signal(DeviceId(0)).map_err(e2s)?;
    let signal_token = signal.export(ExportOptions::any_process()).map_err(e2s)?;
    let vmm = ascend.allocate(DeviceId(0), VMM_LEN).map_err(e2s)?;
    let vmm_token = vmm.export(ExportOptions::any_process()).map_err(e2s)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("exit")?;
    drop((buf, signal, signal_token, vmm, vmm_token));
    Ok(())
}

/// What a process in another namespace does on its first day: opens both runtimes (each
/// sweeps orphaned lease tables), creates a signal (sweeps orphaned word files) and exports
/// once on each (the Ascend export sweeps dead export records).
fn bystander(parent: &Parent) -> Result<(), String> {
    let hip = Runtime::emulated(BackendKind::Hip).map_err(e2s)?;
    let ascend = Runtime::emulated(BackendKind::Ascend).map_err(e2s)?;
    let signal = hip.create_signal(DeviceId(0)).map_err(e2s)?;
    signal.export(ExportOptions::any_process()).map_err(e2s)?;
    for rt in [&hip, &ascend] {
        let len = if std::ptr::eq(rt, &hip) {
            HIP_LEN
        } else {
            VMM_LEN
        };
        let buf = rt.allocate(DeviceId(0), len).map_err(e2s)?;
        buf.export(ExportOptions::any_process()).map_err(e2s)?;
    }
    parent.say("done", "");
    Ok(())
}

/// Whether this machine lets us create a pid namespace with `unshare`; the reason if not.
fn unshare_refused() -> Option<String> {
    match std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stderr(std::process::Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`unshare --pid --fork --mount-proc` is refused here ({}: {}); run as root, or \
             where unprivileged user namespaces are allowed",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("`unshare` (util-linux) cannot run: {e}")),
    }
}

/// A child of this test binary playing `role` in a new pid namespace (under `unshare`),
/// with the root's directories. It leads a process group, so killing it kills the
/// namespace's processes too.
struct Contained(devipc_child::Child);

const WAIT: Duration = devipc_testkit::LONG;

impl Contained {
    #[track_caller]
    fn spawn(role: &str, root: &TestRoot) -> Contained {
        let exe = std::env::current_exe().expect("this test binary");
        let entry = child_entry();
        let mut cmd = devipc_child::Command::program(role, "unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(&exe)
            .args([&*entry, "--exact", "--nocapture", "--test-threads=1"])
            .new_process_group();
        for key in VISIBILITY_ENV_VARS {
            cmd = cmd.env_remove(key);
        }
        let child = cmd
            .env(ROLE_ENV, role)
            .env(MASKS_CLEARED_ENV, "1")
            .envs(root.env())
            .spawn()
            .expect("start a child under unshare");
        Contained(child)
    }

    fn send(&mut self, line: &str) {
        self.0.send(line).expect("send to the contained child");
    }

    fn expect(&mut self, key: &str) -> String {
        match self.0.expect(key, WAIT) {
            Ok(v) => v.trim_end().to_owned(),
            Err(e) => panic!("{}", self.0.explain(&format!("expecting {key}: {e}"))),
        }
    }

    fn finish(mut self) {
        self.send("exit");
        if let Err(e) = self.0.finish(WAIT) {
            panic!("{}", self.0.explain(&e));
        }
    }

    /// Waits for the child to end by itself, successfully.
    fn wait_success(mut self) {
        match self.0.wait(WAIT) {
            Ok(status) if status.success() => {}
            Ok(status) => panic!("{}", self.0.explain(&format!("ended with {status}"))),
            Err(e) => panic!("{}", self.0.explain(&e)),
        }
    }

    /// `kill -9` of the whole namespace (the child leads its process group).
    fn kill(mut self) {
        self.0.kill();
    }
}

fn spawn(root: &TestRoot, role: &str) -> Child {
    Child::build(&child_entry(), role, root).spawn()
}

/// Asks the exporter for its deferred frees until they are `want`, failing after 10 s.
fn wait_for_count(exporter: &mut Child, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        exporter.send("count");
        let got = exporter.expect("count");
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "deferred frees stayed at {got}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The runtime directory's entries but liveness beacons, sorted.
fn run_dir_state(root: &TestRoot) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.run_dir())
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !devipc_shm::liveness::is_beacon_name(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn hip_an_importer_in_another_pid_namespace_keeps_the_free_deferred_until_it_dies() {
    if let Some(why) = unshare_refused() {
        devipc_testkit::skip("pid_namespace::hip_...", &why);
        return;
    }
    let root = TestRoot::new("pidns-hip");
    let mut exporter = spawn(&root, "exporter");
    exporter.send("hip");
    let token = exporter.expect("token");
    let mut importer = Contained::spawn("importer", &root);
    importer.send("hip");
    importer.send(&token);
    assert_eq!(importer.expect("imported"), "ok");
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");

    exporter.send("free");
    assert_eq!(exporter.expect("freed"), "1", "deferred while imported");
    // Past the reaper's thorough pass (after 200 ms without releases), which checks the
    // holders' liveness: the importer is alive, in its own namespace.
    std::thread::sleep(Duration::from_millis(800));
    exporter.send("count");
    assert_eq!(
        exporter.expect("count"),
        "1",
        "the exporter freed under a live importer of another pid namespace"
    );
    importer.send("read");
    assert_eq!(
        importer.expect("read"),
        "ok",
        "the importer's view still works"
    );
    assert_eq!(root.recorded_violations(), Vec::<String>::new());

    // Killed: its beacon's lock is gone, so the exporter's next thorough pass frees.
    importer.kill();
    wait_for_count(&mut exporter, "0");
    exporter.send("exit");
    exporter.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn ascend_an_import_from_another_pid_namespace_keeps_the_export_record() {
    if let Some(why) = unshare_refused() {
        devipc_testkit::skip("pid_namespace::ascend_...", &why);
        return;
    }
    let root = TestRoot::new("pidns-ascend");
    let mut exporter = spawn(&root, "exporter");
    exporter.send("ascend");
    let token = exporter.expect("token");
    let records = || {
        run_dir_state(&root)
            .into_iter()
            .filter(|n| n.starts_with("ascend-vmm-"))
            .count()
    };
    assert_eq!(records(), 1, "the exporter's export record");
    let mut importer = Contained::spawn("importer", &root);
    importer.send("ascend");
    importer.send(&token);
    assert_eq!(
        importer.expect("imported"),
        "ok",
        "an exporter of another pid namespace is alive"
    );
    assert_eq!(
        records(),
        1,
        "the importer left the exporter's record in place"
    );
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");
    exporter.send("free");
    exporter.expect("freed");
    importer.send("read");
    assert_eq!(
        importer.expect("read"),
        "ok",
        "the importer's view outlives the free"
    );
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    importer.finish();
    exporter.send("exit");
    exporter.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn a_process_in_another_pid_namespace_removes_none_of_the_hosts_state() {
    if let Some(why) = unshare_refused() {
        devipc_testkit::skip("pid_namespace::a_process_...", &why);
        return;
    }
    let root = TestRoot::new("pidns-bystander");
    let mut host = spawn(&root, "host-state");
    let token = host.expect("token");
    let before = run_dir_state(&root);
    for prefix in ["leases-", "word-", "ascend-vmm-"] {
        assert!(
            before.iter().any(|n| n.starts_with(prefix)),
            "the host keeps a {prefix}* file: {before:?}"
        );
    }
    let mut bystander = Contained::spawn("bystander", &root);
    bystander.expect("done");
    bystander.wait_success();
    let after = run_dir_state(&root);
    let gone: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
    assert!(
        gone.is_empty(),
        "a process of another pid namespace removed the host's {gone:?}"
    );
    // And the host's export still imports.
    let mut importer = spawn(&root, "importer");
    importer.send("hip");
    importer.send(&token);
    assert_eq!(importer.expect("imported"), "ok");
    importer.send("exit");
    importer.wait_success();
    host.send("exit");
    host.wait_success();
    root.assert_emulator_clean();
}
