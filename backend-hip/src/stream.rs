//! The data plane on HIP: devipc's streams, local events and stream-ordered copies
//! (`hipStreamCreate`, `hipEventCreateWithFlags(hipEventDisableTiming)`,
//! `hipMemcpyBatchAsync` or `hipMemcpyAsync`).
//!
//! Streams and events are kept in the backend's tables until their release, so a stale
//! or foreign handle is `UnknownHandle`, and a release waits for the calls using the
//! object ([`HandleTable::pin`](devipc_core::HandleTable::pin)). Every call binds the
//! device of the stream or event it names and restores the thread's.
//!
//! A timed host wait on an event (`synchronize_event` with a timeout) queries the event
//! with a backoff ([`wait_by_query`]): HIP has no timed event wait. Without a timeout it
//! is `hipEventSynchronize`.

use std::time::Duration;

use devipc_core::backoff::wait_by_query;

use devipc_core::{CopyDesc, DeviceId, Error, EventHandle, RawStream, Result, StreamHandle};
use devipc_hip_sys::{hipEvent_t, hipStream_t};

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::result::{self, BatchCopy};

/// A stream devipc created.
#[derive(Debug, Clone)]
pub(crate) struct StreamRecord {
    pub(crate) device: DeviceId,
    pub(crate) stream: usize,
}

/// A local event devipc created.
#[derive(Debug, Clone)]
pub(crate) struct EventRecord {
    pub(crate) device: DeviceId,
    pub(crate) event: usize,
}

impl StreamRecord {
    /// Destroys the vendor stream (a record already out of the table).
    pub(crate) fn release(&self, backend: &HipBackend) -> Result<()> {
        let _scope = DeviceScope::bind(&backend.api, backend.check_device(self.device)?)?;
        // SAFETY: the record was taken out of the table, so nothing else destroys or uses
        // the stream through devipc; it was created by `create_stream`.
        unsafe { result::stream_destroy(&backend.api, self.stream as hipStream_t) }
    }
}

impl EventRecord {
    /// Destroys the vendor event (a record already out of the table).
    pub(crate) fn release(&self, backend: &HipBackend) -> Result<()> {
        let _scope = DeviceScope::bind(&backend.api, backend.check_device(self.device)?)?;
        // SAFETY: as for streams: out of the table, created by `create_event`.
        unsafe { result::event_destroy(&backend.api, self.event as hipEvent_t) }
    }
}

impl HipBackend {
    /// `create_stream`.
    pub(crate) fn new_stream(&self, device: DeviceId) -> Result<StreamHandle> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        let stream = result::stream_create(&self.api)? as usize;
        let id = self.streams.insert(StreamRecord { device, stream });
        // SAFETY: a live stream of this runtime on `device`, destroyed only by
        // `destroy_stream` (or the backend's drop) through the table.
        let raw = unsafe { RawStream::from_raw(stream) };
        Ok(StreamHandle { id, device, raw })
    }

    /// `destroy_stream`.
    pub(crate) fn end_stream(&self, handle: StreamHandle) -> Result<()> {
        let record = self.streams.get(handle.id)?;
        if record.stream != handle.raw.as_raw() || record.device != handle.device {
            return Err(Error::invalid_argument(format!(
                "stream {} does not match the backend's record",
                handle.id
            )));
        }
        let record = self.streams.remove(handle.id)?;
        record.release(self)
    }

    /// `synchronize_stream`.
    pub(crate) fn sync_stream(&self, device: DeviceId, stream: RawStream) -> Result<()> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        // SAFETY: `RawStream`'s constructor contract: null or a live stream of this
        // runtime on `device`, alive while the call runs.
        unsafe { result::stream_synchronize(&self.api, stream.as_ptr()) }
    }

    /// `create_event`.
    pub(crate) fn new_event(&self, device: DeviceId) -> Result<EventHandle> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        let event = result::local_event_create(&self.api)? as usize;
        let id = self.events.insert(EventRecord { device, event });
        Ok(EventHandle { id, device })
    }

    /// `destroy_event`.
    pub(crate) fn end_event(&self, handle: EventHandle) -> Result<()> {
        let record = self.events.remove(handle.id)?;
        record.release(self)
    }

    /// `record_event`.
    pub(crate) fn record(&self, handle: &EventHandle, stream: RawStream) -> Result<()> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        // SAFETY: the event is pinned (live until the pin drops); the stream is null or a
        // live stream of the event's device (`RawStream`'s contract, the trait's rule).
        unsafe { result::event_record(&self.api, record.event as hipEvent_t, stream.as_ptr()) }
    }

    /// `query_event`.
    pub(crate) fn query(&self, handle: &EventHandle) -> Result<bool> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        // SAFETY: the event is pinned.
        unsafe { result::event_query(&self.api, record.event as hipEvent_t) }
    }

    /// `synchronize_event`.
    pub(crate) fn sync_event(&self, handle: &EventHandle, timeout: Option<Duration>) -> Result<()> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        let event = record.event as hipEvent_t;
        let Some(timeout) = timeout else {
            // SAFETY: the event is pinned.
            return unsafe { result::event_synchronize(&self.api, event) };
        };
        wait_by_query(
            timeout,
            || format!("waiting for event {}", handle.id),
            // SAFETY: the event is pinned.
            || unsafe { result::event_query(&self.api, event) },
        )
    }

    /// `stream_wait_event`.
    pub(crate) fn stream_waits_for(
        &self,
        device: DeviceId,
        stream: RawStream,
        handle: &EventHandle,
    ) -> Result<()> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        // SAFETY: the event is pinned; the stream is null or a live stream of `device`.
        unsafe {
            result::stream_wait_event(&self.api, stream.as_ptr(), record.event as hipEvent_t, 0)
        }
    }

    /// `copy_async`: one `hipMemcpyBatchAsync` where the runtime has it (HIP 7.1), else
    /// one `hipMemcpyAsync` per descriptor, in order, on `stream` of `device`.
    ///
    /// # Safety
    /// As [`DeviceIpc::copy_async`](devipc_core::DeviceIpc::copy_async).
    pub(crate) unsafe fn enqueue_copies(
        &self,
        device: DeviceId,
        stream: RawStream,
        copies: &[CopyDesc],
    ) -> Result<()> {
        let count = copies.len();
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)
            .map_err(|e| Error::copy_failed(0, count, e))?;
        let batch: Vec<BatchCopy> = copies
            .iter()
            .map(|c| BatchCopy {
                dst: c.dst as u64,
                src: c.src as u64,
                len: c.len,
            })
            .collect();
        // SAFETY: the caller's contract for every descriptor and the stream.
        unsafe { result::memcpy_batch_async(&self.api, &batch, stream.as_ptr()) }
            .map_err(|(index, e)| Error::copy_failed(index, count, e))
    }
}

impl HipBackend {
    /// Emulator only: holds (`on`) or releases a stream of this process, as if a long
    /// kernel occupied it (the emulator's `hold_stream` / `release_stream`): the work
    /// enqueued meanwhile stays queued. For tests that need work provably in flight.
    /// [`Error::Unsupported`] on a real runtime, which has no such call.
    pub fn hold_stream_for_tests(&self, stream: RawStream, on: bool) -> Result<()> {
        #[cfg(feature = "emulator")]
        if self.info.source.is_emulated() {
            let code = if on {
                devipc_emulator::hip::hold_stream(stream.as_ptr())
            } else {
                devipc_emulator::hip::release_stream(stream.as_ptr())
            };
            return result::check(&self.api, "hold_stream", code);
        }
        let _ = (stream, on);
        Err(Error::unsupported(
            devipc_core::BackendKind::Hip,
            "holding a stream (an emulator hook for tests)",
        ))
    }
}
