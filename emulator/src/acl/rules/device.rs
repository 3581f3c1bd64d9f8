//! The ACL rules of arguments, initialisation, devices, contexts, handles and peers.

use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_INVALID_HANDLE, ACL_ERROR_RT_PARAM_INVALID, ACL_SUCCESS,
};

use super::{Basis, RuleInfo, WHY_ACL_PARAM, WHY_HANDLE, WHY_RT_PARAM};

/// NULL pointer arguments are rejected.
pub const PARAM_NULL_POINTER: &str = "ascend.param.null-pointer";
/// Reserved arguments must be 0.
pub const PARAM_RESERVED_ZERO: &str = "ascend.param.reserved-must-be-zero";
/// Enumeration arguments must be known values.
pub const PARAM_ENUM_VALUE: &str = "ascend.param.enum-value-checked";
/// Sizes must not be 0.
pub const PARAM_SIZE_NONZERO: &str = "ascend.param.size-nonzero";
/// Arguments the runtime layer range-checks.
pub const PARAM_RUNTIME_RANGE: &str = "ascend.param.runtime-range-checked";
/// A repeated aclInit returns 100002 and counts.
pub const INIT_REPEAT: &str = "ascend.init.repeat-initialize-counted";
/// aclFinalize without a matching aclInit returns 100037.
pub const FINALIZE_REPEAT: &str = "ascend.init.repeat-finalize";
/// Device ids are range checked.
pub const DEVICE_ID_RANGE: &str = "ascend.device.id-range-checked";
/// `ASCEND_RT_VISIBLE_DEVICES` renumbers the devices a process sees (issue 16).
pub const DEVICE_VISIBLE_DEVICES_APPLIED: &str = "ascend.device.visible-devices-applied";
/// The id translation functions refuse ids that are not there (issue 16).
pub const DEVICE_ID_TRANSLATION: &str = "ascend.device.id-translation-checked";
/// Calls that need a context fail without aclrtSetDevice on the thread.
pub const CONTEXT_REQUIRED: &str = "ascend.context.set-device-required";
/// Unknown or stale objects are rejected.
pub const HANDLE_VALID: &str = "ascend.handle.valid";
/// Enabling peer access to the current device itself is rejected.
pub const PEER_DISTINCT: &str = "ascend.peer.distinct-devices";
/// Peer access needs devices that can reach each other.
pub const PEER_TOPOLOGY: &str = "ascend.peer.topology-respected";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: PARAM_NULL_POINTER,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: false,
        summary: "a NULL pointer argument (out-parameter, key, handle, notify) is rejected",
        when_broken: None,
        source: "api-facts A.11, C.4, C.6 (RT-SRC memory.cpp, notify.cpp: ACL_REQUIRES_NOT_NULL)",
        since: None,
    },
    RuleInfo {
        id: PARAM_RESERVED_ZERO,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "reserved arguments must be 0: aclrtMallocPhysical flags, aclrtReserveMemAddress \
                  alignment, aclrtMapMem offset and flags, aclrtDeviceEnablePeerAccess flags; \
                  aclrtReserveMemAddress flags must be 0 or 1 (the page-type flag the ACL wrapper \
                  keeps for compatibility with early interfaces: torch_npu's expandable segments \
                  and Mooncake pass 1)",
        when_broken: None,
        source: "api-facts A.5, A.10, A.11 (RT-DOC 11-04, 04); RT-SRC memory.cpp \
                 aclrtReserveMemAddressImpl (flags 0 or 1, else ACL_ERROR_INVALID_PARAM); \
                 torch_npu NPUCachingAllocator.cpp ExpandableSegment (AclrtReserveMemAddress(.., \
                 0, nullptr, 1))",
        since: None,
    },
    RuleInfo {
        id: PARAM_ENUM_VALUE,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Chosen(WHY_ACL_PARAM),
        breakable: false,
        summary: "enumeration arguments must be known values (malloc policy, memcpy kind, \
                  granularity option, access flags, memory location type, notify create flag, \
                  version package)",
        when_broken: None,
        source: "api-facts A.4, A.5, A.8",
        since: None,
    },
    RuleInfo {
        id: PARAM_SIZE_NONZERO,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Chosen(WHY_ACL_PARAM),
        breakable: false,
        summary: "aclrtMalloc, aclrtMallocPhysical and aclrtReserveMemAddress reject size 0, \
                  aclrtMemSetAccess a descriptor count of 0",
        when_broken: None,
        source: "api-facts A.5 (RT-DOC 11-04: size must not be 0)",
        since: None,
    },
    RuleInfo {
        id: PARAM_RUNTIME_RANGE,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "arguments the runtime layer range-checks fail with ACL_ERROR_RT_PARAM_INVALID: \
                  aclrtSynchronizeDeviceWithTimeout's timeout below -1, aclrtGetMemInfo's attr not \
                  a memory-info kind (ACL_DDR_MEM .. ACL_HBM_MEM_P2P_HUGE1G)",
        when_broken: None,
        source: "RT-SRC device.cpp aclrtSynchronizeDeviceWithTimeoutImpl (timeout in [-1, \
                 INT_MAX], else ACL_ERROR_RT_PARAM_INVALID); memory.cpp aclrtGetMemInfoImpl -> \
                 rtMemGetInfoEx (RT_ERROR_INVALID_VALUE -> 107000)",
        since: None,
    },
    RuleInfo {
        id: INIT_REPEAT,
        code: ACL_ERROR_REPEAT_INITIALIZE,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclInit is reference counted: a repeated call returns \
                  ACL_ERROR_REPEAT_INITIALIZE and counts",
        when_broken: None,
        source: "api-facts A.3 (RT-SRC acl.cpp)",
        since: None,
    },
    RuleInfo {
        id: FINALIZE_REPEAT,
        code: ACL_ERROR_REPEAT_FINALIZE,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclFinalize beyond the aclInit count returns ACL_ERROR_REPEAT_FINALIZE",
        when_broken: None,
        source: "api-facts A.3 (RT-SRC acl.cpp)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_ID_RANGE,
        code: ACL_ERROR_RT_INVALID_DEVICEID,
        basis: Basis::Documented,
        breakable: false,
        summary: "device ids outside 0..aclrtGetDeviceCount are rejected",
        when_broken: None,
        source: "api-facts A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_VISIBLE_DEVICES_APPLIED,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "ASCEND_RT_VISIBLE_DEVICES lists logical device ids: user device i (what \
                  aclrtSetDevice, aclrtGetDeviceCount, VMM locations and every other device \
                  argument use) is the i-th listed; set and empty means no device; the list ends \
                  at an empty or non-numeric entry or an id out of range (keeping what came \
                  before); a repeated id means no device; logical ids map to physical ones through \
                  the container (DEVIPC_EMU_ASCEND_PHY_IDS)",
        when_broken: None,
        source: "CANN python API reference get_logic_dev_id_by_user_dev_id (user, logical and \
                 physical ids); hicann/runtime \
                 tests/ut/runtime/runtime/test/platform/others/rt_utest_runtime.cc \
                 (ut_GetVisibleDevicesByChipCloudTest0: the parse cases); api_error.cc \
                 (ChgUserDevIdToDeviceId on device arguments)",
        since: None,
    },
    RuleInfo {
        id: DEVICE_ID_TRANSLATION,
        code: ACL_ERROR_RT_INVALID_DEVICEID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtGetLogicDevIdByUserDevId, aclrtGetUserDevIdByLogicDevId, \
                  aclrtGetLogicDevIdByPhyDevId, aclrtGetPhyDevIdByLogicDevId and \
                  aclrtDeviceGetUuid refuse a user id that is not visible, a logical id the \
                  container lacks or that ASCEND_RT_VISIBLE_DEVICES does not list (user \
                  direction), and a physical id outside the container, with \
                  ACL_ERROR_RT_INVALID_DEVICEID",
        when_broken: None,
        source: "hicann/runtime rt_utest_runtime.cc (ut_GetVisibleDevicesByChipCloudTest1/2: \
                 ChgUserDevIdToDeviceId and GetUserDevIdByDeviceId give RT_ERROR_DEVICE_ID); \
                 api-facts A.11 (107001)",
        since: None,
    },
    RuleInfo {
        id: CONTEXT_REQUIRED,
        code: ACL_ERROR_RT_CONTEXT_NULL,
        basis: Basis::Documented,
        breakable: true,
        summary: "calls that work on the current device (aclrtGetDevice, aclrtMalloc, \
                  aclrtMallocHost, aclrtFreeHost, streams, aclrtSynchronizeDevice(WithTimeout), \
                  aclrtGetMemInfo, IPC key export/import/close, notify create/import and waits on \
                  IPC notifies, peer access) need aclrtSetDevice on the calling thread",
        when_broken: None,
        source: "api-facts A.11, C.4 (RT-SRC: RT_ERROR_CONTEXT_NULL -> 107002)",
        since: None,
    },
    RuleInfo {
        id: HANDLE_VALID,
        code: ACL_ERROR_RT_INVALID_HANDLE,
        basis: Basis::Chosen(WHY_HANDLE),
        breakable: false,
        summary: "unknown, stale or wrong-kind handles, streams, notifies, keys and shareable \
                  handles are rejected",
        when_broken: None,
        source: "api-facts A.11",
        since: None,
    },
    RuleInfo {
        id: PEER_DISTINCT,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "aclrtDeviceEnablePeerAccess needs a peer device different from the current \
                  device",
        when_broken: None,
        source: "api-facts A.10 (RT-DOC 04)",
        since: None,
    },
    RuleInfo {
        id: PEER_TOPOLOGY,
        code: ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        basis: Basis::Chosen(
            "the topology does not support the access; the runtime reports \
                              unsupported features with 207000",
        ),
        breakable: true,
        summary: "peer access (aclrtDeviceEnablePeerAccess, or a key import with \
                  ENABLE_PEER_ACCESS) between devices that cannot access each other \
                  (aclrtDeviceCanAccessPeer reports 0) fails",
        when_broken: None,
        source: "api-facts A.10 (RT-DOC 04: aclrtDeviceCanAccessPeer before enabling), C.4",
        since: None,
    },
];
