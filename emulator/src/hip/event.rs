//! Events: `hipEventCreateWithFlags`, `hipEventDestroy`, `hipEventRecord`,
//! `hipEventQuery`, `hipEventSynchronize`, `hipStreamWaitEvent`, and their IPC export
//! and import (`hipIpcGetEventHandle`, `hipIpcOpenEventHandle`).
//!
//! An event is two 32-bit words ([`crate::event_words`]): `recorded` (how many records
//! were submitted) and `completed` (the index of the latest record that completed). A
//! record takes the next index when `hipEventRecord` is called and completes it when its
//! stream runs it ([`super::stream`]: at once on an idle stream). The event's state is
//! that of its most recent record, as in HIP: complete when `completed` has reached
//! `recorded`. An event never recorded is complete
//! ([`rules::EVENT_UNRECORDED_IS_COMPLETE`]). `hipStreamWaitEvent` makes the stream wait
//! for the record that is the latest when it is called (none: no wait), blocking only the
//! stream, except for an interprocess event before ROCm 7.0, where the call itself waits
//! (see [`super::stream`]); `hipEventSynchronize` blocks the calling thread.
//!
//! An interprocess event (`hipEventInterprocess | hipEventDisableTiming`) keeps its words
//! in an `Event` object of the state directory: word 0 of the object's one-page segment
//! is `recorded`, word 1 `completed`. Every process that opened the handle maps the same
//! page, so a record in one process is seen by `hipEventQuery` / `hipEventSynchronize`
//! in another, and waiters sleep on the `completed` word with a cross-process futex.
//! Each open adds one holder; `hipEventDestroy` removes it; the page lives while any
//! process holds it (using an imported event after the exporter destroyed the original
//! is undefined in HIP; the emulator keeps working). The 64-byte handle carries the
//! object id and payload `[flags, device, exporter pid, 0]`.
//!
//! Other events keep their words in this process's memory. Events carry no timing data.
//!
//! A record that completes after failed work of its stream (a copy whose memory was
//! revoked meanwhile) keeps that failure: `hipEventSynchronize` and `hipEventQuery` of the
//! event return it while the record is the event's latest, without collecting it from the
//! stream, whose next synchronisation still reports it. Sources: ROCm/HIP
//! `include/hip/hip_runtime_api.h` (`hipEventSynchronize` and `hipEventQuery` list
//! `hipErrorLaunchFailure`, an error of the asynchronous work the event follows); CLR
//! `hipamd/src/hip_event.cpp` (`Event::synchronize`, `Event::query`) has no other error
//! path of its own. Not yet a switchable rule: the conformance shell has no asynchronous
//! HIP copy to make such a failure with (the emulator test `hip_streams` covers it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use devipc_hip_sys::*;

use super::errors::{Failure, HipResult, Refusal, unopenable_handle};
use super::rules::{
    self, EVENT_EXPORT_NEEDS_INTERPROCESS, EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
    EVENT_INVALID_HANDLE_REJECTED, EVENT_ONE_RELEASE_FLAG, EVENT_OPEN_IN_EXPORTER_REJECTED,
    EVENT_UNKNOWN_FLAGS_REJECTED, EVENT_UNRECORDED_IS_COMPLETE,
    STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
};
use super::runtime::{current_device, me, state};
use super::{stream, versions};
use crate::config::HipVersion;
use crate::error::EmuError;
use crate::event_words::{COMPLETED, EventWords, RECORDED, WaitOp};
use crate::handle::{Handle64, decode_handle64, encode_handle64};
use crate::local::HandleTable;
use crate::state::{NewObject, ObjectFlags, ObjectId, ObjectKind, Vendor};
use crate::stream_queue::{Cancel, Op, Queue, WeakQueue};

/// The record index a query or wait looks at: the latest record; for an event never
/// recorded, 0 (complete) or, with [`EVENT_UNRECORDED_IS_COMPLETE`] switched off, 1
/// (pending until the first record completes).
fn target(words: &EventWords) -> HipResult<u32> {
    let r = words.latest()?;
    if r == 0 && !rules::enforced(EVENT_UNRECORDED_IS_COMPLETE) {
        return Ok(1);
    }
    Ok(r)
}

/// What this process keeps per `hipEvent_t`.
#[derive(Debug, Clone)]
struct Event {
    flags: u32,
    device: u32,
    words: Arc<EventWords>,
    /// The `Event` object, for interprocess events (created or opened here).
    shared: Option<ObjectId>,
    /// The failure of the stream work before a record made here, by the record's index
    /// (see the module docs).
    failed: Arc<Mutex<Option<(u32, Failure)>>>,
}

impl Event {
    /// The failure of the work before record `index`, if any.
    fn failure_of(&self, index: u32) -> HipResult<()> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((i, failure)) if *i == index => Err(failure.clone()),
            _ => Ok(()),
        }
    }
}

/// `hipEventRecord` as a stream operation: keeps the first failure of the stream's work
/// before it for the event (without collecting it), then completes its index; dropped
/// unrun, it completes too, so nobody waits for a record that never comes.
struct Record {
    words: Arc<EventWords>,
    index: u32,
    failed: Arc<Mutex<Option<(u32, Failure)>>>,
    queued: Option<(WeakQueue<Failure>, u64)>,
}

impl Record {
    fn run_record(&self) -> HipResult<()> {
        if let Some((queue, seq)) = &self.queued {
            let before = queue.upgrade().and_then(|q| q.first_error_before(*seq));
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            match before {
                Some(failure) => *failed = Some((self.index, failure)),
                None if failed.as_ref().is_some_and(|(i, _)| *i == self.index) => *failed = None,
                None => {}
            }
        }
        Ok(self.words.complete(self.index)?)
    }
}

impl Op<Failure> for Record {
    fn try_now(&mut self) -> Option<HipResult<()>> {
        Some(self.run_record())
    }

    fn run(self: Box<Self>, _cancel: &Cancel) -> HipResult<()> {
        self.run_record()
    }

    fn abandon(self: Box<Self>) {
        let _ = self.words.complete(self.index);
    }

    fn queued(&mut self, queue: &Queue<Failure>, seq: u64) {
        self.queued = Some((queue.downgrade(), seq));
    }
}

static EVENTS: HandleTable<Event> = HandleTable::new("event", 0x4845);

fn event(handle: usize) -> HipResult<Event> {
    if handle == 0 {
        return Err(Failure::invalid_handle("NULL event"));
    }
    EVENTS.get(handle).map_err(|_| {
        Failure::invalid_handle(format!("{handle:#x} is not an event of this process"))
    })
}

/// Checks creation flags against the emulated version (api-facts C.2).
fn check_flags(flags: u32, version: HipVersion) -> HipResult<()> {
    // hipEventDisableSystemFence exists from ROCm 5.6 (see its declaration in the sys
    // crate).
    let fence = if version.at_least(5, 6) {
        hipEventDisableSystemFence
    } else {
        0
    };
    let known = hipEventDefault
        | hipEventBlockingSync
        | hipEventDisableTiming
        | hipEventInterprocess
        | hipEventReleaseToDevice
        | hipEventReleaseToSystem
        | fence;
    let unknown = flags & !known;
    if unknown != 0 && rules::enforced(EVENT_UNKNOWN_FLAGS_REJECTED) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            EVENT_UNKNOWN_FLAGS_REJECTED,
            format!("flags {flags:#x}: bits {unknown:#x} are not event flags of HIP {version}"),
        ));
    }
    let release = flags & (hipEventReleaseToDevice | hipEventReleaseToSystem | fence);
    if release.count_ones() > 1 && rules::enforced(EVENT_ONE_RELEASE_FLAG) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            EVENT_ONE_RELEASE_FLAG,
            format!("flags {flags:#x}: at most one release flag ({release:#x} given)"),
        ));
    }
    if flags & hipEventInterprocess != 0
        && flags & hipEventDisableTiming == 0
        && rules::enforced(EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING)
    {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
            format!("flags {flags:#x}: hipEventInterprocess needs hipEventDisableTiming"),
        ));
    }
    Ok(())
}

/// A new `Event` object on `device` with the words `(recorded, completed)`, mapped.
fn create_shared(device: u32, flags: u32, words: (u32, u32)) -> HipResult<(ObjectId, EventWords)> {
    let state = state()?;
    let reg = state.registry();
    let mut spec = NewObject::event(Vendor::Hip, device);
    spec.aux = u64::from(flags);
    let created = reg.create(spec)?;
    let id = created.meta.id();
    let mapped = created
        .segment
        .as_ref()
        .ok_or_else(|| Failure::new(hipErrorUnknown, "event object without a segment"))
        .and_then(|seg| Ok(seg.map()?))
        .and_then(|mapping| {
            mapping.word(RECORDED)?.store(words.0, Ordering::Release);
            mapping.word(COMPLETED)?.store(words.1, Ordering::Release);
            Ok(EventWords::shared(mapping))
        });
    match mapped {
        Ok(words) => Ok((id, words)),
        Err(e) => {
            let _ = reg.release(id, me()?);
            Err(e)
        }
    }
}

/// `hipEventCreateWithFlags(flags)`: a new event on the current device.
pub(crate) fn create(flags: u32) -> HipResult<usize> {
    let state = state()?;
    check_flags(flags, state.config().hip_version)?;
    let device = current_device(state)?;
    let (words, shared) = if flags & hipEventInterprocess != 0 {
        let (id, words) = create_shared(device, flags, (0, 0))?;
        (words, Some(id))
    } else {
        (EventWords::local(), None)
    };
    let inserted = EVENTS.insert(Event {
        flags,
        device,
        words: Arc::new(words),
        shared,
        failed: Arc::default(),
    });
    match inserted {
        Ok(handle) => Ok(handle),
        Err(e) => {
            if let Some(id) = shared {
                let _ = state.registry().release(id, me()?);
            }
            Err(e.into())
        }
    }
}

/// `hipEventDestroy`: forgets the event; an interprocess event drops this process's hold.
/// Records still queued on a held stream complete into the words when it is released.
pub(crate) fn destroy(handle: usize) -> HipResult<()> {
    if handle == 0 {
        return Err(Failure::invalid_handle("NULL event"));
    }
    let e = EVENTS.remove(handle).map_err(|_| {
        Failure::invalid_handle(format!("{handle:#x} is not an event of this process"))
    })?;
    if let Some(id) = e.shared {
        state()?.registry().release(id, me()?)?;
    }
    Ok(())
}

/// `hipEventElapsedTime(start, stop)`: milliseconds from `start`'s latest record to
/// `stop`'s, in CLR's order of checks (`hip_event.cpp` `Event::elapsedTime`): an event
/// never recorded or created with `hipEventDisableTiming` is `hipErrorInvalidHandle`, a
/// record still pending gives the `hipErrorNotReady` status; the same event twice is 0.
pub(crate) fn elapsed_time(start: usize, stop: usize) -> HipResult<f32> {
    let (a, b) = (event(start)?, event(stop)?);
    let no_timing = |e: &Event| e.flags & hipEventDisableTiming != 0;
    let recorded = |e: &Event| -> HipResult<bool> { Ok(e.words.snapshot()?.0 != 0) };
    let ready = |e: &Event| -> HipResult<bool> { Ok(e.words.is_complete(target(&e.words)?)?) };
    for e in [&a, &b] {
        if !recorded(e)? {
            return Err(Failure::invalid_handle(
                "the event was never recorded: it has no time",
            ));
        }
    }
    if no_timing(&a) || no_timing(&b) {
        return Err(Failure::invalid_handle(
            "an event created with hipEventDisableTiming has no time",
        ));
    }
    if !ready(&a)? || !ready(&b)? {
        return Err(Failure::status(hipErrorNotReady));
    }
    if start == stop {
        return Ok(0.0);
    }
    match (a.words.completed_at(), b.words.completed_at()) {
        (Some(t0), Some(t1)) => Ok((t1 as f64 - t0 as f64) as f32 / 1_000_000.0),
        _ => Err(Failure::invalid_handle("interprocess events have no time")),
    }
}

/// `hipEventRecord(event, stream)`: the record is the event's latest from now on and
/// completes when the stream reaches it.
pub(crate) fn record(handle: usize, stream_handle: usize) -> HipResult<()> {
    let e = event(handle)?;
    let stream = stream::resolve(stream_handle)?;
    let index = e.words.begin_record()?;
    let op = Record {
        words: e.words.clone(),
        index,
        failed: e.failed.clone(),
        queued: None,
    };
    let submitted = stream::submit(&stream, Box::new(op));
    if submitted.is_err() {
        // The stream was destroyed under us: do not leave the record pending forever.
        let _ = e.words.complete(index);
    }
    submitted.map(drop)
}

/// `hipEventQuery`: `Ok` when complete, the `hipErrorNotReady` status otherwise.
pub(crate) fn query(handle: usize) -> HipResult<()> {
    let e = event(handle)?;
    let target = target(&e.words)?;
    if e.words.is_complete(target)? {
        e.failure_of(target)
    } else {
        Err(Failure::status(hipErrorNotReady))
    }
}

/// `hipEventSynchronize`: waits until the event's latest record completed.
pub(crate) fn synchronize(handle: usize) -> HipResult<()> {
    let e = event(handle)?;
    let target = target(&e.words)?;
    e.words.wait(target)?;
    e.failure_of(target)
}

/// `hipStreamWaitEvent(stream, event, flags)`.
pub(crate) fn stream_wait(stream_handle: usize, handle: usize, flags: u32) -> HipResult<()> {
    if flags != 0 && rules::enforced(STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
            format!("flags {flags:#x}: hipStreamWaitEvent takes flags = 0"),
        ));
    }
    let stream = stream::resolve(stream_handle)?;
    let e = event(handle)?;
    let target = target(&e.words)?;
    if e.words.is_complete(target)? {
        // Nothing pending to wait for (CLR checks the event before it enqueues anything).
        return Ok(());
    }
    let seq = stream::submit(&stream, Box::new(WaitOp(e.words.clone(), target)))?;
    let version = state()?.config().hip_version;
    if e.shared.is_some() && !versions::ipc_stream_wait_on_device(version) {
        // CLR before 7.0 waits on the calling thread until the stream passed the wait
        // (see the stream module).
        stream::wait_until_run(&stream, seq);
    }
    Ok(())
}

/// `hipIpcGetEventHandle(event)`.
pub(crate) fn get_handle(handle: usize) -> HipResult<[u8; 64]> {
    let mut e = event(handle)?;
    let id = match e.shared {
        Some(id) => id,
        None if rules::enforced(EVENT_EXPORT_NEEDS_INTERPROCESS) => {
            return Err(Failure::rule(
                hipErrorInvalidConfiguration,
                EVENT_EXPORT_NEEDS_INTERPROCESS,
                format!(
                    "event {handle:#x} was created with flags {:#x}, without hipEventInterprocess",
                    e.flags
                ),
            ));
        }
        None => promote(handle, &mut e)?,
    };
    let state = state()?;
    state.registry().update(id, |m| {
        m.flags.insert(ObjectFlags::EXPORTED);
        Ok::<_, EmuError>(())
    })?;
    Ok(encode_handle64(&Handle64 {
        vendor: Vendor::Hip,
        kind: ObjectKind::Event,
        id,
        payload: [u64::from(e.flags), u64::from(e.device), me()?.pid as u64, 0],
    }))
}

/// With [`EVENT_EXPORT_NEEDS_INTERPROCESS`] switched off: moves a process-local event's
/// words into a new shared object so it can be exported.
fn promote(handle: usize, e: &mut Event) -> HipResult<ObjectId> {
    let (id, words) = create_shared(e.device, e.flags, e.words.snapshot()?)?;
    let words = Arc::new(words);
    let swapped = EVENTS.with(handle, |entry| {
        entry.words = words.clone();
        entry.shared = Some(id);
    });
    if swapped.is_err() {
        let _ = state()?.registry().release(id, me()?);
        return Err(Failure::invalid_handle(
            "the event was destroyed concurrently",
        ));
    }
    e.words = words;
    e.shared = Some(id);
    Ok(id)
}

/// The refusal of an event handle that names no event that can be opened.
fn invalid_handle(why: impl std::fmt::Display) -> Failure {
    unopenable_handle(EVENT_INVALID_HANDLE_REJECTED, "event", why, |message| {
        Failure::new(hipErrorUnknown, message)
    })
}

/// `hipIpcOpenEventHandle(handle)`: a new event of this process on the shared words.
pub(crate) fn open(handle: &[u8; 64]) -> HipResult<usize> {
    let h = decode_handle64(handle).map_err(invalid_handle)?;
    if (h.vendor, h.kind) != (Vendor::Hip, ObjectKind::Event) {
        return Err(invalid_handle(format!(
            "it is a {} {} handle",
            h.vendor, h.kind
        )));
    }
    let state = state()?;
    let device = current_device(state)?;
    let me = me()?;
    let reg = state.registry();
    reg.update(h.id, |m| {
        m.expect(Vendor::Hip, ObjectKind::Event)?;
        let exporter = m.info().exporter;
        if exporter == me && rules::enforced(EVENT_OPEN_IN_EXPORTER_REJECTED) {
            return Err(Refusal::Hip(Failure::rule(
                hipErrorInvalidContext,
                EVENT_OPEN_IN_EXPORTER_REJECTED,
                format!(
                    "this process (pid {}) exported the event; use the original hipEvent_t",
                    me.pid
                ),
            )));
        }
        m.add_holder(me)?;
        Ok(())
    })
    .map_err(|r| r.into_failure(invalid_handle))?;
    let opened = reg
        .open_segment(h.id)
        .and_then(|seg| seg.map())
        .map_err(Failure::from)
        .and_then(|mapping| {
            Ok(EVENTS.insert(Event {
                flags: hipEventInterprocess | hipEventDisableTiming,
                device,
                words: Arc::new(EventWords::shared(mapping)),
                shared: Some(h.id),
                failed: Arc::default(),
            })?)
        });
    if opened.is_err() {
        let _ = reg.release(h.id, me);
    }
    opened
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_rules_follow_the_version() {
        let v6 = HipVersion::parse("6.2").unwrap();
        let v5 = HipVersion::parse("5.2").unwrap();
        let ipc = hipEventInterprocess | hipEventDisableTiming;
        for v in [v5, v6] {
            check_flags(0, v).unwrap();
            check_flags(ipc | hipEventBlockingSync, v).unwrap();
            check_flags(hipEventReleaseToSystem, v).unwrap();
            let rule = |flags| check_flags(flags, v).unwrap_err().rule;
            assert_eq!(
                rule(hipEventInterprocess),
                Some(EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING)
            );
            assert_eq!(rule(0x100), Some(EVENT_UNKNOWN_FLAGS_REJECTED));
            assert_eq!(
                rule(hipEventReleaseToDevice | hipEventReleaseToSystem),
                Some(EVENT_ONE_RELEASE_FLAG)
            );
        }
        check_flags(hipEventDisableSystemFence, v6).unwrap();
        // The flag arrived in ROCm 5.6, not 6.0.
        for accepting in ["5.6", "5.7"] {
            check_flags(
                hipEventDisableSystemFence,
                HipVersion::parse(accepting).unwrap(),
            )
            .unwrap();
        }
        for rejecting in [v5, HipVersion::parse("5.5").unwrap()] {
            assert_eq!(
                check_flags(hipEventDisableSystemFence, rejecting)
                    .unwrap_err()
                    .rule,
                Some(EVENT_UNKNOWN_FLAGS_REJECTED)
            );
        }
        assert_eq!(
            check_flags(hipEventDisableSystemFence | hipEventReleaseToDevice, v6)
                .unwrap_err()
                .code,
            hipErrorInvalidValue
        );
    }
}
