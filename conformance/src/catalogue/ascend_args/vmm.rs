//! Ascend VMM mapping rules: physical-memory properties, granularity, mapping whole
//! handles into free reserved ranges, unmap before release, access descriptors, deferred
//! frees and the export arguments of shareable handles.

use devipc_ascend_sys::consts::ACL_RT_VMM_EXPORT_FLAG_DEFAULT;
use devipc_ascend_sys::types::{
    ACL_DDR_MEM, ACL_HBM_MEM_HUGE, ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_HANDLE_TYPE_POSIX,
    ACL_RT_MEM_ACCESS_FLAGS_READ, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};

use super::{A, CHECK, INVALID_PARAM, mapped, unmapped};
use crate::catalogue::{Step, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::VendorClient;

/// The VMM mapping and export-argument rules.
pub(super) static RULES: &[Rule] = &[
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
];

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
