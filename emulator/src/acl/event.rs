//! Events and IPC events: `aclrtCreateEventExWithFlag`, `aclrtDestroyEvent`,
//! `aclrtRecordEvent`, `aclrtStreamWaitEvent`, `aclrtSynchronizeEvent`,
//! `aclrtQueryEventStatus`, `aclrtIpcGetEventHandle`, `aclrtIpcOpenEventHandle`
//! (api-facts A.9, C.7; RT-DOC 07 event management).
//!
//! The documented flow: process A creates an event with `ACL_EVENT_IPC`, gets its 64-byte
//! handle with `aclrtIpcGetEventHandle` and records it on a stream; process B opens the
//! handle with `aclrtIpcOpenEventHandle` (by value), makes a stream wait on it with
//! `aclrtStreamWaitEvent`, and destroys its event when done. Same device and across
//! devices.
//!
//! - create: `flag` a combination of the `ACL_EVENT_*` flags (100000 otherwise), on the
//!   current device (107002 without one).
//! - get handle: only an event whose flag is exactly `ACL_EVENT_IPC` (RT-SRC
//!   `ApiErrorDecorator::IpcGetEventHandle`: "Only IPC events are supported",
//!   `RT_ERROR_INVALID_VALUE` -> 107000: `ascend.event.ipc-handle-needs-ipc-flag`). The event
//!   becomes an object of the state directory (kind `Event`, one page of words) that other
//!   processes open; asking again gives the same handle, and so does asking in a process
//!   that opened it (the runtime's opened event keeps the handle).
//! - open: a handle of an exported ACL event (107017 otherwise), on the current device
//!   (107002 without one); the opening process holds the object until it destroys its event,
//!   so the event lives until every process that created or opened it destroyed it.
//! - record / wait / synchronize / query: the emulator's streams run synchronously (see
//!   [`super::stream`]), so a record is complete when `aclrtRecordEvent` returns, and a wait
//!   or synchronisation finds the latest record complete at once, as the runtime's IPC event
//!   does when its record finished or nothing was recorded yet (RT-SRC `IpcEvent::IpcEventWait`
//!   "record finished or wait first, return success"); the status is always
//!   `ACL_EVENT_RECORDED_STATUS_COMPLETE`. Records of an IPC event count in its shared word 0,
//!   whichever process records.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use devipc_ascend_sys::consts::{
    ACL_EVENT_CAPTURE_STREAM_PROGRESS, ACL_EVENT_DEVICE_USE_ONLY, ACL_EVENT_EXTERNAL,
    ACL_EVENT_IPC, ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE,
};
use devipc_ascend_sys::types::{ACL_EVENT_RECORDED_STATUS_COMPLETE, aclrtEventRecordedStatus};

use crate::error::EmuError;
use crate::handle::{HANDLE64_LEN, Handle64, decode_handle64, encode_handle64};
use crate::local::HandleTable;
use crate::state::{NewObject, ObjectFlags, ObjectId, ObjectKind, SharedMapping, Vendor};

use super::errors::{AclFailure, AclResult, check};
use super::{device, rules, shared, stream};

/// Every `ACL_EVENT_*` creation flag.
const KNOWN_FLAGS: u32 = ACL_EVENT_SYNC
    | ACL_EVENT_CAPTURE_STREAM_PROGRESS
    | ACL_EVENT_TIME_LINE
    | ACL_EVENT_DEVICE_USE_ONLY
    | ACL_EVENT_EXTERNAL
    | ACL_EVENT_IPC;

/// The shared part of an IPC event: its object and this process's mapping of its words.
#[derive(Debug)]
struct Shared {
    id: ObjectId,
    words: SharedMapping,
}

/// One event handle of this process.
#[derive(Debug)]
struct EventLocal {
    /// The creation flag (`ACL_EVENT_IPC` for opened events).
    flag: u32,
    /// Set once the event is exported (created here) or from the start (opened here).
    shared: Mutex<Option<Arc<Shared>>>,
}

impl EventLocal {
    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

static EVENTS: HandleTable<Arc<EventLocal>> = HandleTable::new("aclrtEvent", 0xac54);

/// `aclrtCreateEventExWithFlag`: returns the handle.
pub fn create(flag: u32) -> AclResult<usize> {
    if flag & !KNOWN_FLAGS != 0 {
        return Err(AclFailure::rule(
            rules::PARAM_ENUM_VALUE,
            format!("flag {flag:#x} is not a combination of the ACL_EVENT_* flags"),
        ));
    }
    device::require_current("aclrtCreateEventExWithFlag")?;
    Ok(EVENTS.insert(Arc::new(EventLocal {
        flag,
        shared: Mutex::new(None),
    }))?)
}

/// `aclrtDestroyEvent`: this process's use of the event ends.
pub fn destroy(handle: usize) -> AclResult<()> {
    let local = EVENTS.remove(handle)?;
    if let Some(shared) = local.shared() {
        let id = shared.id;
        drop(shared);
        drop(local);
        shared::registry()?.release(id, shared::me()?)?;
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
    let mut slot = local.shared.lock().unwrap_or_else(|p| p.into_inner());
    let id = match &*slot {
        Some(shared) => shared.id,
        None => {
            let device = device::require_current("aclrtIpcGetEventHandle")?;
            let reg = shared::registry()?;
            let me = shared::me()?;
            let mut spec = NewObject::event(Vendor::Acl, device);
            spec.aux = u64::from(local.flag);
            spec.flags.insert(ObjectFlags::EXPORTED);
            let created = reg.create(spec)?;
            let id = created.meta.id();
            let words = match created.segment.as_ref() {
                Some(segment) => segment.map().map_err(AclFailure::from),
                None => Err(EmuError::InvalidArgument("event without words".into()).into()),
            };
            let words = words.and_then(|w| {
                w.word(0)?;
                Ok(w)
            });
            match words {
                Ok(words) => *slot = Some(Arc::new(Shared { id, words })),
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
    let reg = shared::registry()?;
    let me = shared::me()?;
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
            words.word(0)?;
            Ok(EVENTS.insert(Arc::new(EventLocal {
                flag: ACL_EVENT_IPC,
                shared: Mutex::new(Some(Arc::new(Shared { id, words }))),
            }))?)
        });
    opened.inspect_err(|_| {
        let _ = reg.release(id, me);
    })
}

/// `aclrtRecordEvent`: complete when it returns (streams are synchronous); an IPC event
/// counts the record in its shared word.
pub fn record(handle: usize, stream_handle: usize) -> AclResult<()> {
    stream::check(stream_handle)?;
    let local = EVENTS.get(handle)?;
    if let Some(shared) = local.shared() {
        shared.words.word(0)?.fetch_add(1, Ordering::AcqRel);
    }
    Ok(())
}

/// `aclrtStreamWaitEvent`: the latest record is complete, so the stream goes on at once.
pub fn stream_wait(stream_handle: usize, handle: usize) -> AclResult<()> {
    stream::check(stream_handle)?;
    EVENTS.get(handle)?;
    Ok(())
}

/// `aclrtSynchronizeEvent`: returns at once (see the module docs).
pub fn synchronize(handle: usize) -> AclResult<()> {
    EVENTS.get(handle)?;
    Ok(())
}

/// `aclrtQueryEventStatus`: always complete (see the module docs).
pub fn query(handle: usize) -> AclResult<aclrtEventRecordedStatus> {
    EVENTS.get(handle)?;
    Ok(ACL_EVENT_RECORDED_STATUS_COMPLETE)
}
