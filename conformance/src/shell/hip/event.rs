//! HIP shell commands for events, IPC event handles (`hipIpc*EventHandle`) and stream
//! waits on events, with their [`Hip`] client calls. Events travel as numbers, handles as
//! hex of their 64 bytes.

use std::ffi::c_uint;
use std::sync::Arc;

use devipc_hip_sys::{HIP_IPC_HANDLE_SIZE, hipEvent_t, hipIpcEventHandle_t};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell, handle_bytes, handle_hex};
use crate::shell::{Exec, Failure, Reply, done, value};

/// An event command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventCommand {
    /// `hipEventCreateWithFlags`: the event.
    Create {
        /// The flags.
        flags: c_uint,
    },
    /// `hipEventDestroy`.
    Destroy {
        /// The event.
        event: u64,
    },
    /// `hipEventRecord` on the null stream.
    Record {
        /// The event.
        event: u64,
    },
    /// `hipEventSynchronize`.
    Sync {
        /// The event.
        event: u64,
    },
    /// `hipEventQuery` (`hipErrorNotReady` is a failure here).
    Query {
        /// The event.
        event: u64,
    },
    /// `hipStreamWaitEvent` of the null stream.
    StreamWait {
        /// The event.
        event: u64,
        /// The flags.
        flags: c_uint,
    },
    /// `hipIpcGetEventHandle`: the handle as hex.
    Handle {
        /// The event.
        event: u64,
    },
    /// `hipIpcOpenEventHandle`: the event.
    Open {
        /// The handle as hex.
        handle: String,
    },
}

impl From<EventCommand> for HipCommand {
    fn from(c: EventCommand) -> Self {
        HipCommand::Event(c)
    }
}

fn event(v: u64) -> hipEvent_t {
    v as usize as hipEvent_t
}

impl HipShell {
    /// Runs an [`EventCommand`].
    pub(super) fn event(&mut self, command: EventCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; event arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test; handles are passed by value as
        // 64-byte structs.
        unsafe {
            match command {
                EventCommand::Create { flags } => {
                    let mut e: hipEvent_t = std::ptr::null_mut();
                    self.check(
                        "hipEventCreateWithFlags",
                        (api.hipEventCreateWithFlags)(&mut e, flags),
                    )?;
                    value(e as usize as u64)
                }
                EventCommand::Destroy { event: e } => self
                    .check("hipEventDestroy", (api.hipEventDestroy)(event(e)))
                    .and_then(|()| done()),
                EventCommand::Record { event: e } => self
                    .check(
                        "hipEventRecord",
                        (api.hipEventRecord)(event(e), std::ptr::null_mut()),
                    )
                    .and_then(|()| done()),
                EventCommand::Sync { event: e } => self
                    .check("hipEventSynchronize", (api.hipEventSynchronize)(event(e)))
                    .and_then(|()| done()),
                EventCommand::Query { event: e } => self
                    .check("hipEventQuery", (api.hipEventQuery)(event(e)))
                    .and_then(|()| done()),
                EventCommand::StreamWait { event: e, flags } => self
                    .check(
                        "hipStreamWaitEvent",
                        (api.hipStreamWaitEvent)(std::ptr::null_mut(), event(e), flags),
                    )
                    .and_then(|()| done()),
                EventCommand::Handle { event: e } => {
                    let mut h = hipIpcEventHandle_t {
                        reserved: [0; HIP_IPC_HANDLE_SIZE],
                    };
                    self.check(
                        "hipIpcGetEventHandle",
                        (api.hipIpcGetEventHandle)(&mut h, event(e)),
                    )?;
                    value(handle_hex(&h.reserved))
                }
                EventCommand::Open { handle } => {
                    let h = hipIpcEventHandle_t {
                        reserved: handle_bytes(&handle)?,
                    };
                    let mut e: hipEvent_t = std::ptr::null_mut();
                    self.check(
                        "hipIpcOpenEventHandle",
                        (api.hipIpcOpenEventHandle)(&mut e, h),
                    )?;
                    value(e as usize as u64)
                }
            }
        }
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// `hipEventCreateWithFlags`.
    pub fn event_create(&mut self, flags: u32) -> Result<u64, Failure> {
        self.0.ask(EventCommand::Create { flags })
    }

    /// `hipEventDestroy`.
    pub fn event_destroy(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Destroy { event })
    }

    /// `hipEventRecord` on the null stream.
    pub fn event_record(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Record { event })
    }

    /// `hipEventSynchronize`.
    pub fn event_sync(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Sync { event })
    }

    /// `hipEventQuery` (`hipErrorNotReady` is a failure here).
    pub fn event_query(&mut self, event: u64) -> Result<(), Failure> {
        self.0.ask(EventCommand::Query { event })
    }

    /// `hipStreamWaitEvent` of the null stream on `event` with `flags`.
    pub fn stream_wait_event(&mut self, event: u64, flags: u32) -> Result<(), Failure> {
        self.0.ask(EventCommand::StreamWait { event, flags })
    }

    /// `hipIpcGetEventHandle`: the handle as hex.
    pub fn event_handle(&mut self, event: u64) -> Result<String, Failure> {
        self.0.ask(EventCommand::Handle { event })
    }

    /// `hipIpcOpenEventHandle`: the event.
    pub fn event_open(&mut self, handle: &str) -> Result<u64, Failure> {
        self.0.ask(EventCommand::Open {
            handle: handle.to_owned(),
        })
    }
}
