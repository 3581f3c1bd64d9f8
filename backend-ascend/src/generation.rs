//! Signals with generations on Ascend: a ring of IPC events (`ACL_EVENT_IPC`, api-facts
//! A.9) next to the signal's Notify, with their handles and the generation words in a word
//! file of devipc's runtime directory ([`devipc_shm::generation`] has the protocol and why
//! it is exact).
//!
//! A Notify cannot carry generations: it is a binary flag, so two records before a wait
//! collapse into one, and the host cannot see when the device consumed one. An IPC event
//! can: `aclrtStreamWaitEvent` takes the record that is the latest when it is issued
//! (RT-SRC `IpcEvent::IpcEventWait`), on the device, without blocking the host; any process
//! holding the event may record it. So the creator makes [`RING_LEN`] events with
//! `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)` (the flag alone: it combines with no other)
//! and publishes their `aclrtIpcGetEventHandle` handles; an importer opens them
//! (`aclrtIpcOpenEventHandle`, on the device it imported the signal on) at its first post or
//! wait. `post` records the slot's event on the caller's stream (`aclrtRecordEvent`);
//! `wait_for` makes the caller's stream wait for it. An IPC event cannot be queried or
//! synchronised on the host (field notes §1a), and devipc never does: completion on the
//! host is a local event recorded after the wait (`Stream::synchronize`, a `Request`).
//!
//! Where the runtime has no IPC events (before CANN 8.x; Ascend 950DT; a host with 64 KiB
//! pages before driver 26.0.RC1: `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`, or the functions
//! missing), the signal is made without a ring and the word file says so: its Notify works
//! as before, and `post` / `wait_for` are [`Error::Unsupported`] in every process, naming
//! why. The token carries the word file's name after the Notify's key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use devipc_ascend_sys::codes::ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
use devipc_ascend_sys::consts::{ACL_EVENT_IPC, ACL_IPC_KEY_LEN};
use devipc_core::{
    BackendKind, DeviceId, Error, Mechanism, Pinned, RawStream, Result, SignalGenerations,
    SignalHandle,
};
use devipc_shm::generation::{self, HANDLE_LEN, Ring};
use devipc_shm::word_file::{NAME_LEN, WordFile};

use crate::backend::AscendBackend;
use crate::device::DeviceScope;
use crate::ipc_key::key_payload;
use crate::notify::SignalRecord;
use crate::result::{self, Key};

/// Events per signal: how many posts a producer may run ahead of its consumer's waits.
pub(crate) const RING_LEN: usize = 4;

/// A signal's ring in this process.
#[derive(Debug)]
pub(crate) struct AscendRing {
    word: WordFile,
    /// Made here (unlinks the word file on release) rather than imported.
    created: bool,
    /// The `aclrtEvent`s, as addresses, in slot order: made with the signal by its
    /// creator, opened at first use by an importer.
    events: Mutex<Option<Arc<[usize]>>>,
}

/// The rings of this backend's signals, by signal id.
pub(crate) type Rings = Mutex<HashMap<u64, Arc<AscendRing>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The key and ring name of an `ascend-notify` token: the 65-byte key, then (from signals
/// with generations) the 32-byte name of the ring's word file.
pub(crate) fn notify_payload(
    payload: &[u8],
    mechanism: Mechanism,
) -> Result<(Key, Option<[u8; NAME_LEN]>)> {
    if payload.len() == ACL_IPC_KEY_LEN + NAME_LEN {
        let (key, name) = payload.split_at(ACL_IPC_KEY_LEN);
        let name: [u8; NAME_LEN] = name
            .try_into()
            .map_err(|_| Error::invalid_token("bad ring name"))?;
        return Ok((key_payload(key, mechanism)?, Some(name)));
    }
    Ok((key_payload(payload, mechanism)?, None))
}

fn runtime_dir() -> Result<std::path::PathBuf> {
    devipc_shm::private_dir::runtime_dir_for_devipc()
}

impl AscendBackend {
    /// Makes the ring of a new signal on the current device (bound by the caller): a word
    /// file, and the events unless the runtime has no IPC events.
    pub(crate) fn create_ring(&self) -> Result<AscendRing> {
        let dir = runtime_dir()?;
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let _ = devipc_shm::word_file::sweep_orphans(&dir);
        });
        let word = WordFile::create(&dir)
            .map_err(|e| Error::io(format!("creating a signal word in {}", dir.display()), e))?;
        let ring = AscendRing {
            word,
            created: true,
            events: Mutex::new(None),
        };
        let mut events = Vec::with_capacity(RING_LEN);
        let mut handles = Vec::with_capacity(RING_LEN);
        let made = (0..RING_LEN).try_for_each(|_| {
            let event = result::create_event_ex_with_flag(&self.api, ACL_EVENT_IPC)?;
            events.push(event);
            // SAFETY: the event was just created here and is live.
            let handle = unsafe { result::ipc_get_event_handle(&self.api, event) }?;
            let mut bytes = [0u8; HANDLE_LEN];
            bytes[..result::IPC_EVENT_HANDLE_LEN].copy_from_slice(&handle);
            handles.push(bytes);
            Ok::<(), Error>(())
        });
        let gens = generation::words(&ring.word);
        match made {
            Ok(()) => {
                if !gens?.publish_ring(&handles) {
                    self.destroy_ring_events(&events);
                    let _ = ring.word.unlink();
                    return Err(Error::invalid_argument(
                        "the ring does not fit its word file",
                    ));
                }
                *lock(&ring.events) = Some(events.into());
            }
            Err(e) if no_ipc_events(&e) => {
                self.destroy_ring_events(&events);
                gens?.mark_unsupported();
            }
            Err(e) => {
                self.destroy_ring_events(&events);
                let _ = ring.word.unlink();
                return Err(e);
            }
        }
        Ok(ring)
    }

    /// The ring named in an imported signal's token, whose owner must be the token's
    /// notify `key` (its events are opened at first use).
    pub(crate) fn open_ring(&self, name: &[u8; NAME_LEN], key: &Key) -> Result<AscendRing> {
        let word = WordFile::open(&runtime_dir()?, name).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid_argument(
                "the signal's ring is gone: its creator destroyed the signal or runs with \
                 another DEVIPC_RUNTIME_DIR",
            ),
            std::io::ErrorKind::InvalidInput => Error::invalid_token("the ring name is malformed"),
            _ => Error::io("opening a signal's ring", e),
        })?;
        if !generation::words(&word)?.owned_by(key) {
            return Err(Error::invalid_token(
                "the signal token's ring belongs to another signal than its notify key",
            ));
        }
        Ok(AscendRing {
            word,
            created: false,
            events: Mutex::new(None),
        })
    }

    /// Files `ring` under signal `id`.
    pub(crate) fn attach_ring(&self, id: u64, ring: AscendRing) {
        lock(&self.rings).insert(id, Arc::new(ring));
    }

    /// The name to put in signal `id`'s token, if it has a ring.
    pub(crate) fn ring_name(&self, id: u64) -> Option<[u8; NAME_LEN]> {
        lock(&self.rings).get(&id).map(|r| *r.word.name())
    }

    /// Writes `key` (the notify's export key) as the owner of signal `id`'s ring, so an
    /// import checks that a token's key and ring belong together.
    pub(crate) fn own_ring(&self, id: u64, key: &Key) -> Result<()> {
        let Some(ring) = lock(&self.rings).get(&id).cloned() else {
            return Ok(());
        };
        if generation::words(&ring.word)?.set_owner(key) {
            Ok(())
        } else {
            Err(Error::invalid_argument(
                "the notify key does not fit the ring's word file",
            ))
        }
    }

    /// Releases signal `id`'s ring, of `device`, with the signal.
    pub(crate) fn release_ring(&self, id: u64, device: DeviceId) {
        let Some(ring) = lock(&self.rings).remove(&id) else {
            return;
        };
        if let Some(events) = lock(&ring.events).take() {
            match device
                .as_c_int()
                .and_then(|d| DeviceScope::bind(&self.api, d))
            {
                Ok(_scope) => self.destroy_ring_events(&events),
                Err(e) => log::error!("devipc: releasing a signal's ring: {e}"),
            }
        }
        if ring.created {
            let _ = ring.word.unlink();
        }
    }

    fn destroy_ring_events(&self, events: &[usize]) {
        for &event in events {
            // SAFETY: each event came from create or open and is destroyed once: the
            // ring is being released or was never handed out.
            if let Err(e) = unsafe { result::destroy_event(&self.api, event) } {
                log::error!("devipc: destroying a signal's ring event failed: {e}");
            }
        }
    }

    /// Signal `id`'s ring.
    fn ring_of(&self, id: u64) -> Result<Arc<AscendRing>> {
        lock(&self.rings).get(&id).cloned().ok_or_else(|| {
            Error::unsupported(
                BackendKind::Ascend,
                "generations of a signal whose token carries no ring (made by an older devipc)",
            )
        })
    }

    /// The ring's events in this process, opened on first use on the device the signal
    /// belongs to here.
    fn ring_events(
        &self,
        record: &Pinned<'_, SignalRecord>,
        ring: &AscendRing,
    ) -> Result<Arc<[usize]>> {
        let mut events = lock(&ring.events);
        if let Some(events) = events.as_ref() {
            return Ok(Arc::clone(events));
        }
        let handles = match generation::words(&ring.word)?
            .ring()
            .map_err(|e| Error::invalid_argument(format!("reading the signal's ring: {e}")))?
        {
            Ring::Ready(handles) => handles,
            Ring::Unsupported | Ring::Absent => {
                return Err(Error::unsupported(
                    BackendKind::Ascend,
                    "generations: the signal's creator could make no IPC events \
                     (aclrtCreateEventExWithFlag(ACL_EVENT_IPC) is missing or answered \
                     feature-not-supported: CANN before 8.x, Ascend 950DT, or 64 KiB host \
                     pages before driver 26.0.RC1)",
                ));
            }
        };
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        let mut opened = Vec::with_capacity(handles.len());
        for bytes in &handles {
            let mut handle = [0u8; result::IPC_EVENT_HANDLE_LEN];
            handle.copy_from_slice(&bytes[..result::IPC_EVENT_HANDLE_LEN]);
            match result::ipc_open_event_handle(&self.api, &handle) {
                Ok(event) => opened.push(event),
                Err(e) => {
                    self.destroy_ring_events(&opened);
                    return Err(e);
                }
            }
        }
        let opened: Arc<[usize]> = opened.into();
        *events = Some(Arc::clone(&opened));
        Ok(opened)
    }

    /// `post_signal`.
    pub(crate) fn post_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<u64> {
        let record = self.signal(signal)?;
        let ring = self.ring_of(signal.id.get())?;
        let events = self.ring_events(&record, &ring)?;
        let released = || record.release_requested();
        let gens = generation::words(&ring.word)?;
        generation::post(
            &gens,
            events.len(),
            signal.id.get(),
            timeout,
            released,
            |slot| {
                let event = ring_event(&events, slot)?;
                self.on_device(record.device, || {
                    // SAFETY: the event is the signal's ring event (live while the record is
                    // pinned: the ring is released with it); the stream is the caller's, live
                    // by `RawStream`'s contract.
                    unsafe { result::record_event(&self.api, event, stream.as_raw()) }
                })
            },
        )
    }

    /// `wait_signal_generation`.
    pub(crate) fn wait_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        generation: u64,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let record = self.signal(signal)?;
        let ring = self.ring_of(signal.id.get())?;
        let events = self.ring_events(&record, &ring)?;
        let gens = generation::words(&ring.word)?;
        let released = || record.release_requested();
        let k = events.len();
        generation::wait(
            &gens,
            k,
            signal.id.get(),
            generation,
            timeout,
            released,
            |slot, _| {
                let event = ring_event(&events, slot)?;
                self.on_device(record.device, || {
                    // SAFETY: as in `post_generation`. The runtime's stream wait on an IPC
                    // event is a stream task: it never blocks this thread.
                    unsafe { result::stream_wait_event(&self.api, stream.as_raw(), event) }
                })
            },
        )
    }

    /// `signal_generations`.
    pub(crate) fn generations_of(&self, signal: &SignalHandle) -> Result<SignalGenerations> {
        let _record = self.signal(signal)?;
        generation::generations(&self.ring_of(signal.id.get())?.word)
    }

    fn on_device<T>(&self, device: DeviceId, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        f()
    }
}

/// Whether `e` says the runtime has no IPC events (rather than that something failed).
fn no_ipc_events(e: &Error) -> bool {
    matches!(e, Error::Unsupported { .. })
        || e.vendor_code() == Some(ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
}

/// The event of ring slot `slot` (a slot past the events opened is corrupt words, never an
/// index out of range).
fn ring_event(events: &[usize], slot: usize) -> Result<usize> {
    events.get(slot).copied().ok_or_else(|| {
        Error::invalid_argument("the signal's generation words name a slot past its ring")
    })
}
