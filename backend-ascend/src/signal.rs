//! Signals on ACL: IPC Notify (api-facts A.8, C.6).
//!
//! A notify is already the binary semaphore devipc promises (DESIGN section 5.5):
//! `aclrtRecordNotify` sets it, `aclrtWaitAndResetNotify` waits until it is set and
//! resets it. The creator exports it under a 65-byte key (`aclrtNotifyGetExportKey`,
//! flag `ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION` = `0x02` for
//! `any_process`), grants peers with `aclrtNotifySetImportPid`, and peers open it with
//! `aclrtNotifyImportByKey` (`ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS` = `0x02` when
//! they use another device than the creator). Every process destroys its own notify
//! (`aclrtDestroyNotify`); the runtime frees it when all have.
//!
//! As for memory, a notify is exported once and its key cached: later exports reuse it,
//! and the validation of the first export is the one that counts.
//!
//! The peer-access import flag is documented, but the ACL wrapper of the open-source CANN
//! runtime (`aclrtNotifyImportByKeyImpl`, hicann/runtime `src/acl/aclrt_impl/notify.cpp`)
//! rejects every import flag above `ACL_NOTIFY_DEVICE_USE_ONLY` (1) with
//! `ACL_ERROR_INVALID_PARAM`, the documented `0x02` included. When a cross-device import
//! with the flag fails with exactly that code, devipc enables peer access with
//! `aclrtDeviceEnablePeerAccess` (the other way the IPC documentation gives) and imports
//! once more without the flag.
//!
//! The runtime takes the wait on an IPC notify only from the device that created it
//! (`Notify::CheckIpcNotifyDevId` in the runtime's `NotifyWait`: "the corresponding Notify
//! Wait must be delivered on the device that creates the IPC Notify", 107000 otherwise);
//! records may come from any device. So `wait` on an imported signal binds the creator's
//! device (the token's), not the device it was imported on; its stream must be the
//! default stream or one of that device.
//!
//! `aclrtRecordNotify` and `aclrtWaitAndResetNotify` are stream tasks. `notify` only
//! queues the record, ordered after the work already on the caller's stream. `wait`
//! queues the wait and then synchronises the stream (`aclrtSynchronizeStream`), so it
//! blocks the calling thread as [`DeviceIpc::wait`](devipc_core::DeviceIpc::wait)
//! promises, and the wait's expiry (`ACL_ERROR_RT_WAIT_TIMEOUT`, reported by the
//! synchronisation as the stream's failure) becomes [`Error::Timeout`]. The devipc
//! emulator's streams behave the same way.
//!
//! The wait's `timeout` is in seconds: the runtime documentation says so and the
//! runtime's own implementation logs it as seconds (`aclrtWaitAndResetNotifyImpl`:
//! `"timeout is [%u]s"`), while the header comment says milliseconds. The conversion is
//! [`timeout_arg`], the one place to change if a runtime ever disagrees.

use std::ffi::c_void;
use std::time::Duration;

use devipc_ascend_sys::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_WAIT_TIMEOUT};
use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_NOTIFY_DEFAULT, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};
use devipc_ascend_sys::types::{aclError, aclrtNotify};
use devipc_core::token::SignalTokenParts;
use devipc_core::{
    DeviceId, Error, ExportOptions, Mechanism, PidValidation, ProcessId, RawStream, Result,
    SignalHandle, SignalToken,
};

use crate::backend::{AscendBackend, lock};
use crate::call::{acl, check, optional};
use crate::device::DeviceScope;
use crate::external::{Key, check_written_key, key_payload};
use crate::memory::pid_args;
use crate::rollback::Undo;

/// `aclrtWaitAndResetNotify`'s `timeout` meaning "wait forever".
pub const WAIT_FOREVER: u32 = 0;

/// The `timeout` argument of `aclrtWaitAndResetNotify` for a wait of at most `timeout`:
/// whole seconds, rounded up (a wait never ends earlier than asked), at least 1 (0 would
/// mean forever) and at most `u32::MAX`. See the [module docs](self) for the unit.
pub fn timeout_arg(timeout: Duration) -> u32 {
    let secs = timeout
        .as_secs()
        .saturating_add(u64::from(timeout.subsec_nanos() > 0));
    u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
}

/// Whether a status from the notify wait (or the stream synchronisation after it) means
/// the wait timed out: `ACL_ERROR_RT_WAIT_TIMEOUT` (107019).
pub fn is_wait_timeout(code: aclError) -> bool {
    code == ACL_ERROR_RT_WAIT_TIMEOUT
}

/// What the backend keeps for a [`SignalHandle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SignalRecord {
    device: DeviceId,
    /// The device the notify was created on: where waits must be delivered.
    home: DeviceId,
    /// The `aclrtNotify`, as an address.
    notify: usize,
    /// Created here (exportable) rather than imported.
    created: bool,
    /// The key of the first export and its validation.
    exported: Option<(Key, PidValidation)>,
}

fn notify_ptr(notify: usize) -> aclrtNotify {
    notify as aclrtNotify
}

impl AscendBackend {
    pub(crate) fn create_signal_impl(&self, device: DeviceId) -> Result<SignalHandle> {
        let dev = self.check_device(device)?;
        let create = optional!(self.api, aclrtCreateNotify)?;
        optional!(self.api, aclrtDestroyNotify)?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut notify: aclrtNotify = std::ptr::null_mut();
        // SAFETY: `notify` is a valid out-pointer; ACL_NOTIFY_DEFAULT is the documented
        // host-usable flag (0).
        let code = unsafe { create(&mut notify, u64::from(ACL_NOTIFY_DEFAULT)) };
        check(&self.api, "aclrtCreateNotify", code)?;
        let id = self.signals.insert(SignalRecord {
            device,
            home: device,
            notify: notify as usize,
            created: true,
            exported: None,
        });
        Ok(SignalHandle { id, device })
    }

    /// The record behind `signal`.
    fn signal(&self, signal: &SignalHandle) -> Result<SignalRecord> {
        self.signals.get(signal.id)
    }

    pub(crate) fn export_signal_impl(
        &self,
        signal: &SignalHandle,
        opts: ExportOptions,
    ) -> Result<SignalToken> {
        let record = self.signal(signal)?;
        if !record.created {
            return Err(Error::invalid_argument(
                "an imported signal cannot be exported again; export the original",
            ));
        }
        let get_key = optional!(self.api, aclrtNotifyGetExportKey)?;
        let _exporting = lock(&self.export_lock);
        // Re-read under the lock: another thread may have exported meanwhile.
        let key = match self.signal(signal)?.exported {
            Some((key, validation)) if validation == opts.validation => key,
            Some((_, validation)) => {
                return Err(Error::invalid_argument(format!(
                    "signal {} was first exported with PID validation {validation:?}; its one \
                     key cannot also be exported with {:?}",
                    signal.id, opts.validation
                )));
            }
            None => {
                let flags = match opts.validation {
                    PidValidation::Trustlist => ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
                    PidValidation::AnyProcess => ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                };
                let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
                let mut key: Key = [0; ACL_IPC_KEY_LEN];
                // SAFETY: the notify is live (in the table; the export lock is held); `key`
                // is a writable buffer of ACL_IPC_KEY_LEN bytes, the `len` passed.
                let code = unsafe {
                    get_key(
                        notify_ptr(record.notify),
                        key.as_mut_ptr().cast(),
                        ACL_IPC_KEY_LEN,
                        flags,
                    )
                };
                check(&self.api, "aclrtNotifyGetExportKey", code)?;
                check_written_key(&key, "aclrtNotifyGetExportKey")?;
                self.signals
                    .with(signal.id, |r| r.exported = Some((key, opts.validation)))?;
                key
            }
        };
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::AscendNotify,
            emulated: self.info.source.is_emulated(),
            device: record.device,
            origin: self.origin()?,
            generation: signal.id.get(),
            payload: key.to_vec(),
        })
    }

    /// Sets the trustlist of a notify this process exported. `aclrtNotifySetImportPid`
    /// takes the notify, not the key, so the token must come from this backend: its
    /// generation is the signal's handle id, and the key must match the one exported.
    pub(crate) fn grant_signal_impl(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        self.check_device(token.device())?;
        let key = key_payload(token.payload(), token.mechanism())?;
        let not_ours = || {
            Error::invalid_argument(
                "only the process that exported a signal can grant it, and this backend did \
                 not export this token's notify (or destroyed it)",
            )
        };
        if token.origin() != self.origin()? {
            return Err(not_ours());
        }
        let (_, record) = self
            .signals
            .get_raw(token.generation())
            .map_err(|_| not_ours())?;
        if record.exported.map(|(k, _)| k) != Some(key) {
            return Err(not_ours());
        }
        let mut pids = pid_args(peers)?;
        let set_pids = optional!(self.api, aclrtNotifySetImportPid)?;
        // The runtime rejects an empty list (num must be > 0); granting nobody is a no-op.
        if pids.is_empty() {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        // SAFETY: the notify is live (in the table); `pids` is a live buffer of
        // `pids.len()` int32 values.
        let code = unsafe { set_pids(notify_ptr(record.notify), pids.as_mut_ptr(), pids.len()) };
        check(&self.api, "aclrtNotifySetImportPid", code)
    }

    pub(crate) fn import_signal_impl(
        &self,
        token: &SignalToken,
        device: DeviceId,
    ) -> Result<SignalHandle> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        let dev = self.check_device(device)?;
        self.check_device(token.device())?;
        let key = key_payload(token.payload(), token.mechanism())?;
        let import = optional!(self.api, aclrtNotifyImportByKey)?;
        let flags = if device != token.device() {
            ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS
        } else {
            ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT
        };
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut notify: aclrtNotify = std::ptr::null_mut();
        // SAFETY: `notify` is a valid out-pointer; `key` is a NUL-terminated buffer.
        let mut code = unsafe { import(&mut notify, key.as_ptr().cast(), flags) };
        if code == ACL_ERROR_INVALID_PARAM && flags != ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT {
            // Some runtimes' ACL wrapper rejects the documented peer-access flag (see the
            // module docs): enable peer access the other documented way and import
            // without the flag.
            self.enable_peer(device, token.device())?;
            // SAFETY: as above.
            code = unsafe {
                import(
                    &mut notify,
                    key.as_ptr().cast(),
                    ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
                )
            };
        }
        check(&self.api, "aclrtNotifyImportByKey", code)?;
        let id = self.signals.insert(SignalRecord {
            device,
            home: token.device(),
            notify: notify as usize,
            created: false,
            exported: None,
        });
        Ok(SignalHandle { id, device })
    }

    pub(crate) fn notify_impl(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        let record = self.signal(signal)?;
        let record_notify = optional!(self.api, aclrtRecordNotify)?;
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        // SAFETY: the notify is live (in the table); the stream is the caller's own.
        let code = unsafe { record_notify(notify_ptr(record.notify), stream.as_ptr()) };
        check(&self.api, "aclrtRecordNotify", code)
    }

    pub(crate) fn wait_impl(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let record = self.signal(signal)?;
        let wait = optional!(self.api, aclrtWaitAndResetNotify)?;
        let timed_out = || Error::Timeout {
            what: format!("waiting for signal {}", signal.id),
            after: timeout.unwrap_or_default(),
        };
        let arg = timeout.map_or(WAIT_FOREVER, timeout_arg);
        // On the creator's device: see the module docs.
        let _scope = DeviceScope::bind(&self.api, record.home.as_c_int()?)?;
        // SAFETY: the notify is live (in the table); the stream is the caller's own.
        let code = unsafe { wait(notify_ptr(record.notify), stream.as_ptr(), arg) };
        if is_wait_timeout(code) {
            return Err(timed_out());
        }
        check(&self.api, "aclrtWaitAndResetNotify", code)?;
        // SAFETY: the caller's own stream (null = default stream).
        match unsafe { acl!(self.api, aclrtSynchronizeStream(stream.as_ptr::<c_void>())) } {
            Err(e) if e.vendor_code().is_some_and(is_wait_timeout) => Err(timed_out()),
            other => other,
        }
    }

    pub(crate) fn destroy_signal_impl(&self, signal: SignalHandle) -> Result<()> {
        let record = self.signals.remove(signal.id)?;
        self.release_signal(record)
            .inspect_err(|_| self.signals.restore(signal.id, record))
    }

    /// `aclrtDestroyNotify` for a record already taken out of the table.
    pub(crate) fn release_signal(&self, record: SignalRecord) -> Result<()> {
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        Undo::DestroyNotify(record.notify).run(&self.api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_whole_seconds_and_never_mean_forever() {
        assert_eq!(timeout_arg(Duration::ZERO), 1);
        assert_eq!(timeout_arg(Duration::from_millis(1)), 1);
        assert_eq!(timeout_arg(Duration::from_secs(1)), 1);
        assert_eq!(timeout_arg(Duration::from_millis(1500)), 2);
        assert_eq!(timeout_arg(Duration::from_secs(30)), 30);
        assert_eq!(timeout_arg(Duration::MAX), u32::MAX);
        assert_ne!(timeout_arg(Duration::from_nanos(1)), WAIT_FOREVER);
    }

    #[test]
    fn only_the_wait_timeout_code_is_a_timeout() {
        assert!(is_wait_timeout(107019));
        assert!(!is_wait_timeout(0));
        assert!(!is_wait_timeout(507899));
    }
}
