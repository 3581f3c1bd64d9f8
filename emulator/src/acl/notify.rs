//! Notifies and notify IPC (api-facts A.8, C.6).
//!
//! A notify is an object with one page of shared words; word 0 is a cross-process
//! [`BinarySemaphore`]. Every process that created or imported it maps the page and keeps
//! a handle (`aclrtNotify`); the object lives until every one of them called
//! `aclrtDestroyNotify` (`ascend.notify.freed-when-all-destroyed`). The export key is
//! `devipc-emu:acl:notify:<id>` in 65 bytes ([`crate::handle`]).
//!
//! - create: `flag` `ACL_NOTIFY_DEFAULT` or `ACL_NOTIFY_DEVICE_USE_ONLY`, on the current
//!   device (107002 without one).
//! - export key: `len >= 65`; flags 0 or `DISABLE_PID_VALIDATION` = **0x02** (the memory
//!   flag 0x1 is rejected, 107000: a caller passing the memory constant would otherwise
//!   silently keep pid validation on). Only the creating process exports; exporting again
//!   returns the same key.
//! - set pid: a non-empty pid list (107000, documented), by the creating process only,
//!   after export.
//! - import: flags up to 3 (the runtime's DOWNLOAD_TO_DEV 0x1 and the documented
//!   `ENABLE_PEER_ACCESS` = **0x02**; the ACL wrapper of current CANN no longer refuses
//!   flags above 1), larger flags 107000 (`ascend.notify.import-flags-0-to-3`); 0x1 alone is
//!   the memory flag, not a notify flag (107000, `ascend.notify.flags-valid`): 0, 0x02 and
//!   0x03 import. The importer's pid must be on the
//!   trustlist unless exported with 0x02 (the creating process itself is trusted). The
//!   emulated notify is reachable from every device, so importing on another device needs
//!   no peer access (the vendor only recommends it).
//! - wait on an IPC notify (exported here, or imported) only from the device it was
//!   created on: `aclrtWaitAndResetNotify` checks the calling thread's current device
//!   (107002 without one) against it and fails with 107000 otherwise (RT-SRC
//!   `Notify::CheckIpcNotifyDevId` in `NotifyWait`: "the corresponding Notify Wait must be
//!   delivered on the device that creates the IPC Notify":
//!   `ascend.notify.wait-on-creating-device`). Records may come from any device.
//! - record / wait-and-reset are stream tasks ([`super::stream`]): the call checks its
//!   arguments, enqueues the task and returns. The record sets word 0 and wakes all
//!   waiters; the wait blocks its stream (only) until the word is set and resets it
//!   atomically, so each record releases exactly one wait
//!   (`ascend.notify.binary-semaphore`). On an idle stream a record, or a wait whose
//!   record is already there, is done before the call returns.
//! - `aclrtNotifyBatchReset` clears its notifies at once, on the host (it takes no stream),
//!   whatever is queued: a record made before it is dropped.
//! - `timeout` of `aclrtWaitAndResetNotify` is in **seconds**: RT-DOC 08 says so (since
//!   8.3.RC1; older pages said ms), the runtime's `rtNotifyWaitWithTimeOut` logs the value
//!   as `timeout=%us` and hands it unchanged to the device, and HCCL passes seconds; only
//!   the header comment says ms (api-facts A.8; the sources side by side in devipc-ascend
//!   `signal.rs`). 0 waits forever, and so does `u32::MAX` (the
//!   runtime's `rtsNotifyWaitAndReset` maps it to an untimed wait). On expiry the wait
//!   fails with `ACL_ERROR_RT_WAIT_TIMEOUT` (107019) and consumes nothing. The wait is a
//!   stream task, so its expiry surfaces as the stream's failure: the next
//!   `aclrtSynchronizeStream` of the stream returns 107019. The time counts from when the
//!   stream reaches the wait, not from the call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_NOTIFY_DEFAULT, ACL_NOTIFY_DEVICE_USE_ONLY,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};

use crate::error::EmuError;
use crate::handle::{KEY_LEN, decode_key, encode_key};
use crate::local::HandleTable;
use crate::state::futex::wait_until;
use crate::state::{
    BinarySemaphore, NewObject, ObjectFlags, ObjectId, ObjectKind, SharedMapping, Vendor,
};
use crate::stream_queue::{Cancel, Op, WaitEnd, wait_sliced};

use super::errors::{AclFailure, AclResult, check};
use super::{device, process_state, rules, stream};

/// One notify handle of this process.
#[derive(Debug)]
struct NotifyLocal {
    id: ObjectId,
    /// The device the notify was created on.
    device: u32,
    /// Whether this process created it (rather than imported it).
    created: bool,
    /// Whether it is an IPC notify: exported (by its creator) or imported.
    ipc: AtomicBool,
    /// The mapped page of words; word 0 is the semaphore.
    words: SharedMapping,
}

static NOTIFIES: HandleTable<Arc<NotifyLocal>> = HandleTable::new("aclrtNotify", 0xac53);

/// `aclrtCreateNotify`: returns the handle.
pub fn create(flag: u64) -> AclResult<usize> {
    let known = [
        u64::from(ACL_NOTIFY_DEFAULT),
        u64::from(ACL_NOTIFY_DEVICE_USE_ONLY),
    ];
    if !known.contains(&flag) {
        return Err(AclFailure::rule(
            rules::PARAM_ENUM_VALUE,
            format!("flag {flag:#x} is not ACL_NOTIFY_DEFAULT or ACL_NOTIFY_DEVICE_USE_ONLY"),
        ));
    }
    let device = device::require_current("aclrtCreateNotify")?;
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let mut spec = NewObject::notify(Vendor::Acl, device);
    spec.aux = flag;
    let created = reg.create(spec)?;
    let id = created.meta.id();
    let mapped = match created.segment.as_ref() {
        Some(segment) => segment.map().map_err(AclFailure::from),
        None => Err(EmuError::InvalidArgument("notify without words".into()).into()),
    };
    register(id, device, true, mapped).inspect_err(|_| {
        let _ = reg.release(id, me);
    })
}

fn register(
    id: ObjectId,
    device: u32,
    created: bool,
    words: AclResult<SharedMapping>,
) -> AclResult<usize> {
    let local = NotifyLocal {
        id,
        device,
        created,
        ipc: AtomicBool::new(!created),
        words: words?,
    };
    // Word 0 must exist before the handle is handed out.
    local.words.word(0)?;
    Ok(NOTIFIES.insert(Arc::new(local))?)
}

/// `aclrtDestroyNotify`.
pub fn destroy(handle: usize) -> AclResult<()> {
    let local = NOTIFIES.remove(handle)?;
    let id = local.id;
    // The page is unmapped when the last user (a wait in flight) lets go.
    drop(local);
    process_state::registry()?.release(id, process_state::me()?)?;
    Ok(())
}

/// `aclrtNotifyGetExportKey`: the key's 65 bytes.
pub fn export(handle: usize, len: usize, flags: u64) -> AclResult<[u8; KEY_LEN]> {
    if len < ACL_IPC_KEY_LEN {
        return Err(AclFailure::rule(
            rules::NOTIFY_MIN_LEN,
            format!("key buffer len {len} is shorter than {ACL_IPC_KEY_LEN}"),
        ));
    }
    check(
        flags & !ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0,
        rules::NOTIFY_FLAGS,
        || {
            format!(
                "flags {flags:#x} is not DEFAULT (0) or DISABLE_PID_VALIDATION (0x02; 0x1 is the memory flag)"
            )
        },
    )?;
    let local = NOTIFIES.get(handle)?;
    check(!local.created, rules::ONLY_EXPORTER_TRUSTS, || {
        "this notify was imported; only the process that created it exports it".to_owned()
    })?;
    process_state::registry()?.update(local.id, |m| {
        m.flags.insert(ObjectFlags::EXPORTED);
        if flags & ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION != 0 {
            m.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
        }
        Ok::<_, EmuError>(())
    })?;
    local.ipc.store(true, Ordering::Release);
    Ok(encode_key(Vendor::Acl, ObjectKind::Notify, local.id))
}

/// `aclrtNotifySetImportPid` (`pids` is non-empty).
pub fn set_pids(handle: usize, pids: &[i32]) -> AclResult<()> {
    let local = NOTIFIES.get(handle)?;
    check(!local.created, rules::ONLY_EXPORTER_TRUSTS, || {
        "this notify was imported; only the process that created it sets its trustlist".to_owned()
    })?;
    process_state::registry()?.update(local.id, |m| {
        if !m.flags.contains(ObjectFlags::EXPORTED) {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                "the notify has no export key yet (aclrtNotifyGetExportKey first)",
            ));
        }
        Ok(m.trust(pids)?)
    })
}

/// The import flags the runtime knows: its `RT_NOTIFY_FLAG_DOWNLOAD_TO_DEV` (0x1) and
/// `ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS` (0x02).
const IMPORT_FLAGS_MAX: u64 =
    ACL_NOTIFY_DEVICE_USE_ONLY as u64 | ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS;

/// `aclrtNotifyImportByKey`: returns the new handle.
pub fn import(key: &[u8], flags: u64) -> AclResult<usize> {
    check(flags > IMPORT_FLAGS_MAX, rules::NOTIFY_IMPORT_FLAGS, || {
        format!(
            "flags {flags:#x}: aclrtNotifyImportByKey takes flags up to {IMPORT_FLAGS_MAX:#x} \
                 (the runtime's DOWNLOAD_TO_DEV 0x1 | ENABLE_PEER_ACCESS 0x02)"
        )
    })?;
    check(
        flags != ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT && flags <= 1,
        rules::NOTIFY_FLAGS,
        || format!("flags {flags:#x}: 0x1 is the memory flag, not a notify import flag"),
    )?;
    device::require_current("aclrtNotifyImportByKey")?;
    let (vendor, kind, raw) = decode_key(key)?;
    if (vendor, kind) != (Vendor::Acl, ObjectKind::Notify) {
        return Err(AclFailure::rule(
            rules::HANDLE_VALID,
            format!("the key names a {vendor} {kind}, not an ACL notify"),
        ));
    }
    let reg = process_state::registry()?;
    let me = process_state::me()?;
    let id = reg.resolve(raw.raw())?;
    let device = reg.update(id, |m| {
        m.expect(Vendor::Acl, ObjectKind::Notify)?;
        if !m.flags.contains(ObjectFlags::EXPORTED) {
            return Err(AclFailure::rule(
                rules::HANDLE_VALID,
                "the notify was never exported",
            ));
        }
        let trusted = m.info().exporter == me || m.is_trusted(me.pid);
        check(!trusted, rules::NOTIFY_TRUSTLIST, || {
            format!(
                "pid {} is not on the notify's trustlist (aclrtNotifySetImportPid), and it was not exported with DISABLE_PID_VALIDATION (0x02)",
                me.pid
            )
        })?;
        m.add_holder(me)?;
        Ok::<_, AclFailure>(m.info().device)
    })?;
    let mapped = reg
        .open_segment(id)
        .and_then(|s| s.map())
        .map_err(AclFailure::from);
    register(id, device, false, mapped).inspect_err(|_| {
        let _ = reg.release(id, me);
    })
}

/// `aclrtNotifyBatchReset`: clears every notify of `handles` at once, on the host (no
/// stream task): a record made before it is dropped, one made after it counts. Every handle
/// is checked before any is cleared (107017 for one that is not a live notify of this
/// process).
pub fn batch_reset(handles: &[usize]) -> AclResult<()> {
    let notifies = handles
        .iter()
        .map(|&h| NOTIFIES.get(h))
        .collect::<Result<Vec<_>, _>>()?;
    for local in notifies {
        BinarySemaphore::new(local.words.word(0)?).reset()?;
    }
    Ok(())
}

/// The record of a notify, as a stream task.
struct Record(Arc<NotifyLocal>);

impl Record {
    fn now(&self) -> AclResult<()> {
        BinarySemaphore::new(self.0.words.word(0)?).record()?;
        Ok(())
    }
}

impl Op<AclFailure> for Record {
    fn try_now(&mut self) -> Option<AclResult<()>> {
        Some(self.now())
    }

    fn run(self: Box<Self>, _cancel: &Cancel) -> AclResult<()> {
        self.now()
    }
}

/// A wait-and-reset of a notify, as a stream task; `limit` from the call's `timeout`.
struct Wait {
    notify: Arc<NotifyLocal>,
    timeout: u32,
    limit: Option<Duration>,
    /// When the stream reached the wait (its timeout counts from there), once it did.
    started: Option<Instant>,
}

impl Wait {
    /// Consumes the record if there is one, without waiting (with the binary-semaphore rule
    /// switched off: finds it set and leaves it).
    fn take(&self) -> AclResult<bool> {
        let word = self.notify.words.word(0)?;
        if rules::enforced(rules::NOTIFY_BINARY_SEMAPHORE) {
            Ok(BinarySemaphore::new(word).try_take()?)
        } else {
            Ok(word.load(Ordering::Acquire) != 0)
        }
    }

    /// Waits up to `slice` for a record; whether it came (and was consumed).
    fn wait_slice(&self, slice: Duration) -> Result<bool, EmuError> {
        let word = self.notify.words.word(0)?;
        let waited = if rules::enforced(rules::NOTIFY_BINARY_SEMAPHORE) {
            BinarySemaphore::new(word).wait_and_reset(Some(slice))
        } else {
            // Rule switched off: wait without resetting, so one record releases every wait.
            wait_until(word, |v| v != 0, Some(slice)).map(drop)
        };
        match waited {
            Ok(()) => Ok(true),
            Err(EmuError::Timeout(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn timed_out(&self) -> AclFailure {
        AclFailure::rule(
            rules::NOTIFY_WAIT_TIMEOUT,
            format!(
                "aclrtWaitAndResetNotify: no record arrived within {} s (the timeout unit is \
                 seconds)",
                self.timeout
            ),
        )
    }

    /// Waits (on the stream's worker, or on the caller with [`rules::STREAM_ASYNC_WAITS`]
    /// switched off) until a record arrives, the limit passes or the stream is destroyed.
    fn wait(&self, cancel: Option<&Cancel>) -> AclResult<()> {
        // What is left of the limit, when a helper already began the wait.
        let limit = self
            .limit
            .map(|l| l.saturating_sub(self.started.map_or(Duration::ZERO, |s| s.elapsed())));
        match wait_sliced(cancel, limit, |slice| self.wait_slice(slice)) {
            // A stream destroyed by force drops its wait: nothing to report.
            Ok(()) | Err(WaitEnd::Cancelled) => Ok(()),
            Err(WaitEnd::TimedOut) => Err(self.timed_out()),
            Err(WaitEnd::Failed(e)) => Err(e.into()),
        }
    }
}

impl Op<AclFailure> for Wait {
    fn try_now(&mut self) -> Option<AclResult<()>> {
        match self.take() {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn run(self: Box<Self>, cancel: &Cancel) -> AclResult<()> {
        self.wait(Some(cancel))
    }

    /// On a host wait for an event recorded after it (see `stream_queue`): the same wait,
    /// given up (not consumed, resumable) at `until`.
    fn run_until(&mut self, cancel: &Cancel, until: Option<Instant>) -> Option<AclResult<()>> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let end = self.limit.and_then(|l| started.checked_add(l));
        let stop = match (end, until) {
            (Some(e), Some(u)) => Some(e.min(u)),
            (e, u) => e.or(u),
        };
        let limit = stop.map(|s| s.saturating_duration_since(Instant::now()));
        match wait_sliced(Some(cancel), limit, |slice| self.wait_slice(slice)) {
            Ok(()) | Err(WaitEnd::Cancelled) => Some(Ok(())),
            Err(WaitEnd::TimedOut) if end.is_some_and(|e| Instant::now() >= e) => {
                Some(Err(self.timed_out()))
            }
            Err(WaitEnd::TimedOut) => None,
            Err(WaitEnd::Failed(e)) => Some(Err(e.into())),
        }
    }
}

/// `aclrtRecordNotify`: enqueues the record on the stream.
pub fn record(handle: usize, stream_handle: usize) -> AclResult<()> {
    stream::check(stream_handle)?;
    let local = NOTIFIES.get(handle)?;
    local.words.word(0)?;
    stream::submit(stream_handle, Box::new(Record(local)))
}

/// `aclrtWaitAndResetNotify`; `timeout` in seconds, 0 = forever. Checks the arguments and
/// enqueues the wait on the stream (see the module docs).
pub fn wait_and_reset(handle: usize, stream_handle: usize, timeout: u32) -> AclResult<()> {
    stream::check(stream_handle)?;
    let local = NOTIFIES.get(handle)?;
    if local.ipc.load(Ordering::Acquire) {
        let current = device::require_current("aclrtWaitAndResetNotify on an IPC notify")?;
        check(
            current != local.device,
            rules::NOTIFY_WAIT_ON_CREATING_DEVICE,
            || {
                format!(
                    "the current device is {current}, but this IPC notify was created on device {}: \
                     the wait must be delivered on the device that created the IPC notify",
                    local.device
                )
            },
        )?;
    }
    local.words.word(0)?;
    let limit =
        (timeout != 0 && timeout != u32::MAX).then(|| Duration::from_secs(u64::from(timeout)));
    let wait = Wait {
        notify: local,
        timeout,
        limit,
        started: None,
    };
    if !stream::async_waits() {
        // Rule switched off: the old synchronous streams, the caller waits.
        return wait.wait(None);
    }
    stream::submit(stream_handle, Box::new(wait))
}
