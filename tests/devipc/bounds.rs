//! Forged, relabelled and stale tokens against the safe API, with real processes on both
//! emulated backends: every view stays inside the vendor object the runtime mapped, a
//! relabelled generation never displaces a live import, two runtimes of one process share
//! one import, and a token outlives neither its buffer nor its external export.
//!
//! An exporter child allocates two neighbouring buffers (`a`, `b`) and exports both; an
//! attacker child imports `a` and then tries to reach `b`, or `a`'s neighbours, through
//! tokens it forges from `a`'s (a token's CRC is not a secret). The strict emulator must
//! record no violation: no forged access may ever reach the vendor.

use std::ffi::c_void;

use devipc::raw::{Backend, DeviceIpc};
use devipc::{BackendKind, DeviceId, DevicePtr, Error, ExportOptions, MemToken, Runtime};
use devipc_core::token::MemTokenParts;
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

const KIND_ENV: &str = "BOUNDS_TEST_KIND";
const LEN: usize = 64 << 10;

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
            "attacker" => attacker(&rt, parent),
            "external" => external_reuse(&rt, parent),
            "own-memory" => own_memory_external(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn fill(seed: u8) -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let s = |e: Error| e.to_string();
    let a = rt.allocate(DeviceId(0), LEN).map_err(s)?;
    let b = rt.allocate(DeviceId(0), LEN).map_err(s)?;
    a.write(0, &fill(0xA5)).map_err(s)?;
    b.write(0, &fill(0x5B)).map_err(s)?;
    let any = ExportOptions::any_process();
    parent.say("a", &a.export(any).map_err(s)?.to_text());
    parent.say("b", &b.export(any).map_err(s)?.to_text());
    parent.hear_exactly("exit")?;
    // `b` must be intact: no forged write reached it.
    let mut got = vec![0u8; LEN];
    b.read(0, &mut got).map_err(s)?;
    if got != fill(0x5B) {
        return Err("buffer b was changed through a forged token".into());
    }
    Ok(())
}

/// `token` with its range and claimed object size replaced (re-encoded with a valid CRC).
fn forge(token: &MemToken, object_size: u64, offset: u64, len: u64) -> MemToken {
    MemToken::new(MemTokenParts {
        object_size,
        offset,
        len,
        ..token.to_parts()
    })
    .expect("a well-formed forgery")
}

/// `token` claiming another generation.
fn relabel(token: &MemToken, generation: u64) -> MemToken {
    MemToken::new(MemTokenParts {
        generation,
        ..token.to_parts()
    })
    .expect("a well-formed relabel")
}

/// Expects an `InvalidToken` refusal and no bytes.
fn refused(what: &str, outcome: Result<devipc::ImportedBuffer, Error>) -> Result<(), String> {
    match outcome {
        Err(Error::InvalidToken { .. }) => Ok(()),
        Err(other) => Err(format!("{what}: refused, but as {}: {other}", other.kind())),
        Ok(view) => {
            let mut got = vec![0u8; view.len().min(LEN)];
            let read = view.read(0, &mut got);
            Err(format!(
                "{what}: imported ({} bytes; read gave {read:?})",
                view.len()
            ))
        }
    }
}

fn attacker(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let a: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let b: MemToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let dev = DeviceId(0);
    let real = a.object_size();
    // Cold import of a range past the real object (claims 4x the allocation).
    refused(
        "cold import claiming 4x the object",
        rt.import(&forge(&a, real * 4, 0, real * 4), dev),
    )?;
    refused(
        "cold import of the next object's bytes",
        rt.import(&forge(&a, real * 4, real, real), dev),
    )?;
    if rt.live_imports() != 0 {
        return Err("a refused cold import left a live import".into());
    }
    // The honest import, then forgeries served from the cache.
    let honest = rt.import(&a, dev).map_err(|e| e.to_string())?;
    let mut got = vec![0u8; LEN];
    honest.read(0, &mut got).map_err(|e| e.to_string())?;
    if got != fill(0xA5) {
        return Err("the honest import read wrong bytes".into());
    }
    for (offset, len) in [(real, real), (real - 1, 2), (u64::MAX / 4, 64)] {
        refused(
            &format!("cache hit at {offset}+{len}"),
            rt.import(&forge(&a, u64::MAX, offset, len), dev),
        )?;
    }
    // A relabelled generation neither imports nor evicts the live import.
    refused(
        "relabelled generation on a cache hit",
        rt.import(&relabel(&a, a.generation() + 1), dev),
    )?;
    honest.read(0, &mut got).map_err(|e| e.to_string())?;
    if got != fill(0xA5) || rt.live_imports() != 1 {
        return Err("the relabelled token disturbed the live import".into());
    }
    let again = rt.import(&a, dev).map_err(|e| e.to_string())?;
    // A second Runtime of this process shares the import (one vendor import per
    // process: Ascend VMM refuses a second one).
    let second = Runtime::emulated(rt.info().kind).map_err(|e| e.to_string())?;
    let shared = second
        .import(&a, dev)
        .map_err(|e| format!("a second runtime's import: {e}"))?;
    shared.read(0, &mut got).map_err(|e| e.to_string())?;
    if got != fill(0xA5) || second.live_imports() != 1 {
        return Err("the second runtime did not share the import".into());
    }
    // `b` itself imports fine: the forgeries were refused, not the memory.
    let vb = rt.import(&b, dev).map_err(|e| e.to_string())?;
    vb.read(0, &mut got).map_err(|e| e.to_string())?;
    if got != fill(0x5B) {
        return Err("b read wrong bytes".into());
    }
    drop((honest, again, shared, vb, second));
    if rt.live_imports() != 0 {
        return Err("imports left open".into());
    }
    parent.say("result", "ok");
    parent.hear_exactly("exit")
}

/// `size` bytes of framework memory (`aclrtMalloc` / `hipMalloc`) on device 0.
fn vendor_malloc(rt: &Runtime, size: usize) -> Result<DevicePtr, String> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `p` is a valid out-pointer, device 0 exists on the emulator and the policy is
    // a documented enumerator.
    let code = unsafe {
        match rt.backend() {
            Backend::Ascend(b) => match (b.api().aclrtSetDevice)(0) {
                0 => (b.api().aclrtMalloc)(
                    &mut p,
                    size,
                    devipc_ascend_sys::types::ACL_MEM_MALLOC_HUGE_ONLY,
                ),
                c => c,
            },
            Backend::Hip(b) => match (b.api().hipSetDevice)(0) {
                0 => (b.api().hipMalloc)(&mut p, size),
                c => c,
            },
            _ => return Err("unknown backend".into()),
        }
    };
    match code {
        0 => Ok(DevicePtr(p as usize as u64)),
        c => Err(format!("vendor malloc failed with {c}")),
    }
}

/// Frees what [`vendor_malloc`] returned.
fn vendor_free(rt: &Runtime, p: DevicePtr) -> Result<(), String> {
    let ptr = p.0 as usize as *mut c_void;
    // SAFETY: `ptr` came from the vendor malloc above and is freed once.
    let code = unsafe {
        match rt.backend() {
            Backend::Ascend(b) => (b.api().aclrtFree)(ptr),
            Backend::Hip(b) => (b.api().hipFree)(ptr),
            _ => return Err("unknown backend".into()),
        }
    };
    match code {
        0 => Ok(()),
        c => Err(format!("vendor free failed with {c}")),
    }
}

/// The framework exports a block. Importing the token in this process is refused (devipc
/// cannot keep framework memory alive, so a view could outlive the block), before and
/// after the export ends, and after the block is freed and the address reused.
fn external_reuse(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let s = |e: Error| e.to_string();
    const BLOCK: usize = 2 << 20;
    let p = vendor_malloc(rt, BLOCK)?;
    let token = rt
        .export_external(DeviceId(0), p, LEN, ExportOptions::any_process())
        .map_err(s)?;
    match rt.import(&token, DeviceId(0)) {
        Err(Error::Unsupported { what, .. }) if what.contains("framework memory") => {}
        other => return Err(format!("an own external export imported: {other:?}")),
    }
    rt.close_external(DeviceId(0), p).map_err(s)?;
    vendor_free(rt, p)?;
    let again = vendor_malloc(rt, BLOCK)?;
    let reused = again == p;
    match rt.import(&token, DeviceId(0)) {
        Err(Error::InvalidArgument { .. }) => {}
        Ok(v) => {
            return Err(format!(
                "the old token imported after the block was freed (address reused: {reused}, local: {})",
                v.is_local()
            ));
        }
        Err(other) => return Err(format!("the old token gave {other:?}")),
    }
    // The same without `Runtime::close_external`: the raw backend's close, then a free
    // and a new block (the reviewer's case): still refused.
    let token = rt
        .export_external(DeviceId(0), again, LEN, ExportOptions::any_process())
        .map_err(s)?;
    rt.backend().close_external(DeviceId(0), again).map_err(s)?;
    vendor_free(rt, again)?;
    let third = vendor_malloc(rt, BLOCK)?;
    if rt.import(&token, DeviceId(0)).is_ok() {
        return Err(format!(
            "after a raw close_external and a free, the old token imported (reused: {})",
            third == again
        ));
    }
    vendor_free(rt, third)?;
    parent.say("result", "ok");
    parent.hear_exactly("exit")
}

/// `export_external` of devipc's own memory is refused (its token would carry a lease of
/// its own, so the buffer's free would not wait for the token's importers): the whole
/// buffer, a block inside it and a span across its end, also through a second runtime of
/// the process. Says `result ok`.
fn own_memory_external(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let buf = rt
        .allocate(DeviceId(0), 1 << 20)
        .map_err(|e| e.to_string())?;
    let base = buf.ptr().0;
    let spans = [
        (base, buf.len()),
        (base + 8192, 4096),
        (base + buf.len() as u64 - 16, 64),
    ];
    for (at, len) in spans {
        match rt.export_external(
            DeviceId(0),
            DevicePtr(at),
            len,
            ExportOptions::any_process(),
        ) {
            Err(e @ Error::InvalidArgument { .. })
                if e.to_string().contains("devipc allocation") => {}
            other => return Err(format!("export_external of {len} at {at:#x}: {other:?}")),
        }
    }
    // Nor through another runtime of this process (each has its own backend).
    let other = Runtime::emulated(rt.info().kind).map_err(|e| e.to_string())?;
    match other.export_external(DeviceId(0), buf.ptr(), 64, ExportOptions::any_process()) {
        Err(e @ Error::InvalidArgument { .. }) if e.to_string().contains("devipc allocation") => {}
        other => return Err(format!("another runtime's export_external: {other:?}")),
    }
    // The buffer is untouched: its own export still works, and its free is immediate.
    buf.export(ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    drop(buf);
    parent.say("result", "ok");
    parent.hear_exactly("exit")
}

fn spawn(root: &TestRoot, role: &str, kind: BackendKind) -> Child {
    Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .spawn()
}

fn forged_tokens_never_leave_the_object(kind: BackendKind) {
    let root = TestRoot::new(&format!("bounds-{kind}"));
    let mut exporter = spawn(&root, "exporter", kind);
    let mut attacker = spawn(&root, "attacker", kind);
    attacker.send(&exporter.expect("a"));
    attacker.send(&exporter.expect("b"));
    assert_eq!(attacker.expect("result"), "ok");
    assert_eq!(
        root.recorded_violations(),
        Vec::<String>::new(),
        "a forged access reached the vendor"
    );
    for mut child in [attacker, exporter] {
        child.send("exit");
        child.wait_success();
    }
    root.assert_emulator_clean();
}

#[test]
fn hip_forged_tokens_never_leave_the_object() {
    forged_tokens_never_leave_the_object(BackendKind::Hip);
}

#[test]
fn ascend_forged_tokens_never_leave_the_object() {
    forged_tokens_never_leave_the_object(BackendKind::Ascend);
}

fn an_own_external_export_is_never_a_local_view(kind: BackendKind) {
    let root = TestRoot::new(&format!("bounds-external-{kind}"));
    let mut child = spawn(&root, "external", kind);
    assert_eq!(child.expect("result"), "ok");
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    child.send("exit");
    child.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn hip_an_own_external_export_is_never_a_local_view() {
    an_own_external_export_is_never_a_local_view(BackendKind::Hip);
}

#[test]
fn ascend_an_own_external_export_is_never_a_local_view() {
    an_own_external_export_is_never_a_local_view(BackendKind::Ascend);
}

fn devipc_memory_is_not_external(kind: BackendKind) {
    let root = TestRoot::new(&format!("bounds-own-memory-{kind}"));
    let mut child = spawn(&root, "own-memory", kind);
    assert_eq!(child.expect("result"), "ok");
    child.send("exit");
    child.wait_success();
    root.assert_emulator_clean();
}

#[test]
fn hip_devipc_memory_is_not_external() {
    devipc_memory_is_not_external(BackendKind::Hip);
}

#[test]
fn ascend_devipc_memory_is_not_external() {
    devipc_memory_is_not_external(BackendKind::Ascend);
}
