//! The HIP backend on the emulator, across real processes, in both HIP ABIs (6.x, where
//! `hipIpcMemLazyEnablePeerAccess` is 1, and 5.x, where it is 0): export, import,
//! read/write and close; interior pointers; blocking signal ping-pong; cross-device
//! import; and the error paths, each mapped to its hipError_t or devipc error.
//!
//! Each test runs its roles in child processes (devipc-testkit) with their own emulator
//! state directory, and checks that nothing is left behind.

use crate::support::{backend, e2s, env, num, pattern};
use devipc_testkit::RawIo;
use std::time::Duration;

use devipc_core::token::MemTokenParts;
use devipc_core::{
    BackendKind, DeviceId, DeviceIpc, Error, ExportOptions, HostIdentity, Mechanism, MemToken,
    ProcessId, RawStream, SignalToken, TokenOrigin,
};
use devipc_testkit::{Child, LONG, Parent, TestRoot, child_entry, run_child};

const VERSIONS: [&str; 2] = ["6.2", "5.2"];
const SIZE: usize = 1 << 20;

fn version_env(version: &str) -> Vec<(&'static str, String)> {
    vec![("DEVIPC_EMU_HIP_VERSION", version.to_owned())]
}

// ---------------------------------------------------------------------------------------
// Child roles.

#[test]
fn child_role() {
    run_child(|role, parent| match role {
        "exporter" => exporter(parent),
        "importer" => importer(parent),
        "signal-owner" => signal_owner(parent),
        "signal-peer" => signal_peer(parent),
        "own-import" => own_import(parent),
        "lease-exporter" => lease_exporter(parent),
        "lease-importer" => lease_importer(parent),
        other => Err(format!("unknown role {other}")),
    });
}

/// Allocates, writes pattern 1, exports `OFFSET..OFFSET+LEN` (or, with `EXTERNAL=1`,
/// exports a pointer at OFFSET of a framework block, `hipMalloc` outside devipc's
/// bookkeeping, through `export_external`), then checks the importer's pattern 2 and frees.
fn exporter(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let (offset, len) = (num("OFFSET")?, num("LEN")?);
    let external = env("EXTERNAL").is_ok_and(|v| v == "1");
    // export_external refuses devipc's own allocations: the framework's block is separate.
    let (alloc, base) = if external {
        (None, b.framework_malloc(DeviceId(0), SIZE).map_err(e2s)?)
    } else {
        let alloc = b.allocate(DeviceId(0), SIZE).map_err(e2s)?;
        let base = alloc.ptr;
        (Some(alloc), base)
    };
    b.write_raw(base, &pattern(1, SIZE)).map_err(e2s)?;
    let token = match &alloc {
        None => {
            let ptr = base.offset(offset).map_err(e2s)?;
            b.export_external(DeviceId(0), ptr, len, ExportOptions::default())
                .map_err(e2s)?
        }
        Some(alloc) => b
            .export(alloc, offset..offset + len, ExportOptions::default())
            .map_err(e2s)?,
    };
    if token.offset() != offset as u64
        || token.len() != len as u64
        || token.object_size() != SIZE as u64
    {
        return Err(format!(
            "token range {}+{} of {}",
            token.offset(),
            token.len(),
            token.object_size()
        ));
    }
    b.grant(&token, &[ProcessId(1)]).map_err(e2s)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("check")?;
    let mut got = vec![0u8; 64];
    b.read_raw(base.offset(offset + 100).map_err(e2s)?, &mut got)
        .map_err(e2s)?;
    if got != pattern(2, 64) {
        return Err("the importer's bytes did not arrive".into());
    }
    parent.say("checked", "");
    parent.hear_exactly("free")?;
    match alloc {
        Some(alloc) => b.free(alloc).map_err(e2s)?,
        // SAFETY: `base` came from framework_malloc on device 0 and is freed once, here;
        // the importer closed (framework_free ends the external export first).
        None => unsafe { b.framework_free(DeviceId(0), base) }.map_err(e2s)?,
    }
    parent.say("freed", "");
    Ok(())
}

/// Imports the token on `DEVICE`, checks pattern 1 at the token's range, writes pattern 2
/// at +100, and closes; then checks that a second close is an UnknownHandle.
fn importer(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let device = DeviceId(num("DEVICE")? as u32);
    let mapping = b.import(&token, device).map_err(e2s)?;
    let offset = token.offset() as usize;
    let mut got = vec![0u8; 256];
    b.read_raw(mapping.ptr, &mut got).map_err(e2s)?;
    if got != pattern(1, SIZE)[offset..offset + 256] {
        return Err(format!("imported bytes differ at offset {offset}"));
    }
    b.write_raw(mapping.ptr.offset(100).map_err(e2s)?, &pattern(2, 64))
        .map_err(e2s)?;
    parent.say("wrote", "");
    parent.hear_exactly("close")?;
    b.close(mapping.clone()).map_err(e2s)?;
    match b.close(mapping) {
        Err(Error::UnknownHandle {
            kind: "mapping", ..
        }) => {}
        other => return Err(format!("double close gave {other:?}")),
    }
    parent.say("closed", "");
    Ok(())
}

/// Creates two signals and plays the producer side of a ping-pong.
fn signal_owner(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let rounds = num("ROUNDS")?;
    let ping = b.create_signal(DeviceId(0)).map_err(e2s)?;
    let pong = b.create_signal(DeviceId(0)).map_err(e2s)?;
    for s in [&ping, &pong] {
        let t = b.export_signal(s, ExportOptions::default()).map_err(e2s)?;
        parent.say("signal", &t.to_text());
    }
    parent.hear_exactly("blocked")?;
    for _ in 0..rounds {
        b.notify(&ping, RawStream::DEFAULT).map_err(e2s)?;
        b.wait(&pong, RawStream::DEFAULT, Some(LONG)).map_err(e2s)?;
    }
    parent.say("done", "");
    parent.hear_exactly("destroy")?;
    b.destroy_signal(ping).map_err(e2s)?;
    b.destroy_signal(pong).map_err(e2s)?;
    Ok(())
}

/// Imports the two signals; shows that a wait blocks until notified (a HIP event alone
/// would return at once), then answers every ping with a pong.
fn signal_peer(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let rounds = num("ROUNDS")?;
    let ping: SignalToken = parent.hear().parse().map_err(e2s)?;
    let pong: SignalToken = parent.hear().parse().map_err(e2s)?;
    let ping = b.import_signal(&ping, DeviceId(1)).map_err(e2s)?;
    let pong = b.import_signal(&pong, DeviceId(1)).map_err(e2s)?;
    match b.wait(&ping, RawStream::DEFAULT, Some(Duration::from_millis(50))) {
        Err(Error::Timeout { .. }) => {}
        other => {
            return Err(format!(
                "a wait before any notify must time out, got {other:?}"
            ));
        }
    }
    parent.say("blocked", "");
    for _ in 0..rounds {
        b.wait(&ping, RawStream::DEFAULT, Some(LONG)).map_err(e2s)?;
        b.notify(&pong, RawStream::DEFAULT).map_err(e2s)?;
    }
    b.destroy_signal(ping).map_err(e2s)?;
    b.destroy_signal(pong).map_err(e2s)?;
    parent.say("done", "");
    Ok(())
}

/// Error paths inside one process.
fn own_import(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let alloc = b.allocate(DeviceId(0), 4096).map_err(e2s)?;
    let token = b
        .export(&alloc, 0..4096, ExportOptions::default())
        .map_err(e2s)?;
    // Importing one's own token is refused by the backend itself, before any vendor call,
    // in every version (ROCm 5.2's hipIpcOpenMemHandle would map it again).
    match b.import(&token, DeviceId(0)) {
        Err(Error::Unsupported { what, .. }) if what.contains("process that exported it") => {}
        other => return Err(format!("own import gave {other:?}")),
    }
    // The same for one's own signal (the runtime would answer hipErrorInvalidContext).
    let signal = b.create_signal(DeviceId(0)).map_err(e2s)?;
    let signal_token = b
        .export_signal(&signal, ExportOptions::default())
        .map_err(e2s)?;
    match b.import_signal(&signal_token, DeviceId(0)) {
        Err(Error::Unsupported { what, .. }) if what.contains("process that exported it") => {}
        other => return Err(format!("own signal import gave {other:?}")),
    }
    b.destroy_signal(signal).map_err(e2s)?;
    // A garbage handle from a "peer", naming a live lease made for another handle by
    // another process: refused before the runtime (the lease is bound to its handle and
    // its exporter), and no hold is left.
    let lease = devipc_shm::lease::held::create_bound(1).map_err(e2s)?;
    let garbage = MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin {
            pid: ProcessId(1),
            start_time: 1,
            host: HostIdentity::current(),
        },
        generation: 1,
        object_size: 4096,
        offset: 0,
        len: 4096,
        payload: [&[0x5a; 64][..], &lease.name()[..]].concat(),
    })
    .map_err(e2s)?;
    match b.import(&garbage, DeviceId(0)) {
        Err(Error::InvalidToken { reason }) if reason.contains("another") => {}
        other => {
            return Err(format!(
                "a garbage handle with a foreign lease gave {other:?}"
            ));
        }
    }
    if lease.live_holders() != 0 {
        return Err("a failed open kept its lease hold".into());
    }
    // Without a lease name the token is not one of devipc's: refused before the runtime.
    let bare = MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: garbage.origin(),
        generation: 1,
        object_size: 4096,
        offset: 0,
        len: 4096,
        payload: vec![0x5a; 64],
    });
    match bare.map_err(e2s).map(|t| b.import(&t, DeviceId(0)))? {
        Err(Error::InvalidToken { .. }) => {}
        other => return Err(format!("a token without a lease gave {other:?}")),
    }
    lease.remove().map_err(|e| e.to_string())?;
    // Validation before any vendor call.
    match b.import(&token, DeviceId(7)) {
        Err(Error::InvalidDevice {
            device: DeviceId(7),
            count: 2,
        }) => {}
        other => return Err(format!("bad device gave {other:?}")),
    }
    match b.export(&alloc, 10..10, ExportOptions::default()) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("empty range gave {other:?}")),
    }
    match b.export(&alloc, 0..4097, ExportOptions::default()) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("range past the end gave {other:?}")),
    }
    // A token of another backend, and one from a real runtime.
    let mut parts = MemTokenParts {
        mechanism: Mechanism::AscendVmm,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin {
            pid: ProcessId(1),
            start_time: 1,
            host: HostIdentity::current(),
        },
        generation: 1,
        object_size: 4096,
        offset: 0,
        len: 4096,
        payload: 7u64.to_le_bytes().to_vec(),
    };
    let ascend = MemToken::new(parts.clone()).map_err(e2s)?;
    match b.import(&ascend, DeviceId(0)) {
        Err(Error::BackendMismatch { .. }) => {}
        other => return Err(format!("an Ascend token gave {other:?}")),
    }
    parts.mechanism = Mechanism::HipIpcMem;
    parts.emulated = false;
    parts.payload = token.payload().to_vec();
    match b.import(&MemToken::new(parts).map_err(e2s)?, DeviceId(0)) {
        Err(Error::BackendMismatch { .. }) => {}
        other => return Err(format!("a real-runtime token gave {other:?}")),
    }
    // Out of memory: hipErrorOutOfMemory (DEVIPC_EMU_MEM_LIMIT is small in this test).
    match b.allocate(DeviceId(1), 64 << 20) {
        Err(Error::Vendor {
            code: 2, ref name, ..
        }) if name == "hipErrorOutOfMemory" => {}
        other => return Err(format!("allocating past the limit gave {other:?}")),
    }
    // Double free is an UnknownHandle, never a second hipFree.
    b.free(alloc.clone()).map_err(e2s)?;
    match b.free(alloc) {
        Err(Error::UnknownHandle {
            kind: "allocation", ..
        }) => {}
        other => return Err(format!("double free gave {other:?}")),
    }
    let info = b.info();
    if info.kind != BackendKind::Hip
        || !info.source.is_emulated()
        || info.capabilities.access_control
    {
        return Err(format!("unexpected info {info:?}"));
    }
    parent.say("ok", "");
    Ok(())
}

/// Exports an allocation, frees it when told, and reports what happened to the free.
fn lease_exporter(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let alloc = b.allocate(DeviceId(0), 8192).map_err(e2s)?;
    b.write_raw(alloc.ptr, &pattern(3, 8192)).map_err(e2s)?;
    let token = b
        .export(&alloc, 0..8192, ExportOptions::default())
        .map_err(e2s)?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("free")?;
    b.free(alloc).map_err(e2s)?;
    parent.say("deferred", &b.deferred_frees().to_string());
    loop {
        match parent.hear().as_str() {
            "count" => parent.say("count", &b.deferred_frees().to_string()),
            "reap" => {
                let freed = b.reap_deferred().map_err(e2s)?;
                parent.say("reaped", &format!("{freed} {}", b.deferred_frees()));
            }
            // Explicit passes back to back for a while, racing the reaper thread's own.
            "reap-storm" => {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(1200);
                while std::time::Instant::now() < until {
                    b.reap_deferred().map_err(e2s)?;
                }
                parent.say("stormed", &b.deferred_frees().to_string());
            }
            "exit" => return Ok(()),
            other => return Err(format!("unexpected {other:?}")),
        }
    }
}

/// Imports, then on request reads (checking the exporter's bytes) and closes.
fn lease_importer(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let mapping = b.import(&token, DeviceId(0)).map_err(e2s)?;
    parent.say("imported", "");
    parent.hear_exactly("read")?;
    let mut got = vec![0u8; 8192];
    b.read_raw(mapping.ptr, &mut got).map_err(e2s)?;
    if got != pattern(3, 8192) {
        return Err("the exporter's bytes are gone".into());
    }
    parent.say("read-ok", "");
    parent.hear_exactly("close")?;
    b.close(mapping).map_err(e2s)?;
    parent.say("closed", "");
    // A new import after the exporter's deferred free went through is refused.
    parent.hear_exactly("import-again")?;
    match b.import(&token, DeviceId(0)) {
        Err(Error::InvalidArgument { what }) if what.contains("freed") => parent.say("refused", ""),
        other => return Err(format!("importing freed memory gave {other:?}")),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Tests (parent side).

fn share_and_check(
    name: &str,
    version: &str,
    offset: usize,
    len: usize,
    device: u32,
    external: bool,
) {
    let root = TestRoot::new(&format!("{name}-{version}"));
    let mut envs = version_env(version);
    envs.push(("OFFSET", offset.to_string()));
    envs.push(("LEN", len.to_string()));
    envs.push(("EXTERNAL", if external { "1" } else { "0" }.to_owned()));
    let mut exp = Child::spawn(&child_entry(), "exporter", &root, &envs);
    let token = exp.expect("token");
    envs.push(("DEVICE", device.to_string()));
    let mut imp = Child::spawn(&child_entry(), "importer", &root, &envs);
    imp.send(&token);
    imp.expect("wrote");
    exp.send("check");
    exp.expect("checked");
    imp.send("close");
    imp.expect("closed");
    imp.wait_success();
    exp.send("free");
    exp.expect("freed");
    exp.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn export_import_read_write_close() {
    for v in VERSIONS {
        share_and_check("whole", v, 0, SIZE, 0, false);
    }
}

#[test]
fn an_interior_range_is_imported_at_its_offset() {
    for v in VERSIONS {
        share_and_check("range", v, 4096 + 123, 8192, 0, false);
    }
}

#[test]
fn an_external_interior_pointer_is_exported_with_its_offset() {
    for v in VERSIONS {
        share_and_check("external", v, 65536 + 7, 4096, 0, true);
    }
}

#[test]
fn cross_device_import() {
    for v in VERSIONS {
        share_and_check("cross", v, 0, SIZE, 1, false);
    }
}

#[test]
fn signal_ping_pong_blocks_until_notified() {
    for v in VERSIONS {
        let root = TestRoot::new(&format!("signal-{v}"));
        let mut envs = version_env(v);
        envs.push(("ROUNDS", "200".to_owned()));
        let mut owner = Child::spawn(&child_entry(), "signal-owner", &root, &envs);
        let ping = owner.expect("signal");
        let pong = owner.expect("signal");
        let mut peer = Child::spawn(&child_entry(), "signal-peer", &root, &envs);
        peer.send(&ping);
        peer.send(&pong);
        peer.expect("blocked");
        owner.send("blocked");
        owner.expect("done");
        peer.expect("done");
        peer.wait_success();
        owner.send("destroy");
        owner.wait_success();
        root.assert_emulator_clean();
    }
}

#[test]
fn error_paths_map_to_their_hip_errors() {
    for v in VERSIONS {
        let root = TestRoot::new(&format!("errors-{v}"));
        let mut envs = version_env(v);
        envs.push(("DEVIPC_EMU_MEM_LIMIT", (32u64 << 20).to_string()));
        let mut child = Child::spawn(&child_entry(), "own-import", &root, &envs);
        child.expect("ok");
        child.wait_success();
        root.assert_emulator_clean();
    }
}

/// An exporter frees a buffer a peer has imported: the free is deferred, then
/// the exporter is sent `command` (answered by `answer_key` with `answer`:
/// still held), the importer reads and closes, and the reaper thread frees without the
/// exporter calling in; a replay is refused afterwards.
fn free_under_an_importer(name: &str, command: &str, answer_key: &str, answer: &str) {
    let root = TestRoot::new(name);
    let mut exp = Child::spawn(&child_entry(), "lease-exporter", &root, &[]);
    let token = exp.expect("token");
    let mut imp = Child::spawn(&child_entry(), "lease-importer", &root, &[]);
    imp.send(&token);
    imp.expect("imported");
    exp.send("free");
    assert_eq!(
        exp.expect("deferred"),
        "1",
        "the free must wait for the importer"
    );
    exp.send(command);
    assert_eq!(exp.expect(answer_key), answer, "still held");
    imp.send("read");
    imp.expect("read-ok");
    imp.send("close");
    imp.expect("closed");
    // Freed once the importer closed, by the reaper thread: the exporter does not call in.
    wait_for_count(&mut exp, "0");
    imp.send("import-again");
    imp.expect("refused");
    imp.wait_success();
    exp.send("exit");
    exp.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn a_free_waits_for_the_importers_to_close() {
    free_under_an_importer("lease-orderly", "reap", "reaped", "0 1");
}

/// Explicit `reap_deferred` passes racing the reaper thread: a reaper that looked while a
/// pass had taken the records once left for good, stranding them (seen in CI).
#[test]
fn explicit_reaps_never_strand_the_reaper() {
    free_under_an_importer("lease-storm", "reap-storm", "stormed", "1");
}

#[test]
fn a_killed_importer_does_not_hold_the_memory() {
    let root = TestRoot::new("lease-killed");
    let mut exp = Child::spawn(&child_entry(), "lease-exporter", &root, &[]);
    let token = exp.expect("token");
    let mut imp = Child::spawn(&child_entry(), "lease-importer", &root, &[]);
    imp.send(&token);
    imp.expect("imported");
    imp.kill();
    exp.send("free");
    // The free itself only reads the holders counter (the killed importer is still in
    // it); the reaper thread finds the holder dead and frees, without the exporter
    // calling in again.
    exp.expect("deferred");
    wait_for_count(&mut exp, "0");
    exp.send("exit");
    exp.wait_success();
    root.assert_emulator_clean();
}

/// Asks the lease exporter for its deferred-free count until it is `want` (the reaper
/// thread frees on its own), failing after 10 s.
fn wait_for_count(exp: &mut Child, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        exp.send("count");
        let got = exp.expect("count");
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "deferred frees stayed at {got}, want {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
