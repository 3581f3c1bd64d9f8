//! The HIP rules of the VMM subset: physical allocations, reservations, mappings, access
//! and the POSIX-fd export and import.

use devipc_hip_sys::{
    hipErrorIllegalAddress, hipErrorInvalidValue, hipErrorNotSupported, hipSuccess,
};

use super::{Basis, RuleInfo};

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
/// Issue 25: from ROCm 7.12 `hipMemSetAccess` accepts a `hipMemLocationTypeHost` descriptor
/// (CPU access to VMM memory); before, a location that is no device is refused.
pub const VMM_HOST_ACCESS_ACCEPTED: &str = "hip.vmm.host-access-accepted";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: VMM_ARGS_VALID,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "The VMM calls refuse NULL out/in pointers, size 0, flags != 0 and (hipMemMap) \
                  offset != 0 with hipErrorInvalidValue; hipMemSetAccess needs count > 0 and \
                  descriptors with a device location (from ROCm 7.12 also the host: \
                  hip.vmm.host-access-accepted) and flags None/Read/ReadWrite; \
                  hipMemGetAllocationGranularity needs option Minimum or Recommended.",
        when_broken: Some("cannot be switched off (the arguments are unusable)"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (argument checks of every call)",
        since: None,
    },
    RuleInfo {
        id: VMM_HANDLE_VALID,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen(
            "CLR only checks for NULL and then uses the freed object (undefined \
                              behaviour); the emulator refuses, with the code of CLR's other \
                              handle failures",
        ),
        breakable: false,
        summary: "A handle whose references all went (hipMemRelease and hipMemUnmap) or that this \
                  process never had is refused with hipErrorInvalidValue. CLR only checks for NULL \
                  and then uses the freed object (undefined behaviour); the emulator refuses \
                  instead, with the code of CLR's other handle failures.",
        when_broken: Some("cannot be switched off (there is no allocation to use)"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRelease: ga->release())",
        since: None,
    },
    RuleInfo {
        id: VMM_PROP_PINNED_DEVICE,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemCreate and hipMemGetAllocationGranularity need prop->type == \
                  hipMemAllocationTypePinned and prop->location.type == hipMemLocationTypeDevice \
                  (hipErrorInvalidValue); a location.id that is not a device is \
                  hipErrorInvalidDevice for hipMemCreate, hipErrorInvalidValue for the granularity \
                  query. The prop is read in the emulated version's layout (ROCm 5.2 or 5.3+).",
        when_broken: Some("any type and location type are accepted"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate, \
                 hipMemGetAllocationGranularity)",
        since: None,
    },
    RuleInfo {
        id: VMM_HANDLE_TYPE_SUPPORTED,
        code: hipErrorNotSupported,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemCreate with a requestedHandleType other than None or PosixFileDescriptor \
                  is hipErrorNotSupported (CLR 6.2). That includes hipMemHandleTypeFabric (0x8): \
                  newer CLR accepts it, the ROCm 7.2 release does not, and the emulator has no \
                  fabric model.",
        when_broken: Some("the allocation is created (and cannot be exported as that type)"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemCreate); field notes 2026-11 \
                 (fabric handles)",
        since: None,
    },
    RuleInfo {
        id: VMM_GRANULARITY_ALIGNED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemCreate, hipMemAddressReserve and hipMemMap sizes must be multiples of the \
                  granularity (the emulator's is 2 MiB), and a reservation's alignment a power of \
                  two (or 0); otherwise hipErrorInvalidValue.",
        when_broken: Some("unaligned sizes are accepted"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (memBaseAddrAlign_, \
                 virtualMemAllocGranularityMinimum_ checks)",
        since: None,
    },
    RuleInfo {
        id: VMM_IPC_NEEDS_ROCM_6_2,
        code: hipErrorNotSupported,
        basis: Basis::Implementation,
        breakable: true,
        summary: "Before ROCm 6.2, hipMemExportToShareableHandle validates its arguments and \
                  returns hipErrorNotSupported (hipamd 5.2 era and clr rocm-5.6.0 .. 6.1.2); the \
                  emulator's import answers the same there. From 6.2 (clr 56ebf5157) both work.",
        when_broken: Some("the export and import work on every version"),
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (rocm-5.6.0 .. rocm-6.2.2)",
        since: None,
    },
    RuleInfo {
        id: VMM_EXPORT_HANDLE_TYPE_MATCHES,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemExportToShareableHandle's handleType must equal the requestedHandleType \
                  the allocation was created (or imported) with, else hipErrorInvalidValue; a None \
                  allocation cannot be exported at all.",
        when_broken: Some("the fd is exported whatever the allocation requested"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemExportToShareableHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_IMPORT_OS_HANDLE_CONVENTION,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen(
            "a value of the other convention would make ROCm read the wrong fd or \
                              crash; the emulator refuses it instead",
        ),
        breakable: false,
        summary: "hipMemImportFromShareableHandle reads osHandle as a pointer to the int fd before \
                  ROCm 7.1.0 and as the fd value from 7.1.0. A value that cannot be right under \
                  the emulated convention (before 7.1: an address in the first page, i.e. an fd \
                  passed by value, which ROCm 7.0 would dereference and crash on; from 7.1: a \
                  value that is no int, i.e. a pointer) is refused by the emulator with \
                  hipErrorInvalidValue instead of crashing.",
        when_broken: Some("cannot be switched off (the fd cannot be read)"),
        source: "api-facts B.4; field notes 2026-11 (ROCm 7.1.0 ABI switch: MoRI hip_compat.hpp, \
                 rocm-systems PR #759)",
        since: None,
    },
    RuleInfo {
        id: VMM_IMPORT_EXPORTED_FD,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "hipMemImportFromShareableHandle of an fd that is not an exported VMM allocation \
                  (closed, another file, hipMalloc memory) is hipErrorInvalidValue (CLR: \
                  ImportShareableVMMHandle fails). The emulator also refuses an fd whose \
                  allocation every process already released: a real dma-buf fd keeps the memory \
                  alive, the emulator cannot see fd lifetimes.",
        when_broken: Some("cannot be switched off (there is no allocation to import)"),
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipMemImportFromShareableHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_MAP_INTO_RESERVATION,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "hipMemMap maps into a page aligned, free part of one hipMemAddressReserve range, \
                  at most the allocation's size (mapped from offset 0); hipMemAddressFree takes a \
                  reservation's base. Anything else is hipErrorInvalidValue (CLR: virtualMap / \
                  FindVirtualMemObj fail).",
        when_broken: Some("cannot be switched off (nothing to map into)"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemMap, hipMemAddressFree)",
        since: None,
    },
    RuleInfo {
        id: VMM_WHOLE_MAPPINGS,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "hipMemUnmap and hipMemSetAccess take a range made of whole hipMemMap mappings, \
                  starting at one (CLR ValidateSubBufferCoverage); partial coverage is \
                  hipErrorInvalidValue.",
        when_broken: Some("cannot be switched off"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (ValidateSubBufferCoverage)",
        since: None,
    },
    RuleInfo {
        id: VMM_ACCESS_REQUIRED,
        code: hipErrorIllegalAddress,
        basis: Basis::Chosen(
            "a device touching the mapping faults; the emulator refuses the copy \
                              with the code of a GPU memory fault",
        ),
        breakable: true,
        summary: "A mapping has no access until hipMemSetAccess grants it (api-facts C.3 step 4); \
                  a device touching it faults. The emulator refuses hipMemcpy / hipMemset on a \
                  mapping the calling thread's device cannot read (or write) with \
                  hipErrorIllegalAddress (the code of a GPU memory fault) and records a violation \
                  in the state directory.",
        when_broken: Some("copies ignore the access flags"),
        source: "api-facts B.4, C.3; CLR hipamd/src/hip_vm.cpp (hipMemSetAccess)",
        since: None,
    },
    RuleInfo {
        id: VMM_UNMAP_BEFORE_ADDRESS_FREE,
        code: hipErrorInvalidValue,
        basis: Basis::Chosen(
            "CUDA requires the range to be unmapped and CLR does not check; the \
                              emulator refuses rather than leave mapped memory without an address \
                              range",
        ),
        breakable: true,
        summary: "hipMemAddressFree of a reservation that still has mappings is refused with \
                  hipErrorInvalidValue: CUDA requires the range to be unmapped and CLR's behaviour \
                  is unchecked (virtualFree under live mappings); the emulator refuses rather than \
                  leave mapped memory without an address range.",
        when_broken: Some(
            "the reservation is freed and its mappings dropped (their references \
                           leak)",
        ),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemAddressFree)",
        since: None,
    },
    RuleInfo {
        id: VMM_RETAIN_NEEDS_VMM_MEMORY,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "hipMemRetainAllocationHandle succeeds only for an address inside a hipMemMap \
                  mapping; hipMalloc memory has no physical allocation object \
                  (hipErrorInvalidValue), which is how allocators tell the kinds apart.",
        when_broken: Some("cannot be switched off (there is no handle to return)"),
        source: "api-facts B.4; CLR hipamd/src/hip_vm.cpp (hipMemRetainAllocationHandle); field \
                 notes 2026-11 (Open MPI rocm fork)",
        since: None,
    },
    RuleInfo {
        id: VMM_LEGACY_IPC_REFUSED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: false,
        summary: "hipIpcGetMemHandle cannot export VMM memory: it fails as for any pointer the \
                  runtime cannot export (hipErrorInvalidValue from 5.6, \
                  hipErrorInvalidDevicePointer before). This breaks vLLM custom all-reduce with \
                  expandable segments (aiter #4174).",
        when_broken: Some("cannot be switched off (VMM memory has no legacy IPC object)"),
        source: "api-facts C.1; field notes 2026-11 (ROCm/aiter #4174); CLR \
                 hipamd/src/hip_memory.cpp (hipIpcGetMemHandle)",
        since: None,
    },
    RuleInfo {
        id: VMM_ADDRESS_RANGE_IS_MAPPING,
        code: hipSuccess,
        basis: Basis::Chosen(
            "what CLR's lookup of the per-map sub-buffer implies; not observed on \
                              hardware",
        ),
        breakable: true,
        summary: "hipMemGetAddressRange of an address inside a hipMemMap mapping reports that \
                  mapping's base and size: CLR finds the per-map sub-buffer object that virtualMap \
                  registers (MemObjMap::FindMemObj); not observed on hardware, so the emulator's \
                  choice.",
        when_broken: Some("the address is unknown to hipMemGetAddressRange"),
        source: "api-facts B.3, B.4; CLR hipamd/src/hip_memory.cpp (hipMemGetAddressRange -> \
                 getMemoryObject), hip_vm.cpp (virtualMap sub-buffers)",
        since: None,
    },
    RuleInfo {
        id: VMM_HOST_ACCESS_ACCEPTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "From ROCm 7.12 hipMemSetAccess accepts a descriptor whose location is \
                  hipMemLocationTypeHost (CPU access to the mapping; location.id is ignored) \
                  with flags None/Read/ReadWrite, on device memory too, beside device \
                  descriptors; before 7.12 (no such enumerator in the headers) a location that is \
                  no device is hipErrorInvalidValue. hipMemGetAccess still takes only a device \
                  location (CLR), so the host's flags are not read back; the emulator's \
                  mappings are always readable and writable by the CPU, so the grant changes no \
                  access the emulator can check. HostNuma / HostNumaCurrent (HIP 10.0) are not \
                  modelled (hipErrorInvalidValue).",
        when_broken: Some("a host descriptor is refused on every version (as before 7.12)"),
        source: "api-facts B.4; rocm-systems CLR projects/clr/hipamd/src/hip_vm.cpp \
                 (hipMemSetAccess: location \
                 types Device, Host, HostNuma, HostNumaCurrent accepted, a host descriptor \
                 dispatched through the current device; hipMemGetAccess: Device only); RCCL \
                 dev_runtime tests (hipMemLocationTypeHost exists from ROCm 7.12, \
                 hip/driver_types.h); ROCm/clr hip_vm.cpp of amd-staging (an earlier step that \
                 took a host descriptor only for host-located allocations)",
        since: Some((7, 12)),
    },
];
