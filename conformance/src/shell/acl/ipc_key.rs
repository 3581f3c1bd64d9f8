//! ACL shell commands for IPC memory keys (`aclrtIpcMem*`), with their [`Acl`] client
//! calls. Keys travel as hex of their 65 bytes.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, key_buf, pid_args, ptr};
use crate::shell::{Exec, Failure, Pids, Reply, done, hex, value};

/// An IPC key command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpcKeyCommand {
    /// `aclrtIpcMemGetExportKey` with a key buffer of `len` bytes: the key as hex.
    Export {
        /// The address.
        ptr: u64,
        /// Bytes exported.
        size: usize,
        /// The key buffer's length.
        len: usize,
        /// The flags.
        flags: u64,
    },
    /// The same export from a fresh thread that never called `aclrtSetDevice`.
    ExportNoContext {
        /// The address.
        ptr: u64,
        /// Bytes exported.
        size: usize,
    },
    /// `aclrtIpcMemSetImportPid`.
    SetPid {
        /// The key as hex.
        key: String,
        /// The trustlist.
        pids: Pids,
    },
    /// `aclrtIpcMemImportByKey`: the address.
    Import {
        /// The key as hex.
        key: String,
        /// The flags.
        flags: u64,
    },
    /// `aclrtIpcMemClose`.
    Close {
        /// The key as hex.
        key: String,
    },
}

impl From<IpcKeyCommand> for AclCommand {
    fn from(c: IpcKeyCommand) -> Self {
        AclCommand::IpcKey(c)
    }
}

impl AclShell {
    /// Runs an [`IpcKeyCommand`].
    pub(super) fn ipc_key(&mut self, command: IpcKeyCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match command {
                IpcKeyCommand::Export {
                    ptr: p,
                    size,
                    len,
                    flags,
                } => {
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtIpcMemGetExportKey",
                        f(ptr(p), size, key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    value(hex(&key))
                }
                IpcKeyCommand::ExportNoContext { ptr: p, size } => {
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let api2 = Arc::clone(&api);
                    let (code, msg) = std::thread::spawn(move || {
                        let mut key = vec![0u8; ACL_IPC_KEY_LEN];
                        let code = f(
                            ptr(p),
                            size,
                            key.as_mut_ptr().cast::<c_char>(),
                            ACL_IPC_KEY_LEN,
                            0,
                        );
                        let m = (api2.aclGetRecentErrMsg)();
                        let msg = if m.is_null() {
                            String::new()
                        } else {
                            CStr::from_ptr(m).to_string_lossy().into_owned()
                        };
                        (code, (msg, key))
                    })
                    .join()
                    .map_err(|_| Failure::harness("the export thread panicked"))?;
                    if code == ACL_SUCCESS {
                        // Destroy the key again; the rule expects no key at all.
                        let key = msg.1;
                        if let Some(close) = api.aclrtIpcMemClose {
                            close(key.as_ptr().cast());
                        }
                        return value(hex(&key));
                    }
                    Err(Failure::Vendor {
                        api: "aclrtIpcMemGetExportKey".into(),
                        code,
                        message: msg.0.trim().to_owned(),
                    })
                }
                IpcKeyCommand::SetPid { key, pids } => {
                    let f = opt!(api, aclrtIpcMemSetImportPid);
                    let key = key_buf(&key)?;
                    let (mut pids, null) = pid_args(&pids);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtIpcMemSetImportPid", f(key.as_ptr().cast(), p, n))
                        .and_then(|()| done())
                }
                IpcKeyCommand::Import { key, flags } => {
                    let f = opt!(api, aclrtIpcMemImportByKey);
                    let key = key_buf(&key)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtIpcMemImportByKey",
                        f(&mut p, key.as_ptr().cast(), flags),
                    )?;
                    value(p as usize as u64)
                }
                IpcKeyCommand::Close { key } => {
                    let f = opt!(api, aclrtIpcMemClose);
                    let key = key_buf(&key)?;
                    self.check("aclrtIpcMemClose", f(key.as_ptr().cast()))
                        .and_then(|()| done())
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtIpcMemGetExportKey` with a key buffer of `len` bytes.
    pub fn key_export(
        &mut self,
        ptr: u64,
        size: usize,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        self.0.ask(IpcKeyCommand::Export {
            ptr,
            size,
            len,
            flags,
        })
    }

    /// `aclrtIpcMemGetExportKey` from a thread without a device context.
    pub fn key_export_no_context(&mut self, ptr: u64, size: usize) -> Result<String, Failure> {
        self.0.ask(IpcKeyCommand::ExportNoContext { ptr, size })
    }

    /// `aclrtIpcMemSetImportPid`.
    pub fn key_set_pid(&mut self, key: &str, pids: &Pids) -> Result<(), Failure> {
        self.0.ask(IpcKeyCommand::SetPid {
            key: key.to_owned(),
            pids: pids.clone(),
        })
    }

    /// `aclrtIpcMemImportByKey`: the address.
    pub fn key_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        self.0.ask(IpcKeyCommand::Import {
            key: key.to_owned(),
            flags,
        })
    }

    /// `aclrtIpcMemClose`.
    pub fn key_close(&mut self, key: &str) -> Result<(), Failure> {
        self.0.ask(IpcKeyCommand::Close {
            key: key.to_owned(),
        })
    }
}
