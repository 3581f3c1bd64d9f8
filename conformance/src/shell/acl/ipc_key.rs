//! ACL shell commands for IPC memory keys (`aclrtIpcMem*`), with their [`Acl`] client
//! calls. Keys travel as hex of their 65 bytes.
//!
//! `key.*` (dispatched from [`super::AclShell`]'s handler).

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use super::{Acl, AclShell, key_buf, pid_args, ptr, unknown};
use crate::shell::{Exec, Failure, Pids, Reply, VendorClient, arg, hex, word};

impl AclShell {
    /// Runs one of this module's commands.
    pub(super) fn key_command(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "key.export" => {
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let (p, size, len, flags): (u64, usize, usize, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtIpcMemGetExportKey",
                        f(ptr(p), size, key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    Ok(vec![hex(&key)])
                }
                "key.export-no-context" => {
                    // The same export from a fresh thread that never called aclrtSetDevice.
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let (p, size): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
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
                        return Ok(vec![hex(&key)]);
                    }
                    Err(Failure::Vendor {
                        api: "aclrtIpcMemGetExportKey".into(),
                        code,
                        message: msg.0.trim().to_owned(),
                    })
                }
                "key.set-pid" => {
                    let f = opt!(api, aclrtIpcMemSetImportPid);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtIpcMemSetImportPid", f(key.as_ptr().cast(), p, n))
                        .and_then(|()| none())
                }
                "key.import" => {
                    let f = opt!(api, aclrtIpcMemImportByKey);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let flags: u64 = arg(a, 1)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtIpcMemImportByKey",
                        f(&mut p, key.as_ptr().cast(), flags),
                    )?;
                    one(p as usize as u64)
                }
                "key.close" => {
                    let f = opt!(api, aclrtIpcMemClose);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    self.check("aclrtIpcMemClose", f(key.as_ptr().cast()))
                        .and_then(|()| none())
                }
                other => Err(unknown(other)),
            }
        }
    }
}

impl<E: Exec> Acl<E> {
    /// `aclrtIpcMemGetExportKey` with a key buffer of `len` bytes.
    pub fn key_export(
        &mut self,
        ptr: u64,
        size: usize,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        word(
            &self.run(format!("key.export {ptr} {size} {len} {flags}"))?,
            0,
        )
    }

    /// `aclrtIpcMemGetExportKey` from a thread without a device context.
    pub fn key_export_no_context(&mut self, ptr: u64, size: usize) -> Result<String, Failure> {
        word(&self.run(format!("key.export-no-context {ptr} {size}"))?, 0)
    }

    /// `aclrtIpcMemSetImportPid`.
    pub fn key_set_pid(&mut self, key: &str, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("key.set-pid {key} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtIpcMemImportByKey`: the address.
    pub fn key_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("key.import {key} {flags}"))?, 0)
    }

    /// `aclrtIpcMemClose`.
    pub fn key_close(&mut self, key: &str) -> Result<(), Failure> {
        self.run(format!("key.close {key}")).map(drop)
    }
}
