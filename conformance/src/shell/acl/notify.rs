//! ACL shell commands for notifies (`aclrt*Notify*`), the IPC signal of CANN, with their
//! [`Acl`] client calls. Keys travel as hex of their 65 bytes.

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use devipc_ascend_sys::consts::{ACL_IPC_KEY_LEN, ACL_NOTIFY_DEFAULT};
use devipc_ascend_sys::types::aclrtNotify;
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclPeer, AclShell, key_buf, pid_args, ptr};
use crate::shell::{Exec, Failure, Pids, Reply, Request, answer, done, hex, value};

/// A notify command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NotifyCommand {
    /// `aclrtCreateNotify` (default flag): the notify.
    Create,
    /// `aclrtNotifyGetExportKey` with a key buffer of `len` bytes: the key as hex.
    Export {
        /// The notify.
        notify: u64,
        /// The key buffer's length.
        len: usize,
        /// The flags.
        flags: u64,
    },
    /// `aclrtNotifySetImportPid`.
    SetPid {
        /// The notify.
        notify: u64,
        /// The trustlist.
        pids: Pids,
    },
    /// `aclrtNotifyImportByKey`: the notify.
    Import {
        /// The key as hex.
        key: String,
        /// The flags.
        flags: u64,
    },
    /// `aclrtRecordNotify` on the default stream, then `aclrtSynchronizeStream`.
    Record {
        /// The notify.
        notify: u64,
    },
    /// `aclrtWaitAndResetNotify` on the default stream (`timeout` 0: forever; the unit is
    /// seconds per RT-DOC, milliseconds per the header), then `aclrtSynchronizeStream`.
    Wait {
        /// The notify.
        notify: u64,
        /// The timeout.
        timeout: u32,
    },
    /// `aclrtWaitAndResetNotify` on `stream`, the call only (the wait is a stream task:
    /// synchronise the stream to wait for it).
    WaitOn {
        /// The notify.
        notify: u64,
        /// The timeout.
        timeout: u32,
        /// The stream.
        stream: u64,
    },
    /// `aclrtDestroyNotify`.
    Destroy {
        /// The notify.
        notify: u64,
    },
}

impl From<NotifyCommand> for AclCommand {
    fn from(c: NotifyCommand) -> Self {
        AclCommand::Notify(c)
    }
}

impl AclShell {
    /// Runs a [`NotifyCommand`].
    pub(super) fn notify(&mut self, command: NotifyCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match command {
                NotifyCommand::Create => {
                    let f = opt!(api, aclrtCreateNotify);
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtCreateNotify",
                        f(&mut n, u64::from(ACL_NOTIFY_DEFAULT)),
                    )?;
                    value(n as usize as u64)
                }
                NotifyCommand::Export { notify, len, flags } => {
                    let f = opt!(api, aclrtNotifyGetExportKey);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtNotifyGetExportKey",
                        f(ptr(notify), key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    value(hex(&key))
                }
                NotifyCommand::SetPid { notify, pids } => {
                    let f = opt!(api, aclrtNotifySetImportPid);
                    let (mut pids, null) = pid_args(&pids);
                    let (p, num) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtNotifySetImportPid", f(ptr(notify), p, num))
                        .and_then(|()| done())
                }
                NotifyCommand::Import { key, flags } => {
                    let f = opt!(api, aclrtNotifyImportByKey);
                    let key = key_buf(&key)?;
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtNotifyImportByKey",
                        f(&mut n, key.as_ptr().cast(), flags),
                    )?;
                    value(n as usize as u64)
                }
                NotifyCommand::Record { notify } => {
                    // A stream task: queue it, then synchronise the default stream so the
                    // record has happened when the command returns.
                    let f = opt!(api, aclrtRecordNotify);
                    self.check("aclrtRecordNotify", f(ptr(notify), std::ptr::null_mut()))?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| done())
                }
                NotifyCommand::Wait { notify, timeout } => {
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    // A stream task too: the synchronisation blocks until the wait is over
                    // (and reports its timeout on runtimes where the call itself returns
                    // at once).
                    self.check(
                        "aclrtWaitAndResetNotify",
                        f(ptr(notify), std::ptr::null_mut(), timeout),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| done())
                }
                NotifyCommand::WaitOn {
                    notify,
                    timeout,
                    stream,
                } => {
                    // Only the call: aclrtWaitAndResetNotify on a stream, which enqueues the
                    // wait ("blocks the stream; asynchronous interface"); no synchronisation.
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    self.check(
                        "aclrtWaitAndResetNotify",
                        f(ptr(notify), ptr(stream), timeout),
                    )
                    .and_then(|()| done())
                }
                NotifyCommand::Destroy { notify } => {
                    let f = opt!(api, aclrtDestroyNotify);
                    self.check("aclrtDestroyNotify", f(ptr(notify)))
                        .and_then(|()| done())
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtCreateNotify` (default flag).
    pub fn notify_create(&mut self) -> Result<u64, Failure> {
        self.0.ask(NotifyCommand::Create)
    }

    /// `aclrtNotifyGetExportKey` with a key buffer of `len` bytes.
    pub fn notify_export(
        &mut self,
        notify: u64,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        self.0.ask(NotifyCommand::Export { notify, len, flags })
    }

    /// `aclrtNotifySetImportPid`.
    pub fn notify_set_pid(&mut self, notify: u64, pids: &Pids) -> Result<(), Failure> {
        self.0.ask(NotifyCommand::SetPid {
            notify,
            pids: pids.clone(),
        })
    }

    /// `aclrtNotifyImportByKey`: the notify.
    pub fn notify_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        self.0.ask(NotifyCommand::Import {
            key: key.to_owned(),
            flags,
        })
    }

    /// `aclrtRecordNotify` on the default stream, then `aclrtSynchronizeStream`.
    pub fn notify_record(&mut self, notify: u64) -> Result<(), Failure> {
        self.0.ask(NotifyCommand::Record { notify })
    }

    /// `aclrtWaitAndResetNotify` on the default stream (`timeout` 0: forever; the unit is
    /// seconds per RT-DOC, milliseconds per the header), then `aclrtSynchronizeStream`.
    pub fn notify_wait(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.0.ask(NotifyCommand::Wait { notify, timeout })
    }

    /// `aclrtWaitAndResetNotify` on `stream`, the call only (the wait is a stream task:
    /// synchronise the stream to wait for it).
    pub fn notify_wait_on(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
    ) -> Result<(), Failure> {
        self.0.ask(NotifyCommand::WaitOn {
            notify,
            timeout,
            stream,
        })
    }

    /// `aclrtDestroyNotify`.
    pub fn notify_destroy(&mut self, notify: u64) -> Result<(), Failure> {
        self.0.ask(NotifyCommand::Destroy { notify })
    }
}

impl AclPeer {
    /// [`Acl::notify_wait_on`] in the peer, which must answer within `limit` (the call only
    /// enqueues); a peer still in the call after `limit` is an error.
    pub fn notify_wait_on_within(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
        limit: Duration,
    ) -> Result<(), Failure> {
        self.0.send(Request::Run(
            NotifyCommand::WaitOn {
                notify,
                timeout,
                stream,
            }
            .into(),
        ))?;
        answer(self.0.reply_within(limit))
    }

    /// Starts [`NotifyCommand::Wait`] in the peer without waiting for it to return.
    pub fn notify_wait_start(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.0
            .send(Request::Run(NotifyCommand::Wait { notify, timeout }.into()))
    }

    /// Collects the result of [`Acl::notify_wait_start`].
    pub fn notify_wait_end(&mut self) -> Result<(), Failure> {
        answer(self.0.reply())
    }
}
