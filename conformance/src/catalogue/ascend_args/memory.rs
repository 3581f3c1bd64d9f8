//! Ascend device memory and copies: allocations beyond the device's memory, pointers that
//! are not a block's base or no device memory, copies past `destMax` and copies whose kind
//! does not match their operands are refused.

use devipc_ascend_sys::types::{ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE};

use super::{A, BLOCK, CHECK, UNDEFINED_HANDLES};
use crate::catalogue::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::VendorClient;

/// The memory and copy rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.mem.device-memory-limit",
        A,
        "an aclrtMalloc larger than any device's memory (1 TiB) is refused; 2 MiB succeeds",
        "api-facts A.11 (DRV_ERROR_OUT_OF_MEMORY -> 207001 ACL_ERROR_RT_MEMORY_ALLOCATION)",
        Expect::Refused,
        &[],
        device_memory_limit,
    ),
    vendor(
        "ascend.mem.known-device-pointer",
        A,
        "aclrtFree of a pointer inside a block (not its base) and aclrtMemGetAddressRange of \
         a pointer that is no device memory are refused; the block's base works for both",
        "api-facts A.3 (aclrtFree frees aclrtMalloc memory; aclrtMemGetAddressRange covers \
         aclrtMalloc, host and VMM memory)",
        Expect::Refused,
        &[Need::EmulatorOnly(UNDEFINED_HANDLES)],
        known_pointer,
    ),
    vendor(
        "ascend.mem.copy-within-bounds",
        A,
        "aclrtMemcpy of 128 bytes into a destination whose stated capacity (destMax) is 64 is \
         refused; with destMax 128 it succeeds",
        "RT-HDR acl_rt.h (aclrtMemcpy: destMax is the destination's capacity); api-facts A.3",
        Expect::Refused,
        &[],
        copy_within_bounds,
    ),
    vendor(
        "ascend.mem.copy-kind-matches",
        A,
        "an aclrtMemcpy whose kind does not match its operands (device memory into a host \
         buffer as ACL_MEMCPY_HOST_TO_DEVICE) is refused; as DEVICE_TO_HOST it succeeds",
        "api-facts A.4 (aclrtMemcpyKind)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "on a device a copy of the wrong kind moves data between the wrong address spaces; \
             the vendor documents no refusal, so the suite does not provoke it",
        )],
        copy_kind,
    ),
];

fn device_memory_limit(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let huge = a.malloc(1 << 40);
    if let Ok(p) = huge {
        let _ = a.free(p);
    }
    let seen = ctx.refused("aclrtMalloc of 1 TiB", huge)?;
    let p = a.malloc(BLOCK).step("aclrtMalloc of 2 MiB")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; 2 MiB succeed"))
}

fn known_pointer(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let inner = ctx.refused("aclrtFree inside the block", a.free(p + 4096))?;
    let nowhere = ctx.refused(
        "aclrtMemGetAddressRange of an address that is no device memory",
        a.address_range(0x1000),
    )?;
    let (base, size) = a
        .address_range(p + 4096)
        .step("aclrtMemGetAddressRange inside the block")?;
    ensure(base == p && size >= BLOCK, || {
        format!("the block at {p:#x} has range {base:#x}+{size:#x}")
    })?;
    a.free(p).step("aclrtFree of the base")?;
    Ok(format!(
        "{inner}; {nowhere}; the base frees and resolves the block"
    ))
}

fn copy_within_bounds(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    // The block is far larger than the copy, so a runtime that ignored destMax would not
    // write outside it.
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let bytes = pattern(4, 128);
    let seen = ctx.refused(
        "aclrtMemcpy of 128 bytes with destMax 64",
        a.write_bounded(p, 64, &bytes),
    )?;
    a.write_bounded(p, 128, &bytes)
        .step("aclrtMemcpy of 128 bytes with destMax 128")?;
    same_bytes(
        "the copied bytes",
        &a.read(p, 128).step("read back")?,
        &bytes,
    )?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; with destMax 128 the copy succeeds"))
}

fn copy_kind(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    a.write(p, &pattern(5, CHECK)).step("fill")?;
    let seen = ctx.refused(
        "device to host copy declared HOST_TO_DEVICE",
        a.read_kind(p, CHECK, ACL_MEMCPY_HOST_TO_DEVICE),
    )?;
    same_bytes(
        "the DEVICE_TO_HOST copy",
        &a.read_kind(p, CHECK, ACL_MEMCPY_DEVICE_TO_HOST)
            .step("the same copy as DEVICE_TO_HOST")?,
        &pattern(5, CHECK),
    )?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; as DEVICE_TO_HOST it succeeds"))
}
