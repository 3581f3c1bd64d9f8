//! HIP VMM rules (api-facts B.4, C.3; issue 15): physical allocations (`hipMemCreate`),
//! reservations, mappings and access, and their sharing between processes as a POSIX file
//! descriptor (`hipMemExportToShareableHandle` / `hipMemImportFromShareableHandle`).
//!
//! Versions: the family exists from ROCm 5.1 (every rule needs it); `hipMemAllocationProp`
//! has the ROCm 5.2 layout below 5.3 (the shell passes the running version's); the export
//! works from 6.2 (before, `hipErrorNotSupported`), and the import reads its `osHandle` as
//! a pointer to the fd before 7.1.0 and as the fd value from 7.1.0 (field notes 2026-11).
//! Rules read the runtime version; on the emulator, `hip.vmm.ipc-needs-rocm-6.2` also asks
//! a peer emulating the other side of its cut-off, so one run checks both.
//!
//! The fd moves between processes with `SCM_RIGHTS` ([`crate::shell::fd_pass`]), as
//! applications do; a machine where that socket cannot be made skips the rule with the
//! reason. Rules whose expectation is undefined on a GPU (a copy without access, freeing a
//! mapped reservation, a released handle, the wrong `osHandle` convention) are
//! emulator-only; each emulator rule of the `hip.vmm.*` family has the rule of its id here
//! or in [`mapping`].
//!
//! This file holds the allocation and sharing rules ([`RULES`]) and the helpers both files
//! use; `mapping.rs` the rules about reservations, mappings, access and address queries
//! ([`mapping::RULES`]), listed after them.

pub(super) mod mapping;

use devipc_hip_sys::{
    hipErrorNotSupported, hipMemAccessFlagsProtReadWrite, hipMemAllocationGranularityMinimum,
    hipMemAllocationTypeInvalid, hipMemAllocationTypePinned, hipMemHandleTypeNone,
    hipMemHandleTypePosixFileDescriptor, hipMemHandleTypeWin32, hipMemLocationTypeDevice,
};

use super::{CHECK, H, INVALID_VALUE};
use crate::catalogue::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::hip::{Hip, HipCommand, OsHandle};
use crate::shell::{Exec, Failure, VendorClient};

const POSIX: i32 = hipMemHandleTypePosixFileDescriptor;
const RW: i32 = hipMemAccessFlagsProtReadWrite;
const PINNED: i32 = hipMemAllocationTypePinned;

/// `HIP_VERSION` of ROCm 6.2, where VMM IPC first works (clr `56ebf5157`; api-facts B.4).
const ROCM_6_2: i32 = 60_200_000;

const VMM: Need = Need::HipAtLeast {
    major: 5,
    minor: 1,
    why: "the VMM family first shipped in ROCm 5.1 (`@@hip_5.1` symbols of ROCm 5.2's \
          libamdhip64)",
};
const VMM_IPC: Need = Need::HipAtLeast {
    major: 6,
    minor: 2,
    why: "before ROCm 6.2 hipMemExportToShareableHandle returns hipErrorNotSupported \
          (hip.vmm.ipc-needs-rocm-6.2)",
};

/// The VMM rules about allocations and their sharing between processes.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.vmm.export-import-shares-memory",
        H,
        "a hipMemCreate allocation exported as a POSIX fd, passed to another process \
         (SCM_RIGHTS) and imported there with the version's osHandle convention (a pointer \
         to the fd before ROCm 7.1.0, the fd value from 7.1.0), then reserved, mapped and \
         given access, shows the same bytes in both directions; the fd may be closed on \
         both sides right after the import",
        "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipMemExportToShareableHandle, \
         hipMemImportFromShareableHandle, rocm-6.2); field notes 2026-11 (ROCm 7.1.0 \
         osHandle switch: MoRI hip_compat.hpp, rocm-systems PR #759)",
        Expect::Behaviour,
        &[VMM_IPC],
        shares_memory,
    ),
    vendor(
        "hip.vmm.args-valid",
        H,
        "the VMM calls refuse unusable arguments with hipErrorInvalidValue: hipMemCreate \
         with flags != 0, hipMemGetAllocationGranularity with an unknown option, hipMemMap \
         with offset != 0 or flags != 0, hipMemSetAccess with flags other than \
         None/Read/ReadWrite",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (argument checks of hipMemCreate, \
         hipMemGetAllocationGranularity, hipMemMap, hipMemSetAccess)",
        INVALID_VALUE,
        &[VMM],
        args_valid,
    ),
    vendor(
        "hip.vmm.handle-valid",
        H,
        "a handle whose references are all gone (hipMemRelease) is refused with \
         hipErrorInvalidValue by hipMemRelease and hipMemMap",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRelease: ga->release(), no check \
         beyond NULL)",
        INVALID_VALUE,
        &[
            VMM,
            Need::EmulatorOnly(
                "CLR only checks for NULL and then uses the freed object (undefined); the \
                 refusal is the emulator's choice",
            ),
        ],
        handle_valid,
    ),
    vendor(
        "hip.vmm.prop-pinned-device",
        H,
        "hipMemCreate and hipMemGetAllocationGranularity need prop.type == \
         hipMemAllocationTypePinned (and a device location); another type is \
         hipErrorInvalidValue",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate, \
         hipMemGetAllocationGranularity)",
        INVALID_VALUE,
        &[VMM],
        prop_pinned_device,
    ),
    vendor(
        "hip.vmm.handle-type-supported",
        H,
        "hipMemCreate with a requestedHandleType other than None or PosixFileDescriptor \
         (here hipMemHandleTypeWin32 on Linux) is hipErrorNotSupported",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate, rocm-6.2; the 5.x hipamd \
         check is UNVERIFIED)",
        Expect::Code("hipErrorNotSupported", hipErrorNotSupported),
        &[VMM],
        handle_type_supported,
    ),
    vendor(
        "hip.vmm.granularity-aligned",
        H,
        "hipMemCreate and hipMemAddressReserve sizes must be multiples of \
         hipMemGetAllocationGranularity, and a reservation's alignment a power of two; \
         otherwise hipErrorInvalidValue",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (memBaseAddrAlign_, \
         virtualMemAllocGranularityMinimum_ checks)",
        INVALID_VALUE,
        &[VMM],
        granularity_aligned,
    ),
    vendor(
        "hip.vmm.ipc-needs-rocm-6.2",
        H,
        "before ROCm 6.2 hipMemExportToShareableHandle of a PosixFileDescriptor allocation \
         returns hipErrorNotSupported; from 6.2 it writes a new fd (on the emulator both \
         sides of the cut-off are checked in one run)",
        "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipamd of the 5.2 era and clr \
         rocm-5.6.0 .. rocm-6.1.2: validate, then hipErrorNotSupported; clr 56ebf5157 in \
         rocm-6.2.0)",
        Expect::Code("hipErrorNotSupported", hipErrorNotSupported),
        &[VMM],
        ipc_needs_rocm_6_2,
    ),
    vendor(
        "hip.vmm.export-handle-type-matches",
        H,
        "hipMemExportToShareableHandle's handleType must equal the allocation's \
         requestedHandleType: a None allocation exported as a POSIX fd is \
         hipErrorInvalidValue",
        "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemExportToShareableHandle)",
        INVALID_VALUE,
        &[VMM_IPC],
        export_handle_type_matches,
    ),
    vendor(
        "hip.vmm.import-os-handle-convention",
        H,
        "hipMemImportFromShareableHandle reads osHandle as a pointer to the int fd before \
         ROCm 7.1.0 and as the fd value from 7.1.0; an import with the other convention \
         is refused (hipErrorInvalidValue, the emulator's choice), the version's one \
         imports",
        "api-facts B.4; field notes 2026-11 (ROCm 7.1.0 ABI switch: MoRI hip_compat.hpp, \
         rocm-systems PR #759); CLR ImportShareableHSAHandle",
        INVALID_VALUE,
        &[
            VMM_IPC,
            Need::EmulatorOnly(
                "the wrong convention is undefined on a real runtime (ROCm 6.2 .. 7.0 \
                 dereference the fd value as a pointer); the right one is checked \
                 everywhere by hip.vmm.export-import-shares-memory",
            ),
        ],
        import_os_handle_convention,
    ),
    vendor(
        "hip.vmm.import-exported-fd",
        H,
        "hipMemImportFromShareableHandle of an fd that is no exported VMM allocation \
         (/dev/null) is hipErrorInvalidValue; an exported one imports",
        "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipMemImportFromShareableHandle: \
         ImportShareableVMMHandle fails)",
        INVALID_VALUE,
        &[VMM_IPC],
        import_exported_fd,
    ),
];

/// Skips unless the table has the VMM functions; binds device 0 and returns the
/// allocation granularity there.
fn ready<E: Exec<HipCommand>>(h: &mut Hip<E>) -> Result<usize, Stop> {
    let missing = h.vmm_missing().step("listing the VMM functions")?;
    if !missing.is_empty() {
        return Err(Stop::Skip(format!(
            "the runtime lacks {} (the VMM family is optional: ROCm 5.1+)",
            missing.join(", ")
        )));
    }
    h.set_device(0).step("hipSetDevice(0)")?;
    let g = h
        .vmm_granularity(0, hipMemAllocationGranularityMinimum, None)
        .step("hipMemGetAllocationGranularity")?;
    ensure(g >= 4096 && g.is_power_of_two(), || {
        format!("hipMemGetAllocationGranularity returned {g:#x}")
    })?;
    Ok(g)
}

/// One allocation mapped at the base of its own reservation.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    handle: u64,
    va: u64,
    size: usize,
}

/// `hipMemCreate` + `hipMemAddressReserve` + `hipMemMap` of `size` bytes on device 0.
fn mapped<E: Exec<HipCommand>>(
    h: &mut Hip<E>,
    size: usize,
    handle_type: i32,
) -> Result<Mapped, Stop> {
    let handle = h
        .vmm_create(size, handle_type, 0, PINNED, 0)
        .step("hipMemCreate")?;
    let va = h.vmm_reserve(size, 0).step("hipMemAddressReserve")?;
    h.vmm_map(va, size, handle, 0, 0).step("hipMemMap")?;
    Ok(Mapped { handle, va, size })
}

/// Undoes [`mapped`]: unmap, release, free the reservation.
fn teardown<E: Exec<HipCommand>>(h: &mut Hip<E>, m: Mapped) -> Result<(), Stop> {
    h.vmm_unmap(m.va, m.size).step("hipMemUnmap")?;
    h.vmm_release(m.handle).step("hipMemRelease")?;
    h.vmm_address_free(m.va, m.size).step("hipMemAddressFree")
}

fn version<E: Exec<HipCommand>>(h: &mut Hip<E>) -> Result<i32, Stop> {
    h.version().step("hipRuntimeGetVersion")
}

/// Releases a handle a call that should have been refused returned anyway.
fn release_if_made<E: Exec<HipCommand>>(h: &mut Hip<E>, r: &Result<u64, Failure>) {
    if let Ok(handle) = r {
        let _ = h.vmm_release(*handle);
    }
}

/// Moves `fd` of `from` into `to` over `SCM_RIGHTS`: its number in `to`. A machine where
/// the socket cannot be made or the message cannot be sent skips the rule with the reason.
fn pass_fd<A: Exec<HipCommand>, B: Exec<HipCommand>>(
    from: &mut Hip<A>,
    fd: i32,
    to: &mut Hip<B>,
) -> Result<i32, Stop> {
    let cannot = |e: Failure| {
        Stop::Skip(format!(
            "cannot pass a file descriptor between processes here (SCM_RIGHTS, api-facts \
             C.3 step 3): {e}"
        ))
    };
    let inbox = to.fd_listen().map_err(cannot)?;
    from.fd_send(&inbox, fd).map_err(cannot)?;
    to.fd_recv().step("receiving the fd")
}

fn shares_memory(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.hip()?;
    let g = ready(&mut a)?;
    let how = OsHandle::for_version(version(&mut a)?);
    let mut b = ctx.hip_peer("importer")?;
    let m = mapped(&mut a, g, POSIX)?;
    a.vmm_set_access(m.va, g, 0, RW)
        .step("exporter hipMemSetAccess")?;
    a.write(m.va, &pattern(3, CHECK)).step("exporter fills")?;
    let fd = a
        .vmm_export(m.handle, POSIX, 0)
        .step("hipMemExportToShareableHandle")?;
    ensure(fd >= 0, || format!("the export wrote fd {fd}"))?;
    ready(&mut b)?;
    let bfd = pass_fd(&mut a, fd, &mut b)?;
    // The importer holds its own descriptor: the exporter may close at once.
    a.fd_close(fd).step("the exporter closes its fd")?;
    let bh = b.vmm_import(bfd, how).step(&format!(
        "hipMemImportFromShareableHandle (fd by {})",
        how.name()
    ))?;
    b.fd_close(bfd).step("the importer closes the fd")?;
    let prop = b
        .vmm_prop(bh)
        .step("hipMemGetAllocationPropertiesFromHandle")?;
    ensure(prop == [PINNED, POSIX, hipMemLocationTypeDevice, 0], || {
        format!("the imported allocation's properties are {prop:?}")
    })?;
    let bva = b.vmm_reserve(g, 0).step("importer hipMemAddressReserve")?;
    b.vmm_map(bva, g, bh, 0, 0).step("importer hipMemMap")?;
    b.vmm_set_access(bva, g, 0, RW)
        .step("importer hipMemSetAccess")?;
    same_bytes(
        "the importer reads",
        &b.read(bva, CHECK).step("importer read")?,
        &pattern(3, CHECK),
    )?;
    b.write(bva + 4096, &pattern(4, 64))
        .step("importer write")?;
    same_bytes(
        "the exporter reads the importer's bytes",
        &a.read(m.va + 4096, 64).step("exporter read")?,
        &pattern(4, 64),
    )?;
    teardown(
        &mut b,
        Mapped {
            handle: bh,
            va: bva,
            size: g,
        },
    )?;
    b.0.finish()?;
    teardown(&mut a, m)?;
    Ok(format!(
        "an exported fd, passed with SCM_RIGHTS and imported by {}, maps the same bytes both \
         ways",
        how.name()
    ))
}

fn args_valid(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let r = h.vmm_create(g, POSIX, 0, PINNED, 1);
    release_if_made(&mut h, &r);
    let create = ctx.refused("hipMemCreate with flags 1", r)?;
    let option = ctx.refused(
        "hipMemGetAllocationGranularity with option 7",
        h.vmm_granularity(0, 7, None),
    )?;
    let handle = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let va = h.vmm_reserve(g, 0).step("hipMemAddressReserve")?;
    let offset = ctx.refused(
        "hipMemMap with offset = granularity",
        h.vmm_map(va, g, handle, g, 0),
    )?;
    let flags = ctx.refused("hipMemMap with flags 1", h.vmm_map(va, g, handle, 0, 1))?;
    h.vmm_map(va, g, handle, 0, 0).step("hipMemMap")?;
    let access = ctx.refused(
        "hipMemSetAccess with flags 2",
        h.vmm_set_access(va, g, 0, 2),
    )?;
    h.vmm_set_access(va, g, 0, RW).step("hipMemSetAccess")?;
    teardown(
        &mut h,
        Mapped {
            handle,
            va,
            size: g,
        },
    )?;
    Ok(format!(
        "{create}; {option}; {offset}; {flags}; {access}; valid arguments succeed"
    ))
}

fn handle_valid(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let handle = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    h.vmm_release(handle).step("the first hipMemRelease")?;
    let again = ctx.refused("a second hipMemRelease", h.vmm_release(handle))?;
    let va = h.vmm_reserve(g, 0).step("hipMemAddressReserve")?;
    let r = h.vmm_map(va, g, handle, 0, 0);
    if r.is_ok() {
        let _ = h.vmm_unmap(va, g);
    }
    let map = ctx.refused("hipMemMap of the released handle", r)?;
    h.vmm_address_free(va, g).step("hipMemAddressFree")?;
    Ok(format!("{again}; {map}"))
}

fn prop_pinned_device(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let invalid = hipMemAllocationTypeInvalid;
    let r = h.vmm_create(g, POSIX, 0, invalid, 0);
    release_if_made(&mut h, &r);
    let create = ctx.refused("hipMemCreate with prop.type Invalid", r)?;
    let gran = ctx.refused(
        "hipMemGetAllocationGranularity with prop.type Invalid",
        h.vmm_granularity(0, hipMemAllocationGranularityMinimum, Some(invalid)),
    )?;
    let handle = h
        .vmm_create(g, POSIX, 0, PINNED, 0)
        .step("hipMemCreate with prop.type Pinned")?;
    h.vmm_release(handle).step("hipMemRelease")?;
    Ok(format!("{create}; {gran}; Pinned succeeds"))
}

fn handle_type_supported(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let r = h.vmm_create(g, hipMemHandleTypeWin32, 0, PINNED, 0);
    release_if_made(&mut h, &r);
    let seen = ctx.refused("hipMemCreate requesting hipMemHandleTypeWin32", r)?;
    for (name, ty) in [
        ("None", hipMemHandleTypeNone),
        ("PosixFileDescriptor", POSIX),
    ] {
        let handle = h
            .vmm_create(g, ty, 0, PINNED, 0)
            .step(&format!("hipMemCreate requesting {name}"))?;
        h.vmm_release(handle).step("hipMemRelease")?;
    }
    Ok(format!("{seen}; None and PosixFileDescriptor succeed"))
}

fn granularity_aligned(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let half = g / 2;
    let r = h.vmm_create(half, POSIX, 0, PINNED, 0);
    release_if_made(&mut h, &r);
    let create = ctx.refused(&format!("hipMemCreate of {half:#x} bytes"), r)?;
    let r = h.vmm_reserve(half, 0);
    if let Ok(va) = r {
        let _ = h.vmm_address_free(va, half);
    }
    let reserve = ctx.refused(&format!("hipMemAddressReserve of {half:#x} bytes"), r)?;
    let r = h.vmm_reserve(g, 3);
    if let Ok(va) = r {
        let _ = h.vmm_address_free(va, g);
    }
    let align = ctx.refused("hipMemAddressReserve with alignment 3", r)?;
    let m = mapped(&mut h, g, POSIX)?;
    teardown(&mut h, m)?;
    Ok(format!(
        "granularity {g:#x}: {create}; {reserve}; {align}; whole granules succeed"
    ))
}

/// The export in `h` (HIP `v`): refused before 6.2, an fd from 6.2.
fn export_at<E: Exec<HipCommand>>(ctx: &Ctx, h: &mut Hip<E>, g: usize, v: i32) -> Verdict {
    let handle = h.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let r = h.vmm_export(handle, POSIX, 0);
    if let Ok(fd) = r {
        let _ = h.fd_close(fd);
    }
    let seen = if v >= ROCM_6_2 {
        r.step(&format!("HIP {v}: hipMemExportToShareableHandle"))
            .and_then(|fd| {
                ensure(fd >= 0, || format!("HIP {v}: the export wrote fd {fd}"))?;
                Ok(format!("HIP {v}: the export gives an fd"))
            })
    } else {
        ctx.refused(&format!("HIP {v}: the export"), r)
    };
    h.vmm_release(handle).step("hipMemRelease")?;
    seen
}

fn ipc_needs_rocm_6_2(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let v = version(&mut h)?;
    let here = export_at(ctx, &mut h, g, v)?;
    if !ctx.target.emulated() {
        return Ok(here);
    }
    // The other side of the cut-off, in a peer the emulator answers as that release.
    let other = if v >= ROCM_6_2 { "6.1" } else { "6.2" };
    let mut p = ctx.hip_peer_emulating(&format!("hip-{other}"), other)?;
    let pg = ready(&mut p)?;
    let pv = version(&mut p)?;
    let there = export_at(ctx, &mut p, pg, pv)?;
    p.0.finish()?;
    Ok(format!("{here}; {there}"))
}

fn export_handle_type_matches(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let g = ready(&mut h)?;
    let none = h
        .vmm_create(g, hipMemHandleTypeNone, 0, PINNED, 0)
        .step("hipMemCreate requesting None")?;
    let r = h.vmm_export(none, POSIX, 0);
    if let Ok(fd) = r {
        let _ = h.fd_close(fd);
    }
    let seen = ctx.refused("exporting a None allocation as a POSIX fd", r);
    h.vmm_release(none).step("hipMemRelease")?;
    let seen = seen?;
    let posix = h
        .vmm_create(g, POSIX, 0, PINNED, 0)
        .step("hipMemCreate requesting PosixFileDescriptor")?;
    let fd = h
        .vmm_export(posix, POSIX, 0)
        .step("exporting a PosixFileDescriptor allocation")?;
    h.fd_close(fd).step("close")?;
    h.vmm_release(posix).step("hipMemRelease")?;
    Ok(format!("{seen}; a PosixFileDescriptor allocation exports"))
}

fn import_os_handle_convention(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.hip()?;
    let g = ready(&mut a)?;
    let how = OsHandle::for_version(version(&mut a)?);
    let mut b = ctx.hip_peer("importer")?;
    ready(&mut b)?;
    let handle = a.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let fd = a
        .vmm_export(handle, POSIX, 0)
        .step("hipMemExportToShareableHandle")?;
    let bfd = pass_fd(&mut a, fd, &mut b)?;
    a.fd_close(fd).step("the exporter closes its fd")?;
    let r = b.vmm_import(bfd, how.other());
    release_if_made(&mut b, &r);
    let wrong = ctx.refused(
        &format!("an import passing the fd by {}", how.other().name()),
        r,
    )?;
    let bh = b
        .vmm_import(bfd, how)
        .step(&format!("the import passing the fd by {}", how.name()))?;
    b.fd_close(bfd).step("the importer closes the fd")?;
    b.vmm_release(bh).step("importer hipMemRelease")?;
    b.0.finish()?;
    a.vmm_release(handle).step("hipMemRelease")?;
    Ok(format!("{wrong}; by {} it imports", how.name()))
}

fn import_exported_fd(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.hip()?;
    let g = ready(&mut a)?;
    let how = OsHandle::for_version(version(&mut a)?);
    let mut b = ctx.hip_peer("importer")?;
    ready(&mut b)?;
    let null = b.fd_null().step("opening /dev/null")?;
    let r = b.vmm_import(null, how);
    release_if_made(&mut b, &r);
    let seen = ctx.refused("importing an fd of /dev/null", r)?;
    b.fd_close(null).step("close")?;
    // Positive control: an exported allocation imports in the same process.
    let handle = a.vmm_create(g, POSIX, 0, PINNED, 0).step("hipMemCreate")?;
    let fd = a
        .vmm_export(handle, POSIX, 0)
        .step("hipMemExportToShareableHandle")?;
    let bfd = pass_fd(&mut a, fd, &mut b)?;
    a.fd_close(fd).step("the exporter closes its fd")?;
    let bh = b.vmm_import(bfd, how).step("importing an exported fd")?;
    b.fd_close(bfd).step("the importer closes the fd")?;
    b.vmm_release(bh).step("importer hipMemRelease")?;
    b.0.finish()?;
    a.vmm_release(handle).step("hipMemRelease")?;
    Ok(format!("{seen}; an exported fd imports"))
}
