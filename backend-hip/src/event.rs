//! Signals on HIP: an interprocess event plus a sequence word in host shared memory.
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
//! The `DeviceIpc` signal methods are in `backend.rs`; this module holds the record the
//! backend keeps per signal and the helpers they share with the backend's `Drop`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devipc_core::{DeviceId, Error, Pinned, Result, SignalHandle};
use devipc_hip_sys::hipEvent_t;
use devipc_shm::futex::{BinarySemaphore, WaitError};
use devipc_shm::word_file::WordFile;

use crate::backend::HipBackend;
use crate::device::DeviceScope;
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
