//! Ascend vendor rules for argument checks, init counting, VMM mappings, copies and
//! ownership: the emulator rules that only the emulator's unit tests checked before
//! (issue 11, mutation completeness). Each reuses the emulator's rule id, so on the
//! emulator a refusal must name it, and `DEVIPC_EMU_BREAK_RULE=<id>` makes it fail.
//!
//! Every "refused" rule makes the same call with the rule satisfied and requires it to
//! succeed (a positive control), so no rule passes merely because a call always fails.
//! Rules whose refusal the vendor does not document (or whose violation is undefined on
//! a device) are emulator-only and say why; on a real runtime they are skipped.

use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_PARAM_INVALID,
};
use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
};
use devipc_ascend_sys::types::{
    ACL_DDR_MEM, ACL_HBM_MEM, ACL_HBM_MEM_HUGE, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_HANDLE_TYPE_POSIX, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READ, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};

use super::ascend::{key_cross_device, key_exported, key_release};
use super::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Applies, Expect, Need, Rule, Stop, Verdict};
use crate::shell::acl::Acl;
use crate::shell::{Exec, Pids, VendorClient};

const A: Applies = Applies::Ascend;
/// Bytes checked in transfers.
const CHECK: usize = 256;
/// `aclrtMalloc` blocks: one 2 MiB huge page (see `KEY_BLOCK` in `ascend/mod.rs`).
const BLOCK: usize = 2 << 20;
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];
const INVALID_PARAM: Expect = Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM);

const UNDOCUMENTED_ENUMS: &str = "api-facts A.4/A.5 list the enumerations' values, but no \
    vendor document says that other values are refused, or with which code";
const UNDEFINED_HANDLES: &str = "real handles and pointers are the runtime's own objects; \
    passing a stale or made-up one is undefined behaviour there, not a documented refusal";

/// The Ascend argument, init, VMM-mapping, copy and ownership rules.
pub static RULES: &[Rule] = &[
    // ---- parameters --------------------------------------------------------------------
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
    // ---- init ------------------------------------------------------------------------
    vendor(
        "ascend.init.repeat-initialize-counted",
        A,
        "aclInit is reference counted: a second aclInit in the process returns \
         ACL_ERROR_REPEAT_INITIALIZE and counts, so two aclFinalize calls succeed after it",
        "api-facts A.3 (RT-SRC acl.cpp)",
        Expect::Code("ACL_ERROR_REPEAT_INITIALIZE", ACL_ERROR_REPEAT_INITIALIZE),
        &[],
        init_counted,
    ),
    vendor(
        "ascend.init.repeat-finalize",
        A,
        "aclFinalize balancing the process's aclInit succeeds; one more is \
         ACL_ERROR_REPEAT_FINALIZE",
        "api-facts A.3 (RT-SRC acl.cpp)",
        Expect::Code("ACL_ERROR_REPEAT_FINALIZE", ACL_ERROR_REPEAT_FINALIZE),
        &[],
        finalize_repeat,
    ),
    // ---- handles, peers --------------------------------------------------------------
    vendor(
        "ascend.handle.valid",
        A,
        "stale or unknown objects are refused: a notify destroyed twice, a physical handle \
         freed twice, an unknown shareable handle; the first destroy and free succeed",
        "api-facts A.11 (DRV_ERROR_INVALID_HANDLE -> 107017)",
        Expect::Refused,
        &[Need::EmulatorOnly(UNDEFINED_HANDLES)],
        handle_valid,
    ),
    vendor(
        "ascend.peer.distinct-devices",
        A,
        "aclrtDeviceEnablePeerAccess to the current device itself is refused; to another \
         device it succeeds",
        "CANN RT-DOC 04 device management (peerDeviceId must differ from the current device); \
         api-facts A.10",
        Expect::Refused,
        TWO_DEVICES,
        peer_distinct,
    ),
    vendor(
        "ascend.peer.topology-respected",
        A,
        "peer access between two devices aclrtDeviceCanAccessPeer reports as unconnected is \
         refused, by aclrtDeviceEnablePeerAccess and by a key import with ENABLE_PEER_ACCESS; \
         between connected devices both succeed",
        "CANN RT-DOC 04 (aclrtDeviceCanAccessPeer before aclrtDeviceEnablePeerAccess); \
         RT-DOC 11-07; api-facts A.10, C.4",
        Expect::Refused,
        TWO_DEVICES,
        peer_topology,
    ),
    // ---- memory and copies -------------------------------------------------------------
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
    // ---- VMM ---------------------------------------------------------------------------
    vendor(
        "ascend.vmm.prop-validated",
        A,
        "aclrtMemGetAllocationGranularity of a device allocation with a DDR (host-only) memory \
         attribute is ACL_ERROR_INVALID_PARAM; with ACL_HBM_MEM_HUGE it succeeds",
        "api-facts A.5 (RT-SRC aclrtMemGetAllocationGranularityImpl: a DDR attribute with a \
         device location returns ACL_ERROR_INVALID_PARAM; RT-DOC 11-04: DDR kinds are host-only)",
        INVALID_PARAM,
        &[],
        prop_validated,
    ),
    vendor(
        "ascend.vmm.size-aligned-to-granularity",
        A,
        "aclrtMallocPhysical of half a granule is refused; of one granule it succeeds",
        "CANN RT-DOC 11-04 (aclrtMallocPhysical: size aligned to the granularity); api-facts \
         A.5, C.5",
        Expect::Refused,
        &[],
        size_granularity,
    ),
    vendor(
        "ascend.vmm.map-whole-handle",
        A,
        "aclrtMapMem of half a two-granule physical allocation is refused; of all of it, it \
         succeeds",
        "CANN RT-DOC 11-04 (aclrtMapMem: size must equal the aclrtMallocPhysical size); \
         api-facts A.5",
        Expect::Refused,
        &[],
        map_whole,
    ),
    vendor(
        "ascend.vmm.map-inside-free-reserved-range",
        A,
        "aclrtMapMem onto a reserved range that already holds a mapping is refused; onto the \
         free range it succeeds",
        "api-facts A.5 (aclrtMapMem maps into an aclrtReserveMemAddress range)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "RT-DOC 11-04 maps into reservations but does not say how an occupied or \
             unreserved range is refused",
        )],
        map_reserved,
    ),
    vendor(
        "ascend.vmm.unmap-before-release",
        A,
        "aclrtReleaseMemAddress of a reservation that still holds a mapping is refused; after \
         aclrtUnmapMem it succeeds",
        "CANN RT-DOC 11-04 (aclrtReleaseMemAddress requires aclrtUnmapMem first); api-facts A.5",
        Expect::Refused,
        &[],
        unmap_before_release,
    ),
    vendor(
        "ascend.vmm.set-access-matches-mapping",
        A,
        "aclrtMemSetAccess of half a mapping is refused; of the whole mapping it succeeds",
        "CANN RT-DOC 11-04 (aclrtMemSetAccess: virPtr and size equal those of aclrtMapMem); \
         api-facts A.5",
        Expect::Refused,
        &[],
        set_access_matches,
    ),
    vendor(
        "ascend.vmm.access-respected",
        A,
        "a copy into a mapping whose access is READ is refused while reading it works; after \
         aclrtMemSetAccess READWRITE the copy succeeds",
        "api-facts A.5 (aclrtMemAccessFlags, aclrtMemSetAccess)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "a device faults on a write to a read-only mapping rather than refusing the copy; \
             the suite does not provoke device faults",
        )],
        access_respected,
    ),
    vendor(
        "ascend.vmm.free-deferred-until-unmapped",
        A,
        "aclrtFreePhysical of mapped memory succeeds but does not release it: the mapping \
         keeps its bytes and takes writes until aclrtUnmapMem",
        "CANN RT-DOC 11-04 (aclrtFreePhysical does not free memory that is still mapped; it \
         is released once unmapped); api-facts A.5",
        Expect::Behaviour,
        &[],
        free_deferred,
    ),
    vendor(
        "ascend.vmm.export-handle-type-none",
        A,
        "aclrtMemExportToShareableHandle with handleType ACL_MEM_HANDLE_TYPE_POSIX is \
         ACL_ERROR_INVALID_PARAM; with ACL_MEM_HANDLE_TYPE_NONE it succeeds",
        "api-facts A.6 (RT-SRC memory.cpp ACL_REQUIRES_PARAM_EQUAL_REPORT: V1 handleType must \
         be NONE)",
        INVALID_PARAM,
        &[],
        export_handle_type,
    ),
    vendor(
        "ascend.vmm.export-flags-valid",
        A,
        "aclrtMemExportToShareableHandle with flags 0x2 is refused; with DEFAULT it succeeds",
        "api-facts A.6 (ACL_RT_VMM_EXPORT_FLAG_DEFAULT 0x0, DISABLE_PID_VALIDATION 0x1)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "api-facts A.6 defines only 0x0 and 0x1; no vendor document says other bits are \
             refused",
        )],
        export_flags,
    ),
    vendor(
        "ascend.ipc.only-exporter-sets-trustlist",
        A,
        "only the exporter sets a trustlist: an importer's aclrtMemSetPidToShareableHandle, \
         aclrtIpcMemSetImportPid and aclrtNotifySetImportPid are refused, while the \
         exporter's succeed",
        "api-facts C.4, C.5, C.6 (in the documented flows the exporter grants)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "the vendor's flows have the exporter grant, but no document says another \
             process's grant is refused",
        )],
        only_exporter_trusts,
    ),
    // ---- IPC keys ----------------------------------------------------------------------
    vendor(
        "ascend.ipc-key.exports-malloc-memory",
        A,
        "aclrtIpcMemGetExportKey of a range running past its aclrtMalloc block is refused; of \
         the block it succeeds",
        "CANN RT-DOC 11-07 (keys export aclrtMalloc memory); api-facts A.7, C.4",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "api-facts C.4 leaves partial and interior ranges UNVERIFIED (D.5), so a range \
             beyond the block is not provoked on a device",
        )],
        key_malloc_only,
    ),
    vendor(
        "ascend.ipc-key.page-aligned",
        A,
        "aclrtIpcMemGetExportKey of a range starting one byte into a block (not page aligned) \
         is refused; from the block's base it succeeds",
        "CANN RT-DOC FAQ (IPC memory sharing needs page-table aligned ranges: export of an \
         unaligned range fails); api-facts C.4",
        Expect::Refused,
        &[],
        key_page_aligned,
    ),
    vendor(
        "ascend.ipc-key.cross-device-copy-restricted",
        A,
        "memory imported by key on another device than its owner's (so the mapping is on \
         device 1) takes no synchronous aclrtMemcpy: a read from it is refused, while an \
         asynchronous device-to-device copy of it succeeds and carries the owner's bytes",
        "CANN RT-DOC 11-07 (imported memory across devices: no host copies, no \
         ACL_MEMCPY_DEFAULT, only asynchronous device to device); api-facts C.4",
        Expect::Refused,
        TWO_DEVICES,
        // The same scenario as ascend.ipc-key.cross-device-import-with-peer-access, which
        // checks this refusal by its id.
        key_cross_device,
    ),
    // ---- notify ------------------------------------------------------------------------
    vendor(
        "ascend.notify.flags-valid",
        A,
        "the memory flag 0x1 is not a notify flag: aclrtNotifyGetExportKey and \
         aclrtNotifyImportByKey with 0x1 are refused; the export with 0x02 \
         (DISABLE_PID_VALIDATION) and the import with 0 succeed",
        "api-facts A.8, C.6 (the notify flags are 0x02, not 0x1)",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "api-facts A.8 defines only 0x0 and 0x02; no vendor document says 0x1 is refused \
             rather than ignored",
        )],
        notify_flags,
    ),
];

// ---------------------------------------------------------------------------------------
// Helpers.

/// The peer's bare tgid after `aclrtSetDevice(dev)`.
fn peer_on<E: Exec>(b: &mut Acl<E>, dev: u32) -> Result<i32, Stop> {
    b.set_device(dev).step("peer aclrtSetDevice")?;
    b.pid().step("peer aclrtDeviceGetBareTgid")
}

fn trust(pid: i32) -> Pids {
    Pids::List(vec![pid])
}

/// A reservation of `size` bytes with physical memory of the same size mapped at its base
/// (access READWRITE, the default): (reservation, physical handle).
fn mapped<E: Exec>(a: &mut Acl<E>, size: usize) -> Result<(u64, u64), Stop> {
    let phys = a.phys_alloc(0, size).step("aclrtMallocPhysical")?;
    let va = a.reserve(size, 0, 0).step("aclrtReserveMemAddress")?;
    a.map_at(va, size, 0, phys, 0).step("aclrtMapMem")?;
    Ok((va, phys))
}

fn unmapped<E: Exec>(a: &mut Acl<E>, va: u64, phys: u64) -> Result<(), Stop> {
    a.unmap_only(va).step("aclrtUnmapMem")?;
    a.release(va).step("aclrtReleaseMemAddress")?;
    a.phys_free(phys).step("aclrtFreePhysical")
}

// ---------------------------------------------------------------------------------------
// Parameters and init.

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

fn init_counted(ctx: &mut Ctx) -> Verdict {
    // The shell's start called aclInit (the process's first, count 1).
    let mut a = ctx.acl()?;
    let seen = ctx.refused("a second aclInit", a.init())?;
    a.finalize().step("the first aclFinalize")?;
    a.finalize()
        .step("the second aclFinalize (the repeated aclInit must have counted)")?;
    Ok(format!("{seen}; it counted: two aclFinalize calls succeed"))
}

fn finalize_repeat(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.finalize()
        .step("aclFinalize balancing the process's aclInit")?;
    let seen = ctx.refused("aclFinalize once more", a.finalize())?;
    Ok(format!("the balancing aclFinalize succeeds; {seen}"))
}

// ---------------------------------------------------------------------------------------
// Handles and peers.

fn handle_valid(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    a.notify_destroy(n).step("the first aclrtDestroyNotify")?;
    let notify = ctx.refused("aclrtDestroyNotify again", a.notify_destroy(n))?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let phys = a.phys_alloc(0, g).step("aclrtMallocPhysical")?;
    a.phys_free(phys).step("the first aclrtFreePhysical")?;
    let freed = ctx.refused("aclrtFreePhysical again", a.phys_free(phys))?;
    let unknown = a.vmm_import(0x7fff_0000_dead_beef, 0);
    if let Ok(p) = unknown {
        let _ = a.phys_free(p);
    }
    let unknown = ctx.refused("import of an unknown shareable handle", unknown)?;
    Ok(format!(
        "{notify}; {freed}; {unknown}; the first destroy and free succeed"
    ))
}

fn peer_distinct(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let seen = ctx.refused(
        "aclrtDeviceEnablePeerAccess(0) on device 0",
        a.enable_peer(0),
    )?;
    a.enable_peer(1)
        .step("aclrtDeviceEnablePeerAccess(1) on device 0")?;
    Ok(format!("{seen}; peer access to device 1 succeeds"))
}

fn peer_topology(ctx: &mut Ctx) -> Verdict {
    let devices = ctx.probe.devices as i32;
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let mut unconnected = None;
    let mut connected = None;
    for d in 1..devices {
        if a.can_access_peer(0, d).step("aclrtDeviceCanAccessPeer")? {
            connected.get_or_insert(d);
        } else {
            unconnected.get_or_insert(d);
        }
    }
    let Some(far) = unconnected else {
        return Err(Stop::Skip(format!(
            "needs a device that cannot peer with device 0 (all {devices} can)"
        )));
    };
    let refused = ctx.refused(
        &format!("aclrtDeviceEnablePeerAccess({far}) on device 0"),
        a.enable_peer(far),
    )?;
    // A key of device-0 memory imported on the unconnected device with ENABLE_PEER_ACCESS.
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    let mut b = ctx.acl_peer("far-importer")?;
    b.set_device(far as u32).step("peer aclrtSetDevice")?;
    let far_import = b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS);
    if far_import.is_ok() {
        let _ = b.key_close(&key);
    }
    let import = ctx.refused(
        &format!("key import with ENABLE_PEER_ACCESS on device {far}"),
        far_import,
    )?;
    let mut control = String::from("no connected device to compare");
    if let Some(near) = connected {
        a.enable_peer(near)
            .step("aclrtDeviceEnablePeerAccess to a connected device")?;
        b.set_device(near as u32).step("peer aclrtSetDevice")?;
        b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
            .step("key import with ENABLE_PEER_ACCESS on a connected device")?;
        b.key_close(&key).step("importer close")?;
        control = format!("device {near} (connected) succeeds in both");
    }
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!("device {far}: {refused}; {import}; {control}"))
}

// ---------------------------------------------------------------------------------------
// Memory and copies.

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

// ---------------------------------------------------------------------------------------
// VMM.

fn prop_validated(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let seen = ctx.refused(
        "granularity of a device allocation with ACL_DDR_MEM",
        a.granularity_of(0, ACL_DDR_MEM, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM),
    )?;
    let g = a
        .granularity_of(0, ACL_HBM_MEM_HUGE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM)
        .step("granularity with ACL_HBM_MEM_HUGE")?;
    Ok(format!("{seen}; ACL_HBM_MEM_HUGE gives {g:#x}"))
}

fn size_granularity(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let half = a.phys_alloc(0, g / 2);
    if let Ok(h) = half {
        let _ = a.phys_free(h);
    }
    let seen = ctx.refused(&format!("aclrtMallocPhysical of {:#x}", g / 2), half)?;
    let h = a
        .phys_alloc(0, g)
        .step("aclrtMallocPhysical of one granule")?;
    a.phys_free(h).step("aclrtFreePhysical")?;
    Ok(format!("{seen}; one granule ({g:#x}) succeeds"))
}

fn map_whole(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let phys = a
        .phys_alloc(0, 2 * g)
        .step("aclrtMallocPhysical of two granules")?;
    let va = a.reserve(2 * g, 0, 0).step("aclrtReserveMemAddress")?;
    let half = a.map_at(va, g, 0, phys, 0);
    if half.is_ok() {
        let _ = a.unmap_only(va);
    }
    let seen = ctx.refused("aclrtMapMem of one of two granules", half)?;
    a.map_at(va, 2 * g, 0, phys, 0)
        .step("aclrtMapMem of the whole allocation")?;
    unmapped(&mut a, va, phys)?;
    Ok(format!("{seen}; the whole allocation maps"))
}

fn map_reserved(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let (va, first) = mapped(&mut a, g)?;
    let second = a.phys_alloc(0, g).step("a second aclrtMallocPhysical")?;
    let twice = a.map_at(va, g, 0, second, 0);
    let seen = ctx.refused("aclrtMapMem onto the occupied range", twice)?;
    unmapped(&mut a, va, first)?;
    let va = a
        .reserve(g, 0, 0)
        .step("aclrtReserveMemAddress for the second")?;
    a.map_at(va, g, 0, second, 0)
        .step("aclrtMapMem onto a free range")?;
    unmapped(&mut a, va, second)?;
    Ok(format!("{seen}; a free range maps"))
}

fn unmap_before_release(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let (va, phys) = mapped(&mut a, g)?;
    let seen = ctx.refused("aclrtReleaseMemAddress while mapped", a.release(va))?;
    unmapped(&mut a, va, phys)?;
    Ok(format!("{seen}; after aclrtUnmapMem the release succeeds"))
}

fn set_access_matches(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let (va, phys) = mapped(&mut a, g)?;
    let seen = ctx.refused(
        "aclrtMemSetAccess of half the mapping",
        a.set_access(va, g / 2, 0, ACL_RT_MEM_ACCESS_FLAGS_READWRITE),
    )?;
    a.set_access(va, g, 0, ACL_RT_MEM_ACCESS_FLAGS_READWRITE)
        .step("aclrtMemSetAccess of the whole mapping")?;
    unmapped(&mut a, va, phys)?;
    Ok(format!("{seen}; the whole mapping succeeds"))
}

fn access_respected(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let (va, phys) = mapped(&mut a, g)?;
    a.write(va, &pattern(6, CHECK))
        .step("write while READWRITE")?;
    a.set_access(va, g, 0, ACL_RT_MEM_ACCESS_FLAGS_READ)
        .step("aclrtMemSetAccess READ")?;
    let seen = ctx.refused(
        "write into the READ mapping",
        a.write(va, &pattern(7, CHECK)),
    )?;
    same_bytes(
        "read of the READ mapping",
        &a.read(va, CHECK).step("read while READ")?,
        &pattern(6, CHECK),
    )?;
    a.set_access(va, g, 0, ACL_RT_MEM_ACCESS_FLAGS_READWRITE)
        .step("aclrtMemSetAccess READWRITE")?;
    a.write(va, &pattern(7, CHECK))
        .step("write after READWRITE")?;
    unmapped(&mut a, va, phys)?;
    Ok(format!(
        "{seen}; reads work, and writes again after READWRITE"
    ))
}

fn free_deferred(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let g = a.granularity(0).step("aclrtMemGetAllocationGranularity")?;
    let (va, phys) = mapped(&mut a, g)?;
    a.write(va, &pattern(8, CHECK)).step("fill")?;
    a.phys_free(phys).step("aclrtFreePhysical while mapped")?;
    same_bytes(
        "read after aclrtFreePhysical",
        &a.read(va, CHECK).step("read after the free")?,
        &pattern(8, CHECK),
    )?;
    a.write(va, &pattern(9, CHECK))
        .step("write after the free")?;
    same_bytes(
        "read back after the free",
        &a.read(va, CHECK).step("read back")?,
        &pattern(9, CHECK),
    )?;
    a.unmap_only(va)
        .step("aclrtUnmapMem (releases the memory)")?;
    a.release(va).step("aclrtReleaseMemAddress")?;
    Ok("the mapping kept its bytes and took writes after aclrtFreePhysical, until unmapped".into())
}

fn export_handle_type(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    let seen = ctx.refused(
        "export with ACL_MEM_HANDLE_TYPE_POSIX",
        a.vmm_export_type(
            vmm.phys,
            ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
            ACL_MEM_HANDLE_TYPE_POSIX,
        ),
    )?;
    a.vmm_export_type(
        vmm.phys,
        ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
        ACL_MEM_HANDLE_TYPE_NONE,
    )
    .step("export with ACL_MEM_HANDLE_TYPE_NONE")?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; NONE succeeds"))
}

fn export_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    let seen = ctx.refused("export with flags 0x2", a.vmm_export(vmm.phys, 2))?;
    a.vmm_export(vmm.phys, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)
        .step("export with DEFAULT")?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; DEFAULT succeeds"))
}

fn only_exporter_trusts(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    a.set_device(0).step("aclrtSetDevice")?;
    let pid = peer_on(&mut b, 0)?;
    // VMM shareable handle.
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    let sh = a.vmm_export(vmm.phys, 0).step("export")?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("the exporter's aclrtMemSetPidToShareableHandle")?;
    let phys = b.vmm_import(sh, 0).step("import")?;
    let vmm_seen = ctx.refused(
        "the importer's aclrtMemSetPidToShareableHandle",
        b.vmm_set_pid(sh, &trust(pid)),
    )?;
    b.phys_free(phys).step("importer free")?;
    a.vmm_free(vmm).step("free")?;
    // IPC key.
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("aclrtIpcMemGetExportKey")?;
    a.key_set_pid(&key, &trust(pid))
        .step("the exporter's aclrtIpcMemSetImportPid")?;
    b.key_import(&key, 0).step("key import")?;
    let key_seen = ctx.refused(
        "the importer's aclrtIpcMemSetImportPid",
        b.key_set_pid(&key, &trust(pid)),
    )?;
    b.key_close(&key).step("importer close")?;
    a.key_close(&key).step("exporter close")?;
    a.free(p).step("aclrtFree")?;
    // Notify.
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let nkey = a
        .notify_export(n, ACL_IPC_KEY_LEN, 0)
        .step("aclrtNotifyGetExportKey")?;
    a.notify_set_pid(n, &trust(pid))
        .step("the exporter's aclrtNotifySetImportPid")?;
    let nb = b.notify_import(&nkey, 0).step("notify import")?;
    let notify_seen = ctx.refused(
        "the importer's aclrtNotifySetImportPid",
        b.notify_set_pid(nb, &trust(pid)),
    )?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "{vmm_seen}; {key_seen}; {notify_seen}; the exporter's grants succeed"
    ))
}

// ---------------------------------------------------------------------------------------
// IPC keys and notify.

fn key_malloc_only(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let past = a.key_export(p, 2 * BLOCK, ACL_IPC_KEY_LEN, 0);
    if let Ok(k) = &past {
        let _ = a.key_close(k);
    }
    let seen = ctx.refused("export of twice the block", past)?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export of the block")?;
    a.key_close(&key).step("aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; the block exports"))
}

fn key_page_aligned(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let unaligned = a.key_export(p + 1, BLOCK - 1, ACL_IPC_KEY_LEN, 0);
    if let Ok(k) = &unaligned {
        let _ = a.key_close(k);
    }
    let seen = ctx.refused("export from base + 1", unaligned)?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export from the base")?;
    a.key_close(&key).step("aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; the aligned base exports"))
}

fn notify_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let export = ctx.refused(
        "aclrtNotifyGetExportKey flags 0x1",
        a.notify_export(n, ACL_IPC_KEY_LEN, 1),
    )?;
    let key = a
        .notify_export(
            n,
            ACL_IPC_KEY_LEN,
            ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
        )
        .step("aclrtNotifyGetExportKey flags 0x02")?;
    peer_on(&mut b, 0)?;
    let bad = b.notify_import(&key, 1);
    if let Ok(nb) = bad {
        let _ = b.notify_destroy(nb);
    }
    let import = ctx.refused("aclrtNotifyImportByKey flags 0x1", bad)?;
    // The import side's 0x02 is refused by the ACL wrapper itself
    // (ascend.notify.import-flags-0-or-1): the positive control imports with 0.
    let nb = b
        .notify_import(&key, 0)
        .step("aclrtNotifyImportByKey flags 0")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "{export}; {import}; the export with 0x02 and the import with 0 succeed"
    ))
}
