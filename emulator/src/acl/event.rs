//! Events and IPC events: `aclrtCreateEventExWithFlag`, `aclrtCreateEventWithFlag`,
//! `aclrtDestroyEvent`,
//! `aclrtRecordEvent`, `aclrtStreamWaitEvent`, `aclrtSynchronizeEvent`,
//! `aclrtSynchronizeEventWithTimeout`, `aclrtQueryEventStatus`, `aclrtIpcGetEventHandle`,
//! `aclrtIpcOpenEventHandle`
//! (api-facts A.9, C.7; RT-DOC 07 event management).
//!
//! The documented flow: process A creates an event with `ACL_EVENT_IPC`, gets its 64-byte
//! handle with `aclrtIpcGetEventHandle` and records it on a stream; process B opens the
//! handle with `aclrtIpcOpenEventHandle` (by value), makes a stream wait on it with
//! `aclrtStreamWaitEvent`, and destroys its event when done. Same device and across
//! devices.
//!
//! - create (`aclrtCreateEventExWithFlag`): `flag` a non-empty combination of
//!   `ACL_EVENT_SYNC`, `ACL_EVENT_CAPTURE_STREAM_PROGRESS`, the runtime's 0x04 and
//!   `ACL_EVENT_TIME_LINE`, or `ACL_EVENT_IPC` alone (107000 otherwise, the runtime's
//!   `ApiErrorDecorator::EventCreateEx`: `ascend.event.create-ex-flags-valid`), on the current
//!   device (107002 without one). `aclrtCreateEventWithFlag` (what torch_npu probes for)
//!   makes local events only: those flags and `ACL_EVENT_DEVICE_USE_ONLY`, or
//!   `ACL_EVENT_EXTERNAL` alone, never `ACL_EVENT_IPC` (107000 otherwise,
//!   `ApiErrorDecorator::EventCreate`: `ascend.event.create-flags-valid`). With either rule
//!   switched off, any combination of the `ACL_EVENT_*` flags is taken (unknown bits: 100000).
//! - get handle: only an event whose flag is exactly `ACL_EVENT_IPC` (RT-SRC
//!   `ApiErrorDecorator::IpcGetEventHandle`: "Only IPC events are supported",
//!   `RT_ERROR_INVALID_VALUE` -> 107000: `ascend.event.ipc-handle-needs-ipc-flag`). The event
//!   becomes an object of the state directory (kind `Event`, one page of words) that other
//!   processes open; asking again gives the same handle, and so does asking in a process
//!   that opened it (the runtime's opened event keeps the handle).
//! - open: a handle of an exported ACL event (107017 otherwise), on the current device
//!   (107002 without one); the opening process holds the object until it destroys its event,
//!   so the event lives until every process that created or opened it destroyed it.
//! - record / wait / synchronize / query ([`crate::event_words`]): `aclrtRecordEvent`
//!   enqueues the record on its stream ([`super::stream`]) and it completes when the stream
//!   reaches it (at once on an idle stream). `aclrtStreamWaitEvent` makes the stream wait
//!   for the record that is the latest when it is called (a task blocking only that
//!   stream); with no record yet, or the latest complete, there is nothing to wait for, as
//!   the runtime's IPC event answers "record finished or wait first, return success" (RT-SRC
//!   `IpcEvent::IpcEventWait`). `aclrtSynchronizeEvent` blocks the calling thread until that
//!   record completed, `aclrtSynchronizeEventWithTimeout` at most `timeout` ms (507047 at
//!   the timeout: `ascend.event.sync-with-timeout`; 0 and values below -1 refused:
//!   `ascend.event.sync-timeout-valid`); a record queued in this process is waited for by
//!   running its stream up to it on the waiting thread when no other thread runs it
//!   ([`crate::stream_queue`]), else on the event's futex word, never by polling.
//!   `aclrtQueryEventStatus` is `ACL_EVENT_RECORDED_STATUS_COMPLETE` once it did (or with no
//!   record), `..._NOT_READY` before. A completed record after failed work of its stream
//!   (an expired notify wait, a copy whose memory went away) makes the synchronisations and
//!   the query return that failure, without collecting it from the stream
//!   (`ascend.event.sync-reports-stream-failure`). The words of an IPC event are word 0
//!   (records submitted) and word 1 (latest record completed) of its shared page, whichever
//!   process records. An event exported after records keeps their state, and a record
//!   still pending at the export completes the shared words too, so the processes that open
//!   the event see it complete (torch_npu records first and exports after:
//!   `ascend.event.export-keeps-pending-record`; switched off, it completes only the
//!   process-local words it was made on, and an opener's wait for it never ends).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use devipc_ascend_sys::consts::{
    ACL_EVENT_CAPTURE_STREAM_PROGRESS, ACL_EVENT_DEVICE_USE_ONLY, ACL_EVENT_EXTERNAL,
    ACL_EVENT_IPC, ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE,
};
use devipc_ascend_sys::types::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY,
    aclrtEventRecordedStatus,
};

use crate::error::EmuError;
use crate::event_words::{COMPLETED, EventWords, RECORDED, WaitOp};
use crate::handle::{HANDLE64_LEN, Handle64, decode_handle64, encode_handle64};
use crate::local::HandleTable;
use crate::state::{NewObject, ObjectFlags, ObjectId, ObjectKind, Vendor};
use crate::stream_queue::{Cancel, Op, Queue, WeakQueue};

use super::errors::{AclFailure, AclResult, check};
use super::{device, process_state, rules, stream};

/// The runtime's `RT_EVENT_DDSYNC` bit, which no `ACL_EVENT_*` macro names but both create
/// calls take.
const RT_EVENT_DDSYNC: u32 = 0x04;

/// The flags `aclrtCreateEventExWithFlag` combines (`ACL_EVENT_IPC` goes alone).
const EX_COMBINABLE: u32 =
    ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | RT_EVENT_DDSYNC | ACL_EVENT_TIME_LINE;

/// The flags `aclrtCreateEventWithFlag` combines (`ACL_EVENT_EXTERNAL` goes alone).
const WITH_FLAG_COMBINABLE: u32 = EX_COMBINABLE | ACL_EVENT_DEVICE_USE_ONLY;

/// Every `ACL_EVENT_*` creation flag, and the runtime's 0x04.
const KNOWN_FLAGS: u32 = RT_EVENT_DDSYNC
    | ACL_EVENT_SYNC
    | ACL_EVENT_CAPTURE_STREAM_PROGRESS
    | ACL_EVENT_TIME_LINE
    | ACL_EVENT_DEVICE_USE_ONLY
    | ACL_EVENT_EXTERNAL
    | ACL_EVENT_IPC;

/// Where an event's words are: this process's memory, or (once exported here, or opened
/// here) the shared page of its object.
#[derive(Debug)]
struct Words {
    words: Arc<EventWords>,
    /// The `Event` object, for an IPC event.
    shared: Option<ObjectId>,
}

/// The latest record of an event made in this process: where it was queued.
#[derive(Debug, Clone)]
struct Queued {
    /// The record's index in the event's words.
    index: u32,
    queue: WeakQueue<AclFailure>,
    seq: u64,
}

/// One event handle of this process.
#[derive(Debug)]
struct EventLocal {
    /// The creation flag (`ACL_EVENT_IPC` for opened events).
    flag: u32,
    state: Mutex<Words>,
    /// The latest record made here, for a host wait to run its stream up to it.
    queued: Mutex<Option<Queued>>,
    /// The failure of the stream work before a record, by the record's index
    /// ([`rules::EVENT_SYNC_REPORTS_STREAM_FAILURE`]).
    failed: Mutex<Option<(u32, AclFailure)>>,
}

/// Locks `m`, whatever a panicking holder left.
fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EventLocal {
    fn new(flag: u32, words: Words) -> EventLocal {
        EventLocal {
            flag,
            state: Mutex::new(words),
            queued: Mutex::new(None),
            failed: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Words> {
        guard(&self.state)
    }

    /// The queue and sequence number of record `index`, if it was made here and its
    /// stream still exists.
    fn queue_of(&self, index: u32) -> Option<(Queue<AclFailure>, u64)> {
        let queued = guard(&self.queued).clone()?;
        if queued.index != index {
            return None;
        }
        Some((queued.queue.upgrade()?, queued.seq))
    }

    /// The failure of the work before record `index` (a record made here), if any.
    fn failure_of(&self, index: u32) -> AclResult<()> {
        if !rules::enforced(rules::EVENT_SYNC_REPORTS_STREAM_FAILURE) {
            return Ok(());
        }
        match &*guard(&self.failed) {
            Some((i, failure)) if *i == index => Err(failure.clone()),
            _ => Ok(()),
        }
    }

    fn words(&self) -> Arc<EventWords> {
        self.lock().words.clone()
    }

    fn shared(&self) -> Option<ObjectId> {
        self.lock().shared
    }
}

static EVENTS: HandleTable<Arc<EventLocal>> = HandleTable::new("aclrtEvent", 0xac54);

/// `aclrtCreateEventExWithFlag`: returns the handle.
pub fn create(flag: u32) -> AclResult<usize> {
    let valid = flag == ACL_EVENT_IPC || (flag != 0 && flag & !EX_COMBINABLE == 0);
    check(!valid, rules::EVENT_CREATE_EX_FLAGS, || {
        format!(
            "flag {flag:#x}: aclrtCreateEventExWithFlag takes a non-empty combination of \
             ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS, 0x04 and ACL_EVENT_TIME_LINE \
             ({EX_COMBINABLE:#x}), or ACL_EVENT_IPC ({ACL_EVENT_IPC:#x}) alone"
        )
    })?;
    new_event(flag, "aclrtCreateEventExWithFlag")
}

/// `aclrtCreateEventWithFlag`: returns the handle of a local event.
pub fn create_with_flag(flag: u32) -> AclResult<usize> {
    let valid = flag == ACL_EVENT_EXTERNAL || (flag != 0 && flag & !WITH_FLAG_COMBINABLE == 0);
    check(!valid, rules::EVENT_CREATE_FLAGS, || {
        format!(
            "flag {flag:#x}: aclrtCreateEventWithFlag takes a non-empty combination of \
             ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS, 0x04, ACL_EVENT_TIME_LINE and \
             ACL_EVENT_DEVICE_USE_ONLY ({WITH_FLAG_COMBINABLE:#x}), or ACL_EVENT_EXTERNAL \
             ({ACL_EVENT_EXTERNAL:#x}) alone; IPC events come from aclrtCreateEventExWithFlag"
        )
    })?;
    new_event(flag, "aclrtCreateEventWithFlag")
}

/// A new local event with `flag` on the current device (the flag's rule checked).
fn new_event(flag: u32, function: &str) -> AclResult<usize> {
    if flag & !KNOWN_FLAGS != 0 {
        // Reached only with the flag rule switched off: bits no ACL_EVENT_* flag has.
        return Err(AclFailure::rule(
            rules::PARAM_ENUM_VALUE,
            format!("flag {flag:#x} is not a combination of the ACL_EVENT_* flags"),
        ));
    }
    device::require_current(function)?;
    Ok(EVENTS.insert(Arc::new(EventLocal::new(
        flag,
        Words {
            words: Arc::new(EventWords::local()),
            shared: None,
        },
    )))?)
}

/// `aclrtDestroyEvent`: this process's use of the event ends.
pub fn destroy(handle: usize) -> AclResult<()> {
    let local = EVENTS.remove(handle)?;
    if let Some(id) = local.shared() {
        // The page stays mapped while a queued record or wait still uses it.
        drop(local);
        process_state::registry()?.release(id, process_state::me()?)?;
    }
    Ok(())
}

/// `aclrtIpcGetEventHandle`: the 64-byte handle.
pub fn get_handle(handle: usize) -> AclResult<[u8; HANDLE64_LEN]> {
    let local = EVENTS.get(handle)?;
    check(local.flag != ACL_EVENT_IPC, rules::EVENT_IPC_FLAG, || {
        format!(
            "the event's flag is {:#x}: only events created with exactly ACL_EVENT_IPC ({ACL_EVENT_IPC:#x}) have an IPC handle",
            local.flag
        )
    })?;
    let mut slot = local.lock();
    let id = match slot.shared {
        Some(id) => id,
        None => {
            let device = device::require_current("aclrtIpcGetEventHandle")?;
            let reg = process_state::registry()?;
            let me = process_state::me()?;
            let mut spec = NewObject::event(Vendor::Acl, device);
            spec.aux = u64::from(local.flag);
            spec.flags.insert(ObjectFlags::EXPORTED);
            let created = reg.create(spec)?;
            let id = created.meta.id();
            let words = match created.segment.as_ref() {
                Some(segment) => segment.map().map_err(AclFailure::from),
                None => Err(EmuError::InvalidArgument("event without words".into()).into()),
            };
            // The records made so far carry over into the shared words: their count now,
            // and (below, once the words are switched) how far they completed.
            let words = words.and_then(|w| {
                let (recorded, completed) = slot.words.snapshot()?;
                w.word(RECORDED)?.store(recorded, Ordering::Release);
                w.word(COMPLETED)?.store(completed, Ordering::Release);
                Ok(w)
            });
            match words {
                Ok(words) => {
                    let local_words = slot.words.clone();
                    let shared = Arc::new(EventWords::shared(words));
                    *slot = Words {
                        words: shared.clone(),
                        shared: Some(id),
                    };
                    // A record that completed since the snapshot: its completion did not
                    // see the switch (Record::finish completes the event's current words
                    // after its own, under this lock), so carry it now; never backwards.
                    if rules::enforced(rules::EVENT_EXPORT_PENDING_RECORD) {
                        let (_, completed) = local_words.snapshot()?;
                        shared.complete(completed)?;
                    }
                }
                Err(e) => {
                    let _ = reg.release(id, me);
                    return Err(e);
                }
            }
            id
        }
    };
    Ok(encode_handle64(&Handle64 {
        vendor: Vendor::Acl,
        kind: ObjectKind::Event,
        id,
        payload: [0; 4],
    }))
}

/// `aclrtIpcOpenEventHandle`: returns the new event handle.
pub fn open(bytes: &[u8; HANDLE64_LEN]) -> AclResult<usize> {
    device::require_current("aclrtIpcOpenEventHandle")?;
    let h = decode_handle64(bytes)?;
    if (h.vendor, h.kind) != (Vendor::Acl, ObjectKind::Event) {
        return Err(AclFailure::rule(
            rules::HANDLE_VALID,
            format!(
                "the handle names a {} {}, not an ACL event",
                h.vendor, h.kind
            ),
        ));
    }
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let id = reg.resolve(h.id.raw())?;
    reg.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::Event)?;
        if !m.flags.contains(ObjectFlags::EXPORTED) {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                "the event has no IPC handle",
            ));
        }
        m.add_holder(me)?;
        Ok::<_, AclFailure>(())
    })?;
    let opened = reg
        .open_segment(id)
        .and_then(|s| s.map())
        .map_err(AclFailure::from)
        .and_then(|words| {
            words.word(COMPLETED)?;
            Ok(EVENTS.insert(Arc::new(EventLocal::new(
                ACL_EVENT_IPC,
                Words {
                    words: Arc::new(EventWords::shared(words)),
                    shared: Some(id),
                },
            )))?)
        });
    opened.inspect_err(|_| {
        let _ = reg.release(id, me);
    })
}

/// `aclrtRecordEvent`: the record is the event's latest from now on; it completes when
/// the stream reaches it.
pub fn record(handle: usize, stream_handle: usize) -> AclResult<()> {
    stream::check(stream_handle)?;
    let event = EVENTS.get(handle)?;
    let words = event.words();
    let index = words.begin_record()?;
    let submitted = stream::submit(
        stream_handle,
        Box::new(Record {
            event: event.clone(),
            words: words.clone(),
            index,
            queued: None,
        }),
    );
    if submitted.is_err() {
        // The stream went away under us: do not leave the record pending forever.
        let _ = words.complete(index);
    }
    submitted
}

/// A record of an event as a stream task: completes its index on the words it was made
/// on when the stream reaches it (or when it is dropped unrun), and, if the event was
/// exported in between, on the event's shared words too
/// ([`rules::EVENT_EXPORT_PENDING_RECORD`]).
struct Record {
    event: Arc<EventLocal>,
    words: Arc<EventWords>,
    index: u32,
    /// Its stream's queue and its sequence number there.
    queued: Option<(WeakQueue<AclFailure>, u64)>,
}

impl Record {
    /// Runs the record: keeps the failure of the stream's work before it for the event
    /// ([`rules::EVENT_SYNC_REPORTS_STREAM_FAILURE`]), then completes.
    fn run_record(&self) -> Result<(), EmuError> {
        if let Some((queue, seq)) = &self.queued {
            let before = queue.upgrade().and_then(|q| q.first_error_before(*seq));
            let mut failed = guard(&self.event.failed);
            match before {
                Some(failure) => *failed = Some((self.index, failure)),
                None if failed.as_ref().is_some_and(|(i, _)| *i == self.index) => {
                    *failed = None;
                }
                None => {}
            }
        }
        self.finish()
    }

    /// Completes the record (also when it is dropped unrun, without looking at the queue,
    /// whose lock may be held then).
    fn finish(&self) -> Result<(), EmuError> {
        self.words.complete(self.index)?;
        if !rules::enforced(rules::EVENT_EXPORT_PENDING_RECORD) {
            return Ok(());
        }
        // Under the event's lock, so an export either sees this completion in the
        // process-local words or is seen here.
        let slot = self.event.lock();
        if !Arc::ptr_eq(&slot.words, &self.words) {
            slot.words.complete(self.index)?;
        }
        Ok(())
    }
}

impl Op<AclFailure> for Record {
    fn try_now(&mut self) -> Option<Result<(), AclFailure>> {
        Some(self.run_record().map_err(AclFailure::from))
    }

    fn run(self: Box<Self>, _cancel: &Cancel) -> Result<(), AclFailure> {
        Ok(self.run_record()?)
    }

    fn queued(&mut self, queue: &Queue<AclFailure>, seq: u64) {
        let queue = queue.downgrade();
        *guard(&self.event.queued) = Some(Queued {
            index: self.index,
            queue: queue.clone(),
            seq,
        });
        self.queued = Some((queue, seq));
    }

    fn abandon(self: Box<Self>) {
        let _ = self.finish();
    }
}

/// `aclrtStreamWaitEvent`: the stream waits for the event's latest record (nothing to wait
/// for when there is none or it completed).
pub fn stream_wait(stream_handle: usize, handle: usize) -> AclResult<()> {
    stream::check(stream_handle)?;
    let words = EVENTS.get(handle)?.words();
    let target = words.latest()?;
    if words.is_complete(target)? {
        return Ok(());
    }
    if !stream::async_waits() {
        // Rule switched off: the old synchronous streams, the caller waits.
        return Ok(words.wait(target)?);
    }
    stream::submit(stream_handle, Box::new(WaitOp(words, target)))
}

/// `aclrtSynchronizeEvent` (`timeout` `None`) and `aclrtSynchronizeEventWithTimeout`:
/// blocks until the event's latest record completed, or `timeout` passed
/// (`ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`, [`rules::EVENT_SYNC_TIMEOUT`]). A record queued in
/// this process is waited for by running its stream up to it on this thread while no
/// other thread runs it ([`Queue::help_until`]), else on the event's word; no polling.
/// The failure of the stream's work before the record is returned once it completed
/// ([`rules::EVENT_SYNC_REPORTS_STREAM_FAILURE`]).
pub fn synchronize(handle: usize, timeout: Option<Duration>) -> AclResult<()> {
    let event = EVENTS.get(handle)?;
    let words = event.words();
    let target = words.latest()?;
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    if !words.is_complete(target)? {
        if let Some((queue, seq)) = event.queue_of(target) {
            queue.help_until(seq, deadline);
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if !words.wait_for(target, left)? {
            if rules::enforced(rules::EVENT_SYNC_TIMEOUT) {
                return Err(AclFailure::rule(
                    rules::EVENT_SYNC_TIMEOUT,
                    format!(
                        "the event's latest record did not complete within {:?}",
                        timeout.unwrap_or_default()
                    ),
                ));
            }
            // Rule switched off: the expiry passes for a completion.
            return Ok(());
        }
    }
    event.failure_of(target)
}

/// `aclrtQueryEventStatus`: whether the event's latest record completed (an event never
/// recorded is complete); a completed record after failed stream work reports the failure
/// ([`rules::EVENT_SYNC_REPORTS_STREAM_FAILURE`]).
pub fn query(handle: usize) -> AclResult<aclrtEventRecordedStatus> {
    let event = EVENTS.get(handle)?;
    let words = event.words();
    let target = words.latest()?;
    if !words.is_complete(target)? {
        return Ok(ACL_EVENT_RECORDED_STATUS_NOT_READY);
    }
    event.failure_of(target)?;
    Ok(ACL_EVENT_RECORDED_STATUS_COMPLETE)
}
