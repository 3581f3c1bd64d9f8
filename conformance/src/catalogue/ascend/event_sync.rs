//! Ascend host waits on events (RT-DOC 07; hicann/runtime): `aclrtSynchronizeEventWithTimeout`
//! and its timeout, and the failure of a stream's work reported by the synchronisation and
//! query of an event recorded after it. A record is kept pending with a notify wait queued
//! before it on the same stream.

use devipc_ascend_sys::codes::{
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_WAIT_TIMEOUT,
};
use devipc_ascend_sys::consts::ACL_EVENT_SYNC;
use std::time::{Duration, Instant};

use super::A;
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::Failure;

/// The timeout of the synchronisation that must expire, and how late it may return.
const SYNC_TIMEOUT_MS: i32 = 200;
const SYNC_SLACK: Duration = Duration::from_millis(1500);

/// The event synchronisation rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.event.sync-with-timeout",
        A,
        "aclrtSynchronizeEventWithTimeout on an event whose latest record is pending fails \
         with ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, not before its timeout (ms); once the record \
         completed it succeeds",
        "RT-DOC aclrtSynchronizeEventWithTimeout (hicann/runtime \
         docs/api_docs/aclrtSynchronizeEventWithTimeout.md); hicann/runtime \
         src/acl/aclrt_impl/event.cpp aclrtSynchronizeEventWithTimeoutImpl",
        Expect::Code(
            "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
            ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
        ),
        &[],
        sync_with_timeout,
    ),
    vendor(
        "ascend.event.sync-timeout-valid",
        A,
        "aclrtSynchronizeEventWithTimeout refuses timeout 0 with ACL_ERROR_RT_PARAM_INVALID \
         (on a recorded, complete event; -1 succeeds)",
        "hicann/runtime src/acl/aclrt_impl/event.cpp aclrtSynchronizeEventWithTimeoutImpl \
         (timeout >= -1), src/runtime/core/src/api_impl/api_error.cc \
         ApiErrorDecorator::EventSynchronize (timeout 0 -> RT_ERROR_INVALID_VALUE)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        sync_timeout_valid,
    ),
    vendor(
        "ascend.event.sync-reports-stream-failure",
        A,
        "an event recorded after a notify wait that expired on the same stream reports the \
         wait's ACL_ERROR_RT_WAIT_TIMEOUT from aclrtSynchronizeEvent, \
         aclrtSynchronizeEventWithTimeout and aclrtQueryEventStatus; the stream's \
         aclrtSynchronizeStream still reports it afterwards",
        "hicann/runtime src/runtime/core/src/api_impl/api_impl.cc ApiImpl::EventSynchronize, \
         ApiImpl::EventQueryStatus (Context::CheckStatus first); CANN guide 'Obtaining \
         Runtime Error Codes'",
        Expect::Behaviour,
        &[],
        sync_reports_stream_failure,
    ),
];

/// The vendor code of a failed step, or a failure of the rule.
fn code_of<T: std::fmt::Debug>(what: &str, result: Result<T, Failure>) -> Result<i32, Stop> {
    match result {
        Err(Failure::Vendor { code, .. }) => Ok(code),
        Ok(v) => Err(Stop::fail(format!("{what} succeeded ({v:?})"))),
        Err(other) => Err(Stop::fail(format!("{what}: {other}"))),
    }
}

fn sync_with_timeout(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let s = a.stream_create().step("aclrtCreateStream")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let e = a
        .event_create(ACL_EVENT_SYNC)
        .step("aclrtCreateEventExWithFlag")?;
    // The record waits behind a notify wait (timeout 0: forever) until the notify is set.
    a.notify_wait_on(n, 0, s)
        .step("aclrtWaitAndResetNotify on the stream")?;
    a.event_record_on(e, s)
        .step("aclrtRecordEvent behind the wait")?;
    let started = Instant::now();
    let result = a.event_sync(e, Some(SYNC_TIMEOUT_MS));
    let took = started.elapsed();
    let seen = ctx.refused("the synchronisation of a pending record", result)?;
    let limit = Duration::from_millis(SYNC_TIMEOUT_MS.unsigned_abs().into());
    ensure(took >= limit && took <= limit + SYNC_SLACK, || {
        format!("it returned after {took:.2?}, not within {SYNC_SLACK:?} after {limit:?}")
    })?;
    // Positive control: the record completes once the notify is set.
    a.notify_record(n).step("aclrtRecordNotify")?;
    a.event_sync(e, Some(30_000))
        .step("the synchronisation after the record")?;
    a.stream_sync(s).step("aclrtSynchronizeStream")?;
    a.event_destroy(e).step("aclrtDestroyEvent")?;
    a.notify_destroy(n).step("aclrtDestroyNotify")?;
    a.stream_destroy(s).step("aclrtDestroyStream")?;
    Ok(format!(
        "{seen} after {took:.2?}; once the notify was recorded it succeeds"
    ))
}

fn sync_timeout_valid(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let e = a
        .event_create(ACL_EVENT_SYNC)
        .step("aclrtCreateEventExWithFlag")?;
    a.event_record(e).step("aclrtRecordEvent")?;
    let result = a.event_sync(e, Some(0));
    let seen = ctx.refused("timeout 0", result)?;
    a.event_sync(e, Some(-1)).step("timeout -1 (forever)")?;
    a.event_destroy(e).step("aclrtDestroyEvent")?;
    Ok(format!("{seen}; -1 succeeds"))
}

fn sync_reports_stream_failure(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let s = a.stream_create().step("aclrtCreateStream")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let e = a
        .event_create(ACL_EVENT_SYNC)
        .step("aclrtCreateEventExWithFlag")?;
    // A wait of 1 s that no record releases fails the stream's work; the record after it
    // still completes.
    a.notify_wait_on(n, 1, s)
        .step("aclrtWaitAndResetNotify (1 s)")?;
    a.event_record_on(e, s)
        .step("aclrtRecordEvent behind the wait")?;
    let mut seen = Vec::new();
    for (what, timeout) in [
        ("aclrtSynchronizeEventWithTimeout", Some(30_000)),
        ("aclrtSynchronizeEvent", None),
    ] {
        let code = code_of(what, a.event_sync(e, timeout))?;
        ensure(code == ACL_ERROR_RT_WAIT_TIMEOUT, || {
            format!("{what} returned {code}, not the wait's {ACL_ERROR_RT_WAIT_TIMEOUT}")
        })?;
        seen.push(what);
    }
    let code = code_of(
        "aclrtQueryEventStatus",
        a.event_query_until(e, Duration::from_secs(5)),
    )?;
    ensure(code == ACL_ERROR_RT_WAIT_TIMEOUT, || {
        format!("aclrtQueryEventStatus returned {code}, not {ACL_ERROR_RT_WAIT_TIMEOUT}")
    })?;
    // Not collected by the event: the stream reports it too.
    let code = code_of("aclrtSynchronizeStream", a.stream_sync(s))?;
    ensure(code == ACL_ERROR_RT_WAIT_TIMEOUT, || {
        format!("aclrtSynchronizeStream returned {code}, not {ACL_ERROR_RT_WAIT_TIMEOUT}")
    })?;
    let _ = a.stream_sync(s);
    a.event_destroy(e).step("aclrtDestroyEvent")?;
    a.notify_destroy(n).step("aclrtDestroyNotify")?;
    a.stream_destroy(s).step("aclrtDestroyStream")?;
    Ok(format!(
        "{} and aclrtQueryEventStatus return {ACL_ERROR_RT_WAIT_TIMEOUT}; \
         aclrtSynchronizeStream still reports it",
        seen.join(", ")
    ))
}
