//! The ACL shell: ACL runtime calls through the raw [`AclApi`] table, one per command,
//! and [`Acl`], the typed client scenarios call.
//!
//! Vendor rules for Ascend run here, so they check whatever fills the table: the devipc
//! emulator, or the real `libascendcl.so` on an Ascend machine. The shell keeps no
//! objects of its own: handles, addresses and notifies travel as their numeric values
//! (meaningful only in the process that made them), keys as hex of their 65 bytes. Each
//! command is one vendor call (or a documented sequence, such as reserve + map + set
//! access), and a failure carries the code and `aclGetRecentErrMsg`.
//!
//! A command is an [`AclCommand`]: one variant per mechanism, each carrying that
//! mechanism's own enum. Each mechanism's file holds its enum, its handler and its
//! [`Acl`] client calls, named like the emulator (`emulator/src/acl/`) and the catalogue
//! (`catalogue/ascend/`):
//!
//! | file | commands |
//! |---|---|
//! | `device.rs` | devices, peers, the process id, `aclInit`/`aclFinalize` counting ([`DeviceCommand`]) |
//! | `memory.rs` | `aclrtMalloc` memory and copies ([`MemoryCommand`]) |
//! | `vmm.rs` | virtual memory management and shareable handles ([`VmmCommand`], [`Vmm`]) |
//! | `ipc_key.rs` | IPC memory keys ([`IpcKeyCommand`]) |
//! | `notify.rs` | notifies ([`NotifyCommand`]) |
//! | `stream.rs` | streams ([`StreamCommand`]) |
//! | `event.rs` | events and IPC event handles ([`EventCommand`]) |

use std::ffi::{CStr, c_void};
use std::sync::Arc;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
use devipc_ascend_sys::types::aclError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::shell::{Exec, Failure, Handler, Memory, Pids, Remote, Reply, VendorClient, unhex};

/// An ACL shell command: the mechanism and its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AclCommand {
    /// Devices, peers, init counting (`device.rs`).
    Device(DeviceCommand),
    /// Memory and copies (`memory.rs`).
    Memory(MemoryCommand),
    /// Virtual memory management (`vmm.rs`).
    Vmm(VmmCommand),
    /// IPC memory keys (`ipc_key.rs`).
    IpcKey(IpcKeyCommand),
    /// Notifies (`notify.rs`).
    Notify(NotifyCommand),
    /// Streams (`stream.rs`).
    Stream(StreamCommand),
    /// Events (`event.rs`).
    Event(EventCommand),
    /// Batched copies (`batch.rs`).
    Batch(BatchCommand),
}

/// The shell's state: the table and how many `aclInit` calls of this shell are not yet
/// balanced by an `aclFinalize` (the runtime counts them, api-facts A.3).
pub struct AclShell {
    api: Arc<AclApi>,
    inits: u32,
}

impl std::fmt::Debug for AclShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclShell")
            .field("source", self.api.source())
            .finish()
    }
}

/// The optional function `$name` of the table, or a harness failure naming it.
macro_rules! opt {
    ($api:expr, $name:ident) => {
        $api.$name.ok_or_else(|| {
            Failure::harness(concat!(
                "this runtime lacks ",
                stringify!($name),
                " (too old for the rule)"
            ))
        })?
    };
}

// The mechanisms, declared after `opt!` so they can use it.
mod batch;
mod device;
mod event;
mod ipc_key;
mod memory;
mod notify;
mod stream;
mod vmm;

pub use batch::{
    BatchAttr, BatchCommand, BatchDescriptor, BatchReply, FAIL_INDEX_UNTOUCHED, Operand,
};
pub use device::{DeviceCommand, IdTranslation};
pub use event::EventCommand;
pub use ipc_key::IpcKeyCommand;
pub use memory::MemoryCommand;
pub use notify::NotifyCommand;
pub use stream::StreamCommand;
pub use vmm::{Vmm, VmmCommand};

impl AclShell {
    /// A shell on `api`; calls `aclInit` (accepting `ACL_ERROR_REPEAT_INITIALIZE`).
    pub fn new(api: Arc<AclApi>) -> Result<AclShell, Failure> {
        let mut shell = AclShell { api, inits: 0 };
        // SAFETY: a NULL config path is documented as "no configuration".
        let code = unsafe { (shell.api.aclInit)(std::ptr::null()) };
        if code != ACL_SUCCESS && code != ACL_ERROR_REPEAT_INITIALIZE {
            return Err(shell.failure("aclInit", code));
        }
        shell.inits = 1;
        Ok(shell)
    }

    /// A vendor failure with the runtime's last message.
    fn failure(&self, api: &str, code: aclError) -> Failure {
        // SAFETY: aclGetRecentErrMsg takes no arguments and returns NULL or a string the
        // runtime owns, valid until the next ACL call on this thread (copied at once).
        let msg = unsafe { (self.api.aclGetRecentErrMsg)() };
        let message = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL, NUL-terminated (the runtime's contract).
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .trim()
                .to_owned()
        };
        Failure::Vendor {
            api: api.to_owned(),
            code,
            message,
        }
    }

    fn check(&self, api: &str, code: aclError) -> Result<(), Failure> {
        if code == ACL_SUCCESS {
            Ok(())
        } else {
            Err(self.failure(api, code))
        }
    }
}

fn ptr(v: u64) -> *mut c_void {
    v as usize as *mut c_void
}

fn pid_args(pids: &Pids) -> (Vec<i32>, bool) {
    match pids {
        Pids::Null => (Vec::new(), true),
        Pids::List(l) => (l.clone(), false),
    }
}

/// A 65-byte key buffer from its hex form.
fn key_buf(text: &str) -> Result<Vec<u8>, Failure> {
    let mut key = unhex(text)?;
    if key.len() < ACL_IPC_KEY_LEN {
        key.resize(ACL_IPC_KEY_LEN, 0);
    }
    Ok(key)
}

impl Handler for AclShell {
    type Command = AclCommand;

    fn handle(&mut self, command: AclCommand) -> Reply {
        match command {
            AclCommand::Device(c) => self.device(c),
            AclCommand::Memory(c) => self.memory(c),
            AclCommand::Vmm(c) => self.vmm(c),
            AclCommand::IpcKey(c) => self.ipc_key(c),
            AclCommand::Notify(c) => self.notify(c),
            AclCommand::Stream(c) => self.stream(c),
            AclCommand::Event(c) => self.event(c),
            AclCommand::Batch(c) => self.batch(c),
        }
    }
}

impl Drop for AclShell {
    fn drop(&mut self) {
        for _ in 0..self.inits {
            // SAFETY: balances an aclInit of this shell; no arguments.
            unsafe { (self.api.aclFinalize)() };
        }
    }
}

/// The typed client of an ACL shell, local ([`Local`](crate::shell::Local)) or remote
/// ([`Remote`]).
#[derive(Debug)]
pub struct Acl<E>(pub E);

/// An ACL shell in a peer process.
pub type AclPeer = Acl<Remote<AclCommand>>;

impl<E: Exec<AclCommand>> VendorClient for Acl<E> {
    fn memory<T: DeserializeOwned>(&mut self, command: Memory) -> Result<T, Failure> {
        self.0.ask(command)
    }
}
