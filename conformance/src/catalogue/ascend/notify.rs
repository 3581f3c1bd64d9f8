//! Ascend notify IPC rules (api-facts A.8, C.6): a notify shared by key is a binary
//! semaphore across processes, its waits time out and block only their stream.

use devipc_ascend_sys::codes::ACL_ERROR_RT_PARAM_INVALID;
use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
};
use std::time::{Duration, Instant};

use super::{A, LONG_WAIT, notify_exported, peer_on, trust};
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::acl::NotifyCommand;
use crate::shell::{Pids, Request};

/// Timeout of the wait that must expire (2 units: 2 s, or 2 ms on a runtime that counts
/// milliseconds), and how late past it the wait may return. The slack keeps the two
/// units' windows apart (2 ms..1.502 s and 2 s..3.5 s).
const WAIT_TIMEOUT: u32 = 2;
const WAIT_SLACK: Duration = Duration::from_millis(1500);

/// The notify IPC rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.notify.binary-semaphore",
        A,
        "across processes a notify is a binary semaphore: aclrtWaitAndResetNotify blocks until a \
         record, then resets; two records release one wait",
        "CANN RT-DOC 08 notify management (documented flow); api-facts A.8, C.6",
        Expect::Behaviour,
        &[],
        notify_binary_semaphore,
    ),
    vendor(
        "ascend.notify.wait-timeout",
        A,
        "aclrtWaitAndResetNotify with timeout 2 and no record fails, neither before the timeout \
         nor more than 1.5 s after it (2 s: the unit is seconds per RT-DOC 08; a real runtime \
         that counts milliseconds as the header says passes with 2 ms and is reported)",
        "CANN RT-DOC 08; api-facts A.8, D.3 (timeout unit: header ms, docs s)",
        Expect::Refused,
        &[],
        notify_wait_timeout,
    ),
    vendor(
        "ascend.stream.waits-block-only-their-stream",
        A,
        "aclrtWaitAndResetNotify is a stream task: two processes that each enqueue a wait on \
         their stream before recording the other's notify on another stream both complete \
         (each call returns at once; each synchronisation returns once the peer recorded)",
        "CANN RT-DOC 08 aclrtWaitAndResetNotify ('blocks the stream; asynchronous interface'); \
         api-facts A.8",
        Expect::Behaviour,
        &[],
        stream_waits_block_only_their_stream,
    ),
    vendor(
        "ascend.notify.min-len-65",
        A,
        "aclrtNotifyGetExportKey needs a key buffer of at least 65 bytes: len 64 is refused, 65 \
         succeeds",
        "CANN RT-DOC 08; api-facts C.6",
        Expect::Refused,
        &[],
        notify_min_len,
    ),
    vendor(
        "ascend.notify.set-pid-needs-pids",
        A,
        "aclrtNotifySetImportPid rejects a NULL pid array and num 0 with \
         ACL_ERROR_RT_PARAM_INVALID",
        "api-facts C.6 (RT-SRC notify.cpp, api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        notify_set_pid_args,
    ),
    vendor(
        "ascend.notify.trustlist-required",
        A,
        "with DEFAULT flags only processes set by aclrtNotifySetImportPid may import a notify; \
         after the exporter adds the importer, its import succeeds",
        "CANN RT-DOC 08; api-facts A.8, C.6",
        Expect::Refused,
        &[],
        notify_trustlist,
    ),
    vendor(
        "ascend.notify.disable-pid-validation",
        A,
        "a notify exported with ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION (0x02, not 0x1) \
         is importable by any process, and its record releases the exporter's wait",
        "CANN RT-DOC 08; api-facts A.8 (the 0x02 flag)",
        Expect::Behaviour,
        &[],
        notify_disable_pid_validation,
    ),
    vendor(
        "ascend.notify.freed-when-all-destroyed",
        A,
        "a notify lives until every process destroyed it: after the exporter destroyed its \
         handle, the importer still records on and destroys its own",
        "CANN RT-DOC 08 (every process destroys the notify); api-facts C.6",
        Expect::Behaviour,
        &[],
        notify_freed_when_all_destroyed,
    ),
];

fn notify_binary_semaphore(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("recorder")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.notify_set_pid(n, &trust(pid))
        .step("aclrtNotifySetImportPid")?;
    let nb = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("aclrtNotifyImportByKey")?;
    // Two records release one wait: the second wait times out.
    b.notify_record(nb).step("first record")?;
    b.notify_record(nb).step("second record")?;
    a.notify_wait(n, LONG_WAIT).step("wait after two records")?;
    let started = Instant::now();
    if a.notify_wait(n, 1).is_ok() {
        return Err(Stop::fail(
            "a second wait returned after two records: records accumulate, the notify is not \
             a binary semaphore",
        ));
    }
    let timed_out = started.elapsed();
    // A wait blocks until the peer records.
    b.0.send(Request::Sleep(300)).step("queueing sleep")?;
    b.0.send(Request::Run(NotifyCommand::Record { notify: nb }.into()))
        .step("queueing the record")?;
    let started = Instant::now();
    a.notify_wait(n, LONG_WAIT)
        .step("wait for the delayed record")?;
    let waited = started.elapsed();
    b.0.reply().step("peer sleep")?;
    b.0.reply().step("peer record")?;
    ensure(waited >= Duration::from_millis(200), || {
        format!("the wait returned after {waited:?}, before the peer's record")
    })?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "two records released one wait (the next timed out after {timed_out:.2?}); a wait \
         blocked {waited:.2?} until the peer's record"
    ))
}

fn notify_wait_timeout(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let started = Instant::now();
    let result = a.notify_wait(n, WAIT_TIMEOUT);
    let took = started.elapsed();
    let seen = ctx.refused(
        &format!("wait with timeout {WAIT_TIMEOUT} and no record"),
        result,
    )?;
    // Positive control: the same wait after a record succeeds.
    a.notify_record(n).step("aclrtRecordNotify")?;
    a.notify_wait(n, WAIT_TIMEOUT)
        .step("the same wait after a record")?;
    a.notify_destroy(n).step("destroy")?;
    // The wait returns neither before its timeout nor more than WAIT_SLACK after it. The
    // unit is seconds per RT-DOC 08 (what the emulator implements), milliseconds per the
    // header (api-facts D.3): a real runtime may show either, and the report says which.
    let within = |unit: Duration| {
        let limit = unit * WAIT_TIMEOUT;
        took >= limit && took <= limit + WAIT_SLACK
    };
    let unit = if within(Duration::from_secs(1)) {
        "seconds"
    } else if within(Duration::from_millis(1)) && !ctx.target.emulated() {
        "milliseconds"
    } else {
        let units = if ctx.target.emulated() {
            format!("{WAIT_TIMEOUT} s")
        } else {
            format!("{WAIT_TIMEOUT} s (RT-DOC 08) nor after {WAIT_TIMEOUT} ms (header)")
        };
        return Err(Stop::fail(format!(
            "the wait with timeout {WAIT_TIMEOUT} returned after {took:.2?}: not within \
             {WAIT_SLACK:?} after {units}"
        )));
    };
    Ok(format!(
        "{seen} after {took:.2?}: the timeout counted in {unit}, within {WAIT_SLACK:?}; after \
         a record the same wait succeeds"
    ))
}

/// How long the call that enqueues a wait may take (it only enqueues): generous, and far
/// below the wait's own timeout.
const ENQUEUE_LIMIT: Duration = Duration::from_secs(10);

fn stream_waits_block_only_their_stream(ctx: &mut Ctx) -> Verdict {
    // Both sides are peers, so a call that blocks (the wait on the caller) cannot hang the
    // rule: its reply is awaited for at most ENQUEUE_LIMIT.
    let mut a = ctx.acl_peer("a")?;
    let mut b = ctx.acl_peer("b")?;
    let flags = ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    let (na, key_a) = notify_exported(&mut a, flags)?;
    let (nb, key_b) = notify_exported(&mut b, flags)?;
    let na_in_b = b
        .notify_import(&key_a, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("B imports A's notify")?;
    let nb_in_a = a
        .notify_import(&key_b, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("A imports B's notify")?;
    let sa = a.stream_create().step("A's aclrtCreateStream")?;
    let sb = b.stream_create().step("B's aclrtCreateStream")?;
    // Each enqueues the wait for the other's signal first. Were the wait on the caller,
    // neither could go on to record the other's notify.
    let started = Instant::now();
    let blocked = |who: &str, e| {
        Stop::fail(format!(
            "{who}'s aclrtWaitAndResetNotify on its stream did not return within \
             {ENQUEUE_LIMIT:?} before any record ({e}): the wait blocks the caller, not the stream"
        ))
    };
    a.notify_wait_on_within(na, LONG_WAIT, sa, ENQUEUE_LIMIT)
        .map_err(|e| blocked("A", e))?;
    b.notify_wait_on_within(nb, LONG_WAIT, sb, ENQUEUE_LIMIT)
        .map_err(|e| blocked("B", e))?;
    let enqueued = started.elapsed();
    // Then each records the other's notify on its default stream, and synchronises.
    a.notify_record(nb_in_a).step("A records B's notify")?;
    b.notify_record(na_in_b).step("B records A's notify")?;
    a.stream_sync(sa)
        .step("A's aclrtSynchronizeStream of the waiting stream")?;
    b.stream_sync(sb)
        .step("B's aclrtSynchronizeStream of the waiting stream")?;
    a.stream_destroy(sa).step("A's aclrtDestroyStream")?;
    b.stream_destroy(sb).step("B's aclrtDestroyStream")?;
    a.notify_destroy(nb_in_a).step("A destroys B's notify")?;
    b.notify_destroy(na_in_b).step("B destroys A's notify")?;
    a.notify_destroy(na).step("A destroys its notify")?;
    b.notify_destroy(nb).step("B destroys its notify")?;
    a.0.finish()?;
    b.0.finish()?;
    Ok(format!(
        "both waits were enqueued before any record ({enqueued:.2?} for the two calls); each \
         process then recorded the other's notify and both waiting streams completed"
    ))
}

fn notify_min_len(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let seen = ctx.refused(
        "key buffer of 64 bytes",
        a.notify_export(n, ACL_IPC_KEY_LEN - 1, 0),
    )?;
    a.notify_export(n, ACL_IPC_KEY_LEN, 0)
        .step("export with a 65-byte buffer")?;
    a.notify_destroy(n).step("destroy")?;
    Ok(format!("{seen}; 65 bytes succeed"))
}

fn notify_set_pid_args(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (n, _key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let null = ctx.refused("NULL pid array", a.notify_set_pid(n, &Pids::Null))?;
    let empty = ctx.refused("num 0", a.notify_set_pid(n, &Pids::List(Vec::new())))?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    a.notify_set_pid(n, &trust(me))
        .step("aclrtNotifySetImportPid with one pid")?;
    a.notify_destroy(n).step("destroy")?;
    Ok(format!("{null}; {empty}; one pid succeeds"))
}

fn notify_trustlist(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    let result = b.notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT);
    if let Ok(nb) = result {
        let _ = b.notify_destroy(nb);
    }
    let seen = ctx.refused("import without the trustlist", result)?;
    a.notify_set_pid(n, &trust(pid))
        .step("aclrtNotifySetImportPid")?;
    let nb = b.notify_import(&key, 0).step("granted import")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!("{seen}; after the grant the import succeeds"))
}

fn notify_disable_pid_validation(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("recorder")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let nb = b.notify_import(&key, 0).step("ungranted import")?;
    b.notify_record(nb).step("record")?;
    a.notify_wait(n, LONG_WAIT)
        .step("wait for the importer's record")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok("an ungranted process imported the 0x02-flagged notify and released a wait".into())
}

fn notify_freed_when_all_destroyed(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.notify_set_pid(n, &trust(pid)).step("grant")?;
    let nb = b.notify_import(&key, 0).step("import")?;
    a.notify_destroy(n).step("exporter destroy")?;
    b.notify_record(nb)
        .step("importer record after the exporter destroyed")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    Ok("the importer's handle stayed usable after the exporter destroyed its own".into())
}
