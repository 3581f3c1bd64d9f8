//! ACL shell commands for synchronisation across processes and streams: notifies
//! (`aclrt*Notify*`), streams and IPC events, with their [`Acl`] client calls.
//!
//! `notify.*`, `stream.*`, `event.*` (dispatched from [`super::AclShell`]'s handler).

use std::ffi::c_char;
use std::sync::Arc;

use devipc_ascend_sys::consts::{ACL_IPC_KEY_LEN, ACL_NOTIFY_DEFAULT};
use devipc_ascend_sys::types::{aclrtEvent, aclrtIpcEventHandle, aclrtNotify};

use super::{Acl, AclShell, key_buf, pid_args, ptr, unknown};
use crate::shell::{Exec, Failure, Pids, Reply, VendorClient, arg, hex, unhex, word};

impl AclShell {
    /// Runs one of this module's commands.
    pub(super) fn sync_command(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "notify.create" => {
                    let f = opt!(api, aclrtCreateNotify);
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtCreateNotify",
                        f(&mut n, u64::from(ACL_NOTIFY_DEFAULT)),
                    )?;
                    one(n as usize as u64)
                }
                "notify.export" => {
                    let f = opt!(api, aclrtNotifyGetExportKey);
                    let (n, len, flags): (u64, usize, u64) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtNotifyGetExportKey",
                        f(ptr(n), key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    Ok(vec![hex(&key)])
                }
                "notify.set-pid" => {
                    let f = opt!(api, aclrtNotifySetImportPid);
                    let n: u64 = arg(a, 0)?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, num) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtNotifySetImportPid", f(ptr(n), p, num))
                        .and_then(|()| none())
                }
                "notify.import" => {
                    let f = opt!(api, aclrtNotifyImportByKey);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let flags: u64 = arg(a, 1)?;
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtNotifyImportByKey",
                        f(&mut n, key.as_ptr().cast(), flags),
                    )?;
                    one(n as usize as u64)
                }
                "notify.record" => {
                    // A stream task: queue it, then synchronise the default stream so the
                    // record has happened when the command returns.
                    let f = opt!(api, aclrtRecordNotify);
                    self.check(
                        "aclrtRecordNotify",
                        f(ptr(arg(a, 0)?), std::ptr::null_mut()),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "notify.wait" => {
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    let (n, timeout): (u64, u32) = (arg(a, 0)?, arg(a, 1)?);
                    // A stream task too: the synchronisation blocks until the wait is over
                    // (and reports its timeout on runtimes where the call itself returns
                    // at once).
                    self.check(
                        "aclrtWaitAndResetNotify",
                        f(ptr(n), std::ptr::null_mut(), timeout),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "notify.wait-on" => {
                    // Only the call: aclrtWaitAndResetNotify on a stream, which enqueues the
                    // wait ("blocks the stream; asynchronous interface"); no synchronisation.
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    let (n, timeout, s): (u64, u32, u64) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    self.check("aclrtWaitAndResetNotify", f(ptr(n), ptr(s), timeout))
                        .and_then(|()| none())
                }
                "stream.create" => {
                    let mut s = std::ptr::null_mut();
                    self.check("aclrtCreateStream", (api.aclrtCreateStream)(&mut s))?;
                    one(s as usize as u64)
                }
                "stream.sync" => self
                    .check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "stream.destroy" => self
                    .check(
                        "aclrtDestroyStream",
                        (api.aclrtDestroyStream)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "notify.destroy" => {
                    let f = opt!(api, aclrtDestroyNotify);
                    self.check("aclrtDestroyNotify", f(ptr(arg(a, 0)?)))
                        .and_then(|()| none())
                }
                "event.create" => {
                    let f = opt!(api, aclrtCreateEventExWithFlag);
                    let flag: u32 = arg(a, 0)?;
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtCreateEventExWithFlag", f(&mut e, flag))?;
                    one(e as usize as u64)
                }
                "event.handle" => {
                    let f = opt!(api, aclrtIpcGetEventHandle);
                    let mut h = aclrtIpcEventHandle::default();
                    self.check("aclrtIpcGetEventHandle", f(ptr(arg(a, 0)?), &mut h))?;
                    let bytes: Vec<u8> = h.reserved.iter().map(|c| *c as u8).collect();
                    Ok(vec![hex(&bytes)])
                }
                "event.open" => {
                    let f = opt!(api, aclrtIpcOpenEventHandle);
                    let bytes = unhex(a.first().copied().unwrap_or(""))?;
                    let mut h = aclrtIpcEventHandle::default();
                    for (slot, b) in h.reserved.iter_mut().zip(bytes) {
                        *slot = b as c_char;
                    }
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtIpcOpenEventHandle", f(h, &mut e))?;
                    one(e as usize as u64)
                }
                "event.record" => {
                    // A stream task: record on the default stream, then synchronise it.
                    let f = opt!(api, aclrtRecordEvent);
                    self.check("aclrtRecordEvent", f(ptr(arg(a, 0)?), std::ptr::null_mut()))?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "event.wait" => {
                    // The default stream waits for the event, then is synchronised.
                    let f = opt!(api, aclrtStreamWaitEvent);
                    self.check(
                        "aclrtStreamWaitEvent",
                        f(std::ptr::null_mut(), ptr(arg(a, 0)?)),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "event.destroy" => {
                    let f = opt!(api, aclrtDestroyEvent);
                    self.check("aclrtDestroyEvent", f(ptr(arg(a, 0)?)))
                        .and_then(|()| none())
                }
                other => Err(unknown(other)),
            }
        }
    }
}

impl<E: Exec> Acl<E> {
    /// `aclrtCreateNotify` (default flag).
    pub fn notify_create(&mut self) -> Result<u64, Failure> {
        word(&self.run("notify.create".into())?, 0)
    }

    /// `aclrtNotifyGetExportKey` with a key buffer of `len` bytes.
    pub fn notify_export(
        &mut self,
        notify: u64,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        word(
            &self.run(format!("notify.export {notify} {len} {flags}"))?,
            0,
        )
    }

    /// `aclrtNotifySetImportPid`.
    pub fn notify_set_pid(&mut self, notify: u64, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("notify.set-pid {notify} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtNotifyImportByKey`: the notify.
    pub fn notify_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("notify.import {key} {flags}"))?, 0)
    }

    /// `aclrtRecordNotify` on the default stream, then `aclrtSynchronizeStream`.
    pub fn notify_record(&mut self, notify: u64) -> Result<(), Failure> {
        self.run(format!("notify.record {notify}")).map(drop)
    }

    /// `aclrtWaitAndResetNotify` on the default stream (`timeout` 0: forever; the unit is
    /// seconds per RT-DOC, milliseconds per the header), then `aclrtSynchronizeStream`.
    pub fn notify_wait(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.run(format!("notify.wait {notify} {timeout}"))
            .map(drop)
    }

    /// `aclrtWaitAndResetNotify` on `stream`, the call only (the wait is a stream task:
    /// synchronise the stream to wait for it).
    pub fn notify_wait_on(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
    ) -> Result<(), Failure> {
        self.run(format!("notify.wait-on {notify} {timeout} {stream}"))
            .map(drop)
    }

    /// `aclrtCreateStream`: the stream.
    pub fn stream_create(&mut self) -> Result<u64, Failure> {
        word(&self.run("stream.create".into())?, 0)
    }

    /// `aclrtSynchronizeStream`.
    pub fn stream_sync(&mut self, stream: u64) -> Result<(), Failure> {
        self.run(format!("stream.sync {stream}")).map(drop)
    }

    /// `aclrtDestroyStream`.
    pub fn stream_destroy(&mut self, stream: u64) -> Result<(), Failure> {
        self.run(format!("stream.destroy {stream}")).map(drop)
    }

    /// `aclrtDestroyNotify`.
    pub fn notify_destroy(&mut self, notify: u64) -> Result<(), Failure> {
        self.run(format!("notify.destroy {notify}")).map(drop)
    }

    /// `aclrtCreateEventExWithFlag` with `flag`: the event.
    pub fn event_create(&mut self, flag: u32) -> Result<u64, Failure> {
        word(&self.run(format!("event.create {flag}"))?, 0)
    }

    /// `aclrtIpcGetEventHandle`: the 64 bytes as hex.
    pub fn event_handle(&mut self, event: u64) -> Result<String, Failure> {
        word(&self.run(format!("event.handle {event}"))?, 0)
    }

    /// `aclrtIpcOpenEventHandle` of a handle from [`Acl::event_handle`]: the event.
    pub fn event_open(&mut self, handle: &str) -> Result<u64, Failure> {
        word(&self.run(format!("event.open {handle}"))?, 0)
    }

    /// `aclrtRecordEvent` on the default stream, then `aclrtSynchronizeStream`.
    pub fn event_record(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.record {event}")).map(drop)
    }

    /// `aclrtStreamWaitEvent` of the default stream, then `aclrtSynchronizeStream`.
    pub fn event_wait(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.wait {event}")).map(drop)
    }

    /// `aclrtDestroyEvent`.
    pub fn event_destroy(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.destroy {event}")).map(drop)
    }
}

impl Acl<crate::shell::Remote> {
    /// [`Acl::notify_wait_on`] in the peer, which must answer within `limit` (the call only
    /// enqueues); a peer still in the call after `limit` is an error.
    pub fn notify_wait_on_within(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
        limit: std::time::Duration,
    ) -> Result<(), Failure> {
        self.0
            .send(&format!("notify.wait-on {notify} {timeout} {stream}"))?;
        self.0.reply_within(limit).map(drop)
    }

    /// Starts `notify.wait` in the peer without waiting for it to return.
    pub fn notify_wait_start(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.0.send(&format!("notify.wait {notify} {timeout}"))
    }

    /// Collects the result of [`Acl::notify_wait_start`].
    pub fn notify_wait_end(&mut self) -> Result<(), Failure> {
        self.0.reply().map(drop)
    }
}
