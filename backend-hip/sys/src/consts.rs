//! HIP numeric constants devipc needs: flags, copy kinds and every `hipError_t` value.
//!
//! Values are copied from the HIP 5.2 headers (Debian `libamdhip64-dev 5.2.3`) and the
//! upstream ROCm 6.x/7.x headers (api-facts B.2, B.3, B.5). Where the ABI changed between
//! ROCm releases (`hipIpcMemLazyEnablePeerAccess`) both values are here under separate
//! names and [`ipc_mem_lazy_enable_peer_access`] picks one from the runtime version.
//! [`error_name`] is the fallback code-to-name table for when the runtime's own
//! `hipGetErrorName` cannot be used.

use crate::types::{
    c_int, c_uint, hipDeviceAttribute_t, hipDriverProcAddressQueryResult, hipError_t,
    hipMemAccessFlags, hipMemAllocationGranularity_flags, hipMemAllocationHandleType,
    hipMemAllocationType, hipMemLocationType, hipMemcpyKind, hipMemoryType, hipPointer_attribute,
};

// ---------------------------------------------------------------------------------------
// Event and stream flags
// ---------------------------------------------------------------------------------------

/// `hipEventDefault`: an event with timing and active (spinning) synchronisation.
pub const hipEventDefault: c_uint = 0x0;
/// `hipEventBlockingSync`: `hipEventSynchronize` blocks the thread instead of spinning.
pub const hipEventBlockingSync: c_uint = 0x1;
/// `hipEventDisableTiming`: no timing data; required together with
/// [`hipEventInterprocess`] (api-facts C.2).
pub const hipEventDisableTiming: c_uint = 0x2;
/// `hipEventInterprocess`: the event can be exported with `hipIpcGetEventHandle`. Must be
/// combined with [`hipEventDisableTiming`], otherwise creation fails with
/// `hipErrorInvalidValue` (api-facts C.2).
pub const hipEventInterprocess: c_uint = 0x4;
/// `hipEventDisableSystemFence`: no system-scope acquire/release fence. Declared and
/// accepted by `hipEventCreateWithFlags` from ROCm 5.6 (hip-tests require
/// `HIP_VERSION >= 5.6` for it); older runtimes reject it as an unknown flag. It counts as
/// a release flag: combined with another one it is `hipErrorInvalidValue`.
pub const hipEventDisableSystemFence: c_uint = 0x2000_0000;
/// `hipEventReleaseToDevice`: release fence scoped to the device.
pub const hipEventReleaseToDevice: c_uint = 0x4000_0000;
/// `hipEventReleaseToSystem`: release fence scoped to the whole system.
pub const hipEventReleaseToSystem: c_uint = 0x8000_0000;

/// `hipStreamDefault`: a stream that synchronises with the null stream.
pub const hipStreamDefault: c_uint = 0x00;
/// `hipStreamNonBlocking`: a stream that does not synchronise with the null stream.
pub const hipStreamNonBlocking: c_uint = 0x01;

// ---------------------------------------------------------------------------------------
// IPC memory open flag: an ABI break between ROCm 5 and 6
// ---------------------------------------------------------------------------------------

/// `hipIpcMemLazyEnablePeerAccess` as defined by ROCm 5.x and earlier headers: `0`.
///
/// `hipIpcOpenMemHandle` compares its `flags` for exact equality with this value, so a
/// 5.x runtime rejects `1` with `hipErrorInvalidValue` (api-facts B.2). Prefer
/// [`ipc_mem_lazy_enable_peer_access`].
pub const hipIpcMemLazyEnablePeerAccess_ROCM5: c_uint = 0;

/// `hipIpcMemLazyEnablePeerAccess` as defined from ROCm 6.0 on (and on HIP-on-NVIDIA):
/// `0x01` (upstream commit `8bb3011cb`, "[ABI Break] changed hipIpcMemLazyEnablePeerAccess
/// flag value"). A 6.x runtime rejects `0` with `hipErrorInvalidValue`. Prefer
/// [`ipc_mem_lazy_enable_peer_access`].
pub const hipIpcMemLazyEnablePeerAccess_ROCM6: c_uint = 0x01;

/// The `hipIpcMemLazyEnablePeerAccess` value the running runtime accepts, chosen from the
/// `HIP_VERSION`-encoded number that `hipRuntimeGetVersion` writes
/// (`major * 10_000_000 + minor * 100_000 + patch`).
///
/// Major version 6 and later get [`hipIpcMemLazyEnablePeerAccess_ROCM6`]; everything
/// below, including nonsense such as 0 or negative numbers, gets
/// [`hipIpcMemLazyEnablePeerAccess_ROCM5`]. Validating the version is the caller's job.
pub const fn ipc_mem_lazy_enable_peer_access(runtime_version: i32) -> c_uint {
    if runtime_version / 10_000_000 >= 6 {
        hipIpcMemLazyEnablePeerAccess_ROCM6
    } else {
        hipIpcMemLazyEnablePeerAccess_ROCM5
    }
}

// ---------------------------------------------------------------------------------------
// hipMemoryType: an ABI break between ROCm 5 and 6
// ---------------------------------------------------------------------------------------

/// What a `hipMemoryType` value means, independent of the version's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Memory the runtime does not know (`hipMemoryTypeUnregistered`, 6.0+ only).
    Unregistered,
    /// Host memory (`hipHostMalloc`, registered host memory).
    Host,
    /// Device memory (`hipMalloc`, IPC mappings).
    Device,
    /// Managed memory (`hipMallocManaged`; 5.7+ as a value of its own).
    Managed,
    /// A HIP array.
    Array,
    /// Unified memory (unused by CLR).
    Unified,
}

/// The `hipMemoryType` value of `kind` in the runtime whose `HIP_VERSION` encoding is
/// `runtime_version`, or `None` where that version has no such value.
///
/// ROCm 5.x (HIP52 header): Host 0, Device 1, Array 2, Unified 3, and from 5.7 Managed 4;
/// ROCm 6.0 and later: Unregistered 0, Host 1, Device 2, Managed 3, Array 10, Unified 11
/// (api-facts B.3; clr CHANGELOG 6.0 lists the `hipPointerAttribute_t` change).
pub const fn memory_type_value(kind: MemoryKind, runtime_version: i32) -> Option<hipMemoryType> {
    if runtime_version / 10_000_000 >= 6 {
        Some(match kind {
            MemoryKind::Unregistered => 0,
            MemoryKind::Host => 1,
            MemoryKind::Device => 2,
            MemoryKind::Managed => 3,
            MemoryKind::Array => 10,
            MemoryKind::Unified => 11,
        })
    } else {
        match kind {
            MemoryKind::Unregistered => None,
            MemoryKind::Host => Some(0),
            MemoryKind::Device => Some(1),
            MemoryKind::Array => Some(2),
            MemoryKind::Unified => Some(3),
            MemoryKind::Managed if runtime_version >= 50_700_000 => Some(4),
            MemoryKind::Managed => None,
        }
    }
}

/// The meaning of a `hipMemoryType` value written by the runtime whose `HIP_VERSION`
/// encoding is `runtime_version` (the inverse of [`memory_type_value`]).
pub const fn memory_type_kind(value: hipMemoryType, runtime_version: i32) -> Option<MemoryKind> {
    const KINDS: [MemoryKind; 6] = [
        MemoryKind::Unregistered,
        MemoryKind::Host,
        MemoryKind::Device,
        MemoryKind::Managed,
        MemoryKind::Array,
        MemoryKind::Unified,
    ];
    let mut i = 0;
    while i < KINDS.len() {
        if let Some(v) = memory_type_value(KINDS[i], runtime_version) {
            if v == value {
                return Some(KINDS[i]);
            }
        }
        i += 1;
    }
    None
}

/// `hipInvalidDeviceId` (ROCm 6.x): the `device` that `hipPointerGetAttributes` writes for
/// memory the runtime does not know.
pub const hipInvalidDeviceId: c_int = -1;

// ---------------------------------------------------------------------------------------
// hipHostMalloc flags (HIP52 header, unchanged in 6.x)
// ---------------------------------------------------------------------------------------

/// `hipHostMallocDefault`.
pub const hipHostMallocDefault: c_uint = 0x0;
/// `hipHostMallocPortable`: usable from every context.
pub const hipHostMallocPortable: c_uint = 0x1;
/// `hipHostMallocMapped`: mapped into the device address space.
pub const hipHostMallocMapped: c_uint = 0x2;
/// `hipHostMallocWriteCombined`.
pub const hipHostMallocWriteCombined: c_uint = 0x4;
/// `hipHostMallocNumaUser`: follow the calling thread's NUMA policy.
pub const hipHostMallocNumaUser: c_uint = 0x2000_0000;
/// `hipHostMallocCoherent`: fine-grained (coherent) memory.
pub const hipHostMallocCoherent: c_uint = 0x4000_0000;
/// `hipHostMallocNonCoherent`: coarse-grained memory; exclusive with
/// [`hipHostMallocCoherent`].
pub const hipHostMallocNonCoherent: c_uint = 0x8000_0000;

// ---------------------------------------------------------------------------------------
// hipGetProcAddress (ROCm 6.2+)
// ---------------------------------------------------------------------------------------

/// `HIP_GET_PROC_ADDRESS_SUCCESS`: the symbol was found.
pub const HIP_GET_PROC_ADDRESS_SUCCESS: hipDriverProcAddressQueryResult = 0;
/// `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`: no such symbol.
pub const HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: hipDriverProcAddressQueryResult = 1;
/// `HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`: the symbol needs a newer `hipVersion`.
pub const HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: hipDriverProcAddressQueryResult = 2;

// ---------------------------------------------------------------------------------------
// Virtual memory management (api-facts B.4; HIP52 header, unchanged values in 6.x/7.x)
// ---------------------------------------------------------------------------------------

/// `hipMemLocationTypeInvalid`.
pub const hipMemLocationTypeInvalid: hipMemLocationType = 0;
/// `hipMemLocationTypeDevice`: `location.id` is a device ordinal.
pub const hipMemLocationTypeDevice: hipMemLocationType = 1;
/// `hipMemLocationTypeHost`: the host (CPU); `location.id` is ignored. In the headers from
/// ROCm 7.12 (`hip/driver_types.h`; RCCL's tests spell it `2` below that), where
/// `hipMemSetAccess` accepts it: CPU access to VMM memory (rocm-systems CLR
/// `hipamd/src/hip_vm.cpp`).
pub const hipMemLocationTypeHost: hipMemLocationType = 2;
/// `hipMemLocationTypeHostNuma`: a host NUMA node; `location.id` is the node.
pub const hipMemLocationTypeHostNuma: hipMemLocationType = 3;
/// `hipMemLocationTypeHostNumaCurrent`: the NUMA node of the calling thread's CPU;
/// `location.id` is ignored.
pub const hipMemLocationTypeHostNumaCurrent: hipMemLocationType = 4;

/// `hipMemAccessFlagsProtNone`: the range is not accessible (the state after `hipMemMap`).
pub const hipMemAccessFlagsProtNone: hipMemAccessFlags = 0;
/// `hipMemAccessFlagsProtRead`: readable.
pub const hipMemAccessFlagsProtRead: hipMemAccessFlags = 1;
/// `hipMemAccessFlagsProtReadWrite`: readable and writable.
pub const hipMemAccessFlagsProtReadWrite: hipMemAccessFlags = 3;

/// `hipMemAllocationTypeInvalid`.
pub const hipMemAllocationTypeInvalid: hipMemAllocationType = 0x0;
/// `hipMemAllocationTypePinned`: the only type `hipMemCreate` takes on ROCm 5.x/6.x.
pub const hipMemAllocationTypePinned: hipMemAllocationType = 0x1;
/// `hipMemAllocationTypeMax`.
pub const hipMemAllocationTypeMax: hipMemAllocationType = 0x7FFF_FFFF;

/// `hipMemHandleTypeNone`: the allocation cannot be exported.
pub const hipMemHandleTypeNone: hipMemAllocationHandleType = 0x0;
/// `hipMemHandleTypePosixFileDescriptor`: exported as an `int` file descriptor (a dma-buf
/// from ROCm 6.2; api-facts B.4, C.3).
pub const hipMemHandleTypePosixFileDescriptor: hipMemAllocationHandleType = 0x1;
/// `hipMemHandleTypeWin32`: Windows NT handle.
pub const hipMemHandleTypeWin32: hipMemAllocationHandleType = 0x2;
/// `hipMemHandleTypeWin32Kmt`: Windows KMT handle.
pub const hipMemHandleTypeWin32Kmt: hipMemAllocationHandleType = 0x4;
/// The VMM family (`hipMemCreate` ... `hipMemGetAllocationPropertiesFromHandle`, exported
/// as `@@hip_5.1` by ROCm 5.2), optional entries of the table: a runtime lacking any of them
/// cannot share virtual memory. [`HipApi::missing_optional`](crate::HipApi::missing_optional)
/// filtered by this list says which are absent.
///
/// Derived at compile time from the one list, [`for_each_hip_fn!`](crate::for_each_hip_fn):
/// its optional entries whose names are `hipMem` followed by a capital letter, in list
/// order (the optional copies `hipMemcpyHtoD` / `hipMemcpyDtoH` are not VMM functions).
pub const VMM_FUNCTIONS: [&str; count_vmm(crate::HipApi::OPTIONAL_SYMBOLS)] =
    select_vmm(crate::HipApi::OPTIONAL_SYMBOLS);

/// What the names of the VMM family start with, followed by a capital letter
/// (`hipMemCreate`, `hipMemMap`, ...); among the list's optional functions, no other name
/// does (a unit test in `table/tests.rs` keeps it so). The copies (`hipMemcpyHtoD`) have a
/// small letter there.
const VMM_PREFIX: &str = "hipMem";

/// Whether `name` is [`VMM_PREFIX`] followed by an ASCII capital letter.
const fn is_vmm(name: &str) -> bool {
    let (name, prefix) = (name.as_bytes(), VMM_PREFIX.as_bytes());
    if name.len() <= prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if name[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    name[prefix.len()].is_ascii_uppercase()
}

/// How many of `names` belong to the VMM family.
const fn count_vmm(names: &[&str]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < names.len() {
        if is_vmm(names[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The VMM family among `names`, in their order (`N` is [`count_vmm`] of them).
const fn select_vmm<const N: usize>(names: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < names.len() {
        if is_vmm(names[i]) {
            out[n] = names[i];
            n += 1;
        }
        i += 1;
    }
    out
}

/// `hipMemHandleTypeFabric`: a 64-byte `hipMemFabricHandle_t` that needs no fd passing.
/// HIP 7 headers only (absent from 5.x/6.x); the value is 0x8 as in CUDA's
/// `CU_MEM_HANDLE_TYPE_FABRIC` and as MoRI's and RCCL's shims use it (field notes
/// 2026-11: "64-byte tokens with handle type 0x8"); third-party code that says 3 is wrong
/// (api-facts B.4 listed it as UNVERIFIED). ROCm 7.2's `hipMemCreate` still refuses it.
pub const hipMemHandleTypeFabric: hipMemAllocationHandleType = 0x8;

/// `hipMemAllocationGranularityMinimum`.
pub const hipMemAllocationGranularityMinimum: hipMemAllocationGranularity_flags = 0x0;
/// `hipMemAllocationGranularityRecommended`.
pub const hipMemAllocationGranularityRecommended: hipMemAllocationGranularity_flags = 0x1;

/// Whether the runtime whose `HIP_VERSION` encoding is `runtime_version` reads
/// `hipMemAllocationProp` in the ROCm 5.2 layout
/// ([`hipMemAllocationProp_R0502`](crate::types::hipMemAllocationProp_R0502)): every
/// version below 5.3 (the layout changed in upstream commit `d267eb7d6`, first in
/// rocm-5.3.0; api-facts B.4).
pub const fn mem_allocation_prop_is_r0502(runtime_version: i32) -> bool {
    runtime_version < 50_300_000
}

/// Whether `hipMemImportFromShareableHandle`'s `void* osHandle` carries the file
/// descriptor **by value** (`(void*)(intptr_t)fd`, the CUDA convention) in the runtime
/// whose `HIP_VERSION` encoding is `runtime_version`: ROCm 7.1.0 and later. Before (6.2
/// .. 7.0.x) it is a **pointer to** the `int` fd (field notes 2026-11: MoRI
/// `hip_compat.hpp`, rocm-systems PR #759; api-facts B.4).
pub const fn import_takes_fd_by_value(runtime_version: i32) -> bool {
    runtime_version >= 70_100_000
}

// ---------------------------------------------------------------------------------------
// hipPointer_attribute (driver_types.h; HIP52 declares all of these)
// ---------------------------------------------------------------------------------------

/// `HIP_POINTER_ATTRIBUTE_MEMORY_TYPE`.
pub const HIP_POINTER_ATTRIBUTE_MEMORY_TYPE: hipPointer_attribute = 2;
/// `HIP_POINTER_ATTRIBUTE_DEVICE_POINTER`.
pub const HIP_POINTER_ATTRIBUTE_DEVICE_POINTER: hipPointer_attribute = 3;
/// `HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
pub const HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL: hipPointer_attribute = 9;
/// `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE`: whether the memory can be exported
/// with `hipIpcGetMemHandle` (`hipMalloc` memory yes, VMM memory no). Declared since HIP
/// 5.2 ("not supported in HIP" there); RCCL queries it only when `HIP_VERSION >=
/// 71260540` (field notes 2026-11).
pub const HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE: hipPointer_attribute = 10;
/// `HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR`.
pub const HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR: hipPointer_attribute = 11;
/// `HIP_POINTER_ATTRIBUTE_RANGE_SIZE`.
pub const HIP_POINTER_ATTRIBUTE_RANGE_SIZE: hipPointer_attribute = 12;
/// `HIP_POINTER_ATTRIBUTE_MAPPED`.
pub const HIP_POINTER_ATTRIBUTE_MAPPED: hipPointer_attribute = 13;

/// `hipDeviceAttributeVirtualMemoryManagementSupported` (89 in the headers from ROCm 5.3
/// on; ROCm 5.2's enum ends at `hipDeviceAttributeMemoryPoolsSupported`, 88): 1 when the
/// device supports the VMM family. AMD's VMM tests (hip-tests
/// `unit/virtualMemoryManagement`) and VMM users (Mooncake, rocSHMEM, Kokkos) query it
/// with `hipDeviceGetAttribute` before any `hipMem*` call.
pub const hipDeviceAttributeVirtualMemoryManagementSupported: hipDeviceAttribute_t = 89;

// ---------------------------------------------------------------------------------------
// hipMemcpyKind
// ---------------------------------------------------------------------------------------

/// `hipMemcpyHostToHost`.
pub const hipMemcpyHostToHost: hipMemcpyKind = 0;
/// `hipMemcpyHostToDevice`.
pub const hipMemcpyHostToDevice: hipMemcpyKind = 1;
/// `hipMemcpyDeviceToHost`.
pub const hipMemcpyDeviceToHost: hipMemcpyKind = 2;
/// `hipMemcpyDeviceToDevice`.
pub const hipMemcpyDeviceToDevice: hipMemcpyKind = 3;
/// `hipMemcpyDefault`: direction inferred from the pointers (unified addressing).
pub const hipMemcpyDefault: hipMemcpyKind = 4;
/// `hipMemcpyDeviceToDeviceNoCU` (ROCm 6.1 and later only; absent in 5.x and 6.0).
pub const hipMemcpyDeviceToDeviceNoCU: hipMemcpyKind = 1024;

// ---------------------------------------------------------------------------------------
// hipError_t
// ---------------------------------------------------------------------------------------

/// Defines one `pub const` per error code and the [`ERRORS`] table from one list.
macro_rules! hip_errors {
    ($( $(#[$doc:meta])* $name:ident = $value:literal, )*) => {
        $(
            $(#[$doc])*
            pub const $name: hipError_t = $value;
        )*

        /// Every `hipError_t` value devipc knows, as `(code, canonical name)`, sorted by
        /// code. Deprecated aliases (e.g. `hipErrorMemoryAllocation`) are not listed; the
        /// canonical name is the one `hipGetErrorName` returns.
        pub const ERRORS: &[(hipError_t, &str)] = &[$( ($value, stringify!($name)), )*];
    };
}

hip_errors! {
    /// `hipSuccess`: the call succeeded.
    hipSuccess = 0,
    /// `hipErrorInvalidValue`: an argument is NULL or out of range.
    hipErrorInvalidValue = 1,
    /// `hipErrorOutOfMemory`: a memory allocation failed.
    hipErrorOutOfMemory = 2,
    /// `hipErrorNotInitialized`: the runtime is not initialised.
    hipErrorNotInitialized = 3,
    /// `hipErrorDeinitialized`: the runtime is shutting down.
    hipErrorDeinitialized = 4,
    /// `hipErrorProfilerDisabled`.
    hipErrorProfilerDisabled = 5,
    /// `hipErrorProfilerNotInitialized`.
    hipErrorProfilerNotInitialized = 6,
    /// `hipErrorProfilerAlreadyStarted`.
    hipErrorProfilerAlreadyStarted = 7,
    /// `hipErrorProfilerAlreadyStopped`.
    hipErrorProfilerAlreadyStopped = 8,
    /// `hipErrorInvalidConfiguration`; also what `hipIpcGetEventHandle` returns for an event
    /// created without `hipEventInterprocess` (api-facts C.2).
    hipErrorInvalidConfiguration = 9,
    /// `hipErrorInvalidPitchValue`.
    hipErrorInvalidPitchValue = 12,
    /// `hipErrorInvalidSymbol`.
    hipErrorInvalidSymbol = 13,
    /// `hipErrorInvalidDevicePointer`; also an IPC attach failure in ROCr (api-facts C.1).
    hipErrorInvalidDevicePointer = 17,
    /// `hipErrorInvalidMemcpyDirection`.
    hipErrorInvalidMemcpyDirection = 21,
    /// `hipErrorInsufficientDriver`.
    hipErrorInsufficientDriver = 35,
    /// `hipErrorMissingConfiguration`.
    hipErrorMissingConfiguration = 52,
    /// `hipErrorPriorLaunchFailure`.
    hipErrorPriorLaunchFailure = 53,
    /// `hipErrorInvalidDeviceFunction`.
    hipErrorInvalidDeviceFunction = 98,
    /// `hipErrorNoDevice`: no HIP-capable device; `hipGetDeviceCount` on a machine without
    /// a GPU returns it (and writes 0).
    hipErrorNoDevice = 100,
    /// `hipErrorInvalidDevice`: a device id outside `0..count`; ROCm 5.2's `hipInit`
    /// returns it on a machine without a GPU.
    hipErrorInvalidDevice = 101,
    /// `hipErrorInvalidImage`.
    hipErrorInvalidImage = 200,
    /// `hipErrorInvalidContext`; also opening an IPC handle in the exporting process
    /// (api-facts C.1, C.2).
    hipErrorInvalidContext = 201,
    /// `hipErrorContextAlreadyCurrent`.
    hipErrorContextAlreadyCurrent = 202,
    /// `hipErrorMapFailed` (alias `hipErrorMapBufferObjectFailed`).
    hipErrorMapFailed = 205,
    /// `hipErrorUnmapFailed`.
    hipErrorUnmapFailed = 206,
    /// `hipErrorArrayIsMapped`.
    hipErrorArrayIsMapped = 207,
    /// `hipErrorAlreadyMapped`.
    hipErrorAlreadyMapped = 208,
    /// `hipErrorNoBinaryForGpu`.
    hipErrorNoBinaryForGpu = 209,
    /// `hipErrorAlreadyAcquired`.
    hipErrorAlreadyAcquired = 210,
    /// `hipErrorNotMapped`.
    hipErrorNotMapped = 211,
    /// `hipErrorNotMappedAsArray`.
    hipErrorNotMappedAsArray = 212,
    /// `hipErrorNotMappedAsPointer`.
    hipErrorNotMappedAsPointer = 213,
    /// `hipErrorECCNotCorrectable`.
    hipErrorECCNotCorrectable = 214,
    /// `hipErrorUnsupportedLimit`.
    hipErrorUnsupportedLimit = 215,
    /// `hipErrorContextAlreadyInUse`.
    hipErrorContextAlreadyInUse = 216,
    /// `hipErrorPeerAccessUnsupported`.
    hipErrorPeerAccessUnsupported = 217,
    /// `hipErrorInvalidKernelFile`.
    hipErrorInvalidKernelFile = 218,
    /// `hipErrorInvalidGraphicsContext`.
    hipErrorInvalidGraphicsContext = 219,
    /// `hipErrorInvalidSource`.
    hipErrorInvalidSource = 300,
    /// `hipErrorFileNotFound`.
    hipErrorFileNotFound = 301,
    /// `hipErrorSharedObjectSymbolNotFound`.
    hipErrorSharedObjectSymbolNotFound = 302,
    /// `hipErrorSharedObjectInitFailed`.
    hipErrorSharedObjectInitFailed = 303,
    /// `hipErrorOperatingSystem`.
    hipErrorOperatingSystem = 304,
    /// `hipErrorInvalidHandle` (alias `hipErrorInvalidResourceHandle`): a bad stream or
    /// event handle.
    hipErrorInvalidHandle = 400,
    /// `hipErrorIllegalState`.
    hipErrorIllegalState = 401,
    /// `hipErrorNotFound`; also `hipMemGetAddressRange` on an unknown pointer (api-facts B.3).
    hipErrorNotFound = 500,
    /// `hipErrorNotReady`: `hipEventQuery` / `hipStreamQuery` while work is pending.
    hipErrorNotReady = 600,
    /// `hipErrorIllegalAddress`.
    hipErrorIllegalAddress = 700,
    /// `hipErrorLaunchOutOfResources`.
    hipErrorLaunchOutOfResources = 701,
    /// `hipErrorLaunchTimeOut`.
    hipErrorLaunchTimeOut = 702,
    /// `hipErrorPeerAccessAlreadyEnabled`.
    hipErrorPeerAccessAlreadyEnabled = 704,
    /// `hipErrorPeerAccessNotEnabled`.
    hipErrorPeerAccessNotEnabled = 705,
    /// `hipErrorSetOnActiveProcess`.
    hipErrorSetOnActiveProcess = 708,
    /// `hipErrorContextIsDestroyed`.
    hipErrorContextIsDestroyed = 709,
    /// `hipErrorAssert`: a kernel called `assert`.
    hipErrorAssert = 710,
    /// `hipErrorHostMemoryAlreadyRegistered`.
    hipErrorHostMemoryAlreadyRegistered = 712,
    /// `hipErrorHostMemoryNotRegistered`.
    hipErrorHostMemoryNotRegistered = 713,
    /// `hipErrorLaunchFailure`.
    hipErrorLaunchFailure = 719,
    /// `hipErrorCooperativeLaunchTooLarge`.
    hipErrorCooperativeLaunchTooLarge = 720,
    /// `hipErrorNotSupported`.
    hipErrorNotSupported = 801,
    /// `hipErrorStreamCaptureUnsupported`.
    hipErrorStreamCaptureUnsupported = 900,
    /// `hipErrorStreamCaptureInvalidated`.
    hipErrorStreamCaptureInvalidated = 901,
    /// `hipErrorStreamCaptureMerge`.
    hipErrorStreamCaptureMerge = 902,
    /// `hipErrorStreamCaptureUnmatched`.
    hipErrorStreamCaptureUnmatched = 903,
    /// `hipErrorStreamCaptureUnjoined`.
    hipErrorStreamCaptureUnjoined = 904,
    /// `hipErrorStreamCaptureIsolation`.
    hipErrorStreamCaptureIsolation = 905,
    /// `hipErrorStreamCaptureImplicit`.
    hipErrorStreamCaptureImplicit = 906,
    /// `hipErrorCapturedEvent`.
    hipErrorCapturedEvent = 907,
    /// `hipErrorStreamCaptureWrongThread`.
    hipErrorStreamCaptureWrongThread = 908,
    /// `hipErrorGraphExecUpdateFailure`.
    hipErrorGraphExecUpdateFailure = 910,
    /// `hipErrorInvalidChannelDescriptor` (added after ROCm 6.2; older runtimes name it
    /// `hipErrorUnknown`).
    hipErrorInvalidChannelDescriptor = 911,
    /// `hipErrorInvalidTexture` (added after ROCm 6.2).
    hipErrorInvalidTexture = 912,
    /// `hipErrorInvalidResourceType` (HIP 7).
    hipErrorInvalidResourceType = 914,
    /// `hipErrorInvalidResourceConfiguration` (HIP 7).
    hipErrorInvalidResourceConfiguration = 915,
    /// `hipErrorStreamDetached` (HIP 7).
    hipErrorStreamDetached = 916,
    /// `hipErrorUnknown`; also what `hipGetErrorName` says for any code it does not know.
    hipErrorUnknown = 999,
    /// `hipErrorRuntimeMemory`: an HSA runtime memory call failed.
    hipErrorRuntimeMemory = 1052,
    /// `hipErrorRuntimeOther`: another HSA runtime call failed.
    hipErrorRuntimeOther = 1053,
    /// `hipErrorInvalidClusterSize` (HIP 7). In ROCm 5.x and 6.x, 1054 is the
    /// `hipErrorTbd` end-of-enum marker, which no API returns; that marker has no
    /// constant here because its value moved in HIP 7.
    hipErrorInvalidClusterSize = 1054,
}

/// `hipErrorMemoryAllocation`: deprecated alias of [`hipErrorOutOfMemory`].
pub const hipErrorMemoryAllocation: hipError_t = hipErrorOutOfMemory;
/// `hipErrorInitializationError`: deprecated alias of [`hipErrorNotInitialized`].
pub const hipErrorInitializationError: hipError_t = hipErrorNotInitialized;
/// `hipErrorMapBufferObjectFailed`: deprecated alias of [`hipErrorMapFailed`].
pub const hipErrorMapBufferObjectFailed: hipError_t = hipErrorMapFailed;
/// `hipErrorInvalidResourceHandle`: deprecated alias of [`hipErrorInvalidHandle`].
pub const hipErrorInvalidResourceHandle: hipError_t = hipErrorInvalidHandle;

/// The canonical symbolic name of a `hipError_t` code, e.g. `hipErrorInvalidContext` for
/// 201, or `None` for a code no known HIP version defines.
///
/// A fallback table: prefer the runtime's own `hipGetErrorName`, which knows the codes of
/// its version. The names agree with ROCm 5.2's `hipGetErrorName` for every code that
/// version defines (checked by the `real_runtime` test); 911-916 are newer (a 5.2 runtime
/// calls them `hipErrorUnknown`) and 1054 is HIP 7's `hipErrorInvalidClusterSize` (a
/// 5.x/6.x runtime calls its end-of-enum marker `hipErrorTbd`).
pub fn error_name(code: hipError_t) -> Option<&'static str> {
    ERRORS
        .binary_search_by_key(&code, |&(c, _)| c)
        .ok()
        .map(|i| ERRORS[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_type_values_follow_the_runtime_version() {
        use MemoryKind::*;
        // (kind, 5.2, 5.7, 6.2), from the HIP52 header and api-facts B.3.
        let table = [
            (Unregistered, None, None, Some(0)),
            (Host, Some(0), Some(0), Some(1)),
            (Device, Some(1), Some(1), Some(2)),
            (Managed, None, Some(4), Some(3)),
            (Array, Some(2), Some(2), Some(10)),
            (Unified, Some(3), Some(3), Some(11)),
        ];
        for (kind, v52, v57, v62) in table {
            for (version, want) in [(50221153, v52), (50731921, v57), (60200000, v62)] {
                assert_eq!(
                    memory_type_value(kind, version),
                    want,
                    "{kind:?} @ {version}"
                );
                if let Some(v) = want {
                    assert_eq!(memory_type_kind(v, version), Some(kind), "{v} @ {version}");
                }
            }
        }
        assert_eq!(memory_type_kind(2, 50221153), Some(Array));
        assert_eq!(memory_type_kind(2, 60200000), Some(Device));
        assert_eq!(memory_type_kind(4, 50221153), None);
        assert_eq!(memory_type_kind(-1, 60200000), None);
    }

    #[test]
    fn lazy_peer_access_flag_follows_the_runtime_major_version() {
        let table: &[(i32, c_uint)] = &[
            (50221153, 0), // Debian 12 ROCm 5.2.3
            (50422804, 0), // hip-sys bindings' HIP 5.4
            (50731921, 0), // 5.7.1
            (59999999, 0),
            (60000000, 1), // 6.0.0
            (60032830, 1),
            (60200000, 1), // 6.2
            (70000000, 1), // 7.0
            (70251234, 1),
            (40200000, 0),
            (0, 0),
            (-1, 0),
            (-60000000, 0),
            (i32::MAX, 1),
        ];
        for &(version, flag) in table {
            assert_eq!(
                ipc_mem_lazy_enable_peer_access(version),
                flag,
                "version {version}"
            );
        }
        assert_eq!(hipIpcMemLazyEnablePeerAccess_ROCM5, 0);
        assert_eq!(hipIpcMemLazyEnablePeerAccess_ROCM6, 1);
    }

    #[test]
    fn error_table_is_sorted_and_unique() {
        for pair in ERRORS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{pair:?}");
        }
        let mut names: Vec<_> = ERRORS.iter().map(|&(_, n)| n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ERRORS.len());
        assert!(ERRORS.iter().all(|&(_, n)| n.starts_with("hip")));
    }

    #[test]
    fn error_names() {
        let table: &[(hipError_t, Option<&str>)] = &[
            (0, Some("hipSuccess")),
            (1, Some("hipErrorInvalidValue")),
            (2, Some("hipErrorOutOfMemory")),
            (3, Some("hipErrorNotInitialized")),
            (9, Some("hipErrorInvalidConfiguration")),
            (17, Some("hipErrorInvalidDevicePointer")),
            (100, Some("hipErrorNoDevice")),
            (101, Some("hipErrorInvalidDevice")),
            (201, Some("hipErrorInvalidContext")),
            (205, Some("hipErrorMapFailed")),
            (400, Some("hipErrorInvalidHandle")),
            (500, Some("hipErrorNotFound")),
            (600, Some("hipErrorNotReady")),
            (704, Some("hipErrorPeerAccessAlreadyEnabled")),
            (705, Some("hipErrorPeerAccessNotEnabled")),
            (801, Some("hipErrorNotSupported")),
            (908, Some("hipErrorStreamCaptureWrongThread")),
            (916, Some("hipErrorStreamDetached")),
            (999, Some("hipErrorUnknown")),
            (1053, Some("hipErrorRuntimeOther")),
            (1054, Some("hipErrorInvalidClusterSize")),
            // Gaps and nonsense.
            (10, None),
            (711, None), // cudaErrorTooManyPeers has no HIP equivalent
            (913, None),
            (1055, None),
            (-1, None),
            (i32::MIN, None),
        ];
        for &(code, name) in table {
            assert_eq!(error_name(code), name, "code {code}");
        }
    }

    #[test]
    fn aliases_share_the_canonical_code() {
        assert_eq!(hipErrorMemoryAllocation, 2);
        assert_eq!(hipErrorInitializationError, 3);
        assert_eq!(hipErrorMapBufferObjectFailed, 205);
        assert_eq!(hipErrorInvalidResourceHandle, 400);
        assert_eq!(
            error_name(hipErrorInvalidResourceHandle),
            Some("hipErrorInvalidHandle")
        );
    }

    #[test]
    fn vmm_version_rules() {
        for (version, r0502, by_value) in [
            (50221153, true, false),
            (50299999, true, false),
            (50300000, false, false),
            (60241133, false, false),
            (70051234, false, false),
            (70099999, false, false),
            (70100000, false, true),
            (70251234, false, true),
        ] {
            assert_eq!(mem_allocation_prop_is_r0502(version), r0502, "{version}");
            assert_eq!(import_takes_fd_by_value(version), by_value, "{version}");
        }
        assert_eq!(hipMemHandleTypePosixFileDescriptor, 1);
        assert_eq!(hipMemHandleTypeFabric, 8);
        assert_eq!(hipMemAccessFlagsProtReadWrite, 3);
        assert_eq!(HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE, 10);
    }

    #[test]
    fn flag_values() {
        assert_eq!(hipEventInterprocess | hipEventDisableTiming, 0x6);
        assert_eq!(hipEventReleaseToSystem, 0x8000_0000);
        assert_eq!(hipStreamNonBlocking, 1);
        assert_eq!(hipMemcpyHostToDevice, 1);
        assert_eq!(hipMemcpyDeviceToHost, 2);
    }
}
