//! `aclrtMemcpyBatchAsync` (issue 25): the ACL wrapper's argument checks, the runtime's
//! checks of the attribute indexes and of each descriptor (location, direction), and
//! `*failIndex` (hicann/runtime `src/acl/aclrt_impl/memory.cpp`, `ApiImpl::LoopMemcpyAsync`,
//! `docs/api_docs/aclrtMemcpyBatchAsync.md`). Every batch runs on the default stream of
//! device 0, between one device buffer and host buffers of the shell.

use devipc_ascend_sys::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_PARAM_INVALID};
use devipc_ascend_sys::types::{ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_LOCATION_TYPE_HOST};

use super::A;
use crate::catalogue::{Step, ensure, pattern, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};
use crate::shell::acl::{
    Acl, AclShell, BatchAttr, BatchDescriptor, BatchReply, FAIL_INDEX_UNTOUCHED, Operand,
};
use crate::shell::{Failure, Local, VendorClient};

const WRAPPER: &str = "hicann/runtime src/acl/aclrt_impl/memory.cpp (MemcpyBatchImpl, \
                       ValidateMemcpyBatchParams)";
const RUNTIME: &str = "hicann/runtime ApiImpl::LoopMemcpyAsync / CheckMemCpyAttr; \
                       docs/api_docs/aclrtMemcpyBatchAsync.md";
const ACL_PARAM: Expect = Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM);
const RT_PARAM: Expect = Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID);
/// Bytes of each buffer.
const LEN: usize = 4096;

/// The batch rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.batch.count-nonzero",
        A,
        "aclrtMemcpyBatchAsync with numBatches 0 is ACL_ERROR_INVALID_PARAM; *failIndex is not \
         written",
        WRAPPER,
        ACL_PARAM,
        &[],
        |ctx| with_device(ctx, count_nonzero),
    ),
    vendor(
        "ascend.batch.dest-max-covers-size",
        A,
        "a descriptor with sizes[i] > destMaxs[i] is ACL_ERROR_INVALID_PARAM; *failIndex is not \
         written",
        WRAPPER,
        ACL_PARAM,
        &[],
        |ctx| with_device(ctx, dest_max),
    ),
    vendor(
        "ascend.batch.attr-reserved-zero",
        A,
        "an attribute with a non-zero rsv byte is ACL_ERROR_INVALID_PARAM",
        WRAPPER,
        ACL_PARAM,
        &[],
        |ctx| with_device(ctx, reserved),
    ),
    vendor(
        "ascend.batch.attr-indexes-valid",
        A,
        "attrsIndexes not starting at 0 is ACL_ERROR_RT_PARAM_INVALID with *failIndex = \
         SIZE_MAX",
        "hicann/runtime runtime tests (memcpy_batch_async_param_err1); \
         docs/api_docs/aclrtMemcpyBatchAsync.md",
        RT_PARAM,
        &[],
        |ctx| with_device(ctx, indexes),
    ),
    vendor(
        "ascend.batch.descriptor-valid",
        A,
        "a descriptor of 0 bytes is ACL_ERROR_RT_PARAM_INVALID with *failIndex = its index",
        RUNTIME,
        RT_PARAM,
        &[],
        |ctx| with_device(ctx, descriptor_valid),
    ),
    vendor(
        "ascend.batch.locations-match",
        A,
        "an attribute naming device 1 for memory of device 0 is ACL_ERROR_RT_PARAM_INVALID with \
         *failIndex = the descriptor",
        RUNTIME,
        RT_PARAM,
        &[],
        |ctx| with_device(ctx, locations),
    ),
    vendor(
        "ascend.batch.host-device-only",
        A,
        "a device-to-device descriptor is ACL_ERROR_RT_PARAM_INVALID with *failIndex = its \
         index",
        RUNTIME,
        RT_PARAM,
        &[],
        |ctx| with_device(ctx, host_device_only),
    ),
    vendor(
        "ascend.batch.fail-index-reported",
        A,
        "a host-to-device then device-to-host batch moves the bytes and leaves *failIndex alone; \
         when descriptor 1 fails, *failIndex is 1",
        RUNTIME,
        Expect::Behaviour,
        &[],
        |ctx| with_device(ctx, fail_index),
    ),
    vendor(
        "ascend.batch.earlier-copies-run",
        A,
        "when descriptor 1 of 3 fails, descriptor 0's copy still runs and descriptor 2's does \
         not",
        RUNTIME,
        Expect::Behaviour,
        &[],
        |ctx| with_device(ctx, earlier_copies_run),
    ),
];

type Shell = Acl<Local<AclShell>>;

/// Runs `body` with device 0 set and one device buffer of [`LEN`] bytes (pattern 1).
fn with_device(ctx: &mut Ctx, body: fn(&Ctx, &mut Shell, u64) -> Verdict) -> Verdict {
    let mut h = ctx.acl()?;
    h.set_device(0).step("aclrtSetDevice(0)")?;
    let d = h.malloc(LEN).step("aclrtMalloc")?;
    h.write(d, &pattern(1, LEN)).step("aclrtMemcpy")?;
    let seen = body(ctx, &mut h, d);
    let _ = h.free(d);
    seen
}

fn desc(dst: Operand, src: Operand, size: usize) -> BatchDescriptor {
    BatchDescriptor {
        dst,
        dest_max: LEN,
        src,
        size,
    }
}

const HOST: (i32, u32) = (ACL_MEM_LOCATION_TYPE_HOST, 0);
const DEV0: (i32, u32) = (ACL_MEM_LOCATION_TYPE_DEVICE, 0);

/// Host to device 0.
const H2D: BatchAttr = BatchAttr {
    dst: DEV0,
    src: HOST,
    dirty_rsv: false,
};
/// Device 0 to host.
const D2H: BatchAttr = BatchAttr {
    dst: HOST,
    src: DEV0,
    dirty_rsv: false,
};

fn outcome(r: &BatchReply) -> Result<(), Failure> {
    r.failure.clone().map_or(Ok(()), Err)
}

fn fail_index_is(r: &BatchReply, want: u64) -> Result<(), crate::rule::Stop> {
    ensure(r.fail_index == want, || {
        format!("*failIndex is {:#x}, not {want:#x}", r.fail_index)
    })
}

fn count_nonzero(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let one = [desc(Operand::Device(d), Operand::Host(0, 0), 16)];
    let r = h
        .batch_counted(vec![vec![0; LEN]], &one, 0, &[H2D], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("numBatches 0", outcome(&r))?;
    fail_index_is(&r, FAIL_INDEX_UNTOUCHED)?;
    Ok(seen)
}

fn dest_max(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let mut one = desc(Operand::Device(d), Operand::Host(0, 0), 64);
    one.dest_max = 32;
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &[one], &[H2D], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("sizes[0] 64 > destMaxs[0] 32", outcome(&r))?;
    fail_index_is(&r, FAIL_INDEX_UNTOUCHED)?;
    Ok(seen)
}

fn reserved(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let one = [desc(Operand::Device(d), Operand::Host(0, 0), 16)];
    let dirty = BatchAttr {
        dirty_rsv: true,
        ..H2D
    };
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &one, &[dirty], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    ctx.refused("attrs[0].rsv[0] = 1", outcome(&r))
}

fn indexes(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let two = [
        desc(Operand::Device(d), Operand::Host(0, 0), 16),
        desc(Operand::Device(d + 64), Operand::Host(0, 0), 16),
    ];
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &two, &[H2D], &[1])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("attrsIndexes {1}", outcome(&r))?;
    fail_index_is(&r, u64::MAX)?;
    Ok(format!("{seen}; *failIndex = SIZE_MAX"))
}

fn descriptor_valid(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let two = [
        desc(Operand::Device(d), Operand::Host(0, 0), 16),
        desc(Operand::Device(d + 64), Operand::Host(0, 0), 0),
    ];
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &two, &[H2D], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("a 0-byte descriptor 1", outcome(&r))?;
    fail_index_is(&r, 1)?;
    Ok(format!("{seen}; *failIndex = 1"))
}

fn locations(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let one = [desc(Operand::Device(d), Operand::Host(0, 0), 16)];
    let wrong = BatchAttr {
        dst: (ACL_MEM_LOCATION_TYPE_DEVICE, 1),
        ..H2D
    };
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &one, &[wrong], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("dstLoc device 1 for memory of device 0", outcome(&r))?;
    fail_index_is(&r, 0)?;
    Ok(format!("{seen}; *failIndex = 0"))
}

fn host_device_only(ctx: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let one = [desc(Operand::Device(d + 2048), Operand::Device(d), 16)];
    let d2d = BatchAttr {
        dst: DEV0,
        src: DEV0,
        dirty_rsv: false,
    };
    let r = h
        .memcpy_batch(Vec::new(), &one, &[d2d], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    let seen = ctx.refused("a device-to-device descriptor", outcome(&r))?;
    fail_index_is(&r, 0)?;
    Ok(format!("{seen}; *failIndex = 0"))
}

fn fail_index(_: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let input = pattern(7, 256);
    let round_trip = [
        desc(Operand::Device(d), Operand::Host(0, 0), 256),
        desc(Operand::Host(1, 0), Operand::Device(d), 256),
    ];
    let ok = h
        .memcpy_batch(
            vec![input.clone(), vec![0; 256]],
            &round_trip,
            &[H2D, D2H],
            &[0, 1],
        )
        .step("aclrtMemcpyBatchAsync")?;
    if let Some(f) = ok.failure {
        return Err(crate::rule::Stop::fail(format!(
            "a valid batch failed: {f}"
        )));
    }
    ensure(ok.hosts[1] == input, || {
        "the device-to-host descriptor did not bring back the host-to-device bytes".to_owned()
    })?;
    fail_index_is(&ok, FAIL_INDEX_UNTOUCHED)?;
    let bad = [
        desc(Operand::Device(d), Operand::Host(0, 0), 16),
        desc(Operand::Device(d + 64), Operand::Host(0, 0), 0),
    ];
    let r = h
        .memcpy_batch(vec![vec![0; LEN]], &bad, &[H2D], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    ensure(r.failure.is_some(), || {
        "a 0-byte descriptor passed".to_owned()
    })?;
    fail_index_is(&r, 1)?;
    Ok("a round trip moves the bytes, *failIndex untouched; descriptor 1 failing: 1".to_owned())
}

fn earlier_copies_run(_: &Ctx, h: &mut Shell, d: u64) -> Verdict {
    let three = [
        desc(Operand::Device(d), Operand::Host(0, 0), 64),
        desc(Operand::Device(d + 64), Operand::Host(0, 0), 0),
        desc(Operand::Device(d + 128), Operand::Host(0, 0), 64),
    ];
    let r = h
        .memcpy_batch(vec![vec![0xee; LEN]], &three, &[H2D], &[0])
        .step("aclrtMemcpyBatchAsync")?;
    ensure(r.failure.is_some(), || {
        "a 0-byte descriptor passed".to_owned()
    })?;
    let now = h.read(d, 192).step("aclrtMemcpy")?;
    ensure(now[..64].iter().all(|&b| b == 0xee), || {
        "descriptor 0 did not copy".to_owned()
    })?;
    ensure(now[128..192] == pattern(1, LEN)[128..192], || {
        "descriptor 2 copied after descriptor 1 failed".to_owned()
    })?;
    Ok("descriptor 0 copied, descriptor 2 not".to_owned())
}
