//! The data plane on ACL: devipc's streams, local events and stream-ordered copies
//! (`aclrtCreateStream`, `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)`,
//! `aclrtMemcpyBatchAsync` for batches of host copies where the runtime has it,
//! `aclrtMemcpyAsync` otherwise: the vendor batch takes no device-to-device copy).
//!
//! Streams and events are kept in the backend's tables until their release, so a stale
//! or foreign handle is `UnknownHandle`, and a release waits for the calls using the
//! object. Every call binds the device of the stream or event it names and restores the
//! thread's.
//!
//! The events are local (`ACL_EVENT_SYNC`), never `ACL_EVENT_IPC`: an IPC event cannot be
//! queried (`aclrtQueryEventStatus` refuses it; field notes §4), and completion is what
//! these events are for.
//!
//! # The vendor's copy rules devipc enforces
//!
//! Every copy passes its explicit kind, never `ACL_MEMCPY_DEFAULT`. Memory imported by
//! IPC key onto another device than the exporter's takes only asynchronous
//! device-to-device copies (RT-DOC 11-07, api-facts C.4): a host-to-device or
//! device-to-host descriptor naming such memory is refused here with
//! [`Error::Unsupported`] before anything reaches the runtime, and so is one enqueued on
//! a stream of another device than the one the memory was imported on.

use std::collections::BTreeMap;
use std::time::Duration;

use devipc_ascend_sys::consts::ACL_EVENT_SYNC;
use devipc_ascend_sys::types::ACL_EVENT_RECORDED_STATUS_COMPLETE;
use devipc_core::backoff::wait_by_query;
use devipc_core::{
    BackendKind, CopyDesc, CopyKind, DeviceId, Error, EventHandle, RawStream, Result, StreamHandle,
};

use crate::backend::AscendBackend;
use crate::device::{CopyRoute, DeviceRange, DeviceScope, range_containing};
use crate::result::{self, BatchCopy, Direction};

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
    pub(crate) fn release(&self, backend: &AscendBackend) -> Result<()> {
        let _scope = DeviceScope::bind(&backend.api, backend.check_device(self.device)?)?;
        // SAFETY: out of the table, so nothing else destroys or uses it through devipc;
        // created by `create_stream`.
        unsafe { result::destroy_stream(&backend.api, self.stream) }
    }
}

impl EventRecord {
    /// Destroys the vendor event (a record already out of the table).
    pub(crate) fn release(&self, backend: &AscendBackend) -> Result<()> {
        let _scope = DeviceScope::bind(&backend.api, backend.check_device(self.device)?)?;
        // SAFETY: as for streams: out of the table, created by `create_event`.
        unsafe { result::destroy_event(&backend.api, self.event) }
    }
}

/// The direction of a copy, which gives its explicit `aclrtMemcpyKind`.
fn direction(kind: CopyKind) -> Direction {
    match kind {
        CopyKind::DeviceToDevice => Direction::DeviceToDevice,
        CopyKind::HostToDevice => Direction::HostToDevice,
        CopyKind::DeviceToHost => Direction::DeviceToHost,
    }
}

impl AscendBackend {
    /// `create_stream`.
    pub(crate) fn new_stream(&self, device: DeviceId) -> Result<StreamHandle> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        let stream = result::create_stream(&self.api)?;
        let id = self.streams.insert(StreamRecord { device, stream });
        // SAFETY: a live stream of this runtime on `device`, destroyed only through the
        // table (`destroy_stream` or the backend's drop).
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
        self.streams.remove(handle.id)?.release(self)
    }

    /// `synchronize_stream`.
    pub(crate) fn sync_stream(&self, device: DeviceId, stream: RawStream) -> Result<()> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        // SAFETY: `RawStream`'s contract: null or a live stream of `device`.
        unsafe { result::synchronize_stream(&self.api, stream.as_raw()) }
    }

    /// `create_event`.
    pub(crate) fn new_event(&self, device: DeviceId) -> Result<EventHandle> {
        let _scope = DeviceScope::bind(&self.api, self.check_device(device)?)?;
        let event = result::create_event_ex_with_flag(&self.api, ACL_EVENT_SYNC)?;
        let id = self.events.insert(EventRecord { device, event });
        Ok(EventHandle { id, device })
    }

    /// `destroy_event`.
    pub(crate) fn end_event(&self, handle: EventHandle) -> Result<()> {
        self.events.remove(handle.id)?.release(self)
    }

    /// `record_event`.
    pub(crate) fn record(&self, handle: &EventHandle, stream: RawStream) -> Result<()> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        // SAFETY: the event is pinned; the stream is null or a live stream of its device.
        unsafe { result::record_event(&self.api, record.event, stream.as_raw()) }
    }

    /// `query_event`.
    pub(crate) fn query(&self, handle: &EventHandle) -> Result<bool> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        // SAFETY: the event is pinned.
        let status = unsafe { result::query_event_status(&self.api, record.event) }?;
        Ok(status == ACL_EVENT_RECORDED_STATUS_COMPLETE)
    }

    /// `synchronize_event`: `aclrtSynchronizeEvent` without a timeout, else the event
    /// queried with a backoff until the deadline.
    pub(crate) fn sync_event(&self, handle: &EventHandle, timeout: Option<Duration>) -> Result<()> {
        let record = self.events.pin(handle.id)?;
        let _scope = DeviceScope::bind(&self.api, self.check_device(record.device)?)?;
        match timeout {
            // SAFETY: the event is pinned.
            None => unsafe { result::synchronize_event(&self.api, record.event) },
            Some(timeout) => wait_by_query(
                timeout,
                || format!("waiting for event {}", handle.id),
                || {
                    // SAFETY: the event is pinned.
                    let status = unsafe { result::query_event_status(&self.api, record.event) }?;
                    Ok(status == ACL_EVENT_RECORDED_STATUS_COMPLETE)
                },
            ),
        }
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
        unsafe { result::stream_wait_event(&self.api, stream.as_raw(), record.event) }
    }

    /// Refuses a descriptor the vendor would refuse or mis-copy (see the module docs);
    /// `ranges` are the ranges devipc mapped ([`AscendBackend::with_ranges`]).
    fn check_copy(
        ranges: &BTreeMap<u64, DeviceRange>,
        device: DeviceId,
        copy: &CopyDesc,
    ) -> Result<()> {
        let sides = [
            (copy.kind.device_dst(), copy.dst, "destination"),
            (copy.kind.device_src(), copy.src, "source"),
        ];
        for (on_device, addr, side) in sides {
            if !on_device {
                continue;
            }
            let Some(range) = range_containing(ranges, addr as u64) else {
                continue;
            };
            if range.route != CopyRoute::Staged {
                continue;
            }
            if copy.kind != CopyKind::DeviceToDevice {
                return Err(Error::unsupported(
                    BackendKind::Ascend,
                    format!(
                        "a {} copy whose {side} is memory imported by IPC key onto another \
                         device than the exporter's: the vendor allows only asynchronous \
                         device-to-device copies of such memory (RT-DOC 11-07, api-facts \
                         C.4); copy through a device buffer of device {}",
                        copy.kind, range.device
                    ),
                ));
            }
            if range.device != device {
                return Err(Error::unsupported(
                    BackendKind::Ascend,
                    format!(
                        "a copy whose {side} is memory imported by IPC key on device {} \
                         (another device than the exporter's), enqueued on a stream of \
                         device {device}: the vendor allows only copies within the device \
                         the memory was imported on (api-facts C.4)",
                        range.device
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `copy_async`: one `aclrtMemcpyAsync` per descriptor, in order, on `stream` of
    /// `device`, each checked first (module docs).
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
        let failed = |index, e| Error::copy_failed(index, count, e);
        let dev = self.check_device(device).map_err(|e| failed(0, e))?;
        let _scope = DeviceScope::bind(&self.api, dev).map_err(|e| failed(0, e))?;
        // Every descriptor first, under one lock of the ranges: a refused one leaves
        // nothing enqueued.
        self.with_ranges(|ranges| {
            for (index, copy) in copies.iter().enumerate() {
                if copy.len > 0 {
                    Self::check_copy(ranges, device, copy).map_err(|e| failed(index, e))?;
                }
            }
            Ok(())
        })?;
        let batch: Vec<BatchCopy> = copies
            .iter()
            .map(|c| BatchCopy {
                dst: c.dst as u64,
                // The destination's capacity is the copy's length (the caller's span).
                dst_max: c.len,
                src: c.src as u64,
                len: c.len,
                direction: direction(c.kind),
            })
            .collect();
        // SAFETY: the caller's contract for every descriptor and the stream.
        unsafe { result::memcpy_batch_async(&self.api, &batch, dev, stream.as_raw()) }
            .map_err(|(index, e)| failed(index, e))
    }
}

impl AscendBackend {
    /// Emulator only: holds (`on`) or releases a stream of this process, as if a long
    /// kernel occupied it (the emulator's `hold_stream` / `release_stream`): the tasks
    /// enqueued meanwhile stay queued. For tests that need work provably in flight.
    /// [`Error::Unsupported`] on a real runtime, which has no such call.
    pub fn hold_stream_for_tests(&self, stream: RawStream, on: bool) -> Result<()> {
        #[cfg(feature = "emulator")]
        if self.info.source.is_emulated() {
            let held = if on {
                devipc_emulator::acl::hold_stream(stream.as_raw())
            } else {
                devipc_emulator::acl::release_stream(stream.as_raw())
            };
            return held.map_err(|e| {
                Error::invalid_argument(format!("holding stream {:#x}: {e:?}", stream.as_raw()))
            });
        }
        let _ = (stream, on);
        Err(Error::unsupported(
            BackendKind::Ascend,
            "holding a stream (an emulator hook for tests)",
        ))
    }
}
