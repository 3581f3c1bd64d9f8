//! The rules the ACL surface enforces: one stable id per rule, its vendor code, and where
//! the rule and the code come from.
//!
//! Every check in the surface names one of these ids; the id appears in the thread's
//! last-error message (`aclGetRecentErrMsg`: `... [rule ascend.vmm.trustlist-required]`),
//! and the conformance suite lists [`ALL`]. Before returning a rule's error the surface
//! asks [`crate::Config::enforces`], so `DEVIPC_EMU_BREAK_RULE=<id>` switches exactly one
//! rule off to show that its scenario can fail. Rules whose violation would make the
//! emulator itself misbehave (a NULL out-parameter, a copy past the end of a mapping, a
//! `MAP_FIXED` outside a reservation) are not breakable ([`RuleInfo::breakable`]); the
//! switch is ignored for them.
//!
//! # Codes: documented or chosen
//!
//! [`CodeBasis::Documented`] codes come from the vendor's headers, source or API reference
//! (api-facts A.3-A.11, C.4-C.6). Where the vendor does not say which code a violation
//! returns (api-facts D.4), the emulator *chooses* one ([`CodeBasis::Chosen`], with the
//! reason). The policy for those:
//!
//! - refusals that the real runtime delegates to the NPU driver (`halShmem*`,
//!   `halMem*`: trustlists, same-process import, one-to-one shareable handles, peer
//!   access for cross-device imports, destroying a name others still hold) return
//!   **507899 `ACL_ERROR_RT_DRV_INTERNAL_ERROR`**: the runtime maps every driver error
//!   that is not in its table to it (`errcode_manage.cc`, api-facts A.11), and the one
//!   field observation (a trustlist rejection of `aclrtIpcMemImportByKey`) saw 507899;
//! - argument checks the runtime layer performs (sizes, ranges, alignment, flag values)
//!   return **107000 `ACL_ERROR_RT_PARAM_INVALID`**, the code the runtime's validation
//!   (`ApiErrorDecorator`, `RT_ERROR_INVALID_VALUE`) gives for the documented cases
//!   (`len`, `size`, `flags` of the IPC key calls);
//! - checks of the ACL wrapper itself (NULL pointers, reserved arguments, enumerations)
//!   return **100000 `ACL_ERROR_INVALID_PARAM`**;
//! - unknown or stale objects (handles, streams, notifies, keys, shareable handles)
//!   return **107017 `ACL_ERROR_RT_INVALID_HANDLE`** (the driver's
//!   `DRV_ERROR_INVALID_HANDLE` mapping).
//!
//! Behavioural rules (what *succeeds*, e.g. repeated key imports, the lifetime of
//! physical memory) have code [`ACL_SUCCESS`] (0).

use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_INVALID_DEVICEID, ACL_ERROR_RT_INVALID_HANDLE, ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_SYS_DMA, ACL_ERROR_RT_WAIT_TIMEOUT, ACL_SUCCESS,
};
use devipc_ascend_sys::types::aclError;

/// Where a rule's code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeBasis {
    /// The vendor documents (or its source shows) this code for this violation.
    Documented,
    /// The vendor does not say; the emulator chose this code, for the given reason.
    Chosen(&'static str),
    /// A behavioural rule: the scenario succeeds ([`ACL_SUCCESS`]).
    Behaviour,
}

/// One enforced rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInfo {
    /// Stable id, e.g. `ascend.vmm.same-process-import-rejected`.
    pub id: &'static str,
    /// The `aclError` a violation returns (0 for behavioural rules).
    pub code: aclError,
    /// Whether the code is documented or chosen (and why).
    pub basis: CodeBasis,
    /// Whether `DEVIPC_EMU_BREAK_RULE` can switch the rule off.
    pub breakable: bool,
    /// What the rule says, in one line.
    pub summary: &'static str,
    /// The vendor source of the rule (api-facts section and vendor document).
    pub source: &'static str,
}

/// Defines the rule id constants and [`ALL`] from one list.
macro_rules! rules {
    ($(
        $(#[$doc:meta])*
        $name:ident = $id:literal, $code:expr, $basis:expr, $breakable:literal,
            $summary:literal, $source:literal;
    )*) => {
        $(
            $(#[$doc])*
            pub const $name: &str = $id;
        )*

        /// Every rule of the ACL surface, in the order of the families above.
        pub const ALL: &[RuleInfo] = &[$(
            RuleInfo {
                id: $id,
                code: $code,
                basis: $basis,
                breakable: $breakable,
                summary: $summary,
                source: $source,
            },
        )*];
    };
}

const WHY_DRIVER: &str = "a driver-level refusal; the runtime maps driver errors outside its \
                          table to 507899 (errcode_manage.cc), the code seen in the field for \
                          a trustlist rejection";
const WHY_RT_PARAM: &str = "a runtime-layer argument check; 107000 is what the runtime's \
                            validation returns for the documented cases";
const WHY_HANDLE: &str = "an unknown or stale object; the driver's DRV_ERROR_INVALID_HANDLE \
                          maps to 107017";
const WHY_REVOKED: &str = "a device access to memory that is no longer mapped for the process; \
                           the vendor documents no code ('exceptions may occur'), the emulator \
                           reports the DMA fault 507013 on the copies that touch it";
const WHY_MAP: &str = "refused by the driver's mapping of the range (halMemMap); the vendor \
                       names no code, and an invalid argument of the driver \
                       (DRV_ERROR_INVALID_VALUE) maps to 107000";
const WHY_ACL_PARAM: &str = "checked by the ACL wrapper before the runtime is called; the \
                             exact code per function is unverified";

rules! {
    // ---- parameters, init, devices ---------------------------------------------------

    /// NULL pointer arguments are rejected.
    PARAM_NULL_POINTER = "ascend.param.null-pointer", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, false,
        "a NULL pointer argument (out-parameter, key, handle, notify) is rejected",
        "api-facts A.11, C.4, C.6 (RT-SRC memory.cpp, notify.cpp: ACL_REQUIRES_NOT_NULL)";
    /// Reserved arguments must be 0.
    PARAM_RESERVED_ZERO = "ascend.param.reserved-must-be-zero", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, true,
        "reserved arguments must be 0: aclrtMallocPhysical flags, aclrtReserveMemAddress \
         alignment, aclrtMapMem offset and flags, aclrtDeviceEnablePeerAccess flags; \
         aclrtReserveMemAddress flags must be 0 or 1 (the page-type flag the ACL wrapper keeps \
         for compatibility with early interfaces: torch_npu's expandable segments and Mooncake \
         pass 1)",
        "api-facts A.5, A.10, A.11 (RT-DOC 11-04, 04); RT-SRC memory.cpp \
         aclrtReserveMemAddressImpl (flags 0 or 1, else ACL_ERROR_INVALID_PARAM); torch_npu \
         NPUCachingAllocator.cpp ExpandableSegment (AclrtReserveMemAddress(.., 0, nullptr, 1))";
    /// Enumeration arguments must be known values.
    PARAM_ENUM_VALUE = "ascend.param.enum-value-checked", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Chosen(WHY_ACL_PARAM), false,
        "enumeration arguments must be known values (malloc policy, memcpy kind, granularity \
         option, access flags, memory location type, notify create flag, version package)",
        "api-facts A.4, A.5, A.8";
    /// Sizes must not be 0.
    PARAM_SIZE_NONZERO = "ascend.param.size-nonzero", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Chosen(WHY_ACL_PARAM), false,
        "aclrtMalloc, aclrtMallocPhysical and aclrtReserveMemAddress reject size 0, \
         aclrtMemSetAccess a descriptor count of 0",
        "api-facts A.5 (RT-DOC 11-04: size must not be 0)";
    /// Arguments the runtime layer range-checks.
    PARAM_RUNTIME_RANGE = "ascend.param.runtime-range-checked", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, false,
        "arguments the runtime layer range-checks fail with ACL_ERROR_RT_PARAM_INVALID: \
         aclrtSynchronizeDeviceWithTimeout's timeout below -1, aclrtGetMemInfo's attr not a \
         memory-info kind (ACL_DDR_MEM .. ACL_HBM_MEM_P2P_HUGE1G)",
        "RT-SRC device.cpp aclrtSynchronizeDeviceWithTimeoutImpl (timeout in [-1, INT_MAX], \
         else ACL_ERROR_RT_PARAM_INVALID); memory.cpp aclrtGetMemInfoImpl -> rtMemGetInfoEx \
         (RT_ERROR_INVALID_VALUE -> 107000)";
    /// A repeated aclInit returns 100002 and counts.
    INIT_REPEAT = "ascend.init.repeat-initialize-counted", ACL_ERROR_REPEAT_INITIALIZE,
        CodeBasis::Documented, true,
        "aclInit is reference counted: a repeated call returns ACL_ERROR_REPEAT_INITIALIZE and \
         counts",
        "api-facts A.3 (RT-SRC acl.cpp)";
    /// aclFinalize without a matching aclInit returns 100037.
    FINALIZE_REPEAT = "ascend.init.repeat-finalize", ACL_ERROR_REPEAT_FINALIZE,
        CodeBasis::Documented, true,
        "aclFinalize beyond the aclInit count returns ACL_ERROR_REPEAT_FINALIZE",
        "api-facts A.3 (RT-SRC acl.cpp)";
    /// Device ids are range checked.
    DEVICE_ID_RANGE = "ascend.device.id-range-checked", ACL_ERROR_RT_INVALID_DEVICEID,
        CodeBasis::Documented, false,
        "device ids outside 0..aclrtGetDeviceCount are rejected",
        "api-facts A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)";
    /// `ASCEND_RT_VISIBLE_DEVICES` renumbers the devices a process sees (issue 16).
    DEVICE_VISIBLE_DEVICES_APPLIED = "ascend.device.visible-devices-applied", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "ASCEND_RT_VISIBLE_DEVICES lists logical device ids: user device i (what aclrtSetDevice, \
         aclrtGetDeviceCount, VMM locations and every other device argument use) is the i-th \
         listed; set and empty means no device; the list ends at an empty or non-numeric entry \
         or an id out of range (keeping what came before); a repeated id means no device; \
         logical ids map to physical ones through the container (DEVIPC_EMU_ASCEND_PHY_IDS)",
        "CANN python API reference get_logic_dev_id_by_user_dev_id (user, logical and physical \
         ids); hicann/runtime tests/ut/runtime/runtime/test/platform/others/rt_utest_runtime.cc \
         (ut_GetVisibleDevicesByChipCloudTest0: the parse cases); api_error.cc \
         (ChgUserDevIdToDeviceId on device arguments)";
    /// The id translation functions refuse ids that are not there (issue 16).
    DEVICE_ID_TRANSLATION = "ascend.device.id-translation-checked", ACL_ERROR_RT_INVALID_DEVICEID,
        CodeBasis::Documented, false,
        "aclrtGetLogicDevIdByUserDevId, aclrtGetUserDevIdByLogicDevId, \
         aclrtGetLogicDevIdByPhyDevId, aclrtGetPhyDevIdByLogicDevId and aclrtDeviceGetUuid \
         refuse a user id that is not visible, a logical id the container lacks or that \
         ASCEND_RT_VISIBLE_DEVICES does not list (user direction), and a physical id outside \
         the container, with ACL_ERROR_RT_INVALID_DEVICEID",
        "hicann/runtime rt_utest_runtime.cc (ut_GetVisibleDevicesByChipCloudTest1/2: \
         ChgUserDevIdToDeviceId and GetUserDevIdByDeviceId give RT_ERROR_DEVICE_ID); api-facts \
         A.11 (107001)";
    /// Calls that need a context fail without aclrtSetDevice on the thread.
    CONTEXT_REQUIRED = "ascend.context.set-device-required", ACL_ERROR_RT_CONTEXT_NULL,
        CodeBasis::Documented, true,
        "calls that work on the current device (aclrtGetDevice, aclrtMalloc, aclrtMallocHost, \
         aclrtFreeHost, streams, aclrtSynchronizeDevice(WithTimeout), aclrtGetMemInfo, IPC key \
         export/import/close, notify create/import and waits on IPC notifies, peer access) need \
         aclrtSetDevice on the calling thread",
        "api-facts A.11, C.4 (RT-SRC: RT_ERROR_CONTEXT_NULL -> 107002)";
    /// Unknown or stale objects are rejected.
    HANDLE_VALID = "ascend.handle.valid", ACL_ERROR_RT_INVALID_HANDLE,
        CodeBasis::Chosen(WHY_HANDLE), false,
        "unknown, stale or wrong-kind handles, streams, notifies, keys and shareable handles \
         are rejected",
        "api-facts A.11";
    /// Enabling peer access to the current device itself is rejected.
    PEER_DISTINCT = "ascend.peer.distinct-devices", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "aclrtDeviceEnablePeerAccess needs a peer device different from the current device",
        "api-facts A.10 (RT-DOC 04)";
    /// Peer access needs devices that can reach each other.
    PEER_TOPOLOGY = "ascend.peer.topology-respected", ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        CodeBasis::Chosen("the topology does not support the access; the runtime reports \
                           unsupported features with 207000"), true,
        "peer access (aclrtDeviceEnablePeerAccess, or a key import with ENABLE_PEER_ACCESS) \
         between devices that cannot access each other (aclrtDeviceCanAccessPeer reports 0) \
         fails",
        "api-facts A.10 (RT-DOC 04: aclrtDeviceCanAccessPeer before enabling), C.4";

    // ---- memory --------------------------------------------------------------------------

    /// Device memory is limited per device across processes.
    MEM_DEVICE_LIMIT = "ascend.mem.device-memory-limit", ACL_ERROR_RT_MEMORY_ALLOCATION,
        CodeBasis::Documented, false,
        "allocations beyond the device's memory (DEVIPC_EMU_MEM_LIMIT, shared by all \
         processes) fail",
        "api-facts A.11 (DRV_ERROR_OUT_OF_MEMORY -> 207001)";
    /// Pointers must be device memory of this process.
    MEM_KNOWN_POINTER = "ascend.mem.known-device-pointer", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtFree needs the base of an aclrtMalloc block of this process; \
         aclrtMemGetAddressRange needs device memory of this process",
        "api-facts A.3";
    /// Copies stay inside their buffers.
    MEM_COPY_BOUNDS = "ascend.mem.copy-within-bounds", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtMemcpy/aclrtMemcpyAsync/aclrtMemset: count must not exceed destMax/maxCount, and \
         device operands must lie inside one allocation, or inside address-contiguous \
         aclrtMapMem mappings of one reservation (see ascend.vmm.copy-spans-contiguous-mappings): \
         a span that touches an unmapped hole or leaves its reservation is refused",
        "api-facts A.3";
    /// The copy kind must match the operands.
    MEM_COPY_KIND = "ascend.mem.copy-kind-matches", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "the kind of aclrtMemcpy and aclrtMemcpyAsync must match which operands are device \
         memory (ACL_MEMCPY_DEFAULT infers it)",
        "api-facts A.4";

    // ---- VMM -----------------------------------------------------------------------------

    /// Physical memory properties are validated.
    VMM_PROP_VALID = "ascend.vmm.prop-validated", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, true,
        "aclrtPhysicalMemProp: handle type NONE (or POSIX), allocation type PINNED, a device \
         location, and a device memory attribute (DDR attributes are host-only)",
        "api-facts A.5 (RT-SRC aclrtMemGetAllocationGranularityImpl)";
    /// Physical sizes are multiples of the granularity.
    VMM_SIZE_GRANULARITY = "ascend.vmm.size-aligned-to-granularity", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "aclrtMallocPhysical's size must be a multiple of the allocation granularity",
        "api-facts A.5, C.5 (RT-DOC 11-04)";
    /// A mapping covers a whole physical handle.
    VMM_MAP_WHOLE = "ascend.vmm.map-whole-handle", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtMapMem's size must equal the physical allocation's size",
        "api-facts A.5 (RT-DOC 11-04)";
    /// Mappings go into free, page-aligned parts of a reservation.
    VMM_MAP_RESERVED = "ascend.vmm.map-inside-free-reserved-range", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtMapMem's range must lie in one aclrtReserveMemAddress range, page aligned, not \
         overlapping another mapping; aclrtUnmapMem needs a mapped address",
        "api-facts A.5";
    /// Reservations are unmapped before release.
    VMM_UNMAP_BEFORE_RELEASE = "ascend.vmm.unmap-before-release", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtReleaseMemAddress needs a reservation base with nothing mapped in it",
        "api-facts A.5 (RT-DOC 11-04)";
    /// Access is set on whole mappings.
    VMM_SET_ACCESS_MATCHES = "ascend.vmm.set-access-matches-mapping", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtMemSetAccess's virPtr and size must equal an aclrtMapMem mapping",
        "api-facts A.5 (RT-DOC 11-04)";
    /// Copies respect the access set on a mapping.
    VMM_ACCESS_RESPECTED = "ascend.vmm.access-respected", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen("a device would fault on the access; the emulator reports it at \
                           the copy as an invalid argument"), true,
        "copies into a mapping need READWRITE access and copies from it READ access \
         (aclrtMemSetAccess; mappings start READWRITE)",
        "api-facts A.5";
    /// aclrtFreePhysical of mapped memory is deferred until it is unmapped.
    VMM_FREE_DEFERRED = "ascend.vmm.free-deferred-until-unmapped", ACL_SUCCESS,
        CodeBasis::Behaviour, false,
        "aclrtFreePhysical does not release memory that is still mapped; it is released at \
         the last aclrtUnmapMem",
        "api-facts A.5 (RT-DOC 11-04)";
    /// A reservation maps memory of one device only.
    VMM_RESERVATION_ONE_DEVICE = "ascend.vmm.reservation-one-device", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_MAP), true,
        "one aclrtReserveMemAddress range may not be bound to physical memory of two devices: \
         aclrtMapMem of a handle of another device than the range's other mappings is refused",
        "RT-DOC 11-04 aclrtMapMem, handle: a reserved range managed by the user cannot be bound \
         to physical memory allocated on two devices at the same time";
    /// A reservation maps local or imported handles, not both.
    VMM_RESERVATION_NOT_MIXED = "ascend.vmm.reservation-not-mixed-local-and-imported",
        ACL_ERROR_RT_PARAM_INVALID, CodeBasis::Chosen(WHY_MAP), true,
        "one aclrtReserveMemAddress range may not be bound both to handles of \
         aclrtMallocPhysical and to handles of aclrtMemImportFromShareableHandle: aclrtMapMem of \
         the other kind than the range's other mappings is refused",
        "RT-DOC 11-04 aclrtMapMem, handle: a reserved range cannot be bound at the same time to \
         handles output by aclrtMallocPhysical and by aclrtMemImportFromShareableHandle(V2)";
    /// Copies may span address-contiguous mappings of one reservation.
    VMM_COPY_SPANS_MAPPINGS = "ascend.vmm.copy-spans-contiguous-mappings", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "one aclrtMemcpy / aclrtMemcpyAsync / aclrtMemset may cover several aclrtMapMem \
         mappings that are address-contiguous in one reservation (torch_npu copies tensors \
         spanning several pages of an expandable segment as one pointer); a span that touches an \
         unmapped hole or leaves the reservation is still refused (ascend.mem.copy-within-bounds)",
        "RT-DOC 11-04 aclrtReserveMemAddress / aclrtMapMem (reserve + map exist to give \
         address-contiguous virtual memory); torch_npu NPUCachingAllocator.cpp ExpandableSegment \
         (20 MiB pages mapped back to back, tensors cross page boundaries)";
    /// V1 export needs handle type NONE.
    VMM_HANDLE_TYPE_NONE = "ascend.vmm.export-handle-type-none", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, true,
        "aclrtMemExportToShareableHandle's handleType must be ACL_MEM_HANDLE_TYPE_NONE",
        "api-facts A.6 (RT-SRC memory.cpp ACL_REQUIRES_PARAM_EQUAL_REPORT)";
    /// V1 export flags are DEFAULT or DISABLE_PID_VALIDATION.
    VMM_EXPORT_FLAGS = "ascend.vmm.export-flags-valid", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "aclrtMemExportToShareableHandle's flags must be DEFAULT (0) or \
         DISABLE_PID_VALIDATION (0x1)",
        "api-facts A.6";
    /// One shareable handle per physical handle.
    VMM_ONE_EXPORT = "ascend.vmm.one-export-per-handle", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "a physical handle is exported at most once, and an imported handle is not \
         re-exported (handle and shareable handle correspond one to one)",
        "api-facts C.5 (RT-DOC 11-04)";
    /// Import in the exporting process is rejected.
    VMM_SAME_PROCESS = "ascend.vmm.same-process-import-rejected", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "aclrtMemImportFromShareableHandle in the process that exported the handle is rejected",
        "api-facts C.5 (RT-DOC 11-04)";
    /// One import per shareable handle and process.
    VMM_ONE_IMPORT = "ascend.vmm.one-import-per-process", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "a process imports a shareable handle at most once (until it frees the import)",
        "api-facts C.5 (RT-DOC 11-04: no one-to-many mapping on the import side)";
    /// Import needs the trustlist unless pid validation is off.
    VMM_TRUSTLIST = "ascend.vmm.trustlist-required", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "importing a shareable handle needs the importer's pid on its trustlist \
         (aclrtMemSetPidToShareableHandle) unless exported with DISABLE_PID_VALIDATION",
        "api-facts A.6, C.5";
    /// aclrtMemSetPidToShareableHandle needs pids.
    VMM_SET_PID_ARGS = "ascend.vmm.set-pid-needs-pids", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, false,
        "aclrtMemSetPidToShareableHandle rejects a NULL pid array and pidNum 0",
        "api-facts A.6";
    /// Physical memory lives until every holder freed it.
    VMM_LIFETIME = "ascend.vmm.lifetime-until-all-freed", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "physical memory lives until every process that allocated or imported it called \
         aclrtFreePhysical: the exporter's free does not invalidate importers",
        "api-facts C.5 (RT-DOC 11-04)";
    /// The import device is range checked.
    VMM_DEVICE_RANGE = "ascend.vmm.device-range-checked", ACL_ERROR_RT_INVALID_DEVICEID,
        CodeBasis::Documented, false,
        "aclrtMemImportFromShareableHandle's deviceId must be a valid device",
        "api-facts A.6, A.11";
    /// Import on another device needs peer access.
    VMM_CROSS_DEVICE = "ascend.vmm.cross-device-needs-peer-access", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "importing on a device other than the exporter's needs aclrtDeviceEnablePeerAccess \
         from that device to the exporter's device in the importing process",
        "api-facts C.5 (RT-DOC 11-04)";
    /// Only the exporting process sets a trustlist.
    ONLY_EXPORTER_TRUSTS = "ascend.ipc.only-exporter-sets-trustlist", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "only the process that exported a shareable handle or key sets its trustlist; only \
         the process that created a notify exports it or sets its trustlist",
        "api-facts C.4, C.5, C.6 (the exporter grants; RT-DOC flows)";

    // ---- IPC keys ------------------------------------------------------------------------

    /// Key buffers hold at least 65 bytes.
    KEY_MIN_LEN = "ascend.ipc-key.min-len-65", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, false,
        "aclrtIpcMemGetExportKey's key buffer len must be at least 65",
        "api-facts A.7, C.4 (RT-DOC 11-07; RT-SRC api_error.cc)";
    /// Exported sizes are not 0.
    KEY_SIZE_NONZERO = "ascend.ipc-key.size-nonzero", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, false,
        "aclrtIpcMemGetExportKey rejects size 0",
        "api-facts C.4 (RT-SRC api_error.cc)";
    /// Key flags are 0 or 1.
    KEY_FLAGS = "ascend.ipc-key.flags-valid", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, true,
        "aclrtIpcMemGetExportKey and aclrtIpcMemImportByKey flags must be 0 or 0x1",
        "api-facts C.4 (RT-SRC api_error.cc)";
    /// Keys export aclrtMalloc memory of this process.
    KEY_MALLOC_ONLY = "ascend.ipc-key.exports-malloc-memory", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), false,
        "aclrtIpcMemGetExportKey's devPtr..devPtr+size must lie in one aclrtMalloc block of \
         this process",
        "api-facts A.7, C.4 (RT-DOC 11-07)";
    /// Exported ranges start page aligned.
    KEY_PAGE_ALIGNED = "ascend.ipc-key.page-aligned", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "the exported range must be page-table aligned at both ends: devPtr and devPtr+size on \
         a 4 KiB page boundary of the block (the IPC interfaces refuse a range that shares a page \
         with other memory, against information leaks across processes)",
        "api-facts C.4; RT-DOC FAQ inter_process_IPC_page_table_align_requirements.md (exporting \
         1024 bytes of an aclrtMalloc(1024) 'may fail: not page-table aligned'; 4096 of \
         aclrtMalloc(4096) succeeds; normal pages 4K, huge pages 2M or 1G)";
    /// aclrtIpcMemSetImportPid needs pids.
    KEY_SET_PID_ARGS = "ascend.ipc-key.set-pid-needs-pids", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, false,
        "aclrtIpcMemSetImportPid rejects a NULL pid array and num 0",
        "api-facts C.4 (RT-SRC api_error.cc)";
    /// Import needs the trustlist unless pid validation is off.
    KEY_TRUSTLIST = "ascend.ipc-key.trustlist-required", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "aclrtIpcMemImportByKey needs the importer's pid on the key's trustlist unless the key \
         was exported with DISABLE_PID_VALIDATION",
        "api-facts A.7, A.11, C.4";
    /// A process may import a key repeatedly.
    KEY_REPEAT_IMPORT = "ascend.ipc-key.repeat-import-allowed", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "repeated imports of one key in one process are allowed: each gives a new address and \
         needs its own aclrtIpcMemClose",
        "api-facts C.4 (RT-SRC api_impl_standard_soc.cc)";
    /// Importers close before the exporter.
    KEY_IMPORTERS_CLOSE_FIRST = "ascend.ipc-key.importers-close-first",
        ACL_ERROR_RT_SYS_DMA, CodeBasis::Chosen(WHY_REVOKED), true,
        "importers close the key before the exporter: the exporter's aclrtIpcMemClose destroys \
         the key even while other processes still map their imports (undefined: 'exceptions \
         may occur'); the emulator records the violation and those imports' copies fail; \
         their closes still succeed",
        "api-facts C.4 (RT-DOC 11-07)";
    /// The block under a key stays allocated while the key is imported.
    KEY_FREE_WHILE_IMPORTED = "ascend.ipc-key.free-while-imported",
        ACL_ERROR_RT_SYS_DMA, CodeBasis::Chosen(WHY_REVOKED), true,
        "aclrtFree of a block whose key other processes still map frees it under them \
         (importers close before the exporter closes and frees, RT-DOC 11-07): the emulator \
         revokes the pages for every process (host access faults, copies fail) and records \
         the violation",
        "api-facts C.4 (RT-DOC 11-07)";
    /// Import on another device needs peer access.
    KEY_CROSS_DEVICE = "ascend.ipc-key.cross-device-needs-peer-access",
        ACL_ERROR_RT_DRV_INTERNAL_ERROR, CodeBasis::Chosen(WHY_DRIVER), true,
        "importing a key on a device other than the owner's needs the ENABLE_PEER_ACCESS flag \
         or aclrtDeviceEnablePeerAccess to the owner's device",
        "api-facts C.4 (RT-DOC 11-07)";
    /// Key imports used across devices take no synchronous or host copies.
    KEY_CROSS_DEVICE_COPY = "ascend.ipc-key.cross-device-copy-restricted", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen("the copy's kind is not allowed on that memory: a runtime-layer \
                           argument check (107000); the vendor names no code"), true,
        "memory imported by key onto another device than its owner's accepts only asynchronous \
         device-to-device copies: aclrtMemcpy (synchronous, any kind) on it fails, and so does \
         aclrtMemcpyAsync of a host kind or ACL_MEMCPY_DEFAULT; aclrtMemcpyAsync device to \
         device works; on the owner's device there is no restriction",
        "api-facts C.4 (RT-DOC 11-07)";
    /// aclrtIpcMemClose in an importer unmaps its oldest import.
    KEY_CLOSE_OLDEST = "ascend.ipc-key.close-unmaps-oldest-import", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "after several imports of one key in a process, each aclrtIpcMemClose unmaps the oldest \
         remaining import (first in, first out); the newer addresses stay usable",
        "RT-SRC api_impl_standard_soc.cc IpcCloseMemory (closes vaList.front() of the key's \
         per-process address list)";

    // ---- notify --------------------------------------------------------------------------

    /// Notify key buffers hold at least 65 bytes.
    NOTIFY_MIN_LEN = "ascend.notify.min-len-65", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen("the documented code of the same check for IPC memory keys"), false,
        "aclrtNotifyGetExportKey's key buffer len must be at least 65",
        "api-facts C.6 (RT-DOC 08)";
    /// Notify flags are 0 or 0x02.
    NOTIFY_FLAGS = "ascend.notify.flags-valid", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Chosen(WHY_RT_PARAM), true,
        "notify export flags are 0 or DISABLE_PID_VALIDATION 0x02; the memory flag 0x1 is not a \
         notify flag, for export nor (past the ACL wrapper's check, see \
         ascend.notify.import-flags-0-or-1) for import",
        "api-facts A.8, C.6";
    /// aclrtNotifySetImportPid needs pids.
    NOTIFY_SET_PID_ARGS = "ascend.notify.set-pid-needs-pids", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, false,
        "aclrtNotifySetImportPid rejects a NULL pid array and num 0",
        "api-facts C.6 (RT-SRC notify.cpp, api_error.cc)";
    /// Import needs the trustlist unless pid validation is off.
    NOTIFY_TRUSTLIST = "ascend.notify.trustlist-required", ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        CodeBasis::Chosen(WHY_DRIVER), true,
        "aclrtNotifyImportByKey needs the importer's pid on the trustlist unless exported with \
         DISABLE_PID_VALIDATION (0x02)",
        "api-facts A.8, C.6";
    /// A notify is a binary semaphore.
    NOTIFY_BINARY_SEMAPHORE = "ascend.notify.binary-semaphore", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "aclrtRecordNotify sets the notify; aclrtWaitAndResetNotify waits until it is set and \
         resets it, so each record releases one wait and records do not accumulate",
        "api-facts A.8, C.6 (RT-DOC 08)";
    /// A wait that expires returns 107019.
    NOTIFY_WAIT_TIMEOUT = "ascend.notify.wait-timeout", ACL_ERROR_RT_WAIT_TIMEOUT,
        CodeBasis::Chosen("the runtime's wait-timeout code; on a device the expiry surfaces \
                           at stream synchronisation. The unit is seconds as in RT-DOC 08 and \
                           the runtime's log (timeout=%us); the header comment says ms"), false,
        "aclrtWaitAndResetNotify with timeout > 0 (seconds) fails when no record arrives in \
         time; 0 waits forever",
        "api-facts A.8 (RT-DOC 08)";
    /// A notify is freed when all processes destroyed it.
    NOTIFY_FREED_WHEN_ALL_DESTROYED = "ascend.notify.freed-when-all-destroyed", ACL_SUCCESS,
        CodeBasis::Behaviour, false,
        "a notify lives until every process that created or imported it called \
         aclrtDestroyNotify",
        "api-facts C.6 (RT-DOC 08)";
    /// The ACL wrapper refuses notify import flags above 1.
    NOTIFY_IMPORT_FLAGS = "ascend.notify.import-flags-0-or-1", ACL_ERROR_INVALID_PARAM,
        CodeBasis::Documented, true,
        "aclrtNotifyImportByKey refuses flags above ACL_NOTIFY_DEVICE_USE_ONLY (1) in the ACL \
         wrapper, the documented ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS (0x02) included; \
         import with 0 and enable peer access with aclrtDeviceEnablePeerAccess instead",
        "RT-SRC notify.cpp aclrtNotifyImportByKeyImpl (flags > ACL_NOTIFY_DEVICE_USE_ONLY -> \
         ACL_ERROR_INVALID_PARAM, 'param flag must be [0,1] currently'); backend-ascend \
         signal.rs";
    /// An IPC notify is waited on from the device that created it.
    NOTIFY_WAIT_ON_CREATING_DEVICE = "ascend.notify.wait-on-creating-device",
        ACL_ERROR_RT_PARAM_INVALID, CodeBasis::Documented, true,
        "aclrtWaitAndResetNotify on an IPC notify (exported, or imported by key) fails with \
         ACL_ERROR_RT_PARAM_INVALID unless the calling thread's current device is the device the \
         notify was created on; records may come from any device",
        "RT-SRC notify.cc Notify::CheckIpcNotifyDevId and api_impl NotifyWait \
         (RT_ERROR_INVALID_VALUE, EE1012: 'the corresponding Notify Wait must be delivered on the \
         device that creates the IPC Notify')";

    // ---- events --------------------------------------------------------------------------

    /// Only events created with ACL_EVENT_IPC have an IPC handle.
    EVENT_IPC_FLAG = "ascend.event.ipc-handle-needs-ipc-flag", ACL_ERROR_RT_PARAM_INVALID,
        CodeBasis::Documented, true,
        "aclrtIpcGetEventHandle fails with ACL_ERROR_RT_PARAM_INVALID unless the event was \
         created by aclrtCreateEventExWithFlag with exactly ACL_EVENT_IPC",
        "RT-DOC 07 aclrtIpcGetEventHandle (only events of aclrtCreateEventExWithFlag with \
         ACL_EVENT_IPC); RT-SRC api_error.cc ApiErrorDecorator::IpcGetEventHandle (flag != \
         RT_EVENT_IPC -> RT_ERROR_INVALID_VALUE, 'Only IPC events are supported')";

    // ---- streams -------------------------------------------------------------------------

    /// Waits are stream tasks: they block their stream, not the caller.
    STREAM_ASYNC_WAITS = "ascend.stream.waits-block-only-their-stream", ACL_SUCCESS,
        CodeBasis::Behaviour, true,
        "aclrtWaitAndResetNotify and aclrtStreamWaitEvent enqueue a wait on the stream and \
         return at once; the wait blocks only that stream (the caller and other streams go \
         on), and an expired notify wait fails the stream's work, reported by the next \
         aclrtSynchronizeStream",
        "RT-DOC 08 aclrtWaitAndResetNotify ('blocks the stream; asynchronous interface'), \
         RT-DOC 07 aclrtStreamWaitEvent; api-facts A.8";
}

/// The rule with this id.
pub fn info(id: &str) -> Option<&'static RuleInfo> {
    ALL.iter().find(|r| r.id == id)
}

/// The code a violation of `id` returns (the runtime-internal code if `id` is unknown,
/// which the unit tests rule out).
pub fn code_of(id: &str) -> aclError {
    info(id).map_or(devipc_ascend_sys::codes::ACL_ERROR_RT_INTERNAL_ERROR, |r| {
        r.code
    })
}

/// Whether the surface enforces `id` in this process: `DEVIPC_EMU_BREAK_RULE` names it
/// only for test runs, and is ignored for rules that are not breakable. An unreadable
/// configuration enforces everything.
pub fn enforced(id: &str) -> bool {
    let breakable = info(id).is_some_and(|r| r.breakable);
    !breakable || crate::Config::global().map_or(true, |c| c.enforces(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut ids: Vec<_> = ALL.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate rule id");
        for r in ALL {
            crate::config::validate_rule_id(r.id).unwrap();
            assert!(r.id.starts_with("ascend."), "{}", r.id);
            assert!(!r.summary.is_empty() && !r.source.is_empty(), "{}", r.id);
            match r.basis {
                CodeBasis::Behaviour => assert_eq!(r.code, ACL_SUCCESS, "{}", r.id),
                _ => {
                    assert_ne!(r.code, ACL_SUCCESS, "{}", r.id);
                    assert!(devipc_ascend_sys::error_name(r.code).is_some(), "{}", r.id);
                }
            }
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(code_of(VMM_SAME_PROCESS), 507_899);
        assert_eq!(code_of(KEY_MIN_LEN), 107_000);
        assert_eq!(code_of(CONTEXT_REQUIRED), 107_002);
        assert_eq!(code_of("ascend.no-such-rule"), 507_000);
        assert!(info(NOTIFY_BINARY_SEMAPHORE).is_some());
        // Not breakable: always enforced whatever the environment says.
        assert!(enforced(PARAM_NULL_POINTER));
    }
}
