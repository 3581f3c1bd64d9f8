//! The vendor rules the HIP surface enforces, as data: one id per rule, the `hipError_t`
//! a violation returns, and where the rule comes from.
//!
//! Every check in the surface names its rule by one of the constants below and asks
//! [`enforced`] right where it would fail, so `DEVIPC_EMU_BREAK_RULE=<id>` switches exactly
//! that rule off (the conformance suite uses this to show that a rule's scenario can
//! fail). [`ALL`] lists every rule with its code, its [`Basis`] (documented by AMD,
//! observed in the CLR implementation, or chosen by the emulator where the vendor is
//! silent or UNVERIFIED) and its source, citing `/work/shared/research/api-facts.md`
//! sections and ROCm CLR files.
//!
//! A rule whose `code` is `hipSuccess` describes a behaviour rather than a refusal (e.g.
//! "open returns the base"); [`RuleInfo::when_broken`] says what the emulator does
//! instead when the rule is switched off.

use devipc_hip_sys::{
    hipError_t, hipErrorIllegalAddress, hipErrorInvalidConfiguration, hipErrorInvalidContext,
    hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorNotFound, hipErrorNotSupported,
    hipErrorPeerAccessAlreadyEnabled, hipErrorPeerAccessUnsupported, hipSuccess,
};

use crate::config::{Config, HipVersion};

/// Why the emulator enforces a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    /// AMD documents it (header comments or the HIP API reference).
    Documented,
    /// AMD does not document it, but the CLR runtime (ROCm 6.2) implements it.
    Implementation,
    /// The vendor is silent or the behaviour is UNVERIFIED; the emulator chose, and
    /// [`RuleInfo::summary`] says why.
    Chosen,
}

/// One enforced rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleInfo {
    /// Stable id, e.g. `hip.mem.open-in-exporter-rejected`.
    pub id: &'static str,
    /// What a violation returns (`hipSuccess` for a behaviour rule).
    pub code: hipError_t,
    /// Documented, implemented or chosen.
    pub basis: Basis,
    /// The rule in one or two sentences, with the reason for a chosen behaviour.
    pub summary: &'static str,
    /// What the emulator does instead when the rule is switched off
    /// (`DEVIPC_EMU_BREAK_RULE`).
    pub when_broken: &'static str,
    /// Where the rule comes from: api-facts section and CLR file.
    pub source: &'static str,
    /// The first HIP version `(major, minor)` that has the rule, `None` for every version.
    /// An older emulated version behaves as [`RuleInfo::summary`] says for it, whether or
    /// not `DEVIPC_EMU_BREAK_RULE` names the rule.
    pub since: Option<(u32, u32)>,
}

impl RuleInfo {
    /// Whether the emulated `version` has this rule at all.
    pub fn exists_in(&self, version: HipVersion) -> bool {
        self.since
            .is_none_or(|(major, minor)| version.at_least(major, minor))
    }
}

/// `hipInit` accepts only `flags == 0`.
pub const INIT_FLAGS_MUST_BE_ZERO: &str = "hip.init.flags-must-be-zero";
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
/// `hipEventInterprocess` requires `hipEventDisableTiming`.
pub const EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING: &str =
    "hip.event.interprocess-needs-disable-timing";
/// Event creation flags outside the runtime's known set are refused.
pub const EVENT_UNKNOWN_FLAGS_REJECTED: &str = "hip.event.unknown-flags-rejected";
/// At most one release-scope flag per event.
pub const EVENT_ONE_RELEASE_FLAG: &str = "hip.event.one-release-flag";
/// `hipIpcGetEventHandle` needs an event created with `hipEventInterprocess`.
pub const EVENT_EXPORT_NEEDS_INTERPROCESS: &str = "hip.event.export-needs-interprocess";
/// Opening an event handle in the process that exported it is refused.
pub const EVENT_OPEN_IN_EXPORTER_REJECTED: &str = "hip.event.open-in-exporter-rejected";
/// A zeroed, garbage or foreign `hipIpcEventHandle_t` is refused.
pub const EVENT_INVALID_HANDLE_REJECTED: &str = "hip.event.invalid-handle-rejected";
/// An event never recorded is complete: `hipEventQuery` succeeds and `hipEventSynchronize`
/// returns at once (so a HIP event alone is not a binary semaphore; DESIGN 5.5).
pub const EVENT_UNRECORDED_IS_COMPLETE: &str = "hip.event.unrecorded-is-complete";
/// `hipStreamWaitEvent`'s `flags` must be 0.
pub const STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO: &str = "hip.stream.wait-event-flags-must-be-zero";
/// A device is not its own peer: `hipDeviceCanAccessPeer(d, d)` writes 0 and
/// `hipDeviceEnablePeerAccess` of the current device fails.
pub const PEER_SELF_IS_NOT_A_PEER: &str = "hip.peer.self-is-not-a-peer";
/// `hipDeviceEnablePeerAccess` accepts only `flags == 0`.
pub const PEER_ENABLE_FLAGS_MUST_BE_ZERO: &str = "hip.peer.enable-flags-must-be-zero";
/// Enabling peer access that is already enabled returns
/// `hipErrorPeerAccessAlreadyEnabled`.
pub const PEER_ALREADY_ENABLED_REJECTED: &str = "hip.peer.already-enabled-rejected";

/// Peer access, and IPC opens on another device than the allocation's, need devices that
/// can reach each other (`hipDeviceCanAccessPeer` reports 1).
pub const PEER_TOPOLOGY_RESPECTED: &str = "hip.peer.topology-respected";
/// The exporter's `hipFree` releases the memory, whether or not other processes still have
/// it open: their mappings then point at freed memory (undefined behaviour, a GPU fault at
/// best). The emulator revokes the pages and records the violation.
pub const MEM_FREE_WHILE_OPENED: &str = "hip.mem.free-while-opened";

/// VMM calls refuse NULL pointers, zero sizes and non-zero `flags`/`offset` arguments.
pub const VMM_ARGS_VALID: &str = "hip.vmm.args-valid";
/// A `hipMemGenericAllocationHandle_t` must be live (not released to zero references).
pub const VMM_HANDLE_VALID: &str = "hip.vmm.handle-valid";
/// `hipMemCreate` / `hipMemGetAllocationGranularity` need a Pinned, Device-located `prop`.
pub const VMM_PROP_PINNED_DEVICE: &str = "hip.vmm.prop-pinned-device";
/// `hipMemCreate` supports `requestedHandleType` None and PosixFileDescriptor only.
pub const VMM_HANDLE_TYPE_SUPPORTED: &str = "hip.vmm.handle-type-supported";
/// Sizes (create, reserve, map) are multiples of the granularity; reserve alignments
/// powers of two.
pub const VMM_GRANULARITY_ALIGNED: &str = "hip.vmm.granularity-aligned";
/// VMM IPC (export and import of a POSIX fd) needs ROCm 6.2.
pub const VMM_IPC_NEEDS_ROCM_6_2: &str = "hip.vmm.ipc-needs-rocm-6.2";
/// `hipMemExportToShareableHandle`'s `handleType` equals the allocation's
/// `requestedHandleType`.
pub const VMM_EXPORT_HANDLE_TYPE_MATCHES: &str = "hip.vmm.export-handle-type-matches";
/// `hipMemImportFromShareableHandle`'s `osHandle` follows the version's convention
/// (pointer to the fd before 7.1, the fd value from 7.1).
pub const VMM_IMPORT_OS_HANDLE_CONVENTION: &str = "hip.vmm.import-os-handle-convention";
/// The imported fd is one `hipMemExportToShareableHandle` made (of a live allocation).
pub const VMM_IMPORT_EXPORTED_FD: &str = "hip.vmm.import-exported-fd";
/// `hipMemMap` maps into a free part of one reservation, at most the allocation's size.
pub const VMM_MAP_INTO_RESERVATION: &str = "hip.vmm.map-into-reservation";
/// `hipMemUnmap` / `hipMemSetAccess` cover whole mappings exactly.
pub const VMM_WHOLE_MAPPINGS: &str = "hip.vmm.whole-mappings";
/// Device access to a mapped range needs `hipMemSetAccess` first.
pub const VMM_ACCESS_REQUIRED: &str = "hip.vmm.access-required";
/// `hipMemAddressFree` of a reservation that still has mappings is refused.
pub const VMM_UNMAP_BEFORE_ADDRESS_FREE: &str = "hip.vmm.unmap-before-address-free";
/// `hipMemRetainAllocationHandle` works only on memory mapped with `hipMemMap`.
pub const VMM_RETAIN_NEEDS_VMM_MEMORY: &str = "hip.vmm.retain-needs-vmm-memory";
/// `hipIpcGetMemHandle` cannot export VMM memory.
pub const VMM_LEGACY_IPC_REFUSED: &str = "hip.vmm.legacy-ipc-refused";
/// `hipMemGetAddressRange` of a VMM address reports the `hipMemMap` mapping holding it.
pub const VMM_ADDRESS_RANGE_IS_MAPPING: &str = "hip.vmm.address-range-is-mapping";

/// Issue 16: `ROCR_VISIBLE_DEVICES`, then `HIP_VISIBLE_DEVICES` (or
/// `CUDA_VISIBLE_DEVICES`), select and renumber the devices a process sees.
pub const DEVICE_VISIBILITY_MASKS_APPLIED: &str = "hip.device.visibility-masks-applied";
/// Issue 16: `hipDeviceGetPCIBusId` needs a buffer of more than 12 bytes.
pub const DEVICE_PCI_BUS_ID_LEN_CHECKED: &str = "hip.device.pci-bus-id-len-checked";
/// Issue 16: `hipDeviceGetByPCIBusId` finds only devices this process sees.
pub const DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY: &str = "hip.device.by-pci-bus-id-visible-only";

/// Every rule the HIP surface enforces.
pub const ALL: &[RuleInfo] = &[
    RuleInfo {
        id: INIT_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipInit(flags) with flags != 0 fails with hipErrorInvalidValue.",
        when_broken: "any flags are accepted",
        source: "api-facts B.1; CLR hipamd/src/hip_context.cpp (hipInit)",
        since: None,
    },
    RuleInfo {
        id: MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        summary: "hipIpcOpenMemHandle compares flags for exact equality with \
                  hipIpcMemLazyEnablePeerAccess of the running version: 0 on ROCm 5.x, 1 from \
                  6.0 (ABI break, commit 8bb3011cb); anything else is hipErrorInvalidValue.",
        when_broken: "any flags are accepted",
        source: "api-facts B.2, C.1; CLR hipamd/src/hip_memory.cpp (hipIpcOpenMemHandle)",
        since: None,
    },
    RuleInfo {
        id: MEM_INVALID_HANDLE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "A zeroed or garbage hipIpcMemHandle_t (CLR: psize == 0), a handle of another \
                  kind or state directory, or one naming an allocation that no longer exists \
                  is hipErrorInvalidValue.",
        when_broken: "the handle reaches the attach step, which fails with \
                      hipErrorInvalidDevicePointer (the code ROCr attach failures map to)",
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp, rocclr/device/device.cpp (IpcAttach)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_IN_EXPORTER_REJECTED,
        code: hipErrorInvalidContext,
        basis: Basis::Implementation,
        summary: "From ROCm 5.6, opening a memory handle in the exporting process is \
                  hipErrorInvalidContext (CLR commit 30e740023 stores owners_process_id in \
                  the handle and compares it with getpid). ROCm 5.2 has no such check: its \
                  handle carries no owner, and rocclr's IpcAttach imports it through ROCr \
                  (hsa_amd_ipc_memory_attach, a KFD import at a new address) and wraps the \
                  new address in a new buffer, so the open succeeds with a second pointer to \
                  the same bytes, closed with hipIpcCloseMemHandle (inferred from that code \
                  path, not observed on hardware); the emulator does that before 5.6. devipc never depends on either (DESIGN 5.1: same-process import is \
                  served without a vendor call).",
        when_broken: "the exporter gets a second mapping of its own allocation (what ROCm \
                      5.2 does)",
        source: "api-facts C.1, D.7; CLR hipamd/src/hip_memory.cpp (owners_process_id \
                 check), rocclr/device/device.cpp (IpcAttach); ROCm/HIP PR #2880",
        since: Some((5, 6)),
    },
    RuleInfo {
        id: MEM_OPEN_RETURNS_BASE,
        code: hipSuccess,
        basis: Basis::Implementation,
        summary: "A handle exported from an interior pointer names the whole allocation and \
                  records the offset (CLR poffset), but hipIpcOpenMemHandle returns the base \
                  of the allocation, not base + offset (rocclr commit 88fca7bf9, confirmed on \
                  hardware on ROCm 6.4.1 and 7.2). The exporter must send the offset itself.",
        when_broken: "open returns base + offset, as ROCm 4.0/4.1 did",
        source: "api-facts C.1; CLR rocclr/device/device.cpp (IpcAttach -> getSvmPtr)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_TWICE_REFCOUNTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        summary: "Opening the same handle twice in one process returns the same pointer and \
                  retains it: each open needs its own hipIpcCloseMemHandle, the mapping goes \
                  when the count reaches 0 (CLR finds the existing memory object and retains \
                  it; the HIP doc only says the pointer is not guaranteed to be the same).",
        when_broken: "every open maps the memory again at a new address",
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp (ihipIpcMemHandleOpen)",
        since: None,
    },
    RuleInfo {
        id: MEM_OPEN_AFTER_FREE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen,
        summary: "Freeing an exported allocation before its importers close it is undefined \
                  behaviour in HIP. The emulator keeps the pages alive for processes that \
                  already opened the handle (their mappings stay valid until they close), \
                  but refuses new opens of the handle with hipErrorInvalidValue once the \
                  exporter freed it or exited, exactly as once the last holder is gone, so \
                  the answer does not depend on whether some other process still maps it.",
        when_broken: "new opens succeed while any process still holds the memory",
        source: "api-facts C.1 (header doc: hipFree before importers close is undefined)",
        since: None,
    },
    RuleInfo {
        id: MEM_CLOSE_NON_IPC_POINTER_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipIpcCloseMemHandle of a pointer that is not inside memory opened with \
                  hipIpcOpenMemHandle (a hipMalloc pointer, an unknown pointer, a mapping \
                  already closed) is refused: hipErrorInvalidValue from ROCm 5.6 (CLR checks \
                  ipcShared), hipErrorInvalidHandle before (ROCm 5.2: IpcDetach fails).",
        when_broken: "the call succeeds and does nothing",
        source: "api-facts C.1; CLR hipamd/src/hip_memory.cpp (hipIpcCloseMemHandle); hipamd \
                 2022 hip_memory.cpp (IpcDetach -> hipErrorInvalidHandle)",
        since: None,
    },
    RuleInfo {
        id: MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
        code: hipErrorNotFound,
        basis: Basis::Implementation,
        summary: "From ROCm 6.0 (assumed; see hip::versions), hipMemGetAddressRange of a \
                  pointer inside no allocation returns hipErrorNotFound (CLR 6.2), although \
                  the header documents hipErrorInvalidDevicePointer; ROCm 5.2 returns \
                  hipErrorInvalidDevicePointer, as the emulator does before 6.0.",
        when_broken: "the header-documented hipErrorInvalidDevicePointer is returned",
        source: "api-facts B.3; CLR hipamd/src/hip_memory.cpp (hipMemGetAddressRange); \
                 ROCm/HIP issue #3531",
        since: Some((6, 0)),
    },
    RuleInfo {
        id: EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        summary: "hipEventCreateWithFlags with hipEventInterprocess but without \
                  hipEventDisableTiming fails with hipErrorInvalidValue.",
        when_broken: "the interprocess event is created anyway",
        source: "api-facts C.2; CLR hipamd/src/hip_event.cpp (ihipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_UNKNOWN_FLAGS_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "Event flags outside hipEventDefault | BlockingSync | DisableTiming | \
                  Interprocess | ReleaseToDevice | ReleaseToSystem (plus \
                  hipEventDisableSystemFence from 5.6) are hipErrorInvalidValue.",
        when_broken: "unknown bits are ignored",
        source: "api-facts B.2, C.2; CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_ONE_RELEASE_FLAG,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "More than one release flag (hipEventReleaseToDevice, \
                  hipEventReleaseToSystem, and from 5.6 hipEventDisableSystemFence) is \
                  hipErrorInvalidValue.",
        when_broken: "several release flags are accepted",
        source: "api-facts C.2; CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_EXPORT_NEEDS_INTERPROCESS,
        code: hipErrorInvalidConfiguration,
        basis: Basis::Implementation,
        summary: "hipIpcGetEventHandle of an event created without hipEventInterprocess is \
                  hipErrorInvalidConfiguration.",
        when_broken: "the event is moved into shared memory and exported",
        source: "api-facts C.2; CLR hipamd/src/hip_event.hpp, hip_event_ipc.cpp",
        since: None,
    },
    RuleInfo {
        id: EVENT_OPEN_IN_EXPORTER_REJECTED,
        code: hipErrorInvalidContext,
        basis: Basis::Documented,
        summary: "hipIpcOpenEventHandle in the process that exported the event is \
                  hipErrorInvalidContext (documented and implemented in 5.2-era hipamd and 6.2).",
        when_broken: "the exporter gets a second event handle on the same shared event",
        source: "api-facts C.2; CLR hipamd/src/hip_event_ipc.cpp (hipIpcOpenEventHandle)",
        since: None,
    },
    RuleInfo {
        id: EVENT_INVALID_HANDLE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "An event handle whose shared memory cannot be mapped (zeroed, garbage, of \
                  another kind, or naming an event that no longer exists) is \
                  hipErrorInvalidValue.",
        when_broken: "hipErrorUnknown (the emulator has no later check to fall through to)",
        source: "api-facts C.2; CLR hipamd/src/hip_event_ipc.cpp (shared memory open)",
        since: None,
    },
    RuleInfo {
        id: EVENT_UNRECORDED_IS_COMPLETE,
        code: hipSuccess,
        basis: Basis::Documented,
        summary: "An event that was never recorded is complete: hipEventQuery returns \
                  hipSuccess and hipEventSynchronize / hipStreamWaitEvent return at once. \
                  A HIP event alone is therefore not a binary semaphore; devipc's backend \
                  adds a sequence word (DESIGN 5.5).",
        when_broken: "an unrecorded event counts as pending until its first record \
                      (hipEventQuery: hipErrorNotReady; hipEventSynchronize waits)",
        source: "DESIGN 5.5; HIP API reference (hipEventSynchronize, hipEventQuery)",
        since: None,
    },
    RuleInfo {
        id: STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        summary: "hipStreamWaitEvent accepts only flags == 0.",
        when_broken: "flags are ignored",
        source: "api-facts B.3; HIP header doc (hipStreamWaitEvent)",
        since: None,
    },
    RuleInfo {
        id: PEER_SELF_IS_NOT_A_PEER,
        code: hipErrorInvalidDevice,
        basis: Basis::Documented,
        summary: "hipDeviceCanAccessPeer(d, d) writes 0, and hipDeviceEnablePeerAccess of the \
                  current device (a peer that cannot be accessed) fails with \
                  hipErrorInvalidDevice.",
        when_broken: "a device reports access to itself and enabling it succeeds",
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: PEER_ENABLE_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        summary: "hipDeviceEnablePeerAccess accepts only flags == 0.",
        when_broken: "flags are ignored",
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: PEER_ALREADY_ENABLED_REJECTED,
        code: hipErrorPeerAccessAlreadyEnabled,
        basis: Basis::Documented,
        summary: "Enabling peer access from the current device to a peer a second time in the \
                  same process returns hipErrorPeerAccessAlreadyEnabled.",
        when_broken: "the second enable succeeds",
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: MEM_FREE_WHILE_OPENED,
        code: hipErrorIllegalAddress,
        basis: Basis::Documented,
        since: None,
        summary: "hipFree by the exporter releases the allocation even while other processes \
                  have it open (importers must close first; the runtime keeps no reference \
                  for them). The emulator revokes the pages for every process (host access \
                  faults, copies fail with hipErrorIllegalAddress) and records the violation.",
        when_broken: "importers keep the pages until they close",
        source: "api-facts C.1 (hipFree in the exporter before importers close: undefined \
                 behaviour, header doc); CLR hipamd/src/hip_memory.cpp (hipFree frees at once, \
                 an IPC attach holds no reference)",
    },
    RuleInfo {
        id: PEER_TOPOLOGY_RESPECTED,
        code: hipErrorPeerAccessUnsupported,
        basis: Basis::Chosen,
        since: None,
        summary: "hipDeviceEnablePeerAccess between devices that cannot reach each other \
                  (hipDeviceCanAccessPeer reports 0) fails with hipErrorPeerAccessUnsupported, \
                  and so does a hipIpcOpenMemHandle on a device unconnected to the \
                  allocation's (the lazy flag cannot enable what the topology lacks). The \
                  emulator chose the open's code: HIP documents the refusal, not its code.",
        when_broken: "every pair of devices can peer",
        source: "api-facts B.3, C.1 (hipIpcMemLazyEnablePeerAccess enables peer access on \
                 demand); HIP API reference hipDeviceEnablePeerAccess \
                 (hipErrorPeerAccessUnsupported)",
    },
    RuleInfo {
        id: VMM_ARGS_VALID,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "The VMM calls refuse NULL out/in pointers, size 0, flags != 0 and (hipMemMap) \
                  offset != 0 with hipErrorInvalidValue; hipMemSetAccess needs count > 0 and \
                  descriptors with a device location and flags None/Read/ReadWrite; \
                  hipMemGetAllocationGranularity needs option Minimum or Recommended.",
        when_broken: "cannot be switched off (the arguments are unusable)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (argument checks of every call)",
        since: None,
    },
    RuleInfo {
        id: VMM_HANDLE_VALID,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen,
        summary: "A handle whose references all went (hipMemRelease and hipMemUnmap) or that \
                  this process never had is refused with hipErrorInvalidValue. CLR only checks \
                  for NULL and then uses the freed object (undefined behaviour); the emulator \
                  refuses instead, with the code of CLR's other handle failures.",
        when_broken: "cannot be switched off (there is no allocation to use)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRelease: ga->release())",
        since: None,
    },
    RuleInfo {
        id: VMM_PROP_PINNED_DEVICE,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemCreate and hipMemGetAllocationGranularity need prop->type == \
                  hipMemAllocationTypePinned and prop->location.type == \
                  hipMemLocationTypeDevice (hipErrorInvalidValue); a location.id that is not \
                  a device is hipErrorInvalidDevice for hipMemCreate, hipErrorInvalidValue \
                  for the granularity query. The prop is read in the emulated version's \
                  layout (ROCm 5.2 or 5.3+).",
        when_broken: "any type and location type are accepted",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate, \
                 hipMemGetAllocationGranularity)",
        since: None,
    },
    RuleInfo {
        id: VMM_HANDLE_TYPE_SUPPORTED,
        code: hipErrorNotSupported,
        basis: Basis::Implementation,
        summary: "hipMemCreate with a requestedHandleType other than None or \
                  PosixFileDescriptor is hipErrorNotSupported (CLR 6.2). That includes \
                  hipMemHandleTypeFabric (0x8): newer CLR accepts it, the ROCm 7.2 release \
                  does not, and the emulator has no fabric model.",
        when_broken: "the allocation is created (and cannot be exported as that type)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate); field notes \
                 2026-11 (fabric handles)",
        since: None,
    },
    RuleInfo {
        id: VMM_GRANULARITY_ALIGNED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemCreate, hipMemAddressReserve and hipMemMap sizes must be multiples of \
                  the granularity (the emulator's is 2 MiB), and a reservation's alignment a \
                  power of two (or 0); otherwise hipErrorInvalidValue.",
        when_broken: "unaligned sizes are accepted",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (memBaseAddrAlign_, \
                 virtualMemAllocGranularityMinimum_ checks)",
        since: None,
    },
    RuleInfo {
        id: VMM_IPC_NEEDS_ROCM_6_2,
        code: hipErrorNotSupported,
        basis: Basis::Implementation,
        summary: "Before ROCm 6.2, hipMemExportToShareableHandle validates its arguments and \
                  returns hipErrorNotSupported (hipamd 5.2 era and clr rocm-5.6.0 .. 6.1.2); \
                  the emulator's import answers the same there. From 6.2 (clr 56ebf5157) \
                  both work.",
        when_broken: "the export and import work on every version",
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (rocm-5.6.0 .. rocm-6.2.2)",
        since: None,
    },
    RuleInfo {
        id: VMM_EXPORT_HANDLE_TYPE_MATCHES,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemExportToShareableHandle's handleType must equal the \
                  requestedHandleType the allocation was created (or imported) with, else \
                  hipErrorInvalidValue; a None allocation cannot be exported at all.",
        when_broken: "the fd is exported whatever the allocation requested",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemExportToShareableHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_IMPORT_OS_HANDLE_CONVENTION,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen,
        summary: "hipMemImportFromShareableHandle reads osHandle as a pointer to the int fd \
                  before ROCm 7.1.0 and as the fd value from 7.1.0. A value that cannot be \
                  right under the emulated convention (before 7.1: an address in the first \
                  page, i.e. an fd passed by value, which ROCm 7.0 would dereference and \
                  crash on; from 7.1: a value that is no int, i.e. a pointer) is refused by \
                  the emulator with hipErrorInvalidValue instead of crashing.",
        when_broken: "cannot be switched off (the fd cannot be read)",
        source: "api-facts B.4; field notes 2026-11 (ROCm 7.1.0 ABI switch: MoRI \
                 hip_compat.hpp, rocm-systems PR #759)",
        since: None,
    },
    RuleInfo {
        id: VMM_IMPORT_EXPORTED_FD,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemImportFromShareableHandle of an fd that is not an exported VMM \
                  allocation (closed, another file, hipMalloc memory) is hipErrorInvalidValue \
                  (CLR: ImportShareableVMMHandle fails). The emulator also refuses an fd whose \
                  allocation every process already released: a real dma-buf fd keeps the \
                  memory alive, the emulator cannot see fd lifetimes.",
        when_broken: "cannot be switched off (there is no allocation to import)",
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp \
                 (hipMemImportFromShareableHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_MAP_INTO_RESERVATION,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemMap maps into a page aligned, free part of one hipMemAddressReserve \
                  range, at most the allocation's size (mapped from offset 0); \
                  hipMemAddressFree takes a reservation's base. Anything else is \
                  hipErrorInvalidValue (CLR: virtualMap / FindVirtualMemObj fail).",
        when_broken: "cannot be switched off (nothing to map into)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemMap, hipMemAddressFree)",
        since: None,
    },
    RuleInfo {
        id: VMM_WHOLE_MAPPINGS,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemUnmap and hipMemSetAccess take a range made of whole hipMemMap \
                  mappings, starting at one (CLR ValidateSubBufferCoverage); partial \
                  coverage is hipErrorInvalidValue.",
        when_broken: "cannot be switched off",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (ValidateSubBufferCoverage)",
        since: None,
    },
    RuleInfo {
        id: VMM_ACCESS_REQUIRED,
        code: hipErrorIllegalAddress,
        basis: Basis::Chosen,
        summary: "A mapping has no access until hipMemSetAccess grants it (api-facts C.3 \
                  step 4); a device touching it faults. The emulator refuses hipMemcpy / \
                  hipMemset on a mapping the calling thread's device cannot read (or write) \
                  with hipErrorIllegalAddress (the code of a GPU memory fault) and records a \
                  violation in the state directory.",
        when_broken: "copies ignore the access flags",
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipMemSetAccess)",
        since: None,
    },
    RuleInfo {
        id: VMM_UNMAP_BEFORE_ADDRESS_FREE,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen,
        summary: "hipMemAddressFree of a reservation that still has mappings is refused with \
                  hipErrorInvalidValue: CUDA requires the range to be unmapped and CLR's \
                  behaviour is unchecked (virtualFree under live mappings); the emulator \
                  refuses rather than leave mapped memory without an address range.",
        when_broken: "the reservation is freed and its mappings dropped (their references leak)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemAddressFree)",
        since: None,
    },
    RuleInfo {
        id: VMM_RETAIN_NEEDS_VMM_MEMORY,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipMemRetainAllocationHandle succeeds only for an address inside a \
                  hipMemMap mapping; hipMalloc memory has no physical allocation object \
                  (hipErrorInvalidValue), which is how allocators tell the kinds apart.",
        when_broken: "cannot be switched off (there is no handle to return)",
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRetainAllocationHandle); \
                 field notes 2026-11 (Open MPI rocm fork)",
        since: None,
    },
    RuleInfo {
        id: VMM_LEGACY_IPC_REFUSED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipIpcGetMemHandle cannot export VMM memory: it fails as for any pointer \
                  the runtime cannot export (hipErrorInvalidValue from 5.6, \
                  hipErrorInvalidDevicePointer before). This breaks vLLM custom all-reduce \
                  with expandable segments (aiter #4174).",
        when_broken: "cannot be switched off (VMM memory has no legacy IPC object)",
        source: "api-facts C.1; field notes 2026-11 (ROCm/aiter #4174); CLR \
                 hipamd/src/hip_memory.cpp (hipIpcGetMemHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_ADDRESS_RANGE_IS_MAPPING,
        code: hipSuccess,
        basis: Basis::Chosen,
        summary: "hipMemGetAddressRange of an address inside a hipMemMap mapping reports that \
                  mapping's base and size: CLR finds the per-map sub-buffer object that \
                  virtualMap registers (MemObjMap::FindMemObj); not observed on hardware, so \
                  the emulator's choice.",
        when_broken: "the address is unknown to hipMemGetAddressRange",
        source: "api-facts B.3, B.4; CLR hipamd/src/hip_memory.cpp (hipMemGetAddressRange \
                 -> getMemoryObject), hip_vm.cpp (virtualMap sub-buffers)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_VISIBILITY_MASKS_APPLIED,
        code: hipSuccess,
        basis: Basis::Implementation,
        summary: "A process sees the devices ROCR_VISIBLE_DEVICES selects (indices or unique \
                  GPU-<hex> prefixes; empty: none; the list ends at an index out of range, a \
                  repeat or an unmatched UUID), then those HIP_VISIBLE_DEVICES (or \
                  CUDA_VISIBLE_DEVICES when HIP's is unset or empty) selects by index among \
                  them (the list ends at the first entry that is not a canonical index in \
                  range; repeats are skipped; GPU- entries from 6.0), renumbered 0.. in the \
                  order listed. Ordinals everywhere (hipSetDevice, hipGetDeviceCount, \
                  locations, peers, pointer attributes) are indices of that view.",
        when_broken: "the masks are ignored: the process sees every physical device under its \
                      physical id",
        source: "ROCR-Runtime src/core/inc/amd_filter_device.h and \
                 src/core/runtime/amd_filter_device.cpp (RvdFilter); CLR \
                 rocclr/device/rocm/rocdevice.cpp (Device::init: HIP_VISIBLE_DEVICES[0] != '\\0' \
                 ? HIP_VISIBLE_DEVICES : CUDA_VISIBLE_DEVICES); HIP docs env_variables.rst; DESIGN 9 (physical device identity)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_PCI_BUS_ID_LEN_CHECKED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipDeviceGetPCIBusId snprintf()s \"%04x:%02x:%02x.0\" into the caller's \
                  len bytes and returns hipErrorInvalidValue when len <= 12 (the id and its NUL \
                  take 13): a short buffer gets a truncated id and the error.",
        when_broken: "a short buffer gets the truncated id and hipSuccess",
        source: "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetPCIBusId: `return len <= \
                 12 ? hipErrorInvalidValue : hipSuccess`); DESIGN 9 (physical device identity)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        summary: "hipDeviceGetByPCIBusId compares the scanned domain, bus and device with the \
                  devices this process sees and answers their ordinal; a bus id of a device \
                  the masks hide (or of none) is hipErrorInvalidValue, like text that does not \
                  scan as %04x:%02x:%02x.",
        when_broken: "a bus id of a hidden device answers its physical id, as code that skips \
                      the mask would",
        source: "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetByPCIBusId: loops over \
                 ihipDeviceGetCount's devices, hipErrorInvalidValue when none matches); DESIGN 9 (physical device identity)",
        since: None,
    },
];

/// The rule with this id, if the HIP surface has one.
pub fn info(id: &str) -> Option<&'static RuleInfo> {
    ALL.iter().find(|r| r.id == id)
}

/// Whether `rule` is enforced in this process: true unless `DEVIPC_EMU_BREAK_RULE` names
/// it. A process whose configuration does not parse enforces every rule (its state-using
/// calls fail anyway).
pub fn enforced(rule: &str) -> bool {
    Config::global().map_or(true, |c| c.enforces(rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::validate_rule_id;

    #[test]
    fn ids_are_unique_well_formed_and_hip_scoped() {
        let mut ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len(), "duplicate rule id");
        for r in ALL {
            validate_rule_id(r.id).unwrap();
            assert!(r.id.starts_with("hip."), "{}", r.id);
            assert!(!r.summary.is_empty() && !r.source.is_empty() && !r.when_broken.is_empty());
            assert!(
                devipc_hip_sys::error_name(r.code).is_some(),
                "{}: unknown code {}",
                r.id,
                r.code
            );
            assert_eq!(info(r.id), Some(r));
        }
        assert_eq!(info("hip.no-such-rule"), None);
    }

    #[test]
    fn version_bound_rules_exist_from_their_release() {
        let v = |t| HipVersion::parse(t).unwrap();
        let open = info(MEM_OPEN_IN_EXPORTER_REJECTED).unwrap();
        assert!(!open.exists_in(v("5.2")) && !open.exists_in(v("5.5")));
        assert!(open.exists_in(v("5.6")) && open.exists_in(v("6.2")));
        let range = info(MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND).unwrap();
        assert!(!range.exists_in(v("5.7")) && range.exists_in(v("6.0")));
        assert!(
            info(MEM_CLOSE_NON_IPC_POINTER_REJECTED)
                .unwrap()
                .exists_in(v("5.2"))
        );
    }

    #[test]
    fn chosen_rules_say_why() {
        for r in ALL.iter().filter(|r| r.basis == Basis::Chosen) {
            assert!(r.summary.contains("emulator"), "{}", r.id);
        }
    }
}
