//! Ascend parameter checks: NULL pointers, non-zero reserved arguments, unknown
//! enumeration values, zero sizes and out-of-range values are refused, and the same calls
//! with valid arguments succeed.

use devipc_ascend_sys::codes::ACL_ERROR_RT_PARAM_INVALID;
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
use devipc_ascend_sys::types::{
    ACL_HBM_MEM, ACL_HBM_MEM_HUGE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};

use super::{A, BLOCK, CHECK, INVALID_PARAM, UNDOCUMENTED_ENUMS, unmapped};
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::VendorClient;

/// The parameter-check rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.param.null-pointer",
        A,
        "a NULL pointer argument is ACL_ERROR_INVALID_PARAM: aclrtDeviceGetBareTgid(NULL), \
         aclrtIpcMemGetExportKey with a NULL devPtr, aclrtNotifyGetExportKey with a NULL \
         notify; the same calls with valid pointers succeed",
        "api-facts A.10 (NULL pid -> 100000), C.4 (NULL devPtr/key -> 100000), C.6 (NULL \
         notify or key -> 100000), A.11 (RT-SRC memory.cpp, notify.cpp: ACL_REQUIRES_NOT_NULL)",
        INVALID_PARAM,
        &[],
        null_pointer,
    ),
    vendor(
        "ascend.param.reserved-must-be-zero",
        A,
        "reserved arguments must be 0: aclrtMallocPhysical and aclrtMapMem flags of 1 are \
         ACL_ERROR_INVALID_PARAM, and so are aclrtReserveMemAddress flags past 1 (the runtime \
         keeps 1 for compatibility); with 0 the calls succeed, and the reserve with 1",
        "CANN RT-DOC 11-04 (flags, alignment, offset are reserved and must be 0); runtime \
         memory.cpp aclrtReserveMemAddressImpl (flags 0 or 1); api-facts A.5, A.11 \
         (reserved-parameter checks of the ACL wrappers return 100000)",
        INVALID_PARAM,
        &[],
        reserved_zero,
    ),
    vendor(
        "ascend.param.enum-value-checked",
        A,
        "enumeration arguments must be known values: a granularity option of 7, an \
         aclrtMalloc policy of 8 and an aclrtMemcpy kind of 99 are refused; known values work",
        "api-facts A.4, A.5 (the enumerations)",
        Expect::Refused,
        &[Need::EmulatorOnly(UNDOCUMENTED_ENUMS)],
        enum_values,
    ),
    vendor(
        "ascend.param.size-nonzero",
        A,
        "aclrtReserveMemAddress of size 0 is refused; of one granule it succeeds",
        "CANN RT-DOC 11-04 (aclrtReserveMemAddress: size must not be 0); api-facts A.5",
        Expect::Refused,
        &[],
        size_nonzero,
    ),
    vendor(
        "ascend.param.runtime-range-checked",
        A,
        "the runtime layer range-checks aclrtSynchronizeDeviceWithTimeout's timeout (below -1 \
         is refused, -1 and positive values are accepted) and aclrtGetMemInfo's kind (a value \
         past the memory-info kinds is refused, ACL_HBM_MEM reports a non-zero total)",
        "RT-SRC device.cpp aclrtSynchronizeDeviceWithTimeoutImpl; memory.cpp \
         aclrtGetMemInfoImpl -> rtMemGetInfoEx (RT_ERROR_INVALID_VALUE -> 107000)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        runtime_range_checked,
    ),
];

fn null_pointer(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let tgid = ctx.refused("aclrtDeviceGetBareTgid(NULL)", a.pid_null())?;
    a.pid().step("aclrtDeviceGetBareTgid(&pid)")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let key = ctx.refused(
        "aclrtIpcMemGetExportKey with a NULL devPtr",
        a.key_export(0, BLOCK, ACL_IPC_KEY_LEN, 0),
    )?;
    let k = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("aclrtIpcMemGetExportKey of the block")?;
    a.key_close(&k).step("aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let notify = ctx.refused(
        "aclrtNotifyGetExportKey of a NULL notify",
        a.notify_export(0, ACL_IPC_KEY_LEN, 0),
    )?;
    a.notify_export(n, ACL_IPC_KEY_LEN, 0)
        .step("aclrtNotifyGetExportKey of the notify")?;
    a.notify_destroy(n).step("aclrtDestroyNotify")?;
    Ok(format!(
        "{tgid}; {key}; {notify}; each call with a valid pointer succeeds"
    ))
}

fn reserved_zero(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let alloc = a.phys_alloc_flags(0, g, 1);
    if let Ok(h) = alloc {
        let _ = a.phys_free(h);
    }
    let alloc = ctx.refused("aclrtMallocPhysical flags 1", alloc)?;
    let phys = a
        .phys_alloc_flags(0, g, 0)
        .step("aclrtMallocPhysical flags 0")?;
    // aclrtReserveMemAddress takes 0 or 1 (the page-type flag "kept for compatibility",
    // runtime memory.cpp; torch_npu passes 1): 2 is the first refused value.
    let reserve = a.reserve(g, 0, 2);
    if let Ok(va) = reserve {
        let _ = a.release(va);
    }
    let reserve = ctx.refused("aclrtReserveMemAddress flags 2", reserve)?;
    let one = a.reserve(g, 0, 1).step("aclrtReserveMemAddress flags 1")?;
    a.release(one).step("aclrtReleaseMemAddress")?;
    let va = a.reserve(g, 0, 0).step("aclrtReserveMemAddress flags 0")?;
    let map = a.map_at(va, g, 0, phys, 1);
    if map.is_ok() {
        let _ = a.unmap_only(va);
    }
    let map = ctx.refused("aclrtMapMem flags 1", map)?;
    a.map_at(va, g, 0, phys, 0).step("aclrtMapMem flags 0")?;
    unmapped(&mut a, va, phys)?;
    Ok(format!("{alloc}; {reserve}; {map}; with 0 each succeeds"))
}

fn enum_values(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let option = ctx.refused(
        "granularity option 7",
        a.granularity_of(0, ACL_HBM_MEM_HUGE, 7),
    )?;
    a.granularity_of(0, ACL_HBM_MEM_HUGE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM)
        .step("granularity option MINIMUM")?;
    let made = a.malloc_policy(BLOCK, 8);
    if let Ok(p) = made {
        let _ = a.free(p);
    }
    let policy = ctx.refused("aclrtMalloc policy 8", made)?;
    let p = a
        .malloc_policy(BLOCK, ACL_MEM_MALLOC_HUGE_FIRST)
        .step("aclrtMalloc policy HUGE_FIRST")?;
    let kind = ctx.refused("aclrtMemcpy kind 99", a.read_kind(p, CHECK, 99))?;
    a.read_kind(p, CHECK, ACL_MEMCPY_DEVICE_TO_HOST)
        .step("aclrtMemcpy DEVICE_TO_HOST")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!(
        "{option}; {policy}; {kind}; the known values succeed"
    ))
}

fn size_nonzero(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let zero = a.reserve(0, 0, 0);
    if let Ok(va) = zero {
        let _ = a.release(va);
    }
    let seen = ctx.refused("aclrtReserveMemAddress of 0 bytes", zero)?;
    let va = a
        .reserve(g, 0, 0)
        .step("aclrtReserveMemAddress of a granule")?;
    a.release(va).step("aclrtReleaseMemAddress")?;
    Ok(format!("{seen}; one granule succeeds"))
}

fn runtime_range_checked(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let seen_timeout = ctx.refused(
        "aclrtSynchronizeDeviceWithTimeout(-2)",
        a.sync_device_timeout(-2),
    )?;
    a.sync_device_timeout(1000)
        .step("aclrtSynchronizeDeviceWithTimeout(1000)")?;
    a.sync_device_timeout(-1)
        .step("aclrtSynchronizeDeviceWithTimeout(-1) with nothing queued")?;
    // One past the last memory-info kind (ACL_HBM_MEM_P2P_HUGE1G = 11).
    let seen_kind = ctx.refused("aclrtGetMemInfo of kind 12", a.mem_info(12))?;
    let (free, total) = a
        .mem_info(ACL_HBM_MEM)
        .step("aclrtGetMemInfo(ACL_HBM_MEM)")?;
    ensure(total > 0 && free <= total, || {
        format!("aclrtGetMemInfo(ACL_HBM_MEM) reported {free} free of {total}")
    })?;
    Ok(format!(
        "{seen_timeout}; {seen_kind}; in range both succeed (HBM {free} free of {total})"
    ))
}
