//! Signals on HIP, the `hip-ipc-event` mechanism: an interprocess event plus a sequence
//! word in host shared memory.
//!
//! devipc promises that a signal is a binary semaphore (DESIGN section 5.5): `notify`
//! once, the peer's `wait` returns once and resets. A HIP event alone cannot do that: an
//! event never recorded returns at once from `hipEventSynchronize`. So each signal pairs
//!
//! - an event created with `hipEventInterprocess | hipEventDisableTiming` and shared with
//!   `hipIpcGetEventHandle` / `hipIpcOpenEventHandle`: it orders the device work, and
//! - a [`WordFile`] in devipc's runtime directory (`DEVIPC_RUNTIME_DIR`, default
//!   `/dev/shm/devipc-$UID`, mode 0700): its word 0 is a futex binary semaphore.
//!
//! `notify(stream)` records the event on `stream`, then sets the word and wakes the
//! waiters. `wait(stream)` blocks the thread until the word is set, resets it, then makes
//! `stream` wait for the event (`hipStreamWaitEvent`), so the waiter's later work is
//! ordered after the notifier's earlier work without a host synchronisation.
//!
//! The token payload is the 64-byte event handle followed by the word file's 32-byte
//! name. The creator unlinks the word file when it destroys the signal; the file records
//! its creator, so the words of a creator that crashed are removed by the next process
//! that creates a signal in the same runtime directory.
//!
//! The `DeviceIpc` signal methods in `backend.rs` call the methods here (create, export,
//! import, notify, wait, destroy); the record the backend keeps per signal and its
//! release are here too, shared with the backend's `Drop`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devipc_core::token::SignalTokenParts;
use devipc_core::{
    BackendKind, DeviceId, Error, Mechanism, Pinned, RawStream, Result, SignalHandle, SignalToken,
};
use devipc_hip_sys::{
    HIP_IPC_HANDLE_SIZE, hipEvent_t, hipEventDisableTiming, hipEventInterprocess,
    hipIpcEventHandle_t,
};
use devipc_shm::futex::{BinarySemaphore, WaitError};
use devipc_shm::word_file::{NAME_LEN, WordFile};

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::generation::RingEvents;
use crate::result;

/// What the backend keeps for a [`SignalHandle`].
#[derive(Debug, Clone)]
pub(crate) struct SignalRecord {
    pub(crate) device: DeviceId,
    /// The `hipEvent_t`, as an address.
    pub(crate) event: usize,
    pub(crate) word: Arc<WordFile>,
    /// Created here (unlinks the word file on destroy) rather than imported.
    pub(crate) created: bool,
    /// The ring of events for generations ([`crate::generation`]).
    pub(crate) ring: Arc<RingEvents>,
}

pub(crate) fn event_ptr(record_event: usize) -> hipEvent_t {
    record_event as hipEvent_t
}

impl HipBackend {
    /// The record of a signal, pinned: `destroy_signal` of a clone of the same handle on
    /// another thread waits until the caller dropped it, so the event stays live for the
    /// vendor calls made meanwhile.
    pub(crate) fn signal(&self, signal: &SignalHandle) -> Result<Pinned<'_, SignalRecord>> {
        self.signals.pin(signal.id)
    }

    /// `create_signal`: an interprocess event and a new word file.
    pub(crate) fn create_event(&self, device: DeviceId) -> Result<SignalHandle> {
        let dev = self.check_device(device)?;
        let dir = devipc_shm::private_dir::runtime_dir_for_devipc()?;
        // Once per process: remove the words of signals whose creator crashed.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let _ = devipc_shm::word_file::sweep_orphans(&dir);
        });
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let event = result::event_create_with_flags(
            &self.api,
            hipEventInterprocess | hipEventDisableTiming,
        )?;
        let word = match WordFile::create(&dir) {
            Ok(word) => word,
            Err(e) => {
                // SAFETY: the event was created above, never handed out, and is destroyed
                // once, here.
                let _ = unsafe { result::event_destroy(&self.api, event) };
                return Err(Error::io(
                    format!("creating a signal word in {}", dir.display()),
                    e,
                ));
            }
        };
        let ring = match self.create_ring(&word, event) {
            Ok(ring) => ring,
            Err(e) => {
                let _ = word.unlink();
                // SAFETY: the event was created above, never handed out, and is destroyed
                // once, here.
                let _ = unsafe { result::event_destroy(&self.api, event) };
                return Err(e);
            }
        };
        let id = self.signals.insert(SignalRecord {
            device,
            event: event as usize,
            word: Arc::new(word),
            created: true,
            ring: Arc::new(ring),
        });
        Ok(SignalHandle { id, device })
    }

    /// `export_signal`: the event's IPC handle and the word file's name.
    pub(crate) fn export_event(&self, signal: &SignalHandle) -> Result<SignalToken> {
        let record = self.signal(signal)?;
        let (event, word, device, created) =
            (record.event, &record.word, record.device, record.created);
        if !created {
            return Err(Error::invalid_argument(
                "an imported signal cannot be exported again; export the original",
            ));
        }
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`).
        let handle = unsafe { result::ipc_get_event_handle(&self.api, event_ptr(event)) }?;
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(word.name());
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::HipIpcEvent,
            emulated: self.info.source.is_emulated(),
            device,
            physical: self.token_physical(device),
            origin: self.origin,
            generation: signal.id.get(),
            payload,
        })
    }

    /// `import_signal`: opens the event's IPC handle and the word file.
    pub(crate) fn import_event(
        &self,
        token: &SignalToken,
        device: DeviceId,
    ) -> Result<SignalHandle> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcEvent)?;
        let dev = self.check_device(device)?;
        if token.origin() == self.origin {
            // As for memory: the runtime refuses to open its own event handle
            // (hipErrorInvalidContext); the facade shares the local signal instead.
            return Err(Error::Unsupported {
                backend: BackendKind::Hip,
                what: "importing a hip-ipc-event token in the process that exported it (use \
                       the exporter's signal; the devipc facade does)"
                    .into(),
            });
        }
        let payload = token.payload();
        if payload.len() != HIP_IPC_HANDLE_SIZE + NAME_LEN {
            return Err(Error::invalid_token(format!(
                "a hip-ipc-event payload is {} bytes, not {}",
                HIP_IPC_HANDLE_SIZE + NAME_LEN,
                payload.len()
            )));
        }
        let (handle_bytes, name) = payload.split_at(HIP_IPC_HANDLE_SIZE);
        let dir = devipc_shm::private_dir::runtime_dir_for_devipc()?;
        let word = open_word(&dir, name)?;
        if !devipc_shm::generation::words(&word)?.owned_by(handle_bytes) {
            return Err(Error::invalid_token(
                "the signal token's word file belongs to another signal than its event",
            ));
        }
        let mut handle = [0u8; HIP_IPC_HANDLE_SIZE];
        handle.copy_from_slice(handle_bytes);
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let event =
            result::ipc_open_event_handle(&self.api, hipIpcEventHandle_t::from_bytes(handle))?;
        let id = self.signals.insert(SignalRecord {
            device,
            event: event as usize,
            word: Arc::new(word),
            created: false,
            ring: Arc::default(),
        });
        Ok(SignalHandle { id, device })
    }

    /// `notify`: records the event on `stream`, then raises the word.
    pub(crate) fn notify_event(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        let record = self.signal(signal)?;
        let (event, word, device) = (record.event, &record.word, record.device);
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`); the stream
        // is the caller's, live by `RawStream`'s constructor contract.
        unsafe { result::event_record(&self.api, event_ptr(event), stream.as_ptr()) }?;
        semaphore(word)?
            .record()
            .map_err(|e| wait_error(e, "signal notify"))
    }

    /// `wait`: waits for the word on this thread, resets it, then makes `stream` wait for
    /// the event.
    pub(crate) fn wait_event(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let started = Instant::now();
        let record = self.signal(signal)?;
        let (event, device) = (record.event, record.device);
        // The word is a futex with the caller's own deadline: the wait ends within the
        // timeout plus scheduling, and the error states the time measured. A destroy of
        // the signal on another thread ends it too (it would otherwise wait for this wait).
        let deadline = timeout.and_then(|t| started.checked_add(t));
        match wait_raised(&record, deadline)? {
            Waited::Raised => {}
            Waited::TimedOut => {
                return Err(Error::timed_out(
                    format!(
                        "waiting for signal {} (limit {:?})",
                        signal.id,
                        timeout.unwrap_or_default()
                    ),
                    started,
                ));
            }
            Waited::Released => {
                return Err(Error::UnknownHandle {
                    kind: "signal",
                    id: signal.id.get(),
                });
            }
        }
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`); the stream
        // is the caller's, live by `RawStream`'s constructor contract; flags 0.
        unsafe { result::stream_wait_event(&self.api, stream.as_ptr(), event_ptr(event), 0) }
    }

    /// `destroy_signal`.
    pub(crate) fn destroy_event(&self, signal: SignalHandle) -> Result<()> {
        let record = self.signals.remove(signal.id)?;
        self.release_signal(record)
    }

    /// Destroys the event and, for a created signal, unlinks its word file.
    pub(crate) fn release_signal(&self, record: SignalRecord) -> Result<()> {
        let unlinked = if record.created {
            record.word.unlink().map_err(|e| {
                Error::io(
                    format!("removing signal word {}", record.word.path().display()),
                    e,
                )
            })
        } else {
            Ok(())
        };
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        self.release_ring(&record.ring);
        // SAFETY: the event came from create or open and is destroyed once: its record was
        // taken out of the table by the caller.
        unsafe { result::event_destroy(&self.api, event_ptr(record.event)) }?;
        unlinked
    }
}

pub(crate) fn open_word(dir: &Path, name: &[u8]) -> Result<WordFile> {
    WordFile::open(dir, name).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid_argument(
            "the signal's word file is gone: its creator destroyed the signal or runs with another DEVIPC_RUNTIME_DIR",
        ),
        std::io::ErrorKind::InvalidInput => Error::invalid_token("the signal word name is malformed"),
        _ => Error::io("opening a signal word", e),
    })
}

/// How often a wait looks whether its signal is being destroyed (by a clone of its handle,
/// on another thread): a notify still wakes it at once, through the futex.
pub(crate) const RELEASE_POLL: Duration = Duration::from_millis(50);

/// How a [`wait_raised`] ended.
pub(crate) enum Waited {
    /// The signal was raised; the wait reset it.
    Raised,
    /// `deadline` passed first.
    TimedOut,
    /// Another thread began destroying the signal: the wait gave up, so the release does
    /// not wait for it forever.
    Released,
}

/// Waits on `record`'s word until it is raised, `deadline` passes or a release of the
/// record begins, in slices of at most [`RELEASE_POLL`].
pub(crate) fn wait_raised(
    record: &Pinned<'_, SignalRecord>,
    deadline: Option<Instant>,
) -> Result<Waited> {
    let sem = semaphore(&record.word)?;
    loop {
        if record.release_requested() {
            return Ok(Waited::Released);
        }
        let slice = deadline.map_or(RELEASE_POLL, |d| until(Some(d)).min(RELEASE_POLL));
        match sem.wait_and_reset(Some(slice)) {
            Ok(()) => return Ok(Waited::Raised),
            Err(WaitError::Timeout(_)) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Waited::TimedOut);
                }
            }
            Err(other) => return Err(wait_error(other, "signal wait")),
        }
    }
}

/// The time left until `deadline` (`None`: unbounded), zero once it passed.
fn until(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::MAX, |d| {
        d.saturating_duration_since(Instant::now())
    })
}

pub(crate) fn semaphore(word: &WordFile) -> Result<BinarySemaphore<'_>> {
    word.word(0)
        .map(BinarySemaphore::new)
        .ok_or_else(|| Error::invalid_argument("signal word file has no word 0"))
}

pub(crate) fn wait_error(e: WaitError, what: &str) -> Error {
    match e {
        WaitError::Timeout(after) => Error::Timeout {
            what: what.to_owned(),
            after,
        },
        WaitError::Sys { op, source } => Error::io(format!("{what}: {op}"), source),
    }
}
