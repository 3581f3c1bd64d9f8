//! devipc's own lifetime protections, proven on the strict emulator with real processes:
//! an exporter that lets go of memory while a peer still has it imported does not pull
//! it from under the peer, and the emulator (which records a violation wherever the
//! vendor's release point passes under an importer) sees no violation. Each scenario runs
//! again with that protection switched off (`DEVIPC_BREAK_PROTECTION`, feature
//! `fault-injection`): then the violation is recorded and the peer's read fails, which
//! shows the protection is what keeps the scenario safe.
//!
//! - HIP: dropping an exported `SharedBuffer` defers `hipFree` until importers closed
//!   (`hip-deferred-free`);
//! - Ascend IPC keys: `close_external` is refused while an importer maps the block
//!   (`ascend-key-close-order`).

use std::ffi::c_void;

use devipc::raw::{Backend, DeviceIpc};
use devipc::{BackendKind, DeviceId, DevicePtr, Error, ExportOptions, MemToken, Runtime};
use devipc_core::protection::{BREAK_ENV, Protection};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

const KIND_ENV: &str = "LIFETIME_TEST_KIND";
const LEN: usize = 64 << 10;
/// Ascend key exports cover whole 2 MiB huge pages (api-facts C.4 FAQ).
const ASCEND_BLOCK: usize = 2 << 20;

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
            "external-exporter" => external_exporter(rt, parent),
            "importer" => importer(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 7 + 3) as u8).collect()
}

/// Allocates with devipc, exports to any process, and drops the buffer on `free`.
fn exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let buf = rt.allocate(DeviceId(0), LEN).map_err(|e| e.to_string())?;
    buf.write(0, &pattern()).map_err(|e| e.to_string())?;
    let token = buf
        .export(ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("free")?;
    drop(buf);
    parent.say("freed", "");
    parent.hear_exactly("exit")
}

/// Exports framework memory (`aclrtMalloc`) by IPC key; `close` ends the export with
/// `close_external` (reporting a refusal), `free` frees the block, `drop-runtime` drops
/// the runtime with the export still open (the framework quitting devipc first).
fn external_exporter(rt: Runtime, parent: &Parent) -> Result<(), String> {
    let Backend::Ascend(b) = rt.backend() else {
        return Err("external-exporter runs on ascend".into());
    };
    let api = b.api().clone();
    let mut rt = Some(rt);
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: device 0 exists on the emulator; `p` is a valid out-pointer and the policy
    // a documented enumerator.
    let code = unsafe {
        match (api.aclrtSetDevice)(0) {
            0 => (api.aclrtMalloc)(
                &mut p,
                ASCEND_BLOCK,
                devipc_ascend_sys::types::ACL_MEM_MALLOC_HUGE_ONLY,
            ),
            c => c,
        }
    };
    if code != 0 {
        return Err(format!("aclrtMalloc failed with {code}"));
    }
    let ptr = DevicePtr(p as usize as u64);
    let live = rt.as_ref().ok_or("no runtime")?;
    let token = live
        .export_external(DeviceId(0), ptr, ASCEND_BLOCK, ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    // SAFETY: `ptr` is the live aclrtMalloc block above, larger than the pattern.
    unsafe { live.backend().write(ptr, &pattern()) }.map_err(|e| e.to_string())?;
    parent.say("token", &token.to_text());
    loop {
        match parent.hear().as_str() {
            "close" => match rt
                .as_ref()
                .ok_or("no runtime")?
                .close_external(DeviceId(0), ptr)
            {
                Ok(()) => parent.say("closed", "ok"),
                Err(e) => parent.say("closed", &format!("{} {e}", e.kind())),
            },
            "drop-runtime" => {
                rt = None;
                parent.say("dropped", "");
            }
            "free" => {
                // SAFETY: `p` came from aclrtMalloc above and is freed once.
                let code = unsafe { (api.aclrtFree)(p) };
                parent.say("freed", &code.to_string());
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// Imports the token it hears on device 0 (view 0); `import <device>` imports it again
/// on another device, `import-second-runtime <device>` through a second `Runtime` of this
/// process (the next view). `read [i]` reads view `i` (`ok`, or the error's kind and
/// vendor name); `close [i]` drops view `i`.
fn importer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let view = rt.import(&token, DeviceId(0)).map_err(|e| e.to_string())?;
    let mut views = vec![Some(view)];
    let mut second: Option<Runtime> = None;
    loop {
        let line = parent.hear();
        let (command, arg) = line.split_once(' ').unwrap_or((line.as_str(), "0"));
        let index: usize = arg
            .parse()
            .map_err(|_| format!("bad argument in {line:?}"))?;
        match command {
            "import" => {
                let view = rt
                    .import(&token, DeviceId(index as u32))
                    .map_err(|e| e.to_string())?;
                views.push(Some(view));
                parent.say("imported", &(views.len() - 1).to_string());
            }
            "import-second-runtime" => {
                if second.is_none() {
                    second = Some(Runtime::emulated(rt.info().kind).map_err(|e| e.to_string())?);
                }
                let view = second
                    .as_ref()
                    .ok_or("no second runtime")?
                    .import(&token, DeviceId(index as u32))
                    .map_err(|e| e.to_string())?;
                views.push(Some(view));
                parent.say("imported", &(views.len() - 1).to_string());
            }
            "read" => {
                let mut got = vec![0u8; 4096];
                let view = views
                    .get(index)
                    .and_then(Option::as_ref)
                    .ok_or("no such view")?;
                let outcome = match view.read(0, &mut got) {
                    Ok(()) if got == pattern() => "ok".to_owned(),
                    Ok(()) => "wrong-bytes".to_owned(),
                    Err(e) => format!("{} {}", e.kind(), e.vendor_name().unwrap_or("-")),
                };
                parent.say("read", &outcome);
            }
            "close" => {
                views.get_mut(index).ok_or("no such view")?.take();
                parent.say("closed", "");
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

fn spawn(root: &TestRoot, role: &str, kind: BackendKind, broken: Option<Protection>) -> Child {
    let mut b = Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .env_remove(BREAK_ENV);
    if let Some(p) = broken {
        b = b.env(BREAK_ENV, p.name());
    }
    b.spawn()
}

/// The rule ids of the recorded violations.
fn violated_rules(root: &TestRoot) -> Vec<String> {
    root.recorded_violations()
        .iter()
        .filter_map(|l| l.strip_prefix("rule="))
        .map(|r| r.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

/// HIP: the exporter drops an exported buffer while a peer has it imported.
fn hip_free_under_an_importer(broken: Option<Protection>) -> (String, Vec<String>) {
    let root = TestRoot::new("lifetime-hip");
    let mut exporter = spawn(&root, "exporter", BackendKind::Hip, broken);
    let mut importer = spawn(&root, "importer", BackendKind::Hip, None);
    importer.send(&exporter.expect("token"));
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");
    exporter.send("free");
    exporter.expect("freed");
    importer.send("read");
    let read = importer.expect("read");
    let violations = violated_rules(&root);
    importer.send("close");
    importer.expect("closed");
    importer.send("exit");
    importer.wait_success();
    exporter.send("exit");
    exporter.wait_success();
    root.clear_violations();
    root.assert_emulator_clean();
    (read, violations)
}

#[test]
fn hip_free_waits_for_importers_and_without_the_lease_is_a_violation() {
    let (read, violations) = hip_free_under_an_importer(None);
    assert_eq!(read, "ok", "the importer still reads the exporter's bytes");
    assert_eq!(violations, Vec::<String>::new());

    let (read, violations) = hip_free_under_an_importer(Some(Protection::HipDeferredFree));
    assert_eq!(violations, ["hip.mem.free-while-opened"]);
    assert_eq!(read, "vendor hipErrorIllegalAddress");
}

/// Ascend: the exporter ends its key export while a peer still maps the block.
fn ascend_close_under_an_importer(broken: Option<Protection>) -> (String, String, Vec<String>) {
    let root = TestRoot::new("lifetime-ascend");
    let mut exporter = spawn(&root, "external-exporter", BackendKind::Ascend, broken);
    let mut importer = spawn(&root, "importer", BackendKind::Ascend, None);
    importer.send(&exporter.expect("token"));
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");
    exporter.send("close");
    let closed = exporter.expect("closed");
    importer.send("read");
    let read = importer.expect("read");
    let violations = violated_rules(&root);
    importer.send("close");
    importer.expect("closed");
    if closed != "ok" {
        // The documented order: now that the importer closed, the exporter may.
        exporter.send("close");
        assert_eq!(exporter.expect("closed"), "ok");
    }
    exporter.send("free");
    assert_eq!(exporter.expect("freed"), "0");
    for child in [importer, exporter] {
        let mut child = child;
        child.send("exit");
        child.wait_success();
    }
    root.clear_violations();
    root.assert_emulator_clean();
    (closed, read, violations)
}

#[test]
fn ascend_key_close_waits_for_importers_and_without_the_check_is_a_violation() {
    let (closed, read, violations) = ascend_close_under_an_importer(None);
    assert!(
        closed.starts_with("invalid_argument ") && closed.contains("importers still have"),
        "{closed}"
    );
    assert_eq!(read, "ok");
    assert_eq!(violations, Vec::<String>::new());

    let (closed, read, violations) =
        ascend_close_under_an_importer(Some(Protection::AscendKeyCloseOrder));
    assert_eq!(closed, "ok");
    assert_eq!(violations, ["ascend.ipc-key.importers-close-first"]);
    assert_eq!(read, "vendor ACL_ERROR_RT_SYS_DMA");
}

/// Ascend: a runtime dropped while an importer still maps its key export leaves the key
/// open (destroying it would pull the memory from under the importer); the importer keeps
/// reading and nothing is recorded. The key dies with the process.
#[test]
fn ascend_runtime_drop_leaves_an_imported_key_open() {
    let root = TestRoot::new("lifetime-ascend-drop");
    let mut exporter = spawn(&root, "external-exporter", BackendKind::Ascend, None);
    let mut importer = spawn(&root, "importer", BackendKind::Ascend, None);
    importer.send(&exporter.expect("token"));
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");
    exporter.send("drop-runtime");
    exporter.expect("dropped");
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok", "the key stayed open");
    assert_eq!(violated_rules(&root), Vec::<String>::new());
    importer.send("close");
    importer.expect("closed");
    for mut child in [importer, exporter] {
        child.send("exit");
        child.wait_success();
    }
    // The exporter's process is gone: the driver (here the emulator's gc) reclaims its
    // block and key.
    reclaim(&root);
    root.assert_emulator_clean();
}

/// Ascend: one key imported on two devices in one process is two vendor imports, and
/// `aclrtIpcMemClose` closes the oldest; dropping the newer view must not unmap the older.
#[test]
fn ascend_key_imported_on_two_devices_closes_in_the_vendors_order() {
    let root = TestRoot::new("lifetime-ascend-two-devices");
    let mut exporter = spawn(&root, "external-exporter", BackendKind::Ascend, None);
    let mut importer = spawn(&root, "importer", BackendKind::Ascend, None);
    importer.send(&exporter.expect("token"));
    importer.send("import 1");
    assert_eq!(importer.expect("imported"), "1");
    for view in ["read 0", "read 1"] {
        importer.send(view);
        assert_eq!(importer.expect("read"), "ok", "{view}");
    }
    // Drop the newer import: the older one keeps working.
    importer.send("close 1");
    importer.expect("closed");
    importer.send("read 0");
    assert_eq!(importer.expect("read"), "ok");
    // The exporter may not close while the older import is open...
    exporter.send("close");
    assert!(exporter.expect("closed").starts_with("invalid_argument "));
    importer.send("close 0");
    importer.expect("closed");
    // ...and may once both are closed.
    exporter.send("close");
    assert_eq!(exporter.expect("closed"), "ok");
    exporter.send("free");
    assert_eq!(exporter.expect("freed"), "0");
    for mut child in [importer, exporter] {
        child.send("exit");
        child.wait_success();
    }
    root.assert_emulator_clean();
}

/// Ascend: two `Runtime`s of one process importing one key are two vendor imports in one
/// process-wide list; dropping the second runtime's view must not close the first's.
#[test]
fn ascend_key_imported_by_two_runtimes_closes_in_the_vendors_order() {
    let root = TestRoot::new("lifetime-ascend-two-runtimes");
    let mut exporter = spawn(&root, "external-exporter", BackendKind::Ascend, None);
    let mut importer = spawn(&root, "importer", BackendKind::Ascend, None);
    importer.send(&exporter.expect("token"));
    importer.send("import-second-runtime 0");
    assert_eq!(importer.expect("imported"), "1");
    importer.send("close 1");
    importer.expect("closed");
    importer.send("read 0");
    assert_eq!(
        importer.expect("read"),
        "ok",
        "the first runtime's view survives"
    );
    importer.send("close 0");
    importer.expect("closed");
    exporter.send("close");
    assert_eq!(exporter.expect("closed"), "ok");
    exporter.send("free");
    assert_eq!(exporter.expect("freed"), "0");
    for mut child in [importer, exporter] {
        child.send("exit");
        child.wait_success();
    }
    root.assert_emulator_clean();
}

/// Runs the emulator's gc on the root's state directory (what the driver does for dead
/// processes).
fn reclaim(root: &TestRoot) {
    let state = devipc_emulator::State::open(devipc_emulator::Config::for_dir(root.emu_dir()))
        .expect("open the state directory");
    state.gc().expect("gc");
}
