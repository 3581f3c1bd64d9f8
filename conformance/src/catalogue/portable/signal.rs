//! Portable guarantees about signals: a same-process import shares the local signal, a
//! signal is a binary semaphore across processes, and a wait times out on time.
use std::time::{Duration, Instant};

use devipc::{DeviceId, Error, ExportOptions};

use super::expect_error;
use crate::catalogue::{Step, ensure, portable};
use crate::counting;
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::facade::FacadeCommand;
use crate::shell::{Failure, Request};

/// How late a wait may return past its timeout (or past the notify that releases it).
const WAIT_SLACK: Duration = Duration::from_millis(1500);

pub(super) const SAME_PROCESS_IMPORT: Rule = portable(
    "portable.signal.same-process-import",
    "importing a signal token in the process that exported it shares the local signal \
     without any vendor call (HIP cannot open its own IPC event), and a notify through \
     the import releases a wait on the original",
    "DESIGN 5.1 and 5.5; api-facts C.2 (hipIpcOpenEventHandle in the exporter: \
     hipErrorInvalidContext)",
    Expect::Behaviour,
    &[],
    signal_same_process,
);

pub(super) const BINARY_SEMAPHORE: Rule = portable(
    "portable.signal.binary-semaphore",
    "a signal is a binary semaphore across processes: notify once and one wait returns and \
     resets; two notifies release one wait; a wait blocks until the peer notifies; both \
     directions",
    "DESIGN 5.5",
    Expect::Behaviour,
    &[],
    signal_semaphore,
)
.catching(&["ascend.notify.binary-semaphore"]);

pub(super) const WAIT_TIMEOUT: Rule = portable(
    "portable.signal.wait-timeout",
    "waiting on a signal nobody notified blocks for the timeout and gives Error::Timeout \
     (a HIP event alone would return at once): never early and at most 250 ms late, for \
     10 ms and 300 ms (the Ascend runtime counts whole seconds, devipc keeps the deadline), \
     in this process and in a peer that imported the signal; the error states the time \
     measured",
    "DESIGN 5.5; devipc Signal::wait; issue 13 item 2 (Ascend notify timeout unit)",
    Expect::Behaviour,
    &[],
    signal_timeout,
);

fn signal_same_process(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.counting_runtime()?;
    let signal = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let token = signal.export(ExportOptions::default()).step("export")?;
    let before = counting::all_calls();
    let local = rt
        .import_signal(&token, DeviceId(0))
        .step("import in the exporting process")?;
    let after = counting::all_calls();
    ensure(before == after, || {
        "the same-process signal import made vendor calls".into()
    })?;
    local.notify().step("notify through the import")?;
    signal
        .wait(Some(Duration::from_secs(10)))
        .step("wait on the original")?;
    drop(local);
    drop(signal);
    Ok("the import shares the local signal; notify and wait meet".into())
}

fn signal_semaphore(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("peer", false)?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let token = sig.export(ExportOptions::default()).step("export")?;
    let pid = peer.pid().step("peer process_id")?;
    sig.grant(&token, &[pid]).step("grant")?;
    let ps = peer.signal_import(&token, 0).step("peer import_signal")?;
    // Two notifies release one wait.
    peer.notify(ps).step("peer notify")?;
    peer.notify(ps).step("peer notify again")?;
    sig.wait(Some(Duration::from_secs(10)))
        .step("wait after two notifies")?;
    let second = sig.wait(Some(Duration::from_millis(300)));
    expect_error("a second wait after two notifies", "Timeout", second)?;
    // A wait blocks until the peer notifies.
    peer.0.send(Request::Sleep(300)).step("queue sleep")?;
    peer.0
        .send(Request::Run(FacadeCommand::Notify { id: ps }))
        .step("queue notify")?;
    let started = Instant::now();
    sig.wait(Some(Duration::from_secs(10)))
        .step("wait for the delayed notify")?;
    let waited = started.elapsed();
    peer.0.reply().step("peer sleep")?;
    peer.0.reply().step("peer notify")?;
    ensure(waited >= Duration::from_millis(200), || {
        format!("the wait returned after {waited:?}, before the peer notified")
    })?;
    ensure(waited <= Duration::from_millis(300) + WAIT_SLACK, || {
        format!(
            "the wait returned {waited:?} after the peer's 300 ms sleep began: more than \
             {WAIT_SLACK:?} after the notify"
        )
    })?;
    // The other direction: the peer waits, this process notifies.
    peer.wait_start(ps, Duration::from_secs(10))
        .step("peer wait")?;
    std::thread::sleep(Duration::from_millis(100));
    sig.notify().step("notify")?;
    peer.wait_end().step("peer wait returns after the notify")?;
    peer.drop_obj(ps).step("peer destroy")?;
    peer.0.finish()?;
    drop(sig);
    Ok(format!(
        "two notifies released one wait; a wait blocked {waited:.2?} until the peer notified; \
         the peer's wait returned on this process's notify"
    ))
}

/// How late past its timeout `Signal::wait` may return in [`signal_timeout`]: devipc's
/// promise is a few milliseconds (backend-ascend `notify.rs` `WAIT_SLACK`), this is
/// generous for a loaded machine and far below the second the Ascend runtime rounds to.
const DEADLINE_SLACK: Duration = Duration::from_millis(250);

fn signal_timeout(ctx: &mut Ctx) -> Verdict {
    const LIMITS: [Duration; 2] = [Duration::from_millis(10), Duration::from_millis(300)];
    let rt = ctx.runtime()?;
    let sig = rt.create_signal(DeviceId(0)).step("create_signal")?;
    let mut seen = Vec::new();
    for limit in LIMITS {
        let started = Instant::now();
        let result = sig.wait(Some(limit));
        let took = started.elapsed();
        let after = match &result {
            Err(Error::Timeout { after, .. }) => *after,
            _ => Duration::ZERO,
        };
        expect_error("wait on a signal never notified", "Timeout", result)?;
        ensure(took >= limit, || {
            format!("wait({limit:?}) gave up after {took:?}, before its timeout")
        })?;
        ensure(took <= limit + DEADLINE_SLACK, || {
            format!(
                "wait({limit:?}) returned after {took:?}, more than {DEADLINE_SLACK:?} past its \
                 timeout (a vendor granularity leaking through?)"
            )
        })?;
        ensure(after >= limit && after <= took, || {
            format!(
                "wait({limit:?}) took {took:?} but its Error::Timeout says it waited {after:?}: \
                 not the time measured"
            )
        })?;
        seen.push(format!("{limit:?} in {took:.1?}"));
    }
    // Across processes: a peer waits on its import of the signal nobody notifies.
    let limit = LIMITS[0];
    let mut peer = ctx.facade_peer("waiter", false)?;
    let token = sig.export(ExportOptions::any_process()).step("export")?;
    let ps = peer.signal_import(&token, 0).step("peer import_signal")?;
    // The first command of a peer may pay for its runtime's start: not timed.
    peer.pid().step("peer process_id")?;
    let started = Instant::now();
    let result = peer.wait(ps, limit);
    let took = started.elapsed();
    match result {
        Err(Failure::Devipc { kind, .. }) if kind == "Timeout" => {}
        other => {
            return Err(Stop::fail(format!(
                "the peer's wait({limit:?}) on a signal nobody notified gave {other:?}, not \
                 Error::Timeout"
            )));
        }
    }
    ensure(took >= limit && took <= limit + DEADLINE_SLACK, || {
        format!(
            "the peer's wait({limit:?}) answered after {took:?}, not within {DEADLINE_SLACK:?} \
             of its timeout"
        )
    })?;
    peer.drop_obj(ps).step("peer destroy")?;
    peer.0.finish()?;
    Ok(format!(
        "Timeout for {} (each no earlier than asked, within {DEADLINE_SLACK:?} after, stating \
         the time measured); the peer's wait({limit:?}) answered in {took:.1?}",
        seen.join(", ")
    ))
}
