//! `hipMemcpyBatchAsync` (HIP 7.1, issue 25): its argument checks, `*failIdx`, and what
//! happens to the descriptors before a failing one (CLR `hipamd/src/hip_memory.cpp`).
//!
//! The function exists from HIP 7.1. On the emulator the rules run in a peer that answers
//! as 7.1, whatever version the run emulates; on a real runtime they run here and skip
//! below 7.1.

use devipc_hip_sys::hipErrorNotSupported;

use super::{CHECK, H, INVALID_VALUE};
use crate::catalogue::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::hip::{BatchReply, FAIL_IDX_UNTOUCHED, Hip, HipCommand};
use crate::shell::{Exec, Failure, VendorClient};

const SOURCE: &str = "CLR hipamd/src/hip_memory.cpp (hipMemcpyBatchAsync); hip-tests \
                      catch/unit/memory/hipMemcpyBatchAsync.cc";
/// Bytes of each buffer.
const LEN: usize = 4096;

/// The batch rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.batch.arguments-required",
        H,
        "hipMemcpyBatchAsync with count 0 or a NULL dsts is hipErrorInvalidValue, and *failIdx \
         is not written",
        SOURCE,
        INVALID_VALUE,
        &[],
        |ctx| on_batch_runtime(ctx, arguments_required, arguments_required),
    ),
    vendor(
        "hip.batch.attrs-not-supported",
        H,
        "hipMemcpyBatchAsync with numAttrs 1 is hipErrorNotSupported and copies nothing",
        SOURCE,
        Expect::Code("hipErrorNotSupported", hipErrorNotSupported),
        &[],
        |ctx| on_batch_runtime(ctx, attrs_not_supported, attrs_not_supported),
    ),
    vendor(
        "hip.batch.zero-size-rejected",
        H,
        "a descriptor of 0 bytes fails hipMemcpyBatchAsync with hipErrorInvalidValue and \
         *failIdx = its index",
        SOURCE,
        INVALID_VALUE,
        &[],
        |ctx| on_batch_runtime(ctx, zero_size_rejected, zero_size_rejected),
    ),
    vendor(
        "hip.batch.descriptors-checked-as-memcpy",
        H,
        "a descriptor running past the end of its device allocation fails hipMemcpyBatchAsync \
         with hipErrorInvalidValue",
        SOURCE,
        INVALID_VALUE,
        &[],
        |ctx| on_batch_runtime(ctx, out_of_bounds, out_of_bounds),
    ),
    vendor(
        "hip.batch.fail-index-reported",
        H,
        "*failIdx is SIZE_MAX after a successful hipMemcpyBatchAsync and the index of the \
         failing descriptor after a failed one",
        SOURCE,
        Expect::Behaviour,
        &[],
        |ctx| on_batch_runtime(ctx, fail_index, fail_index),
    ),
    vendor(
        "hip.batch.earlier-copies-run",
        H,
        "when descriptor 1 of 3 fails, descriptor 0's copy still runs and descriptor 2's does \
         not",
        SOURCE,
        Expect::Behaviour,
        &[],
        |ctx| on_batch_runtime(ctx, earlier_copies_run, earlier_copies_run),
    ),
    vendor(
        "hip.batch.null-stream-accepted",
        H,
        "hipMemcpyBatchAsync on the null stream copies every descriptor",
        SOURCE,
        Expect::Behaviour,
        &[],
        |ctx| on_batch_runtime(ctx, null_stream, null_stream),
    ),
];

type Body<E> = fn(&Ctx, &mut Hip<E>, &mut Buffers) -> Verdict;

/// Runs `body` where `hipMemcpyBatchAsync` exists: on the emulator in a peer answering as
/// HIP 7.1, on a real runtime here (skipped below 7.1).
fn on_batch_runtime(
    ctx: &mut Ctx,
    here: Body<crate::shell::Local<crate::shell::hip::HipShell>>,
    peer: Body<crate::shell::Remote<HipCommand>>,
) -> Verdict {
    if ctx.target.emulated() {
        let mut p = ctx.hip_peer_emulating("hip-7.1", "7.1")?;
        let seen = with_buffers(ctx, &mut p, peer);
        p.0.finish()?;
        return seen;
    }
    let mut h = ctx.hip()?;
    let v = h.version().step("hipRuntimeGetVersion")?;
    if v < 70_100_000 {
        return Err(Stop::Skip(format!(
            "HIP {v} has no hipMemcpyBatchAsync (from 7.1)"
        )));
    }
    with_buffers(ctx, &mut h, here)
}

/// Three device buffers of [`LEN`] bytes on device 0, filled with patterns 1, 2, 3.
struct Buffers {
    a: u64,
    b: u64,
    c: u64,
}

fn with_buffers<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, body: Body<E>) -> Verdict {
    h.set_device(0).step("hipSetDevice(0)")?;
    let mut made = Vec::new();
    for seed in 1..=3 {
        let p = h.malloc(LEN).step("hipMalloc")?;
        made.push(p);
        h.write(p, &pattern(seed, LEN)).step("hipMemcpy")?;
    }
    let mut bufs = Buffers {
        a: made[0],
        b: made[1],
        c: made[2],
    };
    let seen = body(ctx, h, &mut bufs);
    for p in made {
        let _ = h.free(p);
    }
    seen
}

/// The reply's failure as a result, for [`Ctx::refused`].
fn outcome(r: &BatchReply) -> Result<(), Failure> {
    r.failure.clone().map_or(Ok(()), Err)
}

fn untouched(what: &str, r: &BatchReply) -> Result<(), Stop> {
    ensure(r.fail_idx == FAIL_IDX_UNTOUCHED, || {
        format!("{what}: *failIdx was written ({:#x})", r.fail_idx)
    })
}

fn arguments_required<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let one = [(b.b, b.a, LEN)];
    let zero = h
        .batch_raw(&one, 0, false, 0, 0)
        .step("hipMemcpyBatchAsync")?;
    let count = ctx.refused("count 0", outcome(&zero))?;
    untouched("count 0", &zero)?;
    let null = h
        .batch_raw(&one, 1, true, 0, 0)
        .step("hipMemcpyBatchAsync")?;
    let dsts = ctx.refused("dsts NULL", outcome(&null))?;
    untouched("dsts NULL", &null)?;
    Ok(format!("{count}; {dsts}; *failIdx untouched"))
}

fn attrs_not_supported<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let r = h
        .memcpy_batch(&[(b.b, b.a, LEN)], 1, 0)
        .step("hipMemcpyBatchAsync")?;
    let seen = ctx.refused("numAttrs 1", outcome(&r))?;
    same_bytes(
        "the destination after the refused batch",
        &h.read(b.b, CHECK).step("hipMemcpy")?,
        &pattern(2, CHECK),
    )?;
    Ok(format!("{seen}; nothing copied"))
}

fn zero_size_rejected<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let r = h
        .memcpy_batch(&[(b.b, b.a, LEN), (b.c, b.a, 0)], 0, 0)
        .step("hipMemcpyBatchAsync")?;
    let seen = ctx.refused("a 0-byte descriptor 1", outcome(&r))?;
    ensure(r.fail_idx == 1, || {
        format!("*failIdx is {}, not 1", r.fail_idx)
    })?;
    Ok(format!("{seen}; *failIdx = 1"))
}

fn out_of_bounds<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let r = h
        .memcpy_batch(&[(b.c + 8, b.a, LEN)], 0, 0)
        .step("hipMemcpyBatchAsync")?;
    ctx.refused("a descriptor 8 bytes past its allocation", outcome(&r))
}

fn fail_index<E: Exec<HipCommand>>(_: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let ok = h
        .memcpy_batch(&[(b.b, b.a, LEN)], 0, 0)
        .step("hipMemcpyBatchAsync")?;
    ensure(ok.failure.is_none(), || {
        format!("a valid batch failed: {ok:?}")
    })?;
    ensure(ok.fail_idx == u64::MAX, || {
        format!(
            "*failIdx is {:#x} after a successful batch, not SIZE_MAX",
            ok.fail_idx
        )
    })?;
    let bad = h
        .memcpy_batch(&[(b.b, b.a, LEN), (b.c + 8, b.a, LEN)], 0, 0)
        .step("hipMemcpyBatchAsync")?;
    ensure(bad.failure.is_some(), || {
        "an out-of-bounds descriptor passed".to_owned()
    })?;
    ensure(bad.fail_idx == 1, || {
        format!(
            "*failIdx is {:#x} after descriptor 1 failed, not 1",
            bad.fail_idx
        )
    })?;
    Ok("*failIdx: SIZE_MAX on success, 1 when descriptor 1 fails".to_owned())
}

fn earlier_copies_run<E: Exec<HipCommand>>(_: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let r = h
        .memcpy_batch(
            &[(b.b, b.a, LEN), (b.c + 8, b.a, LEN), (b.c, b.a, LEN)],
            0,
            0,
        )
        .step("hipMemcpyBatchAsync")?;
    ensure(r.failure.is_some(), || {
        "an out-of-bounds descriptor passed".to_owned()
    })?;
    same_bytes(
        "descriptor 0's destination",
        &h.read(b.b, CHECK).step("hipMemcpy")?,
        &pattern(1, CHECK),
    )?;
    same_bytes(
        "descriptor 2's destination",
        &h.read(b.c, CHECK).step("hipMemcpy")?,
        &pattern(3, CHECK),
    )?;
    Ok("descriptor 0 copied, descriptor 2 not".to_owned())
}

fn null_stream<E: Exec<HipCommand>>(_: &Ctx, h: &mut Hip<E>, b: &mut Buffers) -> Verdict {
    let r = h
        .memcpy_batch(&[(b.b, b.a, LEN), (b.c, b.a, 64)], 0, 0)
        .step("hipMemcpyBatchAsync")?;
    if let Some(f) = r.failure {
        return Err(Stop::fail(format!("on the null stream: {f}")));
    }
    same_bytes(
        "descriptor 0's destination",
        &h.read(b.b, CHECK).step("hipMemcpy")?,
        &pattern(1, CHECK),
    )?;
    same_bytes(
        "descriptor 1's destination",
        &h.read(b.c, 64).step("hipMemcpy")?,
        &pattern(1, 64),
    )?;
    Ok("both descriptors copied on the null stream".to_owned())
}
