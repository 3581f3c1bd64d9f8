//! Portable guarantees about errors: a token of the other backend, a corrupt token, a bad
//! device id and a double release each give their typed `Error`.
use devipc::raw::{
    DeviceIpc, HostIdentity, Mechanism, MemTokenParts, SignalTokenParts, TokenOrigin,
};
use devipc::{BackendKind, DeviceId, ExportOptions, MemToken, ProcessId, SignalToken};

use super::{SIZE, expect_error};
use crate::catalogue::{Import, Step, portable};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};

pub(super) const WRONG_BACKEND: Rule = portable(
    "portable.error.wrong-backend",
    "a memory or signal token of the other vendor, or from the emulator on a real runtime \
     (and the reverse), is Error::BackendMismatch",
    "DESIGN 3 (mechanism tag), 5.6",
    Expect::Behaviour,
    &[],
    wrong_backend,
);

pub(super) const CORRUPT_TOKEN: Rule = portable(
    "portable.error.corrupt-token",
    "a corrupted, truncated or garbage token is Error::InvalidToken, in text and binary form",
    "DESIGN 3 (parsing is total), 5.6",
    Expect::Behaviour,
    &[],
    corrupt_token,
)
.memory_rule();

pub(super) const BAD_DEVICE: Rule = portable(
    "portable.error.bad-device",
    "a device id outside 0..device_count is Error::InvalidDevice for allocate, import and \
     create_signal",
    "DESIGN 5.6; core DeviceIpc contract",
    Expect::Behaviour,
    &[],
    bad_device,
)
.memory_rule();

pub(super) const DOUBLE_CLOSE: Rule = portable(
    "portable.error.double-close",
    "releasing a handle twice (free, close, destroy_signal) is Error::UnknownHandle, never \
     undefined behaviour",
    "DESIGN 5.6; core DeviceIpc contract",
    Expect::Behaviour,
    &[],
    double_close,
)
.memory_rule();

fn wrong_backend(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let kind = ctx.target.kind();
    let emulated = ctx.target.emulated();
    let other = TokenOrigin {
        pid: ProcessId(std::process::id().wrapping_add(1)),
        start_time: 1,
        host: HostIdentity::current(),
    };
    let (mem_other, sig_other, mem_same, payload) = match kind {
        BackendKind::Ascend => (
            Mechanism::HipIpcMem,
            Mechanism::HipIpcEvent,
            Mechanism::AscendVmm,
            8,
        ),
        _ => (
            Mechanism::AscendVmm,
            Mechanism::AscendNotify,
            Mechanism::HipIpcMem,
            64,
        ),
    };
    let mem = |mechanism: Mechanism, emulated: bool, len: usize| {
        MemToken::new(MemTokenParts {
            mechanism,
            emulated,
            device: DeviceId(0),
            physical: Default::default(),
            origin: other,
            generation: 1,
            object_size: 4096,
            offset: 0,
            len: 4096,
            payload: vec![7; len],
        })
    };
    let foreign = mem(mem_other, emulated, 64).step("building a token")?;
    let a = expect_error(
        "import of the other vendor's memory token",
        "BackendMismatch",
        rt.import(&foreign, DeviceId(0)),
    )?;
    let signal = SignalToken::new(SignalTokenParts {
        mechanism: sig_other,
        emulated,
        device: DeviceId(0),
        physical: Default::default(),
        origin: other,
        generation: 1,
        payload: vec![7; 65],
    })
    .step("building a signal token")?;
    let b = expect_error(
        "import of the other vendor's signal token",
        "BackendMismatch",
        rt.import_signal(&signal, DeviceId(0)),
    )?;
    let flipped = mem(mem_same, !emulated, payload).step("building a token")?;
    let c = expect_error(
        if emulated {
            "import of a real-runtime token on the emulator"
        } else {
            "import of an emulator token on a real runtime"
        },
        "BackendMismatch",
        rt.import(&flipped, DeviceId(0)),
    )?;
    Ok(format!("{a}; {b}; {c}"))
}

fn corrupt_token(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    let token = buf.export(ExportOptions::default()).step("export")?;
    ctx.shares(&token)?;
    let text = token.to_text();
    let mut checks = Vec::new();
    // Flip one character of the base64 body.
    let mut flipped: Vec<char> = text.chars().collect();
    let at = flipped.len() / 2;
    flipped[at] = if flipped[at] == 'A' { 'B' } else { 'A' };
    let flipped: String = flipped.into_iter().collect();
    checks.push(("one character changed", flipped));
    checks.push(("truncated", text[..text.len() - 5].to_owned()));
    checks.push(("garbage after the prefix", "devipc3:not-a-token".to_owned()));
    checks.push(("empty", String::new()));
    checks.push((
        "another format version",
        text.replacen(devipc::raw::token::TEXT_PREFIX, "devipc9:", 1),
    ));
    for (what, t) in &checks {
        expect_error(what, "InvalidToken", t.parse::<MemToken>())?;
    }
    let mut bytes = token.to_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    expect_error(
        "binary token with one bit flipped",
        "InvalidToken",
        MemToken::from_bytes(&bytes),
    )?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let stoken = sig
        .export(ExportOptions::any_process())
        .step("export signal")?;
    expect_error(
        "a signal token read as a memory token",
        "InvalidToken",
        MemToken::from_bytes(&stoken.to_bytes()),
    )?;
    drop(sig);
    drop(buf);
    Ok(format!(
        "{} corruptions (text, binary, kind) are all InvalidToken",
        checks.len() + 2
    ))
}

fn bad_device(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let count = rt.device_count().step("device_count")?;
    let bad = DeviceId(count);
    let a = expect_error(
        &format!("allocate on device {count}"),
        "InvalidDevice",
        ctx.allocate(&rt, bad, 4096),
    )?;
    let s = expect_error(
        &format!("create_signal on device {count}"),
        "InvalidDevice",
        rt.create_signal(bad),
    )?;
    let buf = ctx.allocate(&rt, DeviceId(0), SIZE).step("allocate")?;
    let token = buf.export(ExportOptions::default()).step("export")?;
    ctx.shares(&token)?;
    let i = expect_error(
        &format!("import on device {count}"),
        "InvalidDevice",
        rt.import(&token, bad),
    )?;
    let raw = expect_error(
        &format!("raw backend import on device {count}"),
        "InvalidDevice",
        rt.backend().import(&token, bad),
    )?;
    drop(buf);
    Ok(format!("{a}; {s}; {i}; {raw}"))
}

fn double_close(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let backend = rt.backend();
    let mut peer = ctx.facade_peer("exporter", false)?;
    let alloc = ctx
        .allocate_raw(backend, DeviceId(0), 4096)
        .step("allocate")?;
    backend.free(alloc.clone()).step("free")?;
    let f = expect_error("second free", "UnknownHandle", backend.free(alloc))?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
    let mapping = backend.import(&token, DeviceId(0)).imported("import")?;
    backend.close(mapping.clone()).step("close")?;
    let c = expect_error("second close", "UnknownHandle", backend.close(mapping))?;
    let sig = backend.create_signal(DeviceId(0)).step("create_signal")?;
    backend.destroy_signal(sig.clone()).step("destroy_signal")?;
    let s = expect_error(
        "second destroy_signal",
        "UnknownHandle",
        backend.destroy_signal(sig),
    )?;
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok(format!("{f}; {c}; {s}"))
}
