//! ACL shell commands for events and IPC event handles (`aclrt*Event*`), with their
//! [`Acl`] client calls. Events travel as numbers, handles as hex of their bytes.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devipc_ascend_sys::types::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, aclrtEvent, aclrtEventRecordedStatus, aclrtIpcEventHandle,
};
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, ptr};
use crate::shell::{Exec, Failure, Reply, done, hex, unhex, value};

/// An event command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventCommand {
    /// `aclrtCreateEventExWithFlag` with `flag`: the event.
    Create {
        /// The flag.
        flag: u32,
    },
    /// `aclrtCreateEventWithFlag` with `flag`: the event.
    CreateWithFlag {
        /// The flag.
        flag: u32,
    },
    /// `aclrtIpcGetEventHandle`: the handle as hex.
    Handle {
        /// The event.
        event: u64,
    },
    /// `aclrtIpcOpenEventHandle` of a handle from [`EventCommand::Handle`]: the event.
    Open {
        /// The handle as hex.
        handle: String,
    },
    /// `aclrtRecordEvent` on the default stream, then `aclrtSynchronizeStream`.
    Record {
        /// The event.
        event: u64,
    },
    /// `aclrtStreamWaitEvent` of the default stream, then `aclrtSynchronizeStream`.
    Wait {
        /// The event.
        event: u64,
    },
    /// `aclrtRecordEvent` on `stream`, the call only (the record is a stream task).
    RecordOn {
        /// The event.
        event: u64,
        /// The stream.
        stream: u64,
    },
    /// `aclrtStreamWaitEvent` of `stream`, the call only (the wait is a stream task:
    /// synchronise the stream to wait for it).
    WaitOn {
        /// The event.
        event: u64,
        /// The stream.
        stream: u64,
    },
    /// `aclrtQueryEventStatus` until the event's latest record is complete, for at most
    /// `limit_ms`: whether it was.
    QueryUntil {
        /// The event.
        event: u64,
        /// The longest the polling goes on, in milliseconds.
        limit_ms: u64,
    },
    /// `aclrtSynchronizeEvent` (`timeout` `None`) or `aclrtSynchronizeEventWithTimeout`.
    Sync {
        /// The event.
        event: u64,
        /// The timeout in milliseconds (-1: forever).
        timeout: Option<i32>,
    },
    /// `aclrtDestroyEvent`.
    Destroy {
        /// The event.
        event: u64,
    },
}

impl From<EventCommand> for AclCommand {
    fn from(c: EventCommand) -> Self {
        AclCommand::Event(c)
    }
}

impl AclShell {
    /// Runs an [`EventCommand`].
    pub(super) fn event(&mut self, command: EventCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; events are
        // values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // handles are passed by value.
        unsafe {
            match command {
                EventCommand::Create { flag } => {
                    let f = opt!(api, aclrtCreateEventExWithFlag);
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtCreateEventExWithFlag", f(&mut e, flag))?;
                    value(e as usize as u64)
                }
                EventCommand::CreateWithFlag { flag } => {
                    let f = opt!(api, aclrtCreateEventWithFlag);
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtCreateEventWithFlag", f(&mut e, flag))?;
                    value(e as usize as u64)
                }
                EventCommand::Handle { event } => {
                    let f = opt!(api, aclrtIpcGetEventHandle);
                    let mut h = aclrtIpcEventHandle::default();
                    self.check("aclrtIpcGetEventHandle", f(ptr(event), &mut h))?;
                    let bytes: Vec<u8> = h.reserved.iter().map(|c| *c as u8).collect();
                    value(hex(&bytes))
                }
                EventCommand::Open { handle } => {
                    let f = opt!(api, aclrtIpcOpenEventHandle);
                    let bytes = unhex(&handle)?;
                    let mut h = aclrtIpcEventHandle::default();
                    for (slot, b) in h.reserved.iter_mut().zip(bytes) {
                        *slot = b as c_char;
                    }
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtIpcOpenEventHandle", f(h, &mut e))?;
                    value(e as usize as u64)
                }
                EventCommand::Record { event } => {
                    // A stream task: record on the default stream, then synchronise it.
                    let f = opt!(api, aclrtRecordEvent);
                    self.check("aclrtRecordEvent", f(ptr(event), std::ptr::null_mut()))?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| done())
                }
                EventCommand::Wait { event } => {
                    // The default stream waits for the event, then is synchronised.
                    let f = opt!(api, aclrtStreamWaitEvent);
                    self.check("aclrtStreamWaitEvent", f(std::ptr::null_mut(), ptr(event)))?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| done())
                }
                EventCommand::RecordOn { event, stream } => {
                    let f = opt!(api, aclrtRecordEvent);
                    self.check("aclrtRecordEvent", f(ptr(event), ptr(stream)))
                        .and_then(|()| done())
                }
                EventCommand::WaitOn { event, stream } => {
                    let f = opt!(api, aclrtStreamWaitEvent);
                    self.check("aclrtStreamWaitEvent", f(ptr(stream), ptr(event)))
                        .and_then(|()| done())
                }
                EventCommand::QueryUntil { event, limit_ms } => {
                    let f = opt!(api, aclrtQueryEventStatus);
                    let deadline = Instant::now() + Duration::from_millis(limit_ms);
                    loop {
                        let mut status: aclrtEventRecordedStatus = -1;
                        self.check("aclrtQueryEventStatus", f(ptr(event), &mut status))?;
                        if status == ACL_EVENT_RECORDED_STATUS_COMPLETE {
                            break value(true);
                        }
                        if Instant::now() >= deadline {
                            break value(false);
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                EventCommand::Sync {
                    event,
                    timeout: None,
                } => {
                    let f = opt!(api, aclrtSynchronizeEvent);
                    self.check("aclrtSynchronizeEvent", f(ptr(event)))
                        .and_then(|()| done())
                }
                EventCommand::Sync {
                    event,
                    timeout: Some(ms),
                } => {
                    let f = opt!(api, aclrtSynchronizeEventWithTimeout);
                    self.check("aclrtSynchronizeEventWithTimeout", f(ptr(event), ms))
                        .and_then(|()| done())
                }
                EventCommand::Destroy { event } => {
                    let f = opt!(api, aclrtDestroyEvent);
                    self.check("aclrtDestroyEvent", f(ptr(event)))
                        .and_then(|()| done())
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtCreateEventExWithFlag` with `flag`: the event.
    pub fn event_create(&mut self, flag: u32) -> Result<u64, Failure> {
        self.0.ask(EventCommand::Create { flag })
    }

    /// `aclrtCreateEventWithFlag` with `flag`: the event.
    pub fn event_create_with_flag(&mut self, flag: u32) -> Result<u64, Failure> {
        self.0.ask(EventCommand::CreateWithFlag { flag })
    }

    /// `aclrtIpcGetEventHandle`: the 64 bytes as hex.
    pub fn event_handle(&mut self, event: u64) -> Result<String, Failure> {
        self.0.ask(EventCommand::Handle { event })
    }

    /// `aclrtIpcOpenEventHandle` of a handle from [`Acl::event_handle`]: the event.
    pub fn event_open(&mut self, handle: &str) -> Result<u64, Failure> {
        self.0.ask(EventCommand::Open {
            handle: handle.to_owned(),
        })
    }

    /// `aclrtRecordEvent` on the default stream, then `aclrtSynchronizeStream`.
    pub fn event_record(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Record { event })
    }

    /// `aclrtStreamWaitEvent` of the default stream, then `aclrtSynchronizeStream`.
    pub fn event_wait(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Wait { event })
    }

    /// `aclrtRecordEvent` on `stream`, the call only.
    pub fn event_record_on(&mut self, event: u64, stream: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::RecordOn { event, stream })
    }

    /// `aclrtStreamWaitEvent` of `stream`, the call only.
    pub fn event_wait_on(&mut self, event: u64, stream: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::WaitOn { event, stream })
    }

    /// `aclrtQueryEventStatus` until the event is complete, for at most `limit`: whether it
    /// was.
    pub fn event_query_until(&mut self, event: u64, limit: Duration) -> Result<bool, Failure> {
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        self.0.ask(EventCommand::QueryUntil { event, limit_ms })
    }

    /// `aclrtSynchronizeEvent` (`timeout_ms` `None`) or
    /// `aclrtSynchronizeEventWithTimeout(timeout_ms)`.
    pub fn event_sync(&mut self, event: u64, timeout_ms: Option<i32>) -> Result<(), Failure> {
        self.0.ask(EventCommand::Sync {
            event,
            timeout: timeout_ms,
        })
    }

    /// `aclrtDestroyEvent`.
    pub fn event_destroy(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Destroy { event })
    }
}
