//! The ACL rules of device memory (`aclrtMalloc`, `aclrtFree`) and its copies.

use devipc_ascend_sys::codes::{ACL_ERROR_RT_MEMORY_ALLOCATION, ACL_ERROR_RT_PARAM_INVALID};

use super::{Basis, RuleInfo, WHY_RT_PARAM};

/// Device memory is limited per device across processes.
pub const MEM_DEVICE_LIMIT: &str = "ascend.mem.device-memory-limit";
/// Pointers must be device memory of this process.
pub const MEM_KNOWN_POINTER: &str = "ascend.mem.known-device-pointer";
/// Copies stay inside their buffers.
pub const MEM_COPY_BOUNDS: &str = "ascend.mem.copy-within-bounds";
/// The copy kind must match the operands.
pub const MEM_COPY_KIND: &str = "ascend.mem.copy-kind-matches";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: MEM_DEVICE_LIMIT,
        code: ACL_ERROR_RT_MEMORY_ALLOCATION,
        basis: Basis::Documented,
        breakable: false,
        summary: "allocations beyond the device's memory (DEVIPC_EMU_MEM_LIMIT, shared by all \
                  processes) fail",
        when_broken: None,
        source: "api-facts A.11 (DRV_ERROR_OUT_OF_MEMORY -> 207001)",
        since: None,
    },
    RuleInfo {
        id: MEM_KNOWN_POINTER,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtFree needs the base of an aclrtMalloc block of this process; \
                  aclrtMemGetAddressRange needs device memory of this process",
        when_broken: None,
        source: "api-facts A.3",
        since: None,
    },
    RuleInfo {
        id: MEM_COPY_BOUNDS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtMemcpy/aclrtMemcpyAsync/aclrtMemset: count must not exceed \
                  destMax/maxCount, and device operands must lie inside one allocation, or inside \
                  address-contiguous aclrtMapMem mappings of one reservation (see \
                  ascend.vmm.copy-spans-contiguous-mappings): a span that touches an unmapped hole \
                  or leaves its reservation is refused",
        when_broken: None,
        source: "api-facts A.3",
        since: None,
    },
    RuleInfo {
        id: MEM_COPY_KIND,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "the kind of aclrtMemcpy and aclrtMemcpyAsync must match which operands are \
                  device memory (ACL_MEMCPY_DEFAULT infers it)",
        when_broken: None,
        source: "api-facts A.4",
        since: None,
    },
];
