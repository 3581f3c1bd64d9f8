//! The lifetime promise extended to transfers, with real processes on both emulated
//! backends: an exporter's free while a peer's copy from the memory is in flight, the
//! importer's close with that copy in flight, a request dropped unfinished, and `kill -9`
//! of either side with a copy in flight. The copier holds its stream (an emulator hook:
//! as if a long kernel ran before the copy), so the copy is provably pending when the
//! other steps happen. The strict emulator records a violation wherever memory would be
//! released under a copy; every scenario ends with none and a clean state directory.

use std::time::{Duration, Instant};

use devipc::raw::DeviceIpc;
use devipc::{
    BackendKind, DeviceId, Error, ExportOptions, ImportedBuffer, MemToken, Request, Runtime, Stream,
};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

const KIND_ENV: &str = "DATA_PLANE_TEST_KIND";
const LEN: usize = 1 << 20;

fn pattern() -> Vec<u8> {
    (0..LEN as u32).map(|i| (i * 13 + 5) as u8).collect()
}

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let kind: BackendKind = std::env::var(KIND_ENV)
            .map_err(|e| e.to_string())?
            .parse()
            .map_err(|e: Error| e.to_string())?;
        let rt = Runtime::emulated(kind).map_err(|e| e.to_string())?;
        match role {
            "exporter" => exporter(&rt, parent),
            "copier" => copier(&rt, parent),
            "key-exporter" => key_exporter(&rt, parent),
            "cross-device" => cross_device(&rt, parent),
            "batcher" => batcher(&rt, parent),
            "unprotected" => unprotected(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Allocates, writes the pattern, exports to any process; `free` drops the buffer.
fn exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let buf = rt.allocate(0, LEN).map_err(text)?;
    buf.write(0, &pattern()).map_err(text)?;
    let token = buf
        .export_range(0..LEN, ExportOptions::any_process())
        .map_err(text)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("free")?;
    drop(buf);
    parent.say("freed", "");
    parent.hear_exactly("exit")
}

/// Ascend: exports framework memory (`aclrtMalloc`, 2 MiB) on device 0 by IPC key.
fn key_exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let ptr = devipc::testing::framework_malloc(rt, DeviceId(0), 2 << 20).map_err(text)?;
    // SAFETY: `ptr` is the live 2 MiB block just allocated, larger than the pattern.
    unsafe { rt.backend().write(ptr, &pattern()) }.map_err(text)?;
    let token = rt
        .export_external(0, ptr, 2 << 20, ExportOptions::any_process())
        .map_err(text)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("exit")?;
    rt.close_external(0, ptr).map_err(text)?;
    // SAFETY: the block came from framework_malloc above, its export is closed, and it
    // is freed once.
    unsafe { devipc::testing::framework_free(rt, DeviceId(0), ptr) }.map_err(text)
}

/// Ascend: imports an IPC key onto device 1 (not the exporter's device 0), through a
/// second runtime of the process, and reports
/// what each kind of copy of it gives: the vendor allows only asynchronous
/// device-to-device copies on the device it was imported on.
fn cross_device(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    // Imported through a second runtime of the process, copied on `rt`'s streams: the
    // vendor's rule follows the memory, whichever runtime mapped it.
    let importer = Runtime::emulated(BackendKind::Ascend).map_err(text)?;
    let import = importer.import(&token, DeviceId(1)).map_err(text)?;
    let span = import.span(0..LEN).map_err(text)?;
    let on1 = rt.create_stream(1).map_err(text)?;
    let on0 = rt.create_stream(0).map_err(text)?;
    let local1 = rt.allocate(1, LEN).map_err(text)?;
    let local0 = rt.allocate(0, LEN).map_err(text)?;
    let outcome = |r: devipc::Result<Request>| match r {
        Ok(mut request) => match request.wait(Some(Duration::from_secs(20))) {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("late {}", e.kind()),
        },
        Err(Error::Copy { index, source, .. }) => format!("copy {index} {}", source.kind()),
        Err(e) => format!("error {}", e.kind()),
    };
    parent.say("read", &outcome(on1.read(&span)));
    parent.say("write", &outcome(on1.write(&span, vec![0; LEN])));
    parent.say(
        "d2d-other-stream",
        &outcome(on0.copy(&local0.span(0..LEN).map_err(text)?, &span)),
    );
    parent.say(
        "d2d",
        &outcome(on1.copy(&local1.span(0..LEN).map_err(text)?, &span)),
    );
    let mut got = vec![0u8; LEN];
    local1.read(0, &mut got).map_err(text)?;
    parent.say("bytes", if got == pattern() { "ok" } else { "wrong" });
    parent.hear_exactly("exit")
}

/// A batch of 64 copies (with a zero-length one) through the facade, on whatever HIP
/// version the emulator answers as (`hipMemcpyBatchAsync` exists from 7.1).
fn batcher(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let src = rt.allocate(0, LEN).map_err(text)?;
    let dst = rt.allocate(1, LEN).map_err(text)?;
    src.write(0, &pattern()).map_err(text)?;
    let stream = rt.create_stream(1).map_err(text)?;
    let part = LEN / 64;
    let mut pairs = Vec::new();
    for i in 0..64 {
        let at = i * part;
        pairs.push((
            dst.span(LEN - at - part..LEN - at).map_err(text)?,
            src.span(at..at + part).map_err(text)?,
        ));
    }
    pairs.push((dst.span(0..0).map_err(text)?, src.span(0..0).map_err(text)?));
    let mut request = stream.copy_batch(&pairs).map_err(text)?;
    request.wait(Some(Duration::from_secs(20))).map_err(text)?;
    let mut got = vec![0u8; LEN];
    dst.read(0, &mut got).map_err(text)?;
    let want = pattern();
    let exact = (0..64).all(|i| {
        let at = i * part;
        got[LEN - at - part..LEN - at] == want[at..at + part]
    });
    let version = rt.info().runtime_version.map(|v| v.to_string());
    parent.say("version", version.as_deref().unwrap_or("unknown"));
    parent.say("bytes", if exact { "ok" } else { "wrong" });
    parent.hear_exactly("exit")
}

/// With the request's hold on its memory switched off (`request-keeps-memory`, the
/// parent sets it): a source freed while its copy is queued makes the copy fail, and the
/// request reports it as its own typed error.
fn unprotected(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let src = rt.allocate(0, LEN).map_err(text)?;
    let dst = rt.allocate(0, LEN).map_err(text)?;
    src.write(0, &pattern()).map_err(text)?;
    let stream = rt.create_stream(0).map_err(text)?;
    hold(&stream, true)?;
    let mut request = stream
        .copy(
            &dst.span(0..LEN).map_err(text)?,
            &src.span(0..LEN).map_err(text)?,
        )
        .map_err(text)?;
    drop(src);
    hold(&stream, false)?;
    let outcome = match request.wait(Some(Duration::from_secs(20))) {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("{} {}", e.kind(), e.vendor_name().unwrap_or("-")),
    };
    parent.say("waited", &outcome);
    parent.hear_exactly("exit")
}

/// Holds (or releases) the stream: the emulator's hook, through `devipc::testing`.
fn hold(stream: &Stream, on: bool) -> Result<(), String> {
    if on {
        devipc::testing::hold_stream(stream)
    } else {
        devipc::testing::release_stream(stream)
    }
    .map_err(text)
}

/// Imports the token it hears, then follows commands: `hold` / `release` its stream,
/// `copy` the import into a local buffer (a request), `close-import`, `drop-request`
/// (answers how long the drop took, in microseconds), `wait`, `check` (the local
/// buffer's bytes), `live` (live imports of this process).
fn copier(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let mut import: Option<ImportedBuffer> = Some(rt.import(&token, DeviceId(0)).map_err(text)?);
    let local = rt.allocate(0, LEN).map_err(text)?;
    let stream = rt.create_stream(0).map_err(text)?;
    let mut request: Option<Request> = None;
    loop {
        match parent.hear().as_str() {
            "hold" => {
                hold(&stream, true)?;
                parent.say("held", "");
            }
            "release" => {
                hold(&stream, false)?;
                parent.say("released", "");
            }
            "copy" => {
                let src = import
                    .as_ref()
                    .ok_or("no import")?
                    .span(0..LEN)
                    .map_err(text)?;
                let dst = local.span(0..LEN).map_err(text)?;
                request = Some(stream.copy(&dst, &src).map_err(text)?);
                parent.say("copied", "");
            }
            "close-import" => {
                import = None;
                parent.say("closed", &rt.live_imports().to_string());
            }
            "drop-request" => {
                let started = Instant::now();
                request = None;
                parent.say("dropped", &started.elapsed().as_micros().to_string());
            }
            "wait" => {
                let outcome = match request.as_mut() {
                    Some(r) => r.wait(Some(Duration::from_secs(20))).map_err(text).err(),
                    None => Some("no request".into()),
                };
                parent.say("waited", outcome.as_deref().unwrap_or("ok"));
            }
            "check" => {
                let mut got = vec![0u8; LEN];
                local.read(0, &mut got).map_err(text)?;
                parent.say("bytes", if got == pattern() { "ok" } else { "wrong" });
            }
            "live" => parent.say("live", &rt.live_imports().to_string()),
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

fn spawn(root: &TestRoot, role: &str, kind: BackendKind) -> Child {
    Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .spawn()
}

fn violations(root: &TestRoot) -> Vec<String> {
    root.recorded_violations()
}

/// Asks `live` until the copier has no import left (the drainer finished the request).
fn until_no_import(copier: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        copier.send("live");
        if copier.expect("live") == "0" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the dropped request never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reclaim(root: &TestRoot) {
    let state = devipc_emulator::State::open(devipc_emulator::Config::for_dir(root.emu_dir()))
        .expect("open the state directory");
    state.gc().expect("gc");
}

fn start(root: &TestRoot, kind: BackendKind) -> (Child, Child) {
    let mut exporter = spawn(root, "exporter", kind);
    let mut copier = spawn(root, "copier", kind);
    copier.send(&exporter.expect("token"));
    copier.send("hold");
    copier.expect("held");
    copier.send("copy");
    copier.expect("copied");
    (exporter, copier)
}

fn finish(root: &TestRoot, children: Vec<Child>) {
    for mut child in children {
        child.send("exit");
        child.wait_success();
    }
    assert_eq!(violations(root), Vec::<String>::new());
    root.assert_emulator_clean();
}

#[test]
fn the_exporters_free_and_the_importers_close_wait_for_a_copy_in_flight() {
    for kind in [BackendKind::Hip, BackendKind::Ascend] {
        let root = TestRoot::new(&format!("data-plane-free-{kind}"));
        let (mut exporter, mut copier) = start(&root, kind);
        exporter.send("free");
        exporter.expect("freed");
        copier.send("close-import");
        assert_eq!(
            copier.expect("closed"),
            "1",
            "{kind}: the request keeps the import"
        );
        copier.send("release");
        copier.expect("released");
        copier.send("wait");
        assert_eq!(copier.expect("waited"), "ok", "{kind}");
        copier.send("check");
        assert_eq!(
            copier.expect("bytes"),
            "ok",
            "{kind}: the copy read the exporter's bytes"
        );
        copier.send("live");
        assert_eq!(
            copier.expect("live"),
            "0",
            "{kind}: closed once the copy completed"
        );
        finish(&root, vec![copier, exporter]);
    }
}

#[test]
fn dropping_an_unfinished_request_returns_at_once_and_drains() {
    for kind in [BackendKind::Hip, BackendKind::Ascend] {
        let root = TestRoot::new(&format!("data-plane-drop-{kind}"));
        let (mut exporter, mut copier) = start(&root, kind);
        copier.send("close-import");
        assert_eq!(copier.expect("closed"), "1", "{kind}");
        copier.send("drop-request");
        let micros: u64 = copier.expect("dropped").parse().unwrap();
        assert!(micros < 100_000, "{kind}: dropping took {micros} us");
        exporter.send("free");
        exporter.expect("freed");
        copier.send("live");
        assert_eq!(
            copier.expect("live"),
            "1",
            "{kind}: still held by the pending copy"
        );
        copier.send("release");
        copier.expect("released");
        until_no_import(&mut copier);
        copier.send("check");
        assert_eq!(copier.expect("bytes"), "ok", "{kind}");
        finish(&root, vec![copier, exporter]);
    }
}

#[test]
fn kill_9_of_either_side_with_a_copy_in_flight_is_reclaimed() {
    for kind in [BackendKind::Hip, BackendKind::Ascend] {
        // The copier dies with its copy queued: the exporter frees, the emulator's gc
        // reclaims the dead importer's holds.
        let root = TestRoot::new(&format!("data-plane-kill-copier-{kind}"));
        let (mut exporter, copier) = start(&root, kind);
        copier.kill();
        exporter.send("free");
        exporter.expect("freed");
        exporter.send("exit");
        exporter.wait_success();
        reclaim(&root);
        assert_eq!(violations(&root), Vec::<String>::new(), "{kind}");
        root.assert_emulator_clean();

        // The exporter dies: the import keeps the memory, the copy completes with its
        // bytes, and the gc reclaims what the exporter left once the copier closed.
        let root = TestRoot::new(&format!("data-plane-kill-exporter-{kind}"));
        let (exporter, mut copier) = start(&root, kind);
        exporter.kill();
        copier.send("release");
        copier.expect("released");
        copier.send("wait");
        assert_eq!(copier.expect("waited"), "ok", "{kind}");
        copier.send("check");
        assert_eq!(copier.expect("bytes"), "ok", "{kind}");
        copier.send("close-import");
        copier.expect("closed");
        copier.send("exit");
        copier.wait_success();
        // A killed HIP exporter's lease table is swept by the next process that opens
        // the backend (hip_lifetime); the emulator's objects by the driver (the gc).
        let mut next = spawn(&root, "exporter", kind);
        next.expect("token");
        next.send("free");
        next.expect("freed");
        next.send("exit");
        next.wait_success();
        reclaim(&root);
        assert_eq!(violations(&root), Vec::<String>::new(), "{kind}");
        root.assert_emulator_clean();
    }
}

#[test]
fn ascend_cross_device_key_imports_take_only_device_to_device_copies_on_their_device() {
    let root = TestRoot::new("data-plane-ascend-cross-device");
    let mut exporter = spawn(&root, "key-exporter", BackendKind::Ascend);
    let mut copier = spawn(&root, "cross-device", BackendKind::Ascend);
    copier.send(&exporter.expect("token"));
    assert_eq!(copier.expect("read"), "copy 0 unsupported");
    assert_eq!(copier.expect("write"), "copy 0 unsupported");
    assert_eq!(copier.expect("d2d-other-stream"), "copy 0 unsupported");
    assert_eq!(copier.expect("d2d"), "ok");
    assert_eq!(copier.expect("bytes"), "ok");
    finish(&root, vec![copier, exporter]);
}

#[test]
fn a_batch_is_byte_exact_with_and_without_the_vendors_batch_call() {
    for version in ["6.2", "7.1"] {
        let root = TestRoot::new(&format!("data-plane-batch-{version}"));
        let mut batcher = Child::build(&child_entry(), "batcher", &root)
            .env(KIND_ENV, BackendKind::Hip.name())
            .env("DEVIPC_EMU_HIP_VERSION", version)
            .spawn();
        assert!(batcher.expect("version").starts_with(version), "{version}");
        assert_eq!(batcher.expect("bytes"), "ok", "HIP {version}");
        finish(&root, vec![batcher]);
    }
}

/// A copy that fails while it runs is its request's typed error (Ascend: the event's
/// synchronisation reports the stream's failed work, `ascend.event.sync-reports-stream-failure`).
/// Provoked by switching the request's hold off and freeing the source under the copy; the
/// emulator records the violation, which the test clears.
#[test]
fn a_copy_that_fails_while_it_runs_is_its_requests_error() {
    let root = TestRoot::new("data-plane-failed-copy");
    let mut child = Child::build(&child_entry(), "unprotected", &root)
        .env(KIND_ENV, BackendKind::Ascend.name())
        .env(
            devipc_core::protection::BREAK_ENV,
            devipc_core::protection::Protection::RequestKeepsMemory.name(),
        )
        .spawn();
    let waited = child.expect("waited");
    assert!(waited.starts_with("vendor ACL_ERROR"), "{waited}");
    child.send("exit");
    child.wait_success();
    root.clear_violations();
    root.assert_emulator_clean();
}
