//! [`Stream`]: an ordered queue of device work, devipc's own or a framework's, on which
//! copies are enqueued ([`Stream::copy`], [`Stream::copy_batch`], [`Stream::write`],
//! [`Stream::read`]), each returning a [`Request`].
//!
//! Every call binds the stream's device itself, whatever thread makes it. A copy names
//! [`DeviceSpan`]s, checked against the buffers they come from; the request keeps them,
//! and with them the allocations and imports, alive until the copies completed, so
//! dropping a buffer (closing an import) while a copy through it is in flight is safe: the
//! memory goes when the copy is done.

use std::sync::{Arc, Mutex};

use devipc_core::{CopyDesc, CopyKind, DeviceId, DeviceIpc, Error, EventHandle, RawStream, Result};

use crate::event::Event;
use crate::request::{self, Request, Work};
use crate::runtime::Runtime;
use crate::span::DeviceSpan;

/// An ordered queue of device work on one device: devipc's own
/// ([`Runtime::create_stream`]) or a framework's ([`Stream::wrap`]). Every call binds the
/// stream's device itself, whatever thread makes it; copies return a [`Request`] that
/// keeps the memory they name alive until they completed. Cloning shares it; a stream devipc created is destroyed, in the background, once the
/// last clone and the last request on it are gone.
#[derive(Debug, Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

#[derive(Debug)]
pub(crate) struct StreamInner {
    pub(crate) rt: Runtime,
    device: DeviceId,
    raw: RawStream,
    /// `Some` for a stream devipc created (and destroys).
    owned: Option<devipc_core::StreamHandle>,
    /// Events of finished requests, reused by the next ones.
    events: Mutex<Vec<EventHandle>>,
}

impl StreamInner {
    /// An event for a request: a pooled one, or a new one.
    pub(crate) fn take_event(&self) -> Result<EventHandle> {
        if let Some(event) = lock(&self.events).pop() {
            return Ok(event);
        }
        self.rt.inner.backend()?.create_event(self.device)
    }

    /// Gives back the event of a request that completed; beyond [`POOLED_EVENTS`] it is
    /// destroyed (a burst of requests does not keep its events for the stream's life).
    pub(crate) fn return_event(&self, event: EventHandle) {
        let mut pool = lock(&self.events);
        if pool.len() < POOLED_EVENTS {
            pool.push(event);
            return;
        }
        drop(pool);
        if let Ok(backend) = self.rt.inner.backend()
            && let Err(e) = backend.destroy_event(event)
        {
            log::error!("devipc: destroying a request event failed: {e}");
        }
    }
}

/// How many events of finished requests a stream keeps for the next ones.
pub const POOLED_EVENTS: usize = 64;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is one push or pop: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.rt.inner.is_inherited() {
            return;
        }
        let backend = self.rt.inner.raw_backend();
        for event in lock(&self.events).drain(..) {
            if let Err(e) = backend.destroy_event(event) {
                log::error!("devipc: destroying a request event failed: {e}");
                self.rt.inner.release_failed(e);
            }
        }
        if let Some(handle) = self.owned.take() {
            // The vendor destroy may wait for the stream's work: never in a drop.
            request::destroy_stream_later(self.rt.clone(), handle);
        }
    }
}

impl Stream {
    /// A new stream on `device` of `rt`.
    pub(crate) fn new(rt: &Runtime, device: DeviceId) -> Result<Stream> {
        let handle = rt.inner.backend()?.create_stream(device)?;
        Ok(Stream::from_parts(rt, device, handle.raw, Some(handle)))
    }

    fn from_parts(
        rt: &Runtime,
        device: DeviceId,
        raw: RawStream,
        owned: Option<devipc_core::StreamHandle>,
    ) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                rt: rt.clone(),
                device,
                raw,
                owned,
                events: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A framework's stream on `device` of `rt` (e.g. the current torch stream), which
    /// devipc uses but never destroys.
    ///
    /// # Safety
    /// `raw` is the default stream or a live stream of `rt`'s vendor runtime on `device`,
    /// and stays alive while this `Stream`, a clone of it, or a request enqueued on it
    /// lives (the runtime would use a destroyed stream as is).
    #[allow(unsafe_code, reason = "the constructor carries the stream contract")]
    pub unsafe fn wrap(
        rt: &Runtime,
        device: impl Into<DeviceId>,
        raw: RawStream,
    ) -> Result<Stream> {
        let device = device.into();
        device.check(rt.device_count()?)?;
        Ok(Stream::from_parts(rt, device, raw, None))
    }

    /// The device it belongs to.
    pub fn device(&self) -> DeviceId {
        self.inner.device
    }

    /// The vendor stream's address (`hipStream_t` / `aclrtStream`), to hand to a
    /// framework. An integer, not a [`RawStream`]: the stream lives only as long as this
    /// `Stream` (and its requests), so the safe calls that take a stream take a `&Stream`
    /// ([`Signal::notify_on_stream`](crate::Signal::notify_on_stream)).
    pub fn as_raw(&self) -> usize {
        self.inner.raw.as_raw()
    }

    /// The vendor stream, for calls made while `self` is borrowed (so it is alive).
    pub(crate) fn raw(&self) -> RawStream {
        self.inner.raw
    }

    /// The runtime it belongs to.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.rt
    }

    /// Enqueues a device-to-device copy of `src` into `dst` (spans of equal length, from
    /// any local buffer, import or framework block); the request completes when it did.
    pub fn copy(&self, dst: &DeviceSpan, src: &DeviceSpan) -> Result<Request> {
        self.copy_batch(&[(dst.clone(), src.clone())])
    }

    /// Enqueues the device-to-device copies `(dst, src)` in one call, in order; one request
    /// completes when all did. A refused pair gives [`Error::Copy`](crate::Error::Copy)
    /// with its index:
    /// - devipc's own checks (lengths, the spans' runtime, the vendor's copy rules devipc
    ///   enforces) run over every pair before anything is enqueued: then nothing runs;
    /// - a pair the vendor runtime refuses at enqueue stops the batch there: the copies
    ///   before it were enqueued and run (devipc keeps their memory until they did), so
    ///   synchronize the stream before reusing their destinations.
    pub fn copy_batch(&self, copies: &[(DeviceSpan, DeviceSpan)]) -> Result<Request> {
        let count = copies.len();
        let mut descs = Vec::with_capacity(count);
        let mut keep = KeepOnce::default();
        for (index, (dst, src)) in copies.iter().enumerate() {
            self.check_pair(dst, src)
                .map_err(|e| Error::copy_failed(index, count, e))?;
            descs.push(CopyDesc {
                dst: dst.ptr().0 as usize,
                src: src.ptr().0 as usize,
                len: src.len(),
                kind: CopyKind::DeviceToDevice,
            });
            keep.add(dst);
            keep.add(src);
        }
        self.submit(&descs, Work::new(self.clone(), keep.spans, None))
    }

    /// Enqueues a host-to-device copy of `data` into `dst` (of `data.len()` bytes). The
    /// request owns `data` until the copy completed and gives it back
    /// ([`Request::into_host`]).
    pub fn write(&self, dst: &DeviceSpan, data: Vec<u8>) -> Result<Request> {
        self.check_span(dst)?;
        same_len(dst.len(), data.len())?;
        let desc = CopyDesc {
            dst: dst.ptr().0 as usize,
            src: data.as_ptr() as usize,
            len: data.len(),
            kind: CopyKind::HostToDevice,
        };
        self.submit(
            &[desc],
            Work::new(self.clone(), vec![dst.clone()], Some(data)),
        )
    }

    /// Enqueues a device-to-host copy of `src` into a new host buffer, which
    /// [`Request::into_host`] returns once the copy completed.
    pub fn read(&self, src: &DeviceSpan) -> Result<Request> {
        self.check_span(src)?;
        let mut data = vec![0u8; src.len()];
        let desc = CopyDesc {
            dst: data.as_mut_ptr() as usize,
            src: src.ptr().0 as usize,
            len: data.len(),
            kind: CopyKind::DeviceToHost,
        };
        self.submit(
            &[desc],
            Work::new(self.clone(), vec![src.clone()], Some(data)),
        )
    }

    /// Records `event` on this stream (it must be of this stream's device).
    pub fn record(&self, event: &Event) -> Result<()> {
        self.check_device(event.device())?;
        self.backend()?.record_event(event.handle(), self.raw())
    }

    /// Makes the work enqueued on this stream from now on wait for `event`'s latest
    /// record, without blocking the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.backend()?
            .stream_wait_event(self.device(), self.raw(), event.handle())
    }

    /// Blocks until the work enqueued on this stream so far is done; the first failure
    /// of that work is the error.
    pub fn synchronize(&self) -> Result<()> {
        self.backend()?
            .synchronize_stream(self.device(), self.raw())
    }

    fn backend(&self) -> Result<&crate::raw::Backend> {
        self.inner.rt.inner.backend()
    }

    fn check_device(&self, device: DeviceId) -> Result<()> {
        if device == self.device() {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "an event of device {device} used with a stream of device {}",
                self.device()
            )))
        }
    }

    /// A span this stream's runtime can copy: memory of the same vendor runtime.
    fn check_span(&self, span: &DeviceSpan) -> Result<()> {
        let mine = &self.inner.rt;
        let theirs = span.runtime();
        if same_vendor_runtime(mine, theirs) {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "a span of {} memory copied on a stream of {}: both must be of the same \
                 vendor runtime",
                theirs.info().describe(),
                mine.info().describe()
            )))
        }
    }

    fn check_pair(&self, dst: &DeviceSpan, src: &DeviceSpan) -> Result<()> {
        self.check_span(dst)?;
        self.check_span(src)?;
        same_len(dst.len(), src.len())
    }

    /// Enqueues `descs`, then records the request's event after them. Whatever was
    /// enqueued before a failure is kept alive until it ran.
    fn submit(&self, descs: &[CopyDesc], mut work: Work) -> Result<Request> {
        let backend = self.backend()?;
        let event = self.inner.take_event()?;
        // SAFETY: every descriptor's device side is a span checked against its buffer's
        // bounds (an import's: the vendor object's real size), whose memory `work`
        // keeps allocated or mapped until the request completed; its host side is the
        // heap block of `work`'s host buffer, which moves with `work` without moving
        // its bytes. The stream is devipc's own (kept by `work`) or one its wrapper's
        // caller vouched for.
        let enqueued = unsafe { backend.copy_async(self.device(), self.raw(), descs) };
        let nothing_enqueued = matches!(&enqueued, Err(Error::Copy { index: 0, .. }));
        if nothing_enqueued {
            self.inner.return_event(event);
            return Err(enqueued.unwrap_err());
        }
        let recorded = backend.record_event(&event, self.raw());
        work.set_event(event, recorded.is_ok());
        match (enqueued, recorded) {
            (Ok(()), Ok(())) => Ok(Request::new(work)),
            (Err(e), _) | (Ok(()), Err(e)) => {
                // Some copies were enqueued: their memory stays until they ran.
                request::drain_later(work);
                Err(e)
            }
        }
    }
}

/// The spans a request keeps, one per object kept alive: a batch of a thousand pairs out
/// of two buffers keeps two spans, not two thousand (each clone is two atomic counts).
#[derive(Default)]
struct KeepOnce {
    spans: Vec<DeviceSpan>,
    /// The identities kept, once there are too many to scan.
    seen: Option<std::collections::HashSet<usize>>,
}

impl KeepOnce {
    /// How many spans are compared by a scan before a set takes over.
    const SCAN: usize = 16;

    fn add(&mut self, span: &DeviceSpan) {
        let id = span.keep_identity();
        if id == 0 {
            // Framework memory: its caller keeps it; the stream keeps the runtime.
            return;
        }
        let known = match &mut self.seen {
            Some(seen) => !seen.insert(id),
            None => self.spans.iter().any(|s| s.keep_identity() == id),
        };
        if known {
            return;
        }
        self.spans.push(span.clone());
        if self.seen.is_none() && self.spans.len() > Self::SCAN {
            self.seen = Some(self.spans.iter().map(DeviceSpan::keep_identity).collect());
        }
    }
}

/// Whether `a` and `b` drive the same vendor runtime of this process (the same `Runtime`,
/// or two of one library), whose streams, events and memory they can share.
pub(crate) fn same_vendor_runtime(a: &Runtime, b: &Runtime) -> bool {
    Arc::ptr_eq(&a.inner, &b.inner) || a.backend().cache_domain() == b.backend().cache_domain()
}

fn same_len(dst: usize, src: usize) -> Result<()> {
    if dst == src {
        Ok(())
    } else {
        Err(Error::invalid_argument(format!(
            "a copy of {src} bytes into a {dst}-byte span: the lengths must match (slice \
             the spans)"
        )))
    }
}
