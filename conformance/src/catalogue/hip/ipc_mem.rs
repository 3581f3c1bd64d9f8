//! HIP IPC memory rules (api-facts C.1): `hipIpcGetMemHandle`, `hipIpcOpenMemHandle` and
//! `hipIpcCloseMemHandle`, their flags, reference counts, refusals and lifetimes.

use devipc_hip_sys::{
    hipErrorIllegalAddress, hipErrorInvalidContext, hipErrorInvalidDevicePointer,
    hipErrorInvalidHandle, hipErrorInvalidValue, hipErrorNotFound,
    hipErrorPeerAccessAlreadyEnabled,
};

use super::{CHECK, H, INVALID_VALUE, SIZE, TWO_DEVICES, exported, lazy};
use crate::catalogue::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::{Failure, VendorClient, hex};

/// The IPC memory rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.mem.export-import-shares-memory",
        H,
        "hipMalloc memory exported with hipIpcGetMemHandle and opened in another process with \
         hipIpcOpenMemHandle maps the same bytes, in both directions",
        "HIP header hip_runtime_api.h (hipIpcGetMemHandle, hipIpcOpenMemHandle); api-facts C.1",
        Expect::Behaviour,
        &[],
        mem_shares_memory,
    ),
    vendor(
        "hip.mem.flags-must-equal-lazy-enable",
        H,
        "hipIpcOpenMemHandle's flags must equal hipIpcMemLazyEnablePeerAccess of the running \
         version (0 on ROCm 5, 1 from 6.0); the other value is hipErrorInvalidValue",
        "HIP header doc (hipIpcOpenMemHandle); api-facts B.2, C.1",
        INVALID_VALUE,
        &[],
        mem_flags,
    ),
    vendor(
        "hip.mem.open-in-exporter-rejected",
        H,
        "hipIpcOpenMemHandle in the process that exported the handle is hipErrorInvalidContext",
        "HIP 6.x header doc (return list); CLR commit 30e740023 (rocm-5.6); api-facts C.1",
        Expect::Code("hipErrorInvalidContext", hipErrorInvalidContext),
        &[Need::HipAtLeast {
            major: 5,
            minor: 6,
            why: "ROCm before 5.6 has no such check (its handle has no owner pid): the open \
                  maps the allocation a second time, as the emulator does for 5.2",
        }],
        mem_open_in_exporter,
    ),
    vendor(
        "hip.mem.open-returns-base",
        H,
        "a handle exported from an interior pointer opens to the base of the allocation, not \
         base + offset (the exporter must send the offset)",
        "CLR rocclr/device/device.cpp IpcAttach (commit 88fca7bf9); api-facts C.1",
        Expect::Behaviour,
        &[],
        mem_open_returns_base,
    ),
    vendor(
        "hip.mem.open-twice-refcounted",
        H,
        "opening the same handle twice in one process returns the same pointer; each open \
         needs its own hipIpcCloseMemHandle",
        "CLR hipamd/src/hip_memory.cpp (ihipIpcMemHandleOpen); api-facts C.1",
        Expect::Behaviour,
        &[],
        mem_open_twice,
    ),
    vendor(
        "hip.mem.invalid-handle-rejected",
        H,
        "a zeroed hipIpcMemHandle_t is hipErrorInvalidValue; a garbage one is refused \
         (hipErrorInvalidValue, or hipErrorInvalidDevicePointer from the attach step)",
        "CLR hipamd/src/hip_memory.cpp (psize == 0); api-facts C.1",
        INVALID_VALUE,
        &[],
        mem_invalid_handle,
    ),
    vendor(
        "hip.mem.close-non-ipc-pointer-rejected",
        H,
        "hipIpcCloseMemHandle of a pointer no hipIpcOpenMemHandle returned (a hipMalloc \
         pointer) is refused: hipErrorInvalidValue from ROCm 5.6, hipErrorInvalidHandle \
         before (ROCm 5.2.3)",
        "HIP header doc (hipIpcCloseMemHandle); CLR hip_memory.cpp (ipcShared check); hipamd \
         2022 hip_memory.cpp (IpcDetach -> hipErrorInvalidHandle); api-facts C.1",
        Expect::Refused,
        &[],
        mem_close_non_ipc,
    ),
    vendor(
        "hip.mem.export-null-rejected",
        H,
        "hipIpcGetMemHandle with a NULL handle or NULL device pointer is hipErrorInvalidValue",
        "CLR hipamd/src/hip_memory.cpp (hipIpcGetMemHandle); api-facts C.1",
        INVALID_VALUE,
        &[],
        mem_export_null,
    ),
    vendor(
        "hip.mem.realloc-gets-new-handle",
        H,
        "memory freed and allocated again (even at the same address) gets a new, different IPC \
         handle",
        "HIP header doc (hipIpcGetMemHandle: a freed-then-reallocated address gets a new unique \
         handle); api-facts C.1",
        Expect::Behaviour,
        &[],
        mem_realloc_new_handle,
    ),
    vendor(
        "hip.mem.open-after-free-rejected",
        H,
        "a handle whose allocation the exporter freed cannot be opened any more \
         (hipErrorInvalidValue), even while an earlier importer still has it open",
        "api-facts C.1 (header doc: hipFree before importers close is undefined)",
        INVALID_VALUE,
        &[Need::EmulatorOnly(
            "HIP leaves this undefined; the emulator's refusal is its own choice, so a real \
             runtime is not held to it",
        )],
        mem_open_after_free,
    ),
    vendor(
        "hip.mem.free-while-opened",
        H,
        "hipFree by the exporter releases the allocation although another process still has \
         it open: undefined on a GPU; the emulator fails the importer's copies \
         (hipErrorIllegalAddress) and records the violation; freeing after the importers \
         closed records nothing",
        "api-facts C.1 (header doc: hipFree before importers close is undefined)",
        Expect::Behaviour,
        &[Need::EmulatorOnly(
            "HIP leaves a free under an importer undefined, so the suite does not provoke it \
             on a real runtime",
        )],
        mem_free_while_opened,
    ),
    vendor(
        "hip.mem.cross-device-open",
        H,
        "with peer access enabled, a process opens a handle on another device than the \
         exporter's and sees the bytes",
        "HIP header doc (hipIpcMemLazyEnablePeerAccess); api-facts C.1 (older runtimes ignore \
         the lazy flag: enable peer access explicitly)",
        Expect::Behaviour,
        TWO_DEVICES,
        mem_cross_device,
    ),
    vendor(
        "hip.mem.address-range-unknown-not-found",
        H,
        "hipMemGetAddressRange of a pointer inside no allocation is hipErrorNotFound",
        "CLR 6.2 hipamd/src/hip_memory.cpp (hipMemGetAddressRange); api-facts B.3",
        Expect::Code("hipErrorNotFound", hipErrorNotFound),
        &[Need::HipAtLeast {
            major: 6,
            minor: 0,
            why: "the header documents hipErrorInvalidDevicePointer, which ROCm 5.2 returns; \
                  hipErrorNotFound is what CLR 6.2 returns (from 6.0 assumed, 5.6/5.7 \
                  unverified)",
        }],
        mem_address_range_unknown,
    ),
];

fn mem_shares_memory(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    p.set_device(0).step("peer hipSetDevice")?;
    let q = p.mem_open(&handle, flag).step("hipIpcOpenMemHandle")?;
    same_bytes(
        "importer reads",
        &p.read(q, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    p.write(q + 128, &pattern(2, 64)).step("importer write")?;
    same_bytes(
        "exporter reads the importer's bytes",
        &h.read(ptr + 128, 64).step("exporter read")?,
        &pattern(2, 64),
    )?;
    p.mem_close(q).step("hipIpcCloseMemHandle")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    Ok(format!("bytes shared both ways (open flags {flag})"))
}

fn mem_flags(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    p.set_device(0).step("peer hipSetDevice")?;
    let wrong = flag ^ 1;
    let result = p.mem_open(&handle, wrong);
    if let Ok(q) = result {
        let _ = p.mem_close(q);
    }
    let seen = ctx.refused(&format!("open with flags {wrong}"), result)?;
    let q = p
        .mem_open(&handle, flag)
        .step(&format!("open with flags {flag}"))?;
    p.mem_close(q).step("close")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    Ok(format!("{seen}; flags {flag} succeed"))
}

fn mem_open_in_exporter(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    let result = h.mem_open(&handle, flag);
    if let Ok(q) = result {
        let _ = h.mem_close(q);
    }
    let seen = ctx.refused("open in the exporting process", result)?;
    // Positive control: the same open in another process succeeds.
    let mut p = ctx.hip_peer("importer")?;
    p.set_device(0).step("peer hipSetDevice")?;
    let q = p.mem_open(&handle, flag).step("the peer's open")?;
    p.mem_close(q).step("the peer's close")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    Ok(format!("{seen}; the same open in another process succeeds"))
}

fn mem_open_returns_base(ctx: &mut Ctx) -> Verdict {
    const OFFSET: u64 = 4096;
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    let flag = lazy(&mut h)?;
    h.set_device(0).step("hipSetDevice")?;
    let ptr = h.malloc(SIZE).step("hipMalloc")?;
    let whole = pattern(1, OFFSET as usize + CHECK);
    h.write(ptr, &whole).step("filling it")?;
    let handle = h
        .mem_handle(ptr + OFFSET)
        .step("hipIpcGetMemHandle(base + 4096)")?;
    p.set_device(0).step("peer hipSetDevice")?;
    let q = p.mem_open(&handle, flag).step("hipIpcOpenMemHandle")?;
    let got = p.read(q, CHECK).step("read at the opened pointer")?;
    let (base, size) = p.address_range(q).step("hipMemGetAddressRange")?;
    p.mem_close(q).step("close")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    if got == whole[OFFSET as usize..] {
        return Err(Stop::fail(
            "the opened pointer shows the bytes at base + 4096: open returned base + offset \
             (ROCm 4.0/4.1 behaviour)",
        ));
    }
    same_bytes("bytes at the opened pointer", &got, &whole[..CHECK])?;
    ensure(base == q, || {
        format!("hipMemGetAddressRange says the base is {base:#x}, open returned {q:#x}")
    })?;
    Ok(format!(
        "the handle of base + {OFFSET} opened to the base of the {size}-byte allocation"
    ))
}

fn mem_open_twice(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    p.set_device(0).step("peer hipSetDevice")?;
    let q1 = p.mem_open(&handle, flag).step("first open")?;
    let q2 = p.mem_open(&handle, flag).step("second open")?;
    ensure(q1 == q2, || {
        format!("the second open returned {q2:#x}, the first {q1:#x}")
    })?;
    p.mem_close(q1).step("first close")?;
    same_bytes(
        "read after one of two closes",
        &p.read(q2, CHECK).step("read after the first close")?,
        &pattern(1, CHECK),
    )?;
    p.mem_close(q2).step("second close")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    Ok("two opens gave one pointer; it stayed mapped until the second close".into())
}

fn mem_invalid_handle(ctx: &mut Ctx) -> Verdict {
    let mut e = ctx.hip()?;
    let flag = lazy(&mut e)?;
    let (ptr, handle) = exported(&mut e)?;
    // The opens happen in a peer, so the positive control (a real handle opens) is the
    // same call in the same process.
    let mut h = ctx.hip_peer("importer")?;
    h.set_device(0).step("peer hipSetDevice")?;
    let zero = ctx.refused("open a zeroed handle", h.mem_open(&hex(&[0u8; 64]), flag))?;
    // Garbage with a non-zero size field may get past the first check to the ROCr attach,
    // whose failure CLR reports as hipErrorInvalidDevicePointer (api-facts C.1): either
    // code is a refusal; success is not.
    let garbage: Vec<u8> = (0..64u8)
        .map(|i| i.wrapping_mul(73).wrapping_add(5))
        .collect();
    let junk = match h.mem_open(&hex(&garbage), flag) {
        Ok(q) => {
            let _ = h.mem_close(q);
            return Err(Stop::fail("a garbage handle opened"));
        }
        Err(Failure::Vendor { code, .. })
            if code == hipErrorInvalidValue || code == hipErrorInvalidDevicePointer =>
        {
            format!(
                "garbage handle -> {}",
                crate::ctx::code_name(ctx.target.kind(), code)
            )
        }
        Err(e) => return Err(Stop::fail(format!("open a garbage handle: {e}"))),
    };
    let q = h.mem_open(&handle, flag).step("open a real handle")?;
    h.mem_close(q).step("close")?;
    h.0.finish()?;
    e.free(ptr).step("hipFree")?;
    Ok(format!("{zero}; {junk}; a real handle opens"))
}

fn mem_close_non_ipc(ctx: &mut Ctx) -> Verdict {
    let mut e = ctx.hip()?;
    let flag = lazy(&mut e)?;
    let (exported_ptr, handle) = exported(&mut e)?;
    let mut h = ctx.hip_peer("importer")?;
    let v = h.version().step("hipRuntimeGetVersion")?;
    // The code changed with CLR's ipcShared check (ROCm 5.6; emulator hip::versions).
    let (want_name, want) = if v >= 50_600_000 {
        ("hipErrorInvalidValue", hipErrorInvalidValue)
    } else {
        ("hipErrorInvalidHandle", hipErrorInvalidHandle)
    };
    h.set_device(0).step("peer hipSetDevice")?;
    let ptr = h.malloc(SIZE).step("hipMalloc")?;
    let result = h.mem_close(ptr);
    let code = match &result {
        Err(Failure::Vendor { code, .. }) => Some(*code),
        _ => None,
    };
    let seen = ctx.refused("close of a hipMalloc pointer", result)?;
    h.free(ptr).step("hipFree")?;
    ensure(code == Some(want), || {
        format!("{seen}, but HIP_VERSION {v} answers {want_name} ({want})")
    })?;
    let q = h.mem_open(&handle, flag).step("hipIpcOpenMemHandle")?;
    h.mem_close(q).step("close of the opened pointer")?;
    h.0.finish()?;
    e.free(exported_ptr).step("hipFree")?;
    Ok(format!("{seen}; closing an opened pointer succeeds"))
}

fn mem_export_null(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let ptr = h.malloc(SIZE).step("hipMalloc")?;
    let null_handle = ctx.refused("NULL handle", h.mem_handle_null(ptr))?;
    let null_ptr = ctx.refused("NULL device pointer", h.mem_handle(0))?;
    h.mem_handle(ptr)
        .step("hipIpcGetMemHandle with valid pointers")?;
    h.free(ptr).step("hipFree")?;
    Ok(format!(
        "{null_handle}; {null_ptr}; with valid pointers it succeeds"
    ))
}

fn mem_realloc_new_handle(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let first = h.malloc(SIZE).step("hipMalloc")?;
    let h1 = h.mem_handle(first).step("first handle")?;
    h.free(first).step("hipFree")?;
    let second = h.malloc(SIZE).step("hipMalloc again")?;
    let h2 = h.mem_handle(second).step("second handle")?;
    h.free(second).step("hipFree")?;
    ensure(h1 != h2, || {
        "the reallocated memory got the same IPC handle as the freed one".into()
    })?;
    Ok(format!(
        "new handle after free and malloc ({})",
        if first == second {
            "same address"
        } else {
            "different address"
        }
    ))
}

fn mem_open_after_free(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut holder = ctx.hip_peer("holder")?;
    let mut late = ctx.hip_peer("late-importer")?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    holder.set_device(0).step("holder hipSetDevice")?;
    let q = holder
        .mem_open(&handle, flag)
        .step("holder opens before the free")?;
    // Positive control: while the exporter has not freed, a second process opens.
    late.set_device(0).step("late importer hipSetDevice")?;
    let before = late.mem_open(&handle, flag).step("open before the free")?;
    late.mem_close(before).step("close before the free")?;
    h.free(ptr).step("hipFree while the holder has it open")?;
    let result = late.mem_open(&handle, flag);
    if let Ok(q) = result {
        let _ = late.mem_close(q);
    }
    let seen = ctx.refused("open after the exporter freed", result)?;
    holder.mem_close(q).step("holder close")?;
    late.0.finish()?;
    holder.0.finish()?;
    // The free under the holder is hip.mem.free-while-opened's business.
    ctx.take_violations();
    Ok(format!("an open before the free succeeds; {seen}"))
}

fn mem_free_while_opened(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut holder = ctx.hip_peer("holder")?;
    let flag = lazy(&mut h)?;
    holder.set_device(0).step("holder hipSetDevice")?;
    // Positive control: free after the importer closed.
    let (ptr, handle) = exported(&mut h)?;
    let q = holder.mem_open(&handle, flag).step("open")?;
    holder.read(q, CHECK).step("holder read")?;
    holder.mem_close(q).step("holder close")?;
    h.free(ptr).step("hipFree after the close")?;
    let recorded = ctx.take_violations();
    if !recorded.is_empty() {
        return Err(Stop::fail(format!(
            "freeing after the importer closed recorded violations: {recorded:?}"
        )));
    }
    // Free while the holder has it open.
    let (ptr, handle) = exported(&mut h)?;
    let q = holder.mem_open(&handle, flag).step("open")?;
    h.free(ptr).step("hipFree while the holder has it open")?;
    let read = holder.read(q, CHECK);
    let recorded = ctx.take_violations();
    holder.mem_close(q).step("holder close after the free")?;
    holder.0.finish()?;
    let seen = ctx.violation_seen(
        "the holder's read after the exporter's hipFree",
        read,
        Some(hipErrorIllegalAddress),
        &recorded,
    )?;
    Ok(format!("a free after the close records nothing; {seen}"))
}

fn mem_cross_device(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    let flag = lazy(&mut h)?;
    let (ptr, handle) = exported(&mut h)?;
    p.set_device(1).step("peer hipSetDevice(1)")?;
    match p.enable_peer(0, 0) {
        Ok(()) => {}
        Err(Failure::Vendor { code, .. }) if code == hipErrorPeerAccessAlreadyEnabled => {}
        Err(e) => return Err(Stop::fail(format!("hipDeviceEnablePeerAccess(0): {e}"))),
    }
    let q = p.mem_open(&handle, flag).step("open on device 1")?;
    let on = p
        .pointer_device(q)
        .step("hipPointerGetAttributes of the opened pointer")?;
    same_bytes(
        "device-1 importer reads",
        &p.read(q, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    p.mem_close(q).step("close")?;
    p.0.finish()?;
    h.free(ptr).step("hipFree")?;
    ensure(on == 1, || {
        format!("the mapping opened on device 1 reports device {on}")
    })?;
    Ok("opened on device 1 from device 0 with peer access; the mapping is on device 1".into())
}

fn mem_address_range_unknown(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let seen = ctx.refused(
        "hipMemGetAddressRange of an unknown pointer",
        h.address_range(0x1000),
    )?;
    let ptr = h.malloc(SIZE).step("hipMalloc")?;
    let range = h.address_range(ptr + 64);
    h.free(ptr).step("hipFree")?;
    let (base, size) = range.step("hipMemGetAddressRange inside an allocation")?;
    ensure(base == ptr && size >= SIZE, || {
        format!("the allocation at {ptr:#x} has range {base:#x}+{size:#x}")
    })?;
    Ok(format!(
        "{seen}; inside an allocation it gives the allocation"
    ))
}
