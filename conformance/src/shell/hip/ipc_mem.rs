//! HIP shell commands for IPC memory handles (`hipIpc*MemHandle`), with their [`Hip`]
//! client calls. Handles travel as hex of their 64 bytes.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use devipc_hip_sys::{HIP_IPC_HANDLE_SIZE, hipIpcMemHandle_t};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell, handle_bytes, handle_hex, ptr};
use crate::shell::{Exec, Failure, Reply, done, value};

/// An IPC memory command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpcMemCommand {
    /// `hipIpcGetMemHandle`: the handle as hex.
    Handle {
        /// The address.
        ptr: u64,
    },
    /// `hipIpcGetMemHandle(NULL, ptr)`.
    HandleNull {
        /// The address.
        ptr: u64,
    },
    /// `hipIpcOpenMemHandle`: the address.
    Open {
        /// The handle as hex.
        handle: String,
        /// The flags.
        flags: c_uint,
    },
    /// `hipIpcCloseMemHandle`.
    Close {
        /// The address the open gave.
        ptr: u64,
    },
}

impl From<IpcMemCommand> for HipCommand {
    fn from(c: IpcMemCommand) -> Self {
        HipCommand::IpcMem(c)
    }
}

impl HipShell {
    /// Runs an [`IpcMemCommand`].
    pub(super) fn ipc_mem(&mut self, command: IpcMemCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer
        // arguments are values this shell or its peer got from the runtime, or deliberately
        // invalid values whose rejection is the rule under test; handles are passed by
        // value as 64-byte structs.
        unsafe {
            match command {
                IpcMemCommand::Handle { ptr: p } => {
                    let mut h = hipIpcMemHandle_t {
                        reserved: [0; HIP_IPC_HANDLE_SIZE],
                    };
                    self.check(
                        "hipIpcGetMemHandle",
                        (api.hipIpcGetMemHandle)(&mut h, ptr(p)),
                    )?;
                    value(handle_hex(&h.reserved))
                }
                IpcMemCommand::HandleNull { ptr: p } => self
                    .check(
                        "hipIpcGetMemHandle",
                        (api.hipIpcGetMemHandle)(std::ptr::null_mut(), ptr(p)),
                    )
                    .and_then(|()| done()),
                IpcMemCommand::Open { handle, flags } => {
                    let h = hipIpcMemHandle_t {
                        reserved: handle_bytes(&handle)?,
                    };
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "hipIpcOpenMemHandle",
                        (api.hipIpcOpenMemHandle)(&mut p, h, flags),
                    )?;
                    value(p as usize as u64)
                }
                IpcMemCommand::Close { ptr: p } => self
                    .check("hipIpcCloseMemHandle", (api.hipIpcCloseMemHandle)(ptr(p)))
                    .and_then(|()| done()),
            }
        }
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// `hipIpcGetMemHandle`: the handle as hex.
    pub fn mem_handle(&mut self, ptr: u64) -> Result<String, Failure> {
        self.0.ask(IpcMemCommand::Handle { ptr })
    }

    /// `hipIpcGetMemHandle(NULL, ptr)`.
    pub fn mem_handle_null(&mut self, ptr: u64) -> Result<(), Failure> {
        self.0.ask(IpcMemCommand::HandleNull { ptr })
    }

    /// `hipIpcOpenMemHandle`: the address.
    pub fn mem_open(&mut self, handle: &str, flags: u32) -> Result<u64, Failure> {
        self.0.ask(IpcMemCommand::Open {
            handle: handle.to_owned(),
            flags,
        })
    }

    /// `hipIpcCloseMemHandle`.
    pub fn mem_close(&mut self, ptr: u64) -> Result<(), Failure> {
        self.0.ask(IpcMemCommand::Close { ptr })
    }
}
