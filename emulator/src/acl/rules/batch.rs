//! The ACL rules of `aclrtMemcpyBatchAsync` (issue 25; a trial feature of CANN 9.0): the
//! ACL wrapper's argument checks (`src/acl/aclrt_impl/memory.cpp`, `MemcpyBatchImpl` /
//! `ValidateMemcpyBatchParams`: 100000), the runtime's checks of the attribute indexes
//! (runtime tests `memcpy_batch_async_param_err0/1`: 107000, `failIndex` SIZE_MAX) and of
//! each descriptor (`ApiImpl::LoopMemcpyAsync`, `ValidateMemCpyParamsAndAttributes`,
//! `CheckMemCpyAttr`: 107000, `failIndex` = the descriptor), all in hicann/runtime, and the
//! API reference (`docs/api_docs/aclrtMemcpyBatchAsync.md`, `aclrtMemcpyBatchAttr.md`).
//! NULL arrays are `ascend.param.null-pointer`; each descriptor's copy is also checked
//! like `aclrtMemcpyAsync` of its direction (bounds, and the cross-device rule of memory
//! imported by key, api-facts C.4: no host copies of it across devices, so no batch).

use devipc_ascend_sys::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_PARAM_INVALID, ACL_SUCCESS};

use super::{Basis, RuleInfo};

/// `numBatches` must be greater than 0.
pub const BATCH_COUNT_NONZERO: &str = "ascend.batch.count-nonzero";
/// `destMaxs[i] >= sizes[i]` for every descriptor (checked by the ACL wrapper first).
pub const BATCH_DEST_MAX_COVERS_SIZE: &str = "ascend.batch.dest-max-covers-size";
/// The `rsv` bytes of every attribute are zero.
pub const BATCH_ATTR_RSV_ZERO: &str = "ascend.batch.attr-reserved-zero";
/// The attribute indexes are well formed.
pub const BATCH_ATTR_INDEXES_VALID: &str = "ascend.batch.attr-indexes-valid";
/// Each descriptor has a size in `1..=destMax` and non-NULL operands.
pub const BATCH_DESCRIPTOR_VALID: &str = "ascend.batch.descriptor-valid";
/// Each descriptor's memory is where its attribute says.
pub const BATCH_LOCATIONS_MATCH: &str = "ascend.batch.locations-match";
/// Each descriptor copies host to device or device to host.
pub const BATCH_HOST_DEVICE_ONLY: &str = "ascend.batch.host-device-only";
/// `*failIndex` names the failing descriptor (SIZE_MAX when none is to blame).
pub const BATCH_FAIL_INDEX_REPORTED: &str = "ascend.batch.fail-index-reported";
/// The descriptors before the failing one are enqueued and run.
pub const BATCH_EARLIER_COPIES_RUN: &str = "ascend.batch.earlier-copies-run";

const WRAPPER: &str = "hicann/runtime src/acl/aclrt_impl/memory.cpp (MemcpyBatchImpl, \
                       ValidateMemcpyBatchParams)";
const RUNTIME: &str = "hicann/runtime runtime api_impl (ApiImpl::LoopMemcpyAsync, \
                       ValidateMemCpyParamsAndAttributes, CheckMemCpyAttr); \
                       docs/api_docs/aclrtMemcpyBatchAsync.md";
const ATTRS: &str = "hicann/runtime runtime tests (StreamTest910B memcpy_batch_async_param_err0, \
                     memcpy_batch_async_param_err1); docs/api_docs/aclrtMemcpyBatchAsync.md \
                     (attrsIndexes: first 0, increasing, below numBatches; numAttrs <= \
                     numBatches)";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: BATCH_COUNT_NONZERO,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtMemcpyBatchAsync with numBatches 0 is 100000 (the ACL wrapper's \
                  ACL_REQUIRES_POSITIVE); *failIndex is not written",
        when_broken: None,
        source: WRAPPER,
        since: None,
    },
    RuleInfo {
        id: BATCH_DEST_MAX_COVERS_SIZE,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "the ACL wrapper refuses a descriptor with sizes[i] > destMaxs[i] with 100000 \
                  before anything is enqueued; *failIndex is not written (the runtime's own \
                  check, ascend.batch.descriptor-valid, would give 107000 and the index)",
        when_broken: None,
        source: WRAPPER,
        since: None,
    },
    RuleInfo {
        id: BATCH_ATTR_RSV_ZERO,
        code: ACL_ERROR_INVALID_PARAM,
        basis: Basis::Documented,
        breakable: true,
        summary: "every attrs[k].rsv byte (k < numAttrs) must be 0, else 100000 from the ACL \
                  wrapper; *failIndex is not written",
        when_broken: None,
        source: "hicann/runtime src/acl/aclrt_impl/memory.cpp (ValidateMemcpyBatchParams); \
                 docs/api_docs/aclrtMemcpyBatchAttr.md",
        since: None,
    },
    RuleInfo {
        id: BATCH_ATTR_INDEXES_VALID,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "numAttrs must be in 1..=numBatches, attrsIndexes[0] must be 0, each index \
                  greater than the one before and below numBatches; else 107000 with \
                  *failIndex = SIZE_MAX, nothing enqueued",
        when_broken: None,
        source: ATTRS,
        since: None,
    },
    RuleInfo {
        id: BATCH_DESCRIPTOR_VALID,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "the runtime refuses a descriptor with sizes[i] == 0, sizes[i] > destMaxs[i] or \
                  a NULL dsts[i] / srcs[i] with 107000 and *failIndex = i",
        when_broken: None,
        source: RUNTIME,
        since: None,
    },
    RuleInfo {
        id: BATCH_LOCATIONS_MATCH,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "each descriptor takes the attribute attrsIndexes assigns it; its dstLoc and \
                  srcLoc must match where the memory is (host, host NUMA and unregistered \
                  memory count as host; a device location also needs the device id), else \
                  107000 with *failIndex = i",
        when_broken: None,
        source: RUNTIME,
        since: None,
    },
    RuleInfo {
        id: BATCH_HOST_DEVICE_ONLY,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "only host-to-device and device-to-host descriptors are supported: one whose \
                  operands are both device memory (or both host memory) is 107000 with \
                  *failIndex = i",
        when_broken: None,
        source: RUNTIME,
        since: None,
    },
    RuleInfo {
        id: BATCH_FAIL_INDEX_REPORTED,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "a runtime refusal writes *failIndex: the index of the failing descriptor, or \
                  SIZE_MAX when no descriptor is to blame (the attribute indexes); refusals of \
                  the ACL wrapper and successful batches leave it as it was",
        when_broken: None,
        source: RUNTIME,
        since: None,
    },
    RuleInfo {
        id: BATCH_EARLIER_COPIES_RUN,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "the runtime checks and enqueues descriptor by descriptor: when descriptor i \
                  fails, the copies before it are already enqueued and run although the call \
                  fails; the ones after it are not",
        when_broken: None,
        source: RUNTIME,
        since: None,
    },
];
