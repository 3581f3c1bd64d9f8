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
//! This module holds the shell's state, the dispatch and the helpers; each command group
//! (the first word of a command, before any `.`) lives in its own file together with its
//! [`Acl`] client calls:
//!
//! | file | commands |
//! |---|---|
//! | `device.rs` | devices, peers, the process id, `aclInit`/`aclFinalize` counting |
//! | `memory.rs` | `aclrtMalloc` memory and copies |
//! | `vmm.rs` | virtual memory management and shareable handles ([`Vmm`]) |
//! | `ipc_key.rs` | IPC memory keys |
//! | `sync.rs` | notifies, streams and IPC events |

use std::ffi::{CStr, c_void};
use std::sync::Arc;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
use devipc_ascend_sys::types::aclError;

use crate::shell::{Exec, Failure, Handler, Pids, Reply, VendorClient, unhex};

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

// The command groups, declared after `opt!` so they can use it. A command goes to the
// group named by its first word (before a `.`); see `Handler::handle` below.
mod device;
mod ipc_key;
mod memory;
mod sync;
mod vmm;

pub use vmm::Vmm;

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
    fn handle(&mut self, name: &str, a: &[&str]) -> Reply {
        match name.split('.').next().unwrap_or(name) {
            "set-device"
            | "device-count"
            | "pid"
            | "pid-null"
            | "init"
            | "finalize"
            | "peer"
            | "dev"
            | "sync-device-timeout" => self.device_command(name, a),
            "malloc" | "free" | "write" | "read" | "copy" | "address-range" | "mem-info" => {
                self.memory_command(name, a)
            }
            "granularity" | "phys" | "va" | "vmm" | "mem" => self.vmm_command(name, a),
            "key" => self.key_command(name, a),
            "notify" | "stream" | "event" => self.sync_command(name, a),
            _ => Err(unknown(name)),
        }
    }
}

/// The failure for a command no group knows.
fn unknown(name: &str) -> Failure {
    Failure::harness(format!("unknown ACL shell command `{name}`"))
}

impl Drop for AclShell {
    fn drop(&mut self) {
        for _ in 0..self.inits {
            // SAFETY: balances an aclInit of this shell; no arguments.
            unsafe { (self.api.aclFinalize)() };
        }
    }
}

/// The typed client of an ACL shell, local or remote.
#[derive(Debug)]
pub struct Acl<E>(pub E);

impl<E: Exec> VendorClient for Acl<E> {
    fn run(&mut self, line: String) -> Reply {
        self.0.exec(&line)
    }
}
