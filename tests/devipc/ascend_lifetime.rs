//! Ascend import bounds and lifetime through the facade, with real processes on the
//! strict emulator (devipc issue 12, Ascend side):
//!
//! - a token is a claim: re-encoded with a larger range (its CRC is no secret) or with
//!   another generation, it does not import, on either memory path (VMM shareable handle,
//!   IPC key), also with the key's lease stripped from the payload (items 1 and 8);
//! - once the exporter freed its VMM allocation, or dropped the runtime of a key export,
//!   a replayed token is refused with a typed error, although the vendor object still
//!   lives for a peer that mapped it before (item 5);
//! - dropping the exporter's runtime while a peer maps its memory leaves the peer's view
//!   working, and the emulator records no violation (item 6).
//!
//! Each import that is expected to fail runs in a fresh process, so it is a cold import
//! (no cached mapping of the same object).

use std::ffi::c_void;

use devipc::raw::{Backend, DeviceIpc};
use devipc::{BackendKind, DeviceId, DevicePtr, Error, ExportOptions, MemToken, Runtime};
use devipc_core::token::MemTokenParts;
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

/// A VMM buffer: one 2 MiB granule.
const VMM_LEN: usize = 2 << 20;
/// A framework block shared by IPC key: two 2 MiB huge pages.
const KEY_BLOCK: usize = 4 << 20;
/// Where the test pattern sits: the last page of the object, so a view that covers the
/// whole object sees it and one beyond it would read past the object.
const PATTERN_AT: usize = 4096;

fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 13 + 5) as u8).collect()
}

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let rt = Runtime::emulated(BackendKind::Ascend).map_err(|e| e.to_string())?;
        match role {
            "vmm-exporter" => vmm_exporter(rt, parent),
            "key-exporter" => key_exporter(rt, parent),
            "importer" => importer(&rt, parent),
            "racer" => racer(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

/// Allocates, writes the pattern at the end, exports; `free` drops the buffer,
/// `drop-runtime` the buffer and the runtime.
fn vmm_exporter(rt: Runtime, parent: &Parent) -> Result<(), String> {
    let buf = rt
        .allocate(DeviceId(0), VMM_LEN)
        .map_err(|e| e.to_string())?;
    buf.write(VMM_LEN - PATTERN_AT, &pattern())
        .map_err(|e| e.to_string())?;
    let token = buf
        .export(ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    parent.say("token", &token.to_text());
    let mut buf = Some(buf);
    let mut rt = Some(rt);
    loop {
        match parent.hear().as_str() {
            "free" => {
                buf = None;
                parent.say("done", "");
            }
            "drop-runtime" => {
                buf = None;
                rt = None;
                parent.say("done", "");
            }
            // A child forked from the exporter exits normally (running the `atexit`
            // handlers it inherited); the exporter waits for it.
            "fork-exit" => {
                // SAFETY: the child only calls `exit`; the parent waits for it.
                let pid = unsafe { libc::fork() };
                match pid {
                    0 => std::process::exit(0),
                    p if p > 0 => {
                        let mut status = 0;
                        // SAFETY: `p` is our child; `status` is a valid out-pointer.
                        unsafe { libc::waitpid(p, &mut status, 0) };
                        parent.say("done", &status.to_string());
                    }
                    _ => return Err("fork failed".into()),
                }
            }
            "exit" => {
                drop((buf, rt));
                return Ok(());
            }
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// `aclrtMalloc`s a block as a framework would, fills its last page through a view of its
/// own export, exports it by IPC key; `drop-runtime` drops the runtime with the export
/// open, `free` frees the block (after the importers closed).
fn key_exporter(rt: Runtime, parent: &Parent) -> Result<(), String> {
    let Backend::Ascend(b) = rt.backend() else {
        return Err("key-exporter runs on ascend".into());
    };
    let api = b.api().clone();
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: device 0 exists on the emulator; `p` is a valid out-pointer and the policy a
    // documented enumerator.
    let code = unsafe {
        match (api.aclrtSetDevice)(0) {
            0 => (api.aclrtMalloc)(
                &mut p,
                KEY_BLOCK,
                devipc_ascend_sys::types::ACL_MEM_MALLOC_HUGE_ONLY,
            ),
            c => c,
        }
    };
    if code != 0 {
        return Err(format!("aclrtMalloc failed with {code}"));
    }
    let ptr = DevicePtr(p as usize as u64);
    let token = rt
        .export_external(DeviceId(0), ptr, KEY_BLOCK, ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    let at = ptr
        .offset(KEY_BLOCK - PATTERN_AT)
        .map_err(|e| e.to_string())?;
    // SAFETY: `at..at + PATTERN_AT` is the last page of the live aclrtMalloc block above.
    unsafe { rt.backend().write(at, &pattern()) }.map_err(|e| e.to_string())?;
    parent.say("token", &token.to_text());
    let mut rt = Some(rt);
    loop {
        match parent.hear().as_str() {
            "drop-runtime" => {
                rt = None;
                parent.say("done", "");
            }
            "free" => {
                // SAFETY: `p` came from aclrtMalloc above and is freed once.
                let code = unsafe { (api.aclrtFree)(p) };
                parent.say("done", &code.to_string());
            }
            "exit" => {
                drop(rt);
                return Ok(());
            }
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// What `import` of a token gave: `ok`, or the error's kind.
fn outcome<T>(r: devipc::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => {
            eprintln!("import refused: {e}");
            e.kind().to_owned()
        }
    }
}

/// A token rebuilt from `t`'s parts after `change`.
fn forged(t: &MemToken, change: impl FnOnce(&mut MemTokenParts)) -> Result<MemToken, String> {
    let mut parts = t.to_parts();
    change(&mut parts);
    MemToken::new(parts).map_err(|e| e.to_string())
}

/// Hears a token; `try <forgery>` imports a forged copy of it (answering with
/// [`outcome`], the import dropped at once); `import` imports it and keeps the view;
/// `read` reads the pattern at the view's end; `close` drops the view.
fn importer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let key_len = devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
    let mut view = None;
    loop {
        let line = parent.hear();
        let (command, arg) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match command {
            "try" => {
                let t = match arg {
                    // A range reaching a page past the real object, the size claim grown
                    // to match (the token's own check passes).
                    "grow" => forged(&token, |p| {
                        p.object_size += 4096;
                        p.len += 4096;
                    })?,
                    "generation" => forged(&token, |p| p.generation += 1)?,
                    // Key tokens: the lease name cut off the payload.
                    "strip-lease" => forged(&token, |p| p.payload.truncate(key_len))?,
                    "strip-lease-grow" => forged(&token, |p| {
                        p.payload.truncate(key_len);
                        p.object_size += 4096;
                        p.len += 4096;
                    })?,
                    "strip-lease-generation" => forged(&token, |p| {
                        p.payload.truncate(key_len);
                        p.generation += 1;
                    })?,
                    // Another producer (no record under it) and no lease: nothing would
                    // bound the view or make the exporter's close wait.
                    "reorigin-strip-lease" => forged(&token, |p| {
                        p.payload.truncate(key_len);
                        p.origin.start_time += 1;
                    })?,
                    "genuine" => token.clone(),
                    other => return Err(format!("unknown forgery {other:?}")),
                };
                parent.say("outcome", &outcome(rt.import(&t, DeviceId(0))));
            }
            "import" => {
                let said = match rt.import(&token, DeviceId(0)) {
                    Ok(v) => {
                        view = Some(v);
                        "ok".to_owned()
                    }
                    Err(e) => e.kind().to_owned(),
                };
                parent.say("outcome", &said);
            }
            "read" => {
                let v = view.as_ref().ok_or("no view")?;
                let mut got = vec![0u8; PATTERN_AT];
                let said = match v.read(v.len() - PATTERN_AT, &mut got) {
                    Ok(()) if got == pattern() => "ok".to_owned(),
                    Ok(()) => "wrong-bytes".to_owned(),
                    Err(e) => e.kind().to_owned(),
                };
                parent.say("read", &said);
            }
            "close" => {
                view = None;
                parent.say("closed", "");
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other:?}")),
        }
    }
}

/// Four threads import the key token, read it and drop the view for a while, two on
/// device 0 and two on device 1 (two vendor imports of one key in this process, which
/// `aclrtIpcMemClose` closes oldest first). Says how many reads failed or saw wrong bytes.
fn racer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2000);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (rt, token, failures, rounds) = (rt, &token, &failures, &rounds);
            s.spawn(move || {
                let mut got = [0u8; 16];
                while std::time::Instant::now() < deadline {
                    let ok = rt.import(token, DeviceId(t % 2)).is_ok_and(|view| {
                        view.read(KEY_BLOCK - PATTERN_AT, &mut got).is_ok()
                            && got[..] == pattern()[..16]
                    });
                    if !ok {
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let rounds = rounds.into_inner();
    parent.say(
        "failures",
        &format!("{} of {rounds}", failures.into_inner()),
    );
    parent.hear_exactly("exit")
}

fn spawn(root: &TestRoot, role: &str) -> Child {
    Child::build(&child_entry(), role, root)
        .env_remove(devipc_core::protection::BREAK_ENV)
        .env_remove("DEVIPC_EMU_BREAK_RULE")
        .spawn()
}

/// An importer of `token` that tries `forgery` once (a cold import) and exits.
fn try_once(root: &TestRoot, token: &str, forgery: &str) -> String {
    let mut importer = spawn(root, "importer");
    importer.send(token);
    importer.send(&format!("try {forgery}"));
    let outcome = importer.expect("outcome");
    importer.send("exit");
    importer.wait_success();
    outcome
}

/// A peer's view of the token's whole object, reading its last page.
fn reader(root: &TestRoot, token: &str) -> Child {
    let mut importer = spawn(root, "importer");
    importer.send(token);
    importer.send("import");
    assert_eq!(importer.expect("outcome"), "ok");
    importer.send("read");
    assert_eq!(importer.expect("read"), "ok");
    importer
}

fn finish(mut child: Child) {
    child.send("exit");
    child.wait_success();
}

/// Items 1 and 8 on the VMM path.
#[test]
fn ascend_vmm_tokens_with_forged_ranges_or_generations_do_not_import() {
    let root = TestRoot::new("ascend-lifetime-vmm-forged");
    let mut exporter = spawn(&root, "vmm-exporter");
    let token = exporter.expect("token");
    for forgery in ["grow", "generation"] {
        assert_eq!(
            try_once(&root, &token, forgery),
            "invalid_token",
            "{forgery}"
        );
    }
    assert_eq!(try_once(&root, &token, "genuine"), "ok");
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    finish(exporter);
    root.assert_emulator_clean();
}

/// Items 1 and 8 on the IPC key path, also with the lease stripped from the token.
#[test]
fn ascend_key_tokens_with_forged_ranges_or_generations_do_not_import() {
    let root = TestRoot::new("ascend-lifetime-key-forged");
    let mut exporter = spawn(&root, "key-exporter");
    let token = exporter.expect("token");
    for forgery in [
        "grow",
        "generation",
        "strip-lease-grow",
        "strip-lease-generation",
    ] {
        assert_eq!(
            try_once(&root, &token, forgery),
            "invalid_token",
            "{forgery}"
        );
    }
    // A token naming another producer finds no export record: refused, whatever the
    // runtime would map (before, it imported without any lease hold, and the exporter's
    // close_external then destroyed the key under it).
    assert_eq!(
        try_once(&root, &token, "reorigin-strip-lease"),
        "invalid_argument"
    );
    // A stripped token that claims nothing false still imports: the importer holds the
    // lease the exporter recorded, so the exporter's close still waits for it.
    assert_eq!(try_once(&root, &token, "strip-lease"), "ok");
    assert_eq!(try_once(&root, &token, "genuine"), "ok");
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    // Nobody maps the block any more: dropping the runtime closes the key, then the
    // framework frees the block.
    exporter.send("drop-runtime");
    exporter.expect("done");
    exporter.send("free");
    assert_eq!(exporter.expect("done"), "0");
    finish(exporter);
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    root.assert_emulator_clean();
}

/// Items 5 and 6 on the VMM path: `how` is `free` (the buffer) or `drop-runtime`.
fn vmm_replay_after(how: &str) {
    let root = TestRoot::new(&format!("ascend-lifetime-vmm-replay-{how}"));
    let mut exporter = spawn(&root, "vmm-exporter");
    let token = exporter.expect("token");
    let mut peer = reader(&root, &token);
    exporter.send(how);
    exporter.expect("done");
    // The vendor keeps the memory for the peer that mapped it (ACL: released when every
    // process freed it)...
    peer.send("read");
    assert_eq!(peer.expect("read"), "ok", "{how}: the peer's view survives");
    // ...but the export is over: a replayed token is refused, typed.
    assert_eq!(
        try_once(&root, &token, "genuine"),
        "invalid_argument",
        "{how}"
    );
    assert_eq!(root.recorded_violations(), Vec::<String>::new(), "{how}");
    peer.send("close");
    peer.expect("closed");
    finish(peer);
    finish(exporter);
    root.assert_emulator_clean();
}

#[test]
fn ascend_vmm_replay_after_free_is_refused_while_a_peer_still_maps_it() {
    vmm_replay_after("free");
}

#[test]
fn ascend_vmm_replay_after_runtime_drop_is_refused_while_a_peer_still_maps_it() {
    vmm_replay_after("drop-runtime");
}

/// Items 5 and 6 on the IPC key path: the exporter's runtime is dropped while a peer maps
/// the block. The key stays open for the peer (no violation, the peer reads), and a
/// replayed token is refused, with or without its lease.
#[test]
fn ascend_key_replay_after_runtime_drop_is_refused_while_a_peer_still_maps_it() {
    let root = TestRoot::new("ascend-lifetime-key-replay");
    let mut exporter = spawn(&root, "key-exporter");
    let token = exporter.expect("token");
    let mut peer = reader(&root, &token);
    exporter.send("drop-runtime");
    exporter.expect("done");
    peer.send("read");
    assert_eq!(
        peer.expect("read"),
        "ok",
        "the key stayed open for the peer"
    );
    for replay in ["genuine", "strip-lease"] {
        assert_eq!(
            try_once(&root, &token, replay),
            "invalid_argument",
            "{replay}"
        );
    }
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    peer.send("close");
    peer.expect("closed");
    finish(peer);
    exporter.send("free");
    assert_eq!(exporter.expect("done"), "0");
    finish(exporter);
    // The exporter's process is gone: the driver (here the emulator's gc) reclaims the key
    // it left open, and the next import of the token finds the record of a dead exporter
    // (and removes it).
    devipc_emulator_gc(&root);
    assert_eq!(try_once(&root, &token, "genuine"), "invalid_argument");
    root.assert_emulator_clean();
}

/// Runs the emulator's gc on the root's state directory (what the driver does for dead
/// processes).
fn devipc_emulator_gc(root: &TestRoot) {
    let state = devipc_emulator::State::open(devipc_emulator::Config::for_dir(root.emu_dir()))
        .expect("open the state directory");
    state.gc().expect("gc");
}

/// Imports of one key on two devices from several threads: the process's import list
/// must follow the runtime's order, or closing one thread's import unmaps another's
/// (the runtime closes a key's oldest import).
#[test]
fn ascend_key_imports_racing_on_two_devices_never_unmap_a_live_view() {
    let root = TestRoot::new("ascend-key-race");
    let mut exporter = spawn(&root, "key-exporter");
    let token = exporter.expect("token");
    let mut racer = spawn(&root, "racer");
    racer.send(&token);
    let failures = racer.expect("failures");
    assert!(failures.starts_with("0 of "), "failed reads: {failures}");
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    finish(racer);
    exporter.send("drop-runtime");
    exporter.expect("done");
    exporter.send("free");
    assert_eq!(exporter.expect("done"), "0");
    finish(exporter);
    root.assert_emulator_clean();
}

/// Issue 13 item 1, Ascend keys: an exporter killed while a peer maps its key leaves its
/// lease table and export record behind; the next process that opens the backend and
/// runs a normal cycle leaves neither (nor anything of its own).
#[test]
fn ascend_killed_key_exporters_files_are_swept_by_the_next_process() {
    let root = TestRoot::new("ascend-killed-exporter");
    // The exporter's files (liveness beacons are the processes', swept on their own).
    let runtime_files = || -> Vec<String> {
        std::fs::read_dir(root.run_dir())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !devipc_shm::liveness::is_beacon_name(n))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut exporter = spawn(&root, "key-exporter");
    let token = exporter.expect("token");
    let peer = reader(&root, &token);
    exporter.kill();
    finish(peer);
    assert!(
        !runtime_files().is_empty(),
        "the killed exporter left its files"
    );

    let mut second = spawn(&root, "key-exporter");
    let token = second.expect("token");
    let peer = reader(&root, &token);
    finish(peer);
    second.send("drop-runtime");
    second.expect("done");
    second.send("free");
    assert_eq!(second.expect("done"), "0");
    finish(second);
    assert_eq!(
        runtime_files(),
        Vec::<String>::new(),
        "swept, and the cycle left none"
    );
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    root.assert_emulator_clean();
}

/// A child forked from an exporter that exits normally runs the exporter's inherited
/// `atexit` handler: it must not remove the exporter's export records (the exports are
/// the parent's and still live).
#[test]
fn ascend_a_forked_child_exiting_keeps_the_exporters_records() {
    let root = TestRoot::new("ascend-fork-exit");
    let mut exporter = spawn(&root, "vmm-exporter");
    let token = exporter.expect("token");
    exporter.send("fork-exit");
    assert_eq!(exporter.expect("done"), "0");
    let peer = reader(&root, &token);
    finish(peer);
    exporter.send("free");
    exporter.expect("done");
    finish(exporter);
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    root.assert_emulator_clean();
}
