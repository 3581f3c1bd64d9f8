//! Signals with generations on HIP: a ring of interprocess events whose handles and
//! generation words live in the signal's word file ([`devipc_shm::generation`] has the
//! protocol and why it is exact).
//!
//! The creator makes [`RING_LEN`] events (`hipEventInterprocess | hipEventDisableTiming`)
//! with the signal and publishes their `hipIpcGetEventHandle` handles in the word file; a
//! process that imported the signal opens them (`hipIpcOpenEventHandle`) at its first post
//! or wait, so a signal used only as a binary semaphore never opens them. `post` records
//! the slot's event on the caller's stream (`hipEventRecord`); `wait_for` makes the
//! caller's stream wait for it (`hipStreamWaitEvent`): on the device from ROCm 7.0, on the
//! host before (the runtime's IPC-event stream wait blocks the calling thread until the
//! record completed there, without a limit). So before 7.0 devipc first waits for the
//! record with `hipEventQuery`, backing off to 1 ms, within the caller's deadline and a
//! destroy on another thread: the only poll of the signals, where the vendor's own wait
//! would not end when the producer died with its record pending.
//!
//! Both vendor facts used are the ones the binary signal already relies on: a stream wait
//! takes the record that is the latest when it is issued, and any process holding an IPC
//! event may record it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use devipc_core::{Error, Pinned, RawStream, Result, SignalGenerations, SignalHandle, backoff};
use devipc_hip_sys::{
    HIP_IPC_HANDLE_SIZE, hipEvent_t, hipEventDisableTiming, hipEventInterprocess,
    hipIpcEventHandle_t,
};
use devipc_shm::generation::{self, GenerationError, Ring};
use devipc_shm::word_file::WordFile;

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::event::{SignalRecord, event_ptr};
use crate::result;

/// Events per signal: how many posts a producer may run ahead of its consumer's waits.
pub(crate) const RING_LEN: usize = 4;

/// A signal's ring events in this process: made with the signal by its creator, opened
/// at first use by an importer. Destroyed with the signal's record.
#[derive(Debug, Default)]
pub(crate) struct RingEvents {
    /// The `hipEvent_t`s, as addresses, in slot order.
    events: Mutex<Option<Arc<[usize]>>>,
}

impl RingEvents {
    fn lock(&self) -> MutexGuard<'_, Option<Arc<[usize]>>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ring_error(e: GenerationError) -> Error {
    Error::invalid_argument(format!("reading the signal's ring: {e}"))
}

impl HipBackend {
    /// Makes the ring of a new signal on the current device (bound by the caller) and
    /// publishes its handles in `word`, whose owner becomes the handle of the signal's own
    /// event (`owner`: an import checks the token's against it). Destroys what it made on
    /// failure.
    pub(crate) fn create_ring(&self, word: &WordFile, owner: hipEvent_t) -> Result<RingEvents> {
        // SAFETY: the signal's event, just created by the caller and live.
        let handle = unsafe { result::ipc_get_event_handle(&self.api, owner) }?;
        if !generation::words(word)?.set_owner(&handle.to_bytes()) {
            return Err(Error::invalid_argument(
                "the signal's owner does not fit its word file",
            ));
        }
        let mut events = Vec::with_capacity(RING_LEN);
        let mut handles = Vec::with_capacity(RING_LEN);
        let made = (0..RING_LEN).try_for_each(|_| {
            let event = result::event_create_with_flags(
                &self.api,
                hipEventInterprocess | hipEventDisableTiming,
            )?;
            events.push(event as usize);
            // SAFETY: the event was just created here and is live.
            let handle = unsafe { result::ipc_get_event_handle(&self.api, event) }?;
            let mut bytes = [0u8; generation::HANDLE_LEN];
            bytes[..HIP_IPC_HANDLE_SIZE].copy_from_slice(&handle.to_bytes());
            handles.push(bytes);
            Ok::<(), Error>(())
        });
        let published = made.and_then(|()| {
            generation::words(word)?
                .publish_ring(&handles)
                .then_some(())
                .ok_or_else(|| {
                    Error::invalid_argument("the signal's ring does not fit its word file")
                })
        });
        if let Err(e) = published {
            self.destroy_ring_events(&events);
            return Err(e);
        }
        Ok(RingEvents {
            events: Mutex::new(Some(events.into())),
        })
    }

    /// Destroys ring events (the device bound by the caller); failures are logged, as the
    /// signal is going away.
    fn destroy_ring_events(&self, events: &[usize]) {
        for &event in events {
            // SAFETY: each event came from create or open, and is destroyed once: the ring
            // is being released or was never handed out.
            if let Err(e) = unsafe { result::event_destroy(&self.api, event_ptr(event)) } {
                log::error!("devipc: destroying a signal's ring event failed: {e}");
            }
        }
    }

    /// Releases `ring` with its signal (the device bound by the caller).
    pub(crate) fn release_ring(&self, ring: &RingEvents) {
        if let Some(events) = ring.lock().take() {
            self.destroy_ring_events(&events);
        }
    }

    /// The ring's events in this process, opening an imported signal's on first use (on
    /// the device it was imported on).
    fn ring_events(&self, record: &SignalRecord, ring: &Arc<RingEvents>) -> Result<Arc<[usize]>> {
        let mut events = ring.lock();
        if let Some(events) = events.as_ref() {
            return Ok(Arc::clone(events));
        }
        let handles = match generation::words(&record.word)?
            .ring()
            .map_err(ring_error)?
        {
            Ring::Ready(handles) => handles,
            Ring::Absent | Ring::Unsupported => {
                return Err(Error::invalid_argument(
                    "the signal's creator made no ring of events: it was created by an older \
                     devipc, without generations",
                ));
            }
        };
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        let mut opened = Vec::with_capacity(handles.len());
        for bytes in &handles {
            let mut handle = [0u8; HIP_IPC_HANDLE_SIZE];
            handle.copy_from_slice(&bytes[..HIP_IPC_HANDLE_SIZE]);
            match result::ipc_open_event_handle(&self.api, hipIpcEventHandle_t::from_bytes(handle))
            {
                Ok(event) => opened.push(event as usize),
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

    fn ring_of(&self, record: &Pinned<'_, SignalRecord>) -> Result<Arc<[usize]>> {
        self.ring_events(record, &record.ring)
    }

    /// `post_signal`.
    pub(crate) fn post_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<u64> {
        let record = self.signal(signal)?;
        let events = self.ring_of(&record)?;
        let released = || record.release_requested();
        let gens = generation::words(&record.word)?;
        generation::post(
            &gens,
            events.len(),
            signal.id.get(),
            timeout,
            released,
            |slot| {
                let event = ring_event(&events, slot)?;
                let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
                // SAFETY: the event is the signal's ring event (live while the record is
                // pinned); the stream is the caller's, live by `RawStream`'s contract.
                unsafe { result::event_record(&self.api, event, stream.as_ptr()) }
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
        let started = Instant::now();
        let record = self.signal(signal)?;
        let events = self.ring_of(&record)?;
        let gens = generation::words(&record.word)?;
        let released = || record.release_requested();
        let k = events.len();
        generation::wait(
            &gens,
            k,
            signal.id.get(),
            generation,
            timeout,
            released,
            |slot, until| {
                let event = ring_event(&events, slot)?;
                let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
                if self.ipc_stream_wait_blocks_host() {
                    // Before ROCm 7.0 the vendor's stream wait blocks this thread until the
                    // record completed, without a limit; wait for it here first, within the
                    // caller's deadline and a destroy on another thread.
                    let what = || {
                        format!(
                            "waiting for generation {generation} of signal {}",
                            signal.id
                        )
                    };
                    self.wait_recorded(signal.id.get(), event, started, until, &released, &what)?;
                }
                // SAFETY: the event is the signal's ring event (live while the record is
                // pinned); the stream is the caller's, live by `RawStream`'s contract; flags 0.
                unsafe { result::stream_wait_event(&self.api, stream.as_ptr(), event, 0) }
            },
        )
    }

    /// Whether this runtime's `hipStreamWaitEvent` on an IPC event blocks the calling
    /// thread until the record completed (CLR before 7.0).
    fn ipc_stream_wait_blocks_host(&self) -> bool {
        self.info.runtime_version.is_some_and(|v| v.major < 7)
    }

    /// Asks `hipEventQuery` until the event's latest record completed, `until` passed
    /// (`Error::Timeout`, measured from `started`) or `released()` (`UnknownHandle`):
    /// the only poll of the signals, where the vendor's wait has no limit (CLR before 7.0).
    fn wait_recorded(
        &self,
        signal: u64,
        event: hipEvent_t,
        started: Instant,
        until: Option<Instant>,
        released: &impl Fn() -> bool,
        what: &impl Fn() -> String,
    ) -> Result<()> {
        loop {
            if released() {
                return Err(Error::UnknownHandle {
                    kind: "signal",
                    id: signal,
                });
            }
            let now = Instant::now();
            let slice = match until {
                Some(u) if now >= u => return Err(Error::timed_out(what(), started)),
                Some(u) => (u - now).min(generation::RELEASE_POLL),
                None => generation::RELEASE_POLL,
            };
            // SAFETY: the event is the signal's ring event, live while the caller's record
            // is pinned.
            let polled = backoff::wait_by_query(slice, what, || unsafe {
                result::event_query(&self.api, event)
            });
            match polled {
                Ok(()) => return Ok(()),
                Err(Error::Timeout { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// `signal_generations`.
    pub(crate) fn generations_of(&self, signal: &SignalHandle) -> Result<SignalGenerations> {
        generation::generations(&self.signal(signal)?.word)
    }
}

/// The event of ring slot `slot` (the words name a slot of the ring length the events were
/// opened with; a slot past them is corrupt words, never an index out of range).
fn ring_event(events: &[usize], slot: usize) -> Result<hipEvent_t> {
    events.get(slot).map(|&e| event_ptr(e)).ok_or_else(|| {
        Error::invalid_argument("the signal's generation words name a slot past its ring")
    })
}
