//! The HIP rules of device memory shared by IPC handles (`hipIpcGetMemHandle`,
//! `hipIpcOpenMemHandle`, `hipIpcCloseMemHandle`), and of `hipFree` and
//! `hipMemGetAddressRange` around them; and the driver-style copies (`hipMemcpyHtoD`,
//! `hipMemcpyDtoH`).

use devipc_hip_sys::{
    hipErrorIllegalAddress, hipErrorInvalidContext, hipErrorInvalidValue, hipErrorNotFound,
    hipSuccess,
};

use super::{Basis, RuleInfo};

/// `hipIpcOpenMemHandle`'s `flags` must equal the runtime's `hipIpcMemLazyEnablePeerAccess`
/// (0 on ROCm 5.x, 1 from 6.0).
pub const MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE: &str = "hip.mem.flags-must-equal-lazy-enable";
/// A zeroed, garbage or foreign `hipIpcMemHandle_t` is refused.
pub const MEM_INVALID_HANDLE_REJECTED: &str = "hip.mem.invalid-handle-rejected";
/// Opening a memory handle in the process that exported it is refused.
pub const MEM_OPEN_IN_EXPORTER_REJECTED: &str = "hip.mem.open-in-exporter-rejected";
/// `hipIpcOpenMemHandle` returns the allocation's base, even for a handle exported from
/// an interior pointer.
pub const MEM_OPEN_RETURNS_BASE: &str = "hip.mem.open-returns-base";
/// Opening the same handle twice in one process returns the same pointer, reference
/// counted: one `hipIpcCloseMemHandle` per open, unmapped when the count reaches zero.
pub const MEM_OPEN_TWICE_REFCOUNTED: &str = "hip.mem.open-twice-refcounted";
/// A handle whose allocation the exporter already freed (or whose exporter exited) cannot
/// be opened any more.
pub const MEM_OPEN_AFTER_FREE_REJECTED: &str = "hip.mem.open-after-free-rejected";
/// `hipIpcCloseMemHandle` of a pointer that no `hipIpcOpenMemHandle` returned is refused.
pub const MEM_CLOSE_NON_IPC_POINTER_REJECTED: &str = "hip.mem.close-non-ipc-pointer-rejected";
/// `hipMemGetAddressRange` of an unknown pointer returns `hipErrorNotFound`.
pub const MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND: &str = "hip.mem.address-range-unknown-not-found";
/// The exporter's `hipFree` releases the memory, whether or not other processes still have
/// it open: their mappings then point at freed memory (undefined behaviour, a GPU fault at
/// best). The emulator revokes the pages and records the violation.
pub const MEM_FREE_WHILE_OPENED: &str = "hip.mem.free-while-opened";
/// Issue 25: `hipMemcpyHtoD` / `hipMemcpyDtoH` are `hipMemcpy` with the kind
/// `hipMemcpyHostToDevice` / `hipMemcpyDeviceToHost`.
pub const MEM_HTOD_DTOH_ARE_DIRECTED_COPIES: &str = "hip.mem.htod-dtoh-are-directed-copies";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipIpcOpenMemHandle compares flags for exact equality with \
                  hipIpcMemLazyEnablePeerAccess of the running version: 0 on ROCm 5.x, 1 from 6.0 \
                  (ABI break, commit 8bb3011cb); anything else is hipErrorInvalidValue.",
        when_broken: Some("any flags are accepted"),
        source: "api-facts B.2, C.1; CLR hipamd/src/hip_memory.cpp (hipIpcOpenMemHandle)",
        since: None,
    },
    RuleInfo {
        id: MEM_INVALID_HANDLE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "A zeroed or garbage hipIpcMemHandle_t (CLR: psize == 0), a handle of another \
                  kind or state directory, or one naming an allocation that no longer exists is \
                  hipErrorInvalidValue.",
        when_broken: Some(
            "the handle reaches the attach step, which fails with \
                           hipErrorInvalidDevicePointer (the code ROCr attach failures map to)",
        ),
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp, rocclr/device/device.cpp \
                 (IpcAttach)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_IN_EXPORTER_REJECTED,
        code: hipErrorInvalidContext,
        basis: Basis::Implementation,
        breakable: true,
        summary: "From ROCm 5.6, opening a memory handle in the exporting process is \
                  hipErrorInvalidContext (CLR commit 30e740023 stores owners_process_id in the \
                  handle and compares it with getpid). ROCm 5.2 has no such check: its handle \
                  carries no owner, and rocclr's IpcAttach imports it through ROCr \
                  (hsa_amd_ipc_memory_attach, a KFD import at a new address) and wraps the new \
                  address in a new buffer, so the open succeeds with a second pointer to the same \
                  bytes, closed with hipIpcCloseMemHandle (inferred from that code path, not \
                  observed on hardware); the emulator does that before 5.6. devipc never depends \
                  on either (DESIGN 5.1: same-process import is served without a vendor call).",
        when_broken: Some(
            "the exporter gets a second mapping of its own allocation (what ROCm 5.2 \
                           does)",
        ),
        source: "api-facts C.1, D.7; CLR hipamd/src/hip_memory.cpp (owners_process_id check), \
                 rocclr/device/device.cpp (IpcAttach); ROCm/HIP PR #2880",
        since: Some((5, 6)),
    },
    RuleInfo {
        id: MEM_OPEN_RETURNS_BASE,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "A handle exported from an interior pointer names the whole allocation and \
                  records the offset (CLR poffset), but hipIpcOpenMemHandle returns the base of \
                  the allocation, not base + offset (rocclr commit 88fca7bf9, confirmed on \
                  hardware on ROCm 6.4.1 and 7.2). The exporter must send the offset itself.",
        when_broken: Some("open returns base + offset, as ROCm 4.0/4.1 did"),
        source: "api-facts C.1; CLR rocclr/device/device.cpp (IpcAttach -> getSvmPtr)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_TWICE_REFCOUNTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "Opening the same handle twice in one process returns the same pointer and \
                  retains it: each open needs its own hipIpcCloseMemHandle, the mapping goes when \
                  the count reaches 0 (CLR finds the existing memory object and retains it; the \
                  HIP doc only says the pointer is not guaranteed to be the same).",
        when_broken: Some("every open maps the memory again at a new address"),
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp (ihipIpcMemHandleOpen)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_AFTER_FREE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen(
            "HIP leaves a free before the importers close undefined; refusing new \
                              opens keeps the answer independent of other holders",
        ),
        breakable: true,
        summary: "Freeing an exported allocation before its importers close it is undefined \
                  behaviour in HIP. The emulator keeps the pages alive for processes that already \
                  opened the handle (their mappings stay valid until they close), but refuses new \
                  opens of the handle with hipErrorInvalidValue once the exporter freed it or \
                  exited, exactly as once the last holder is gone, so the answer does not depend \
                  on whether some other process still maps it.",
        when_broken: Some("new opens succeed while any process still holds the memory"),
        source: "api-facts C.1 (header doc: hipFree before importers close is undefined)",
        since: None,
    },
    RuleInfo {
        id: MEM_CLOSE_NON_IPC_POINTER_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipIpcCloseMemHandle of a pointer that is not inside memory opened with \
                  hipIpcOpenMemHandle (a hipMalloc pointer, an unknown pointer, a mapping already \
                  closed) is refused: hipErrorInvalidValue from ROCm 5.6 (CLR checks ipcShared), \
                  hipErrorInvalidHandle before (ROCm 5.2: IpcDetach fails).",
        when_broken: Some("the call succeeds and does nothing"),
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp (hipIpcCloseMemHandle); hipamd 2022 \
                 hip_memory.cpp (IpcDetach -> hipErrorInvalidHandle)",
        since: None,
    },
    RuleInfo {
        id: MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
        code: hipErrorNotFound,
        basis: Basis::Implementation,
        breakable: true,
        summary: "From ROCm 6.0 (assumed; see hip::versions), hipMemGetAddressRange of a pointer \
                  inside no allocation returns hipErrorNotFound (CLR 6.2), although the header \
                  documents hipErrorInvalidDevicePointer; ROCm 5.2 returns \
                  hipErrorInvalidDevicePointer, as the emulator does before 6.0.",
        when_broken: Some("the header-documented hipErrorInvalidDevicePointer is returned"),
        source: "api-facts B.3; CLR hipamd/src/hip_memory.cpp (hipMemGetAddressRange); ROCm/HIP \
                 issue #3531",
        since: Some((6, 0)),
    },
    RuleInfo {
        id: MEM_FREE_WHILE_OPENED,
        code: hipErrorIllegalAddress,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipFree by the exporter releases the allocation even while other processes have \
                  it open (importers must close first; the runtime keeps no reference for them). \
                  The emulator revokes the pages for every process (host access faults, copies \
                  fail with hipErrorIllegalAddress) and records the violation.",
        when_broken: Some("importers keep the pages until they close"),
        source: "api-facts C.1 (hipFree in the exporter before importers close: undefined \
                 behaviour, header doc); CLR hipamd/src/hip_memory.cpp (hipFree frees at once, an \
                 IPC attach holds no reference)",
        since: None,
    },
    RuleInfo {
        id: MEM_HTOD_DTOH_ARE_DIRECTED_COPIES,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemcpyHtoD(dst, src, n) and hipMemcpyDtoH(dst, src, n) are hipMemcpy(dst, \
                  src, n, hipMemcpyHostToDevice / hipMemcpyDeviceToHost) on the null stream: the \
                  same checks (the device operand lies inside device memory of this process, \
                  else hipErrorInvalidValue; n == 0 copies nothing) and the same bytes.",
        when_broken: Some("the calls check their operands and return hipSuccess without copying"),
        source: "api-facts B.3 (hipMemcpy); CLR hipamd/src/hip_memory.cpp (hipMemcpyHtoD / \
                 hipMemcpyDtoH -> ihipMemcpy \
                 with hipMemcpyHostToDevice / hipMemcpyDeviceToHost on the current device's null \
                 stream); hip-tests unit/memory/hipMemVmm.cc (fills and reads VMM memory with \
                 them)",
        since: None,
    },
];
