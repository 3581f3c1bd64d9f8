//! HIP VMM rules about reservations, mappings, access and address queries: what
//! `hipMemMap`, `hipMemUnmap`, `hipMemSetAccess`, `hipMemAddressFree`,
//! `hipMemRetainAllocationHandle`, `hipIpcGetMemHandle` and `hipMemGetAddressRange` do with
//! VMM memory (api-facts B.4; issue 15), and the host location of `hipMemSetAccess`
//! (issue 25). The allocation and sharing rules and the helpers
//! are in the parent module.

use devipc_hip_sys::{
    HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE, hipErrorIllegalAddress,
    hipErrorInvalidDevicePointer, hipErrorInvalidValue, hipMemAccessFlagsProtNone,
    hipMemLocationTypeHost,
};

use crate::shell::Exec;
use crate::shell::hip::{Hip, HipCommand};

use super::{CHECK, H, INVALID_VALUE, PINNED, POSIX, RW, VMM, mapped, ready, teardown, version};
use crate::catalogue::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::{Failure, VendorClient};

/// `HIP_VERSION` of ROCm 5.6, from which `hipIpcGetMemHandle` reports a pointer it cannot
/// export as `hipErrorInvalidValue` (clr `30e740023`; api-facts C.1).
const ROCM_5_6: i32 = 50_600_000;
/// `HIP_VERSION` of ROCm 7.12, from which `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE`
/// answers (RCCL queries it when `HIP_VERSION >= 71260540`; field notes 2026-11).
const ROCM_7_12: i32 = 71_200_000;

/// The VMM rules about mappings and addresses, listed after [`super::RULES`].
pub(in crate::catalogue::hip) static RULES: &[Rule] = &[
    vendor(
        "hip.vmm.map-into-reservation",
        H,
        "hipMemMap maps at most the allocation's size into a hipMemAddressReserve range, \
         and hipMemAddressFree takes a reservation's base; otherwise hipErrorInvalidValue",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemMap, hipMemAddressFree)",
        INVALID_VALUE,
        &[VMM],
        map_into_reservation,
    ),
    vendor(
        "hip.vmm.whole-mappings",
        H,
        "hipMemUnmap and hipMemSetAccess take whole hipMemMap mappings; part of one is \
         hipErrorInvalidValue",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (ValidateSubBufferCoverage)",
        INVALID_VALUE,
        &[VMM],
        whole_mappings,
    ),
    vendor(
        "hip.vmm.access-required",
        H,
        "a mapping has no access (hipMemGetAccess: ProtNone) until hipMemSetAccess grants \
         it; a copy before that is a GPU fault, which the emulator reports as \
         hipErrorIllegalAddress and records as a violation",
        "api-facts B.4, C.3 (step 4: hipMemSetAccess after hipMemMap); CLR \
         hipamd/src/hip_vm.cpp (hipMemSetAccess)",
        Expect::Code("hipErrorIllegalAddress", hipErrorIllegalAddress),
        &[
            VMM,
            Need::EmulatorOnly(
                "a copy to memory without access faults the GPU; the suite does not provoke \
                 it on a real runtime",
            ),
        ],
        access_required,
    ),
    vendor(
        "hip.vmm.unmap-before-address-free",
        H,
        "hipMemAddressFree of a reservation that still has mappings is refused \
         (hipErrorInvalidValue, the emulator's choice); after hipMemUnmap it succeeds",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemAddressFree; CUDA requires the \
         range unmapped)",
        INVALID_VALUE,
        &[
            VMM,
            Need::EmulatorOnly(
                "CLR does not check (virtualFree under live mappings); the suite does not \
                 provoke it on a real runtime",
            ),
        ],
        unmap_before_address_free,
    ),
    vendor(
        "hip.vmm.retain-needs-vmm-memory",
        H,
        "hipMemRetainAllocationHandle of hipMalloc memory is hipErrorInvalidValue; inside a \
         hipMemMap mapping it returns the allocation's handle (how allocators tell the \
         kinds apart)",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRetainAllocationHandle); hip-tests \
         unit/virtualMemoryManagement/hipMemRetainAllocationHandle.cc; field notes 2026-11 \
         (Open MPI rocm fork)",
        INVALID_VALUE,
        &[VMM],
        retain_needs_vmm_memory,
    ),
    vendor(
        "hip.vmm.legacy-ipc-refused",
        H,
        "hipIpcGetMemHandle cannot export VMM memory (hipErrorInvalidValue from ROCm 5.6, \
         hipErrorInvalidDevicePointer before) while hipMalloc memory exports; from ROCm \
         7.12 HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE is 0 for it and 1 for \
         hipMalloc memory",
        "api-facts C.1; field notes 2026-11 (ROCm/aiter #4174: expandable segments break \
         vLLM custom all-reduce; RCCL ipcRegisterBuffer); CLR hipamd/src/hip_memory.cpp \
         (hipIpcGetMemHandle)",
        Expect::Refused,
        &[VMM],
        legacy_ipc_refused,
    ),
    vendor(
        "hip.vmm.address-range-is-mapping",
        H,
        "hipMemGetAddressRange of an address inside a hipMemMap mapping reports that \
         mapping's base and size (two mappings side by side in one reservation are two \
         ranges)",
        "api-facts B.3, B.4; CLR hipamd/src/hip_memory.cpp (hipMemGetAddressRange -> \
         getMemoryObject), hip_vm.cpp (virtualMap registers a sub-buffer per mapping)",
        Expect::Behaviour,
        &[VMM],
        address_range_is_mapping,
    ),
    vendor(
        "hip.vmm.host-access-accepted",
        H,
        "from ROCm 7.12 hipMemSetAccess accepts a hipMemLocationTypeHost descriptor (CPU \
         access) on a device allocation, leaving device 0's access and copies as they were; \
         before 7.12 the host location is hipErrorInvalidValue (on the emulator a peer \
         emulating the other side of 7.12 checks both)",
        "api-facts B.4; rocm-systems CLR projects/clr/hipamd/src/hip_vm.cpp (hipMemSetAccess: \
         Device, Host, HostNuma, HostNumaCurrent locations); RCCL dev_runtime tests \
         (hipMemLocationTypeHost from ROCm 7.12, hip/driver_types.h)",
        Expect::Behaviour,
        &[VMM],
        host_access_accepted,
    ),
];

fn map_into_reservation(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let handle = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let va = h.vmm_reserve(2 * g, 0).step("hipMemAddressReserve")?;
    let r = h.vmm_map(va, 2 * g, handle, 0, 0);
    if r.is_ok() {
        let _ = h.vmm_unmap(va, 2 * g);
    }
    let over = ctx.refused(
        "hipMemMap of twice the allocation's size into the reservation",
        r,
    )?;
    // Positive control: the allocation maps in the second half of the reservation.
    let at = va + g as u64;
    h.vmm_map(at, g, handle, 0, 0)
        .step("hipMemMap at reservation + granularity")?;
    let r = h.vmm_address_free(at, g);
    let not_base = ctx.refused(
        "hipMemAddressFree of an address that is no reservation's base",
        r,
    )?;
    h.vmm_unmap(at, g).step("hipMemUnmap")?;
    h.vmm_release(handle).step("hipMemRelease")?;
    h.vmm_address_free(va, 2 * g)
        .step("hipMemAddressFree of the base")?;
    Ok(format!(
        "{over}; {not_base}; a map inside the reservation and a free of its base succeed"
    ))
}

fn whole_mappings(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let m = mapped(&mut h, 2 * g, POSIX)?;
    let access = ctx.refused(
        "hipMemSetAccess of the first half of a mapping",
        h.vmm_set_access(m.va, g, 0, RW),
    )?;
    let unmap = ctx.refused(
        "hipMemUnmap of the first half of a mapping",
        h.vmm_unmap(m.va, g),
    )?;
    h.vmm_set_access(m.va, m.size, 0, RW)
        .step("hipMemSetAccess of the whole mapping")?;
    teardown(&mut h, m)?;
    Ok(format!("{access}; {unmap}; the whole mapping succeeds"))
}

fn access_required(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let m = mapped(&mut h, g, POSIX)?;
    let before = h.vmm_get_access(m.va, 0).step("hipMemGetAccess")?;
    ensure(before == hipMemAccessFlagsProtNone as u64, || {
        format!("after hipMemMap device 0 has access {before}, not ProtNone")
    })?;
    let write = h.write(m.va, &pattern(5, CHECK));
    let recorded = ctx.take_violations();
    let seen = ctx.violation_seen(
        "a copy into the mapping before hipMemSetAccess",
        write,
        Some(hipErrorIllegalAddress),
        &recorded,
    )?;
    h.vmm_set_access(m.va, g, 0, RW).step("hipMemSetAccess")?;
    h.write(m.va, &pattern(5, CHECK))
        .step("a copy after hipMemSetAccess")?;
    same_bytes(
        "read back",
        &h.read(m.va, CHECK).step("read")?,
        &pattern(5, CHECK),
    )?;
    let after = h.vmm_get_access(m.va, 0).step("hipMemGetAccess")?;
    ensure(after == RW as u64, || {
        format!("after hipMemSetAccess(ReadWrite) device 0 has access {after}")
    })?;
    teardown(&mut h, m)?;
    Ok(format!(
        "ProtNone after hipMemMap; {seen}; after hipMemSetAccess copies work"
    ))
}

fn unmap_before_address_free(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let m = mapped(&mut h, g, POSIX)?;
    let r = h.vmm_address_free(m.va, g);
    if r.is_ok() {
        // The emulator with the rule off dropped the mapping with the reservation; its
        // reference is released by hand.
        let _ = h.vmm_release(m.handle);
        let _ = h.vmm_release(m.handle);
    }
    let seen = ctx.refused("hipMemAddressFree of a mapped reservation", r)?;
    teardown(&mut h, m)?;
    Ok(format!("{seen}; after hipMemUnmap it succeeds"))
}

fn retain_needs_vmm_memory(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let p = h.malloc(g).step("hipMalloc")?;
    let r = h.vmm_retain(p);
    let seen = ctx.refused("hipMemRetainAllocationHandle of hipMalloc memory", r);
    h.free(p).step("hipFree")?;
    let seen = seen?;
    let m = mapped(&mut h, g, POSIX)?;
    let got = h
        .vmm_retain(m.va + 4096)
        .step("hipMemRetainAllocationHandle inside a mapping")?;
    // CLR returns the handle without taking a reference (hip-tests never release the
    // retained handle), unlike CUDA's cuMemRetainAllocationHandle: the teardown's one
    // release of the allocation must still find it (a retain that took a reference would
    // leak it; a release of the retained handle here would free it under the mapping).
    teardown(&mut h, m)?;
    ensure(got == m.handle, || {
        format!(
            "the retained handle {got:#x} is not the allocation's {:#x}",
            m.handle
        )
    })?;
    Ok(format!(
        "{seen}; inside a mapping it returns the allocation's handle"
    ))
}

fn legacy_ipc_refused(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let v = version(&mut h)?;
    let (want_name, want) = if v >= ROCM_5_6 {
        ("hipErrorInvalidValue", hipErrorInvalidValue)
    } else {
        ("hipErrorInvalidDevicePointer", hipErrorInvalidDevicePointer)
    };
    let m = mapped(&mut h, g, POSIX)?;
    h.vmm_set_access(m.va, g, 0, RW).step("hipMemSetAccess")?;
    let r = h.mem_handle(m.va);
    let code = r.as_ref().err().and_then(Failure::code);
    let seen = ctx.refused("hipIpcGetMemHandle of VMM memory", r)?;
    ensure(code == Some(want), || {
        format!("{seen}, but HIP_VERSION {v} answers {want_name} ({want})")
    })?;
    let p = h.malloc(g).step("hipMalloc")?;
    let legacy = h
        .mem_handle(p)
        .step("hipIpcGetMemHandle of hipMalloc memory");
    let attrs = if v >= ROCM_7_12 {
        let attr = HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE;
        let vmm = h
            .pointer_attribute(attr, m.va)
            .step("the attribute of VMM memory");
        let malloc = h
            .pointer_attribute(attr, p)
            .step("the attribute of hipMalloc memory");
        Some((vmm, malloc))
    } else {
        None
    };
    h.free(p).step("hipFree")?;
    teardown(&mut h, m)?;
    legacy?;
    let attrs = match attrs {
        Some((vmm, malloc)) => {
            let (vmm, malloc) = (vmm?, malloc?);
            ensure(vmm == 0 && malloc == 1, || {
                format!(
                    "IS_LEGACY_HIP_IPC_CAPABLE is {vmm} for VMM memory, {malloc} for hipMalloc memory"
                )
            })?;
            "; IS_LEGACY_HIP_IPC_CAPABLE is 0 for it, 1 for hipMalloc memory"
        }
        None => "",
    };
    Ok(format!("{seen}; hipMalloc memory exports{attrs}"))
}

fn address_range_is_mapping(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let h1 = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let h2 = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let va = h.vmm_reserve(2 * g, 0).step("hipMemAddressReserve")?;
    let second = va + g as u64;
    h.vmm_map(va, g, h1, 0, 0).step("hipMemMap (first)")?;
    h.vmm_map(second, g, h2, 0, 0).step("hipMemMap (second)")?;
    let first_range = h.address_range(va + 64);
    let second_range = h.address_range(second + 64);
    h.vmm_unmap(va, g).step("hipMemUnmap")?;
    h.vmm_unmap(second, g).step("hipMemUnmap")?;
    h.vmm_release(h1).step("hipMemRelease")?;
    h.vmm_release(h2).step("hipMemRelease")?;
    h.vmm_address_free(va, 2 * g).step("hipMemAddressFree")?;
    for (what, base, range) in [("first", va, first_range), ("second", second, second_range)] {
        let (got, size) =
            range.step(&format!("hipMemGetAddressRange inside the {what} mapping"))?;
        ensure(got == base && size == g, || {
            format!("inside the {what} mapping ({base:#x}+{g:#x}) the range is {got:#x}+{size:#x}")
        })?;
    }
    Ok("each address gives the base and size of the mapping holding it".into())
}

/// The host descriptor in `h` (HIP `v`): accepted from 7.12, refused before.
fn host_access_at<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, g: usize, v: i32) -> Verdict {
    let m = mapped(h, g, POSIX)?;
    h.vmm_set_access(m.va, g, 0, RW)
        .step(&format!("HIP {v}: hipMemSetAccess(device 0)"))?;
    let r = h.vmm_set_access_at(m.va, g, hipMemLocationTypeHost, 0, RW);
    let seen = if v >= ROCM_7_12 {
        r.step(&format!("HIP {v}: hipMemSetAccess(host, ReadWrite)"))
            .map(|()| format!("HIP {v}: the host descriptor is accepted"))
    } else {
        let code = r.as_ref().err().and_then(Failure::code);
        ctx.refused_as(
            &format!("HIP {v}: hipMemSetAccess(host, ReadWrite)"),
            "hip.vmm.host-access-accepted",
            r,
        )
        .and_then(|seen| {
            ensure(code == Some(hipErrorInvalidValue), || {
                format!("{seen}, not hipErrorInvalidValue")
            })?;
            Ok(seen)
        })
    };
    let after = (|| {
        let access = h
            .vmm_get_access(m.va, 0)
            .step("hipMemGetAccess(device 0)")?;
        ensure(access == RW as u64, || {
            format!("HIP {v}: after the host descriptor device 0 has access {access}")
        })?;
        h.write(m.va, &pattern(6, CHECK))
            .step("a copy into the mapping")?;
        same_bytes(
            "read back",
            &h.read(m.va, CHECK).step("read")?,
            &pattern(6, CHECK),
        )
    })();
    teardown(h, m)?;
    let seen = seen?;
    after?;
    Ok(seen)
}

fn host_access_accepted(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let v = version(&mut h)?;
    let here = host_access_at(ctx, &mut h, g, v)?;
    if !ctx.target.emulated() {
        return Ok(here);
    }
    // The other side of the cut-off, in a peer the emulator answers as that release.
    let other = if v >= ROCM_7_12 { "7.0" } else { "7.12" };
    let mut p = ctx.hip_peer_emulating(&format!("hip-{other}"), other)?;
    let pg = ready(&mut p)?;
    let pv = version(&mut p)?;
    let there = host_access_at(ctx, &mut p, pg, pv)?;
    p.0.finish()?;
    Ok(format!("{here}; {there}"))
}
