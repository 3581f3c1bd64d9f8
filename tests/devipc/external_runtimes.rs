//! Audit N3: `export_external` is the process's, not one `Runtime`'s. A framework block
//! allocated through one runtime and exported through a second of the same process, while
//! a child process maps it: `framework_free` (and `close_external`) through the first is
//! refused with a typed error and the emulator records no free under the importer; once
//! the importer closed (or was killed), the free through the first runtime goes through
//! and ends the second runtime's export. On both emulated backends, with real processes.

use devipc::{BackendKind, DeviceId, Error, ExportOptions, MemToken, Runtime};
use devipc_testkit::{Child, Parent, RawIo, TestRoot, child_entry};

const KIND_ENV: &str = "EXTERNAL_RUNTIMES_KIND";
const BLOCK: usize = 1 << 20;
const BYTES: &[u8; 16] = b"framework bytes!";

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let kind: BackendKind = std::env::var(KIND_ENV)
            .map_err(|e| e.to_string())?
            .parse()
            .map_err(|e: Error| e.to_string())?;
        match role {
            "owner" => owner(kind, parent),
            "importer" => importer(kind, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn s(e: Error) -> String {
    e.to_string()
}

/// Two runtimes: the first allocates the block (the framework's allocator), the second
/// exports it. Says the token; after `held`, tries the free and the close through the
/// first runtime (both refused) and says `refused`; after `free`, frees through the first
/// runtime, checks the second's export ended, and says `freed`.
fn owner(kind: BackendKind, parent: &Parent) -> Result<(), String> {
    let first = Runtime::emulated(kind).map_err(s)?;
    let second = Runtime::emulated(kind).map_err(s)?;
    let p = devipc::testing::framework_malloc(&first, DeviceId(0), BLOCK).map_err(s)?;
    first.backend().write_raw(p, BYTES).map_err(s)?;
    let token = second
        .export_external(DeviceId(0), p, BLOCK, ExportOptions::any_process())
        .map_err(s)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("held")?;
    // SAFETY: the block of `framework_malloc(&first, ..)`, not freed yet; no view of it here.
    match unsafe { devipc::testing::framework_free(&first, DeviceId(0), p) } {
        Err(Error::InvalidArgument { .. }) => {}
        other => {
            return Err(format!(
                "framework_free through another runtime than the exporter, under an \
                 importer: {other:?}"
            ));
        }
    }
    match first.close_external(DeviceId(0), p) {
        Err(Error::InvalidArgument { .. }) => {}
        other => {
            return Err(format!(
                "close_external through the other runtime: {other:?}"
            ));
        }
    }
    // The refused free left the block and its export alone.
    let mut got = [0u8; 16];
    first.backend().read_raw(p, &mut got).map_err(s)?;
    if &got != BYTES {
        return Err("the block changed under the refused free".into());
    }
    parent.say("refused", "");
    parent.hear_exactly("free")?;
    // SAFETY: as above; the importer is gone.
    unsafe { devipc::testing::framework_free(&first, DeviceId(0), p) }.map_err(s)?;
    // The export ended with it, for the exporting runtime too.
    match second.close_external(DeviceId(0), p) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("the export outlived the free: {other:?}")),
    }
    parent.say("freed", "");
    parent.hear_exactly("exit")
}

/// Imports the token, checks its bytes and says `held`; closes on `close`.
fn importer(kind: BackendKind, parent: &Parent) -> Result<(), String> {
    let rt = Runtime::emulated(kind).map_err(s)?;
    let token: MemToken = parent.hear().parse().map_err(s)?;
    let view = rt.import(&token, DeviceId(0)).map_err(s)?;
    let mut got = [0u8; 16];
    view.read(0, &mut got).map_err(s)?;
    if &got != BYTES {
        return Err(format!("imported {got:?}"));
    }
    parent.say("held", "");
    parent.hear_exactly("close")?;
    // Still the block's bytes: nothing freed it meanwhile.
    view.read(0, &mut got).map_err(s)?;
    if &got != BYTES {
        return Err("the block was freed under the import".into());
    }
    drop(view);
    parent.say("closed", "");
    parent.hear_exactly("exit")
}

fn spawn(root: &TestRoot, role: &str, kind: BackendKind) -> Child {
    Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .spawn()
}

/// The scenario; `kill`: the importer is killed instead of closing.
fn free_through_another_runtime(kind: BackendKind, kill: bool) {
    let root = TestRoot::new(&format!("external-runtimes-{kind}-{kill}"));
    let mut owner = spawn(&root, "owner", kind);
    let mut importer = spawn(&root, "importer", kind);
    importer.send(&owner.expect("token"));
    importer.expect("held");
    owner.send("held");
    owner.expect("refused");
    assert_eq!(
        root.recorded_violations(),
        Vec::<String>::new(),
        "a free under the importer"
    );
    if kill {
        importer.kill();
    } else {
        importer.send("close");
        importer.expect("closed");
        importer.send("exit");
        importer.wait_success();
    }
    owner.send("free");
    owner.expect("freed");
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    owner.send("exit");
    owner.wait_success();
    if kill {
        // The killed importer's objects: the driver (here the emulator's gc) reclaims them.
        let state = devipc_emulator::State::open(devipc_emulator::Config::for_dir(root.emu_dir()))
            .expect("open the state directory");
        state.gc().expect("gc");
    }
    root.assert_emulator_clean();
}

#[test]
fn hip_framework_free_through_another_runtime_waits_for_the_importer() {
    free_through_another_runtime(BackendKind::Hip, false);
}

#[test]
fn ascend_framework_free_through_another_runtime_waits_for_the_importer() {
    free_through_another_runtime(BackendKind::Ascend, false);
}

#[test]
fn hip_framework_free_through_another_runtime_after_the_importer_was_killed() {
    free_through_another_runtime(BackendKind::Hip, true);
}

#[test]
fn ascend_framework_free_through_another_runtime_after_the_importer_was_killed() {
    free_through_another_runtime(BackendKind::Ascend, true);
}
