//! The HIP rules of the runtime (`hipInit`), device identity and visibility, device
//! queries (`hipDeviceGet`, `hipDeviceGetAttribute`), and peer access.

use devipc_hip_sys::{
    hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorPeerAccessAlreadyEnabled,
    hipErrorPeerAccessUnsupported, hipSuccess,
};

use super::{Basis, RuleInfo};

/// `hipInit` accepts only `flags == 0`.
pub const INIT_FLAGS_MUST_BE_ZERO: &str = "hip.init.flags-must-be-zero";
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
/// Issue 16: `ROCR_VISIBLE_DEVICES`, then `HIP_VISIBLE_DEVICES` (or
/// `CUDA_VISIBLE_DEVICES`), select and renumber the devices a process sees.
pub const DEVICE_VISIBILITY_MASKS_APPLIED: &str = "hip.device.visibility-masks-applied";
/// Issue 16: `hipDeviceGetPCIBusId` needs a buffer of more than 12 bytes.
pub const DEVICE_PCI_BUS_ID_LEN_CHECKED: &str = "hip.device.pci-bus-id-len-checked";
/// Issue 16: `hipDeviceGetByPCIBusId` finds only devices this process sees.
pub const DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY: &str = "hip.device.by-pci-bus-id-visible-only";
/// Issue 25: `hipDeviceGet` of an ordinal this process does not see is
/// `hipErrorInvalidDevice`.
pub const DEVICE_GET_CHECKS_ORDINAL: &str = "hip.device.get-checks-ordinal";
/// Issue 25: `hipDeviceGetAttribute(hipDeviceAttributeVirtualMemoryManagementSupported)`
/// answers 1 (from ROCm 5.3, the first release with the attribute).
pub const DEVICE_VMM_ATTRIBUTE_REPORTED: &str = "hip.device.vmm-attribute-reported";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: INIT_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipInit(flags) with flags != 0 fails with hipErrorInvalidValue.",
        when_broken: Some("any flags are accepted"),
        source: "api-facts B.1; CLR hipamd/src/hip_context.cpp (hipInit)",
        since: None,
    },
    RuleInfo {
        id: PEER_SELF_IS_NOT_A_PEER,
        code: hipErrorInvalidDevice,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipDeviceCanAccessPeer(d, d) writes 0, and hipDeviceEnablePeerAccess of the \
                  current device (a peer that cannot be accessed) fails with \
                  hipErrorInvalidDevice.",
        when_broken: Some("a device reports access to itself and enabling it succeeds"),
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: PEER_ENABLE_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipDeviceEnablePeerAccess accepts only flags == 0.",
        when_broken: Some("flags are ignored"),
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: PEER_ALREADY_ENABLED_REJECTED,
        code: hipErrorPeerAccessAlreadyEnabled,
        basis: Basis::Documented,
        breakable: true,
        summary: "Enabling peer access from the current device to a peer a second time in the same \
                  process returns hipErrorPeerAccessAlreadyEnabled.",
        when_broken: Some("the second enable succeeds"),
        source: "api-facts B.3; CLR hipamd/src/hip_peer.cpp",
        since: None,
    },
    RuleInfo {
        id: PEER_TOPOLOGY_RESPECTED,
        code: hipErrorPeerAccessUnsupported,
        basis: Basis::Chosen(
            "HIP documents the refusal of peer access between unconnected \
                              devices, not the code of an open across them",
        ),
        breakable: true,
        summary: "hipDeviceEnablePeerAccess between devices that cannot reach each other \
                  (hipDeviceCanAccessPeer reports 0) fails with hipErrorPeerAccessUnsupported, and \
                  so does a hipIpcOpenMemHandle on a device unconnected to the allocation's (the \
                  lazy flag cannot enable what the topology lacks). The emulator chose the open's \
                  code: HIP documents the refusal, not its code.",
        when_broken: Some("every pair of devices can peer"),
        source: "api-facts B.3, C.1 (hipIpcMemLazyEnablePeerAccess enables peer access on demand); \
                 HIP API reference hipDeviceEnablePeerAccess (hipErrorPeerAccessUnsupported)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_VISIBILITY_MASKS_APPLIED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "A process sees the devices ROCR_VISIBLE_DEVICES selects (indices or unique \
                  GPU-<hex> prefixes; empty: none; the list ends at an index out of range, a \
                  repeat or an unmatched UUID), then those HIP_VISIBLE_DEVICES (or \
                  CUDA_VISIBLE_DEVICES when HIP's is unset or empty) selects by index among them \
                  (the list ends at the first entry that is not a canonical index in range; \
                  repeats are skipped; GPU- entries from 6.0), renumbered 0.. in the order listed. \
                  Ordinals everywhere (hipSetDevice, hipGetDeviceCount, locations, peers, pointer \
                  attributes) are indices of that view.",
        when_broken: Some(
            "the masks are ignored: the process sees every physical device under its \
                           physical id",
        ),
        source: "ROCR-Runtime src/core/inc/amd_filter_device.h and \
                 src/core/runtime/amd_filter_device.cpp (RvdFilter); CLR \
                 rocclr/device/rocm/rocdevice.cpp (Device::init: HIP_VISIBLE_DEVICES[0] != '\\0' ? \
                 HIP_VISIBLE_DEVICES : CUDA_VISIBLE_DEVICES); HIP docs env_variables.rst; DESIGN 9 \
                 (physical device identity)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_PCI_BUS_ID_LEN_CHECKED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipDeviceGetPCIBusId snprintf()s \"%04x:%02x:%02x.0\" into the caller's len \
                  bytes and returns hipErrorInvalidValue when len <= 12 (the id and its NUL take \
                  13): a short buffer gets a truncated id and the error.",
        when_broken: Some("a short buffer gets the truncated id and hipSuccess"),
        source: "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetPCIBusId: `return len <= 12 ? \
                 hipErrorInvalidValue : hipSuccess`); DESIGN 9 (physical device identity)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipDeviceGetByPCIBusId compares the scanned domain, bus and device with the \
                  devices this process sees and answers their ordinal; a bus id of a device the \
                  masks hide (or of none) is hipErrorInvalidValue, like text that does not scan as \
                  %04x:%02x:%02x.",
        when_broken: Some(
            "a bus id of a hidden device answers its physical id, as code that skips \
                           the mask would",
        ),
        source: "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetByPCIBusId: loops over \
                 ihipDeviceGetCount's devices, hipErrorInvalidValue when none matches); DESIGN 9 \
                 (physical device identity)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_GET_CHECKS_ORDINAL,
        code: hipErrorInvalidDevice,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipDeviceGet(&d, ordinal) writes the ordinal (a HIP device handle is its \
                  ordinal) when this process sees that device; a NULL d is hipErrorInvalidValue, \
                  an ordinal outside 0..count hipErrorInvalidDevice. Older hipamd wrote any \
                  ordinal; the emulator follows the clr line on every version (the release of \
                  the change is UNVERIFIED).",
        when_broken: Some("any ordinal is written back and hipSuccess returned"),
        source: "DESIGN 9 (ordinals index this process's view); CLR hipamd/src/hip_device.cpp \
                 (ihipDeviceGet: device == nullptr -> \
                 hipErrorInvalidValue, deviceId outside g_devices -> hipErrorInvalidDevice); \
                 hip-tests unit/virtualMemoryManagement (hipDeviceGet before the VMM calls)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_VMM_ATTRIBUTE_REPORTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipDeviceGetAttribute(&v, hipDeviceAttributeVirtualMemoryManagementSupported, \
                  d) writes 1 (every emulated device supports VMM) from ROCm 5.3, whose headers \
                  first have the attribute (5.2's switch lacks it: hipErrorInvalidValue); a \
                  NULL v is hipErrorInvalidValue, a device outside \
                  0..count hipErrorInvalidDevice (CLR checks in that order). The emulator models \
                  only this attribute: any other is hipErrorInvalidValue, CLR's answer for an \
                  attribute its switch lacks.",
        when_broken: Some("the attribute answers 0, as for a device without VMM support"),
        source: "api-facts B.4 (VMM); CLR hipamd/src/hip_device_runtime.cpp \
                 (hipDeviceGetAttribute: pi == nullptr -> \
                 hipErrorInvalidValue, device outside ihipDeviceGetCount -> \
                 hipErrorInvalidDevice, hipDeviceAttributeVirtualMemoryManagementSupported from \
                 the device info, default -> hipErrorInvalidValue); ROCm 5.2.3 \
                 hip_runtime_api.h (the enum ends at MemoryPoolsSupported = 88); hip-tests \
                 unit/memory/hipMemVmm.cc (queried before any hipMem* call)",
        since: Some((5, 3)),
    },
];
