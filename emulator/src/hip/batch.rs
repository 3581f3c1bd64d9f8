//! `hipMemcpyBatchAsync` (HIP 7.1, issue 25): many copies in one call, over the stream
//! queues the single `hipMemcpyAsync` uses.
//!
//! CLR (`hipamd/src/hip_memory.cpp`) checks the stream (`hipErrorInvalidHandle`; the null
//! stream is fine), then the arrays and the count (`hipErrorInvalidValue`), then refuses
//! attributes (`numAttrs > 0`: `hipErrorNotSupported`), writes `*failIdx = SIZE_MAX` and
//! enqueues the descriptors one by one as `hipMemcpyDefault` asynchronous copies until one
//! fails (a zero size fails too): `*failIdx` is its index, the copies before it stay
//! enqueued. The emulator checks the same things in the same order ([`plan`]); the copies
//! that pass are submitted as one operation of the stream, so they run in stream order as
//! one unit, each re-checked for revocation when it runs (like the single copy: a copy from
//! memory its exporter freed in the meantime fails, and the next synchronisation reports
//! it). Below HIP 7.1 the function does not exist ([`exists_in`]).
// Matching on the vendor's constants keeps their C names.
#![allow(non_upper_case_globals)]

use devipc_hip_sys::{hipErrorInvalidValue, hipErrorNotSupported, hipMemcpyDefault};

use super::errors::{Failure, HipResult};
use super::memory::{self, CopyPlan};
use super::rules::{
    self, BATCH_ARGUMENTS_REQUIRED, BATCH_ATTRS_NOT_SUPPORTED, BATCH_EARLIER_COPIES_RUN,
    BATCH_FAIL_INDEX_REPORTED, BATCH_NULL_STREAM_ACCEPTED, BATCH_ZERO_SIZE_REJECTED,
};
use super::stream;
use crate::config::HipVersion;

/// Whether HIP `version` has `hipMemcpyBatchAsync`: from 7.1 (HIP CHANGELOG "HIP 7.1":
/// "Added new HIP APIs ... `hipMemcpyBatchAsync`"; hip-tests require `HIP_VERSION >=
/// 7.1`).
pub(crate) fn exists_in(version: HipVersion) -> bool {
    version.at_least(7, 1)
}

/// One descriptor: `len` bytes from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// `dsts[i]`.
    pub dst: usize,
    /// `srcs[i]`.
    pub src: usize,
    /// `sizes[i]`.
    pub len: usize,
}

/// The checks before any descriptor is read: the version, the stream, the arrays (`arrays`:
/// whether `dsts`, `srcs`, `sizes` and `failIdx` are all non-NULL), the count and the
/// attributes, in CLR's order.
pub(crate) fn check_call(
    stream: usize,
    arrays: bool,
    count: usize,
    num_attrs: usize,
) -> HipResult<()> {
    let version = super::runtime::config()?.hip_version;
    if !exists_in(version) {
        return Err(Failure::new(
            hipErrorNotSupported,
            format!("hipMemcpyBatchAsync first shipped in HIP 7.1; emulating HIP {version}"),
        ));
    }
    if stream == 0 && !rules::enforced(BATCH_NULL_STREAM_ACCEPTED) {
        return Err(Failure::invalid_value(
            "the null stream is refused (rule hip.batch.null-stream-accepted switched off)",
        ));
    }
    stream::resolve(stream)?;
    let enforced = rules::enforced(BATCH_ARGUMENTS_REQUIRED);
    if !arrays || (count == 0 && enforced) {
        let message = format!(
            "dsts, srcs, sizes and failIdx must be non-NULL and count non-zero (count {count})"
        );
        // Switched off, NULL arrays are still refused: the emulator cannot read them.
        return Err(if enforced {
            Failure::rule(hipErrorInvalidValue, BATCH_ARGUMENTS_REQUIRED, message)
        } else {
            Failure::invalid_value(message)
        });
    }
    if num_attrs > 0 && rules::enforced(BATCH_ATTRS_NOT_SUPPORTED) {
        return Err(Failure::rule(
            hipErrorNotSupported,
            BATCH_ATTRS_NOT_SUPPORTED,
            format!("numAttrs is {num_attrs}: memcpy attributes are not supported"),
        ));
    }
    Ok(())
}

/// The outcome of checking the descriptors.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The copies to enqueue, in descriptor order.
    pub copies: Vec<CopyPlan>,
    /// The first failing descriptor and its failure.
    pub failed: Option<(usize, Failure)>,
}

impl Planned {
    /// The value `*failIdx` gets: `None` to leave it alone.
    pub(crate) fn fail_index(&self) -> Option<usize> {
        if !rules::enforced(BATCH_FAIL_INDEX_REPORTED) {
            return None;
        }
        Some(self.failed.as_ref().map_or(usize::MAX, |(i, _)| *i))
    }
}

/// Checks the descriptors in order, as CLR's loop does, up to the first that fails: the
/// copies before it are kept (enqueued anyway, [`BATCH_EARLIER_COPIES_RUN`]) unless that
/// rule is switched off.
pub(crate) fn plan(descriptors: &[Descriptor]) -> Planned {
    let mut copies = Vec::with_capacity(descriptors.len());
    for (i, d) in descriptors.iter().enumerate() {
        match plan_one(d) {
            Ok(Some(copy)) => copies.push(copy),
            Ok(None) => {}
            Err(failure) => {
                if !rules::enforced(BATCH_EARLIER_COPIES_RUN) {
                    copies.clear();
                }
                return Planned {
                    copies,
                    failed: Some((i, failure)),
                };
            }
        }
    }
    Planned {
        copies,
        failed: None,
    }
}

/// One descriptor as `hipMemcpyAsync(dst, src, len, hipMemcpyDefault)`, except that zero
/// bytes fail ([`BATCH_ZERO_SIZE_REJECTED`]); `None`: nothing to copy.
fn plan_one(d: &Descriptor) -> HipResult<Option<CopyPlan>> {
    if d.len == 0 {
        if rules::enforced(BATCH_ZERO_SIZE_REJECTED) {
            return Err(Failure::rule(
                hipErrorInvalidValue,
                BATCH_ZERO_SIZE_REJECTED,
                "sizes[i] is 0",
            ));
        }
        return Ok(None);
    }
    memory::plan_memcpy(d.dst, d.src, d.len, hipMemcpyDefault)
}

/// Submits `copies` to `stream` as one operation, each run by `run` in order; the first
/// failure of a copy at run time is the operation's (reported by the next
/// synchronisation), the other copies still run.
pub(crate) fn submit(
    stream: usize,
    copies: Vec<CopyPlan>,
    run: fn(CopyPlan) -> HipResult<()>,
) -> HipResult<()> {
    if copies.is_empty() {
        return Ok(());
    }
    stream::submit_work(
        stream,
        Box::new(move || {
            let mut first = Ok(());
            for copy in copies {
                let done = run(copy);
                if first.is_ok() {
                    first = done;
                }
            }
            first
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_exists_from_7_1() {
        let v = |t| HipVersion::parse(t).unwrap();
        assert!(!exists_in(v("5.2")) && !exists_in(v("6.2")) && !exists_in(v("7.0")));
        assert!(exists_in(v("7.1")) && exists_in(v("7.2")));
    }
}
