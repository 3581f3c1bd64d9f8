//! The HIP shell: HIP runtime calls through the raw [`HipApi`] table, one per command,
//! and [`Hip`], the typed client scenarios call (its memory calls are [`VendorClient`]'s,
//! shared with the ACL client).
//!
//! Vendor rules for HIP run here, so they check whatever fills the table: the devipc
//! emulator, or the real `libamdhip64` on an AMD machine. Pointers and events travel as
//! numbers (meaningful only in the process that made them), the 64-byte IPC handles as
//! hex. A failure carries the code and `hipGetErrorString` read right after the call.
//!
//! A command is a [`HipCommand`]: one variant per mechanism, each carrying that
//! mechanism's own enum. Each mechanism's file holds its enum, its handler and its
//! [`Hip`] client calls, named like the emulator (`emulator/src/hip/`) and the catalogue
//! (`catalogue/hip/`):
//!
//! | file | commands |
//! |---|---|
//! | `device.rs` | runtime queries, devices, PCI bus ids, UUIDs, peer access ([`DeviceCommand`]) |
//! | `memory.rs` | `hipMalloc` memory and copies, pointer attributes ([`MemoryCommand`]) |
//! | `ipc_mem.rs` | IPC memory handles ([`IpcMemCommand`]) |
//! | `event.rs` | events, IPC event handles, stream waits ([`EventCommand`]) |
//! | `vmm.rs` | virtual memory management and the descriptor passing it needs ([`VmmCommand`]) |
//! | `batch.rs` | `hipMemcpyBatchAsync` ([`BatchCommand`]) |

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

use devipc_hip_sys::{HIP_IPC_HANDLE_SIZE, HipApi, hipError_t, hipSuccess};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::shell::{Exec, Failure, Handler, Memory, Remote, Reply, VendorClient, hex, unhex};

mod batch;
mod device;
mod event;
mod ipc_mem;
mod memory;
mod vmm;

pub use batch::{BatchCommand, BatchReply, FAIL_IDX_UNTOUCHED};
pub use device::DeviceCommand;
pub use event::EventCommand;
pub use ipc_mem::IpcMemCommand;
pub use memory::MemoryCommand;
pub use vmm::{OsHandle, VmmCommand};

/// A HIP shell command: the mechanism and its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HipCommand {
    /// Runtime queries, devices and peers (`device.rs`).
    Device(DeviceCommand),
    /// Memory and copies (`memory.rs`).
    Memory(MemoryCommand),
    /// IPC memory handles (`ipc_mem.rs`).
    IpcMem(IpcMemCommand),
    /// Events (`event.rs`).
    Event(EventCommand),
    /// Virtual memory management (`vmm.rs`).
    Vmm(VmmCommand),
    /// Batched copies (`batch.rs`).
    Batch(BatchCommand),
}

/// The shell's state: the table, and the socket this shell receives file descriptors on
/// (`VmmCommand::FdListen`).
pub struct HipShell {
    api: Arc<HipApi>,
    inbox: Option<crate::shell::fd_pass::Inbox>,
}

impl std::fmt::Debug for HipShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipShell")
            .field("source", self.api.source())
            .finish()
    }
}

impl HipShell {
    /// A shell on `api`.
    pub fn new(api: Arc<HipApi>) -> HipShell {
        HipShell { api, inbox: None }
    }

    /// The text of `hipGetErrorString(code)`, right after the failing call.
    fn failure(&self, api: &str, code: hipError_t) -> Failure {
        // SAFETY: hipGetErrorString returns a static NUL-terminated string (or NULL).
        let s = unsafe { (self.api.hipGetErrorString)(code) };
        let message = if s.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL and NUL-terminated per the HIP contract.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Failure::Vendor {
            api: api.to_owned(),
            code,
            message,
        }
    }

    fn check(&self, api: &str, code: hipError_t) -> Result<(), Failure> {
        if code == hipSuccess {
            Ok(())
        } else {
            Err(self.failure(api, code))
        }
    }
}

fn ptr(v: u64) -> *mut c_void {
    v as usize as *mut c_void
}

/// A 64-byte IPC handle (memory or event) from its hex form.
fn handle_bytes(text: &str) -> Result<[c_char; HIP_IPC_HANDLE_SIZE], Failure> {
    let bytes = unhex(text)?;
    if bytes.len() != HIP_IPC_HANDLE_SIZE {
        return Err(Failure::harness(format!(
            "an IPC handle is {HIP_IPC_HANDLE_SIZE} bytes, got {}",
            bytes.len()
        )));
    }
    let mut out = [0 as c_char; HIP_IPC_HANDLE_SIZE];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = b as c_char;
    }
    Ok(out)
}

/// The hex form of a 64-byte IPC handle.
fn handle_hex(reserved: &[c_char; HIP_IPC_HANDLE_SIZE]) -> String {
    let bytes: Vec<u8> = reserved.iter().map(|&c| c as u8).collect();
    hex(&bytes)
}

impl Handler for HipShell {
    type Command = HipCommand;

    fn handle(&mut self, command: HipCommand) -> Reply {
        match command {
            HipCommand::Device(c) => self.device(c),
            HipCommand::Memory(c) => self.memory(c),
            HipCommand::IpcMem(c) => self.ipc_mem(c),
            HipCommand::Event(c) => self.event(c),
            HipCommand::Vmm(c) => self.vmm(c),
            HipCommand::Batch(c) => self.batch(c),
        }
    }
}

/// The typed client of a HIP shell, local ([`Local`](crate::shell::Local)) or remote
/// ([`Remote`]).
#[derive(Debug)]
pub struct Hip<E>(pub E);

/// A HIP shell in a peer process.
pub type HipPeer = Hip<Remote<HipCommand>>;

impl<E: Exec<HipCommand>> VendorClient for Hip<E> {
    fn memory<T: DeserializeOwned>(&mut self, command: Memory) -> Result<T, Failure> {
        self.0.ask(command)
    }
}
