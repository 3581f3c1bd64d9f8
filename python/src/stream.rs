//! `Stream` and `Event`: the Python side of devipc's stream-ordered data plane.
//!
//! A `Stream` is devipc's own (`Runtime.create_stream`) or wraps a framework's stream
//! given as an integer (`Stream.wrap`). Copies enqueued on it (`copy`, `copy_batch`,
//! `write`, `read`) name spans (`buffer.span(start, stop)`, or a whole buffer) and return a
//! `Request`; enqueueing releases the GIL and never waits for the copy. Every call binds
//! the stream's device itself, whatever thread makes it, so one stream serves several
//! Python threads. An `Event` is a local, queryable event: recorded on a stream, waited
//! for by the host or by another stream.
//!
//! Each copy notes its stream among the users of the buffers it touches
//! ([`crate::span::Users`]): the work the DLPack handshake orders a consumer after.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;

use devipc::{DeviceId, Error, RawStream};

use crate::buffers::contiguous_bytes;
use crate::errors::{self, to_py};
use crate::request::{Kind, Request};
use crate::runtime::Runtime;
use crate::slot::Detached;
use crate::span::{Target, target};
use crate::wait::sliced;

/// A stream and the runtime it belongs to.
#[derive(Debug)]
pub(crate) struct StreamCore {
    pub(crate) stream: devipc::Stream,
    pub(crate) rt: Arc<devipc::Runtime>,
    /// The event `synchronize()` records and waits for, made on first use.
    sync: Mutex<Option<devipc::Event>>,
}

impl StreamCore {
    fn new(stream: devipc::Stream, rt: Arc<devipc::Runtime>) -> Arc<StreamCore> {
        Arc::new(StreamCore {
            stream,
            rt,
            sync: Mutex::new(None),
        })
    }

    /// The event of `synchronize()`.
    fn sync_event(&self) -> devipc::Result<devipc::Event> {
        let mut slot = self.sync.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(event) = slot.as_ref() {
            return Ok(event.clone());
        }
        let event = self.rt.create_event(self.stream.device())?;
        *slot = Some(event.clone());
        Ok(event)
    }
}

/// Which vendor runtime `rt` drives (its kind and library): two runtimes of one domain in
/// a process drive the same vendor runtime, whose streams they share.
pub(crate) fn domain(rt: &devipc::Runtime) -> String {
    let info = rt.info();
    format!("{}:{}", info.kind, info.source)
}

/// An ordered queue of device work on one device.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Stream {
    core: Detached<Arc<StreamCore>>,
}

impl Stream {
    fn new(core: Arc<StreamCore>) -> Stream {
        Stream {
            core: Detached::new(core),
        }
    }

    /// The stream, for the signal and handshake code.
    pub(crate) fn core(&self) -> &Arc<StreamCore> {
        &self.core
    }

    /// `dst` and `src` of one copy, noted as used by this stream.
    fn pair(&self, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<(Target, Target)> {
        let (dst, src) = (target(dst)?, target(src)?);
        dst.used_by(&self.core);
        src.used_by(&self.core);
        Ok((dst, src))
    }
}

/// A new Python `Stream` for `stream` of `rt`.
pub(crate) fn wrap_new(stream: devipc::Stream, rt: Arc<devipc::Runtime>) -> Stream {
    Stream::new(StreamCore::new(stream, rt))
}

#[pymethods]
impl Stream {
    /// Wraps a framework's stream, given as an integer (`torch.cuda.current_stream()
    /// .cuda_stream` on ROCm; 0 is the default stream), on `device` of `runtime`, for
    /// devipc's copies, events and signals. devipc never destroys it.
    ///
    /// The caller's responsibility, which devipc cannot check: `raw` is the default stream
    /// or a live stream of `runtime`'s vendor runtime on `device`, and stays alive (the
    /// framework does not destroy it) while this object, or a request enqueued on it, is
    /// alive. A runtime would use a destroyed or foreign stream as is (the emulator refuses
    /// one it does not know).
    #[staticmethod]
    #[pyo3(signature = (runtime, raw, device=0))]
    fn wrap(runtime: &Runtime, raw: i128, device: u32) -> PyResult<Stream> {
        let rt = runtime.get()?;
        let value = usize::try_from(raw).map_err(|_| {
            errors::invalid_argument(format!(
                "a stream is a non-negative integer (a vendor stream pointer, 0 for the \
                 default stream), not {raw}"
            ))
        })?;
        #[allow(
            unsafe_code,
            reason = "a framework's stream named by the Python caller"
        )]
        // SAFETY: the Python caller's promise, stated in this method's docstring (a live
        // stream of this runtime on `device`, outliving this object and its requests), as
        // with every framework stream handed over as an integer; `Stream::wrap` checks the
        // device.
        let wrapped =
            unsafe { devipc::Stream::wrap(&rt, DeviceId(device), RawStream::from_raw(value)) };
        let stream = wrapped.map_err(to_py)?;
        Ok(wrap_new(stream, rt))
    }

    /// The device it belongs to.
    #[getter]
    fn device(&self) -> u32 {
        self.core.stream.device().0
    }

    /// The vendor stream as an integer (to hand to a framework, e.g.
    /// `torch.cuda.ExternalStream`); 0 is the default stream.
    #[getter]
    fn raw(&self) -> usize {
        self.core.stream.as_raw()
    }

    /// Enqueues a device-to-device copy of `src` into `dst` (each a `Span` or a whole
    /// buffer, of equal lengths; imports and framework memory included).
    fn copy(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let (dst, src) = self.pair(dst, src)?;
        let nbytes = src.span.len();
        let stream = &self.core.stream;
        let request = py
            .detach(|| stream.copy(&dst.span, &src.span))
            .map_err(to_py)?;
        Ok(Request::new(request, Kind::Device, nbytes))
    }

    /// Enqueues the device-to-device copies `[(dst, src), ...]` in one call, in order; one
    /// request completes when all did. A refused pair raises `CopyError`, whose `index`
    /// names it and `count` is the batch's length (the cause is its `__cause__`): one
    /// refused by devipc's checks (not a pair, not memory, unequal lengths, memory of
    /// another runtime) refuses the whole batch before anything is enqueued; one the
    /// runtime refuses at enqueue leaves the pairs before it running (their memory is
    /// kept until they ran). A single `copy` is a batch of one.
    fn copy_batch(&self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<Request> {
        let items: Vec<Bound<'_, PyAny>> = pairs
            .try_iter()
            .map_err(|_| errors::invalid_argument("copy_batch takes a list of (dst, src) pairs"))?
            .collect::<PyResult<_>>()?;
        let count = items.len();
        let mut spans = Vec::with_capacity(count);
        let mut nbytes = 0usize;
        for (index, item) in items.iter().enumerate() {
            let refused = |e: Error| to_py(Error::copy_failed(index, count, e));
            let (dst, src) = item
                .extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()
                .map_err(|_| refused(Error::invalid_argument("each pair is a (dst, src) tuple")))?;
            let (dst, src) = match self.pair(&dst, &src) {
                Ok(pair) => pair,
                Err(e) => {
                    let text = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
                    let err = refused(Error::invalid_argument(text));
                    err.set_cause(py, Some(e));
                    return Err(err);
                }
            };
            nbytes = nbytes.saturating_add(src.span.len());
            spans.push((dst.span, src.span));
        }
        let stream = &self.core.stream;
        let request = py.detach(|| stream.copy_batch(&spans)).map_err(to_py)?;
        Ok(Request::new(request, Kind::Device, nbytes))
    }

    /// Enqueues a host-to-device copy of `data` (bytes, bytearray, memoryview, a
    /// C-contiguous numpy array: any buffer-protocol object, copied first) into `dst` (a
    /// `Span` or a whole buffer of `len(data)` bytes).
    fn write(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let bytes = contiguous_bytes(data)?;
        let dst = target(dst)?;
        dst.used_by(&self.core);
        let nbytes = bytes.len();
        let stream = &self.core.stream;
        let request = py
            .detach(|| stream.write(&dst.span, bytes))
            .map_err(to_py)?;
        Ok(Request::new(request, Kind::Write, nbytes))
    }

    /// Enqueues a device-to-host copy of `src` (a `Span` or a whole buffer); the request's
    /// `result()` is the bytes.
    fn read(&self, py: Python<'_>, src: &Bound<'_, PyAny>) -> PyResult<Request> {
        let src = target(src)?;
        src.used_by(&self.core);
        let nbytes = src.span.len();
        let stream = &self.core.stream;
        let request = py.detach(|| stream.read(&src.span)).map_err(to_py)?;
        Ok(Request::new(request, Kind::Read, nbytes))
    }

    /// Records `event` (of this stream's device) here: it completes when the work
    /// enqueued so far is done.
    fn record(&self, py: Python<'_>, event: &Event) -> PyResult<()> {
        let stream = &self.core.stream;
        py.detach(|| stream.record(&event.event)).map_err(to_py)
    }

    /// Makes the work enqueued here from now on wait for `event`'s latest record, without
    /// blocking the host.
    fn wait_event(&self, py: Python<'_>, event: &Event) -> PyResult<()> {
        let stream = &self.core.stream;
        py.detach(|| stream.wait_event(&event.event)).map_err(to_py)
    }

    /// Blocks until the work enqueued so far is done (an event recorded now, waited for);
    /// a failure of that work, where the runtime reports it, raises. The GIL is released;
    /// Ctrl-C interrupts the wait within 50 ms.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let core = &self.core;
        let event = py
            .detach(|| -> devipc::Result<devipc::Event> {
                let event = core.sync_event()?;
                core.stream.record(&event)?;
                Ok(event)
            })
            .map_err(to_py)?;
        sliced(py, None, "synchronizing the stream", |slice| {
            event.wait(Some(slice))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<devipc.Stream {:#x} on device {}>",
            self.core.stream.as_raw(),
            self.core.stream.device().0
        )
    }
}

/// A local, queryable event: recorded on a stream, it completes when the work enqueued
/// there before it is done.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Event {
    event: Detached<devipc::Event>,
}

impl Event {
    /// Wraps `event`.
    pub(crate) fn new(event: devipc::Event) -> Event {
        Event {
            event: Detached::new(event),
        }
    }
}

#[pymethods]
impl Event {
    /// The device it belongs to.
    #[getter]
    fn device(&self) -> u32 {
        self.event.device().0
    }

    /// Records it on `stream` (a stream of its device).
    fn record(&self, py: Python<'_>, stream: &Stream) -> PyResult<()> {
        let stream = &stream.core.stream;
        py.detach(|| stream.record(&self.event)).map_err(to_py)
    }

    /// Whether its latest record completed (an event never recorded has).
    fn is_complete(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.event.is_complete()).map_err(to_py)
    }

    /// Waits until its latest record completed; `timeout` in seconds (`None`: as long as
    /// it takes) gives `TimedOutError` when it passes. The GIL is released; Ctrl-C
    /// interrupts the wait within 50 ms.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let event = &self.event;
        sliced(py, timeout, "waiting for the event", |slice| {
            event.wait(Some(slice))
        })
    }

    fn __repr__(&self) -> String {
        format!("<devipc.Event on device {}>", self.event.device().0)
    }
}
