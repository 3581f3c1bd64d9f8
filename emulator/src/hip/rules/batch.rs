//! The HIP rules of `hipMemcpyBatchAsync` (HIP 7.1, issue 25): its argument checks, how
//! it reports the first failing descriptor, and what happens to the descriptors before
//! it. All from CLR `hipamd/src/hip_memory.cpp` (`hipMemcpyBatchAsync`, ROCm/clr at
//! bf1f713), which loops over the descriptors and enqueues each as a `hipMemcpyDefault`
//! asynchronous copy, and hip-tests `catch/unit/memory/hipMemcpyBatchAsync.cc`.

use devipc_hip_sys::{hipErrorInvalidValue, hipErrorNotSupported, hipSuccess};

use super::{Basis, RuleInfo};

/// NULL `dsts`, `srcs`, `sizes` or `failIdx`, or `count == 0`, is `hipErrorInvalidValue`.
pub const BATCH_ARGUMENTS_REQUIRED: &str = "hip.batch.arguments-required";
/// `numAttrs > 0` is `hipErrorNotSupported`; `attrs` and `attrsIdxs` are not read.
pub const BATCH_ATTRS_NOT_SUPPORTED: &str = "hip.batch.attrs-not-supported";
/// A descriptor of zero bytes fails the batch (unlike `hipMemcpyAsync`, where it is a
/// no-op).
pub const BATCH_ZERO_SIZE_REJECTED: &str = "hip.batch.zero-size-rejected";
/// `*failIdx` is `SIZE_MAX` once the arguments pass, and the index of the first failing
/// descriptor when one fails.
pub const BATCH_FAIL_INDEX_REPORTED: &str = "hip.batch.fail-index-reported";
/// The descriptors before the failing one stay enqueued and run.
pub const BATCH_EARLIER_COPIES_RUN: &str = "hip.batch.earlier-copies-run";
/// The null stream is accepted (CUDA's `cudaMemcpyBatchAsync` refuses the legacy one).
pub const BATCH_NULL_STREAM_ACCEPTED: &str = "hip.batch.null-stream-accepted";

const SOURCE: &str = "CLR hipamd/src/hip_memory.cpp (hipMemcpyBatchAsync, ROCm/clr bf1f713); \
                      hip-tests catch/unit/memory/hipMemcpyBatchAsync.cc; HIP CHANGELOG 7.1; \
                      api-facts B.3 (hipMemcpyAsync, as which each descriptor is checked)";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: BATCH_ARGUMENTS_REQUIRED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipMemcpyBatchAsync with a NULL dsts, srcs, sizes or failIdx, or with count 0, \
                  is hipErrorInvalidValue (after the stream check: an unknown stream is \
                  hipErrorInvalidHandle); *failIdx is not written. Each descriptor is then \
                  checked as hipMemcpyAsync(dsts[i], srcs[i], sizes[i], hipMemcpyDefault) checks \
                  it (a device operand past its allocation: hipErrorInvalidValue, *failIdx = i).",
        when_broken: Some(
            "count 0 succeeds and enqueues nothing (NULL arrays are still refused, without the \
             rule)",
        ),
        source: SOURCE,
        since: Some((7, 1)),
    },
    RuleInfo {
        id: BATCH_ATTRS_NOT_SUPPORTED,
        code: hipErrorNotSupported,
        basis: Basis::Implementation,
        breakable: true,
        summary: "CLR does not support memcpy attributes: numAttrs > 0 is hipErrorNotSupported \
                  (nothing is enqueued, *failIdx is not written); with numAttrs 0, attrs and \
                  attrsIdxs are not read (NULL is fine). The header marks the three parameters \
                  'not supported'.",
        when_broken: Some("the attributes are ignored and the copies run"),
        source: SOURCE,
        since: Some((7, 1)),
    },
    RuleInfo {
        id: BATCH_ZERO_SIZE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "A descriptor with sizes[i] == 0 fails the batch with hipErrorInvalidValue and \
                  *failIdx = i, although hipMemcpyAsync of 0 bytes is a no-op.",
        when_broken: Some("a zero-size descriptor copies nothing and the batch goes on"),
        source: SOURCE,
        since: Some((7, 1)),
    },
    RuleInfo {
        id: BATCH_FAIL_INDEX_REPORTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "Once the arguments pass, hipMemcpyBatchAsync writes *failIdx = SIZE_MAX, then \
                  the index of the first descriptor that fails (its error is the call's); a \
                  successful batch leaves SIZE_MAX.",
        when_broken: Some("*failIdx is never written"),
        source: SOURCE,
        since: Some((7, 1)),
    },
    RuleInfo {
        id: BATCH_EARLIER_COPIES_RUN,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "CLR enqueues descriptor by descriptor and stops at the first failure: the \
                  copies before the failing descriptor are enqueued and run although the call \
                  fails (the batch is not all-or-nothing); the ones after it are not. Copies of \
                  one call run in stream order.",
        when_broken: Some("a failing batch enqueues nothing"),
        source: SOURCE,
        since: Some((7, 1)),
    },
    RuleInfo {
        id: BATCH_NULL_STREAM_ACCEPTED,
        code: hipSuccess,
        basis: Basis::Implementation,
        breakable: true,
        summary: "The null stream is a valid stream for hipMemcpyBatchAsync (CLR checks only \
                  hip::isValid, which accepts it), unlike cudaMemcpyBatchAsync, whose docs \
                  refuse the legacy NULL stream: the copies run as null-stream work.",
        when_broken: Some("the null stream is refused with hipErrorInvalidValue, as CUDA does"),
        source: SOURCE,
        since: Some((7, 1)),
    },
];
