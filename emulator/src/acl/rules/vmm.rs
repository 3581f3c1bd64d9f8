//! The ACL rules of virtual memory management: physical allocations, reservations, mappings
//! and their shareable handles.

use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_PARAM_INVALID, ACL_SUCCESS,
};

use super::{Basis, RuleInfo, WHY_DRIVER, WHY_MAP, WHY_RT_PARAM};

/// Physical memory properties are validated.
pub const VMM_PROP_VALID: &str = "ascend.vmm.prop-validated";
/// Physical sizes are multiples of the granularity.
pub const VMM_SIZE_GRANULARITY: &str = "ascend.vmm.size-aligned-to-granularity";
/// A mapping covers a whole physical handle.
pub const VMM_MAP_WHOLE: &str = "ascend.vmm.map-whole-handle";
/// Mappings go into free, page-aligned parts of a reservation.
pub const VMM_MAP_RESERVED: &str = "ascend.vmm.map-inside-free-reserved-range";
/// Reservations are unmapped before release.
pub const VMM_UNMAP_BEFORE_RELEASE: &str = "ascend.vmm.unmap-before-release";
/// Access is set on whole mappings.
pub const VMM_SET_ACCESS_MATCHES: &str = "ascend.vmm.set-access-matches-mapping";
/// Copies respect the access set on a mapping.
pub const VMM_ACCESS_RESPECTED: &str = "ascend.vmm.access-respected";
/// aclrtFreePhysical of mapped memory is deferred until it is unmapped.
pub const VMM_FREE_DEFERRED: &str = "ascend.vmm.free-deferred-until-unmapped";
/// A reservation maps memory of one device only.
pub const VMM_RESERVATION_ONE_DEVICE: &str = "ascend.vmm.reservation-one-device";
/// A reservation maps local or imported handles, not both.
pub const VMM_RESERVATION_NOT_MIXED: &str = "ascend.vmm.reservation-not-mixed-local-and-imported";
/// Copies may span address-contiguous mappings of one reservation.
pub const VMM_COPY_SPANS_MAPPINGS: &str = "ascend.vmm.copy-spans-contiguous-mappings";
/// V1 export needs handle type NONE.
pub const VMM_HANDLE_TYPE_NONE: &str = "ascend.vmm.export-handle-type-none";
/// V1 export flags are DEFAULT or DISABLE_PID_VALIDATION.
pub const VMM_EXPORT_FLAGS: &str = "ascend.vmm.export-flags-valid";
/// One shareable handle per physical handle.
pub const VMM_ONE_EXPORT: &str = "ascend.vmm.one-export-per-handle";
/// Import in the exporting process is rejected.
pub const VMM_SAME_PROCESS: &str = "ascend.vmm.same-process-import-rejected";
/// One import per shareable handle and process.
pub const VMM_ONE_IMPORT: &str = "ascend.vmm.one-import-per-process";
/// Import needs the trustlist unless pid validation is off.
pub const VMM_TRUSTLIST: &str = "ascend.vmm.trustlist-required";
/// aclrtMemSetPidToShareableHandle needs pids.
pub const VMM_SET_PID_ARGS: &str = "ascend.vmm.set-pid-needs-pids";
/// Physical memory lives until every holder freed it.
pub const VMM_LIFETIME: &str = "ascend.vmm.lifetime-until-all-freed";
/// The import device is range checked.
pub const VMM_DEVICE_RANGE: &str = "ascend.vmm.device-range-checked";
/// Import on another device needs peer access.
pub const VMM_CROSS_DEVICE: &str = "ascend.vmm.cross-device-needs-peer-access";
/// Only the exporting process sets a trustlist.
pub const ONLY_EXPORTER_TRUSTS: &str = "ascend.ipc.only-exporter-sets-trustlist";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: VMM_PROP_VALID,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtPhysicalMemProp: handle type NONE (or POSIX), allocation type PINNED, a \
                  device location, and a device memory attribute (DDR attributes are host-only)",
        when_broken: None,
        source: "api-facts A.5 (RT-SRC aclrtMemGetAllocationGranularityImpl)",
        since: None,
    },
    RuleInfo {
        id: VMM_SIZE_GRANULARITY,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "aclrtMallocPhysical's size must be a multiple of the allocation granularity",
        when_broken: None,
        source: "api-facts A.5, C.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_MAP_WHOLE,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtMapMem's size must equal the physical allocation's size",
        when_broken: None,
        source: "api-facts A.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_MAP_RESERVED,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtMapMem's range must lie in one aclrtReserveMemAddress range, page aligned, \
                  not overlapping another mapping; aclrtUnmapMem needs a mapped address",
        when_broken: None,
        source: "api-facts A.5",
        since: None,
    },
    RuleInfo {
        id: VMM_UNMAP_BEFORE_RELEASE,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtReleaseMemAddress needs a reservation base with nothing mapped in it",
        when_broken: None,
        source: "api-facts A.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_SET_ACCESS_MATCHES,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtMemSetAccess's virPtr and size must equal an aclrtMapMem mapping",
        when_broken: None,
        source: "api-facts A.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_ACCESS_RESPECTED,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(
            "a device would fault on the access; the emulator reports it at the \
                              copy as an invalid argument",
        ),
        breakable: true,
        summary: "copies into a mapping need READWRITE access and copies from it READ access \
                  (aclrtMemSetAccess; mappings start READWRITE)",
        when_broken: None,
        source: "api-facts A.5",
        since: None,
    },
    RuleInfo {
        id: VMM_FREE_DEFERRED,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: false,
        summary: "aclrtFreePhysical does not release memory that is still mapped; it is released \
                  at the last aclrtUnmapMem",
        when_broken: None,
        source: "api-facts A.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_RESERVATION_ONE_DEVICE,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_MAP),
        breakable: true,
        summary: "one aclrtReserveMemAddress range may not be bound to physical memory of two \
                  devices: aclrtMapMem of a handle of another device than the range's other \
                  mappings is refused",
        when_broken: None,
        source: "RT-DOC 11-04 aclrtMapMem, handle: a reserved range managed by the user cannot be \
                 bound to physical memory allocated on two devices at the same time",
        since: None,
    },
    RuleInfo {
        id: VMM_RESERVATION_NOT_MIXED,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_MAP),
        breakable: true,
        summary: "one aclrtReserveMemAddress range may not be bound both to handles of \
                  aclrtMallocPhysical and to handles of aclrtMemImportFromShareableHandle: \
                  aclrtMapMem of the other kind than the range's other mappings is refused",
        when_broken: None,
        source: "RT-DOC 11-04 aclrtMapMem, handle: a reserved range cannot be bound at the same \
                 time to handles output by aclrtMallocPhysical and by \
                 aclrtMemImportFromShareableHandle(V2)",
        since: None,
    },
    RuleInfo {
        id: VMM_COPY_SPANS_MAPPINGS,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "one aclrtMemcpy / aclrtMemcpyAsync / aclrtMemset may cover several aclrtMapMem \
                  mappings that are address-contiguous in one reservation (torch_npu copies \
                  tensors spanning several pages of an expandable segment as one pointer); a span \
                  that touches an unmapped hole or leaves the reservation is still refused \
                  (ascend.mem.copy-within-bounds)",
        when_broken: None,
        source: "RT-DOC 11-04 aclrtReserveMemAddress / aclrtMapMem (reserve + map exist to give \
                 address-contiguous virtual memory); torch_npu NPUCachingAllocator.cpp \
                 ExpandableSegment (20 MiB pages mapped back to back, tensors cross page \
                 boundaries)",
        since: None,
    },
    RuleInfo {
        id: VMM_HANDLE_TYPE_NONE,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtMemExportToShareableHandle's handleType must be ACL_MEM_HANDLE_TYPE_NONE",
        when_broken: None,
        source: "api-facts A.6 (RT-SRC memory.cpp ACL_REQUIRES_PARAM_EQUAL_REPORT)",
        since: None,
    },
    RuleInfo {
        id: VMM_EXPORT_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "aclrtMemExportToShareableHandle's flags must be DEFAULT (0) or \
                  DISABLE_PID_VALIDATION (0x1)",
        when_broken: None,
        source: "api-facts A.6",
        since: None,
    },
    RuleInfo {
        id: VMM_ONE_EXPORT,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "a physical handle is exported at most once, and an imported handle is not \
                  re-exported (handle and shareable handle correspond one to one)",
        when_broken: None,
        source: "api-facts C.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_SAME_PROCESS,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "aclrtMemImportFromShareableHandle in the process that exported the handle is \
                  rejected",
        when_broken: None,
        source: "api-facts C.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_ONE_IMPORT,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "a process imports a shareable handle at most once (until it frees the import)",
        when_broken: None,
        source: "api-facts C.5 (RT-DOC 11-04: no one-to-many mapping on the import side)",
        since: None,
    },
    RuleInfo {
        id: VMM_TRUSTLIST,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "importing a shareable handle needs the importer's pid on its trustlist \
                  (aclrtMemSetPidToShareableHandle) unless exported with DISABLE_PID_VALIDATION",
        when_broken: None,
        source: "api-facts A.6, C.5",
        since: None,
    },
    RuleInfo {
        id: VMM_SET_PID_ARGS,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtMemSetPidToShareableHandle rejects a NULL pid array and pidNum 0",
        when_broken: None,
        source: "api-facts A.6",
        since: None,
    },
    RuleInfo {
        id: VMM_LIFETIME,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "physical memory lives until every process that allocated or imported it called \
                  aclrtFreePhysical: the exporter's free does not invalidate importers",
        when_broken: None,
        source: "api-facts C.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: VMM_DEVICE_RANGE,
        code: ACL_ERROR_RT_INVALID_DEVICEID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtMemImportFromShareableHandle's deviceId must be a valid device",
        when_broken: None,
        source: "api-facts A.6, A.11",
        since: None,
    },
    RuleInfo {
        id: VMM_CROSS_DEVICE,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "importing on a device other than the exporter's needs \
                  aclrtDeviceEnablePeerAccess from that device to the exporter's device in the \
                  importing process",
        when_broken: None,
        source: "api-facts C.5 (RT-DOC 11-04)",
        since: None,
    },
    RuleInfo {
        id: ONLY_EXPORTER_TRUSTS,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "only the process that exported a shareable handle or key sets its trustlist; \
                  only the process that created a notify exports it or sets its trustlist",
        when_broken: None,
        source: "api-facts C.4, C.5, C.6 (the exporter grants; RT-DOC flows)",
        since: None,
    },
];
