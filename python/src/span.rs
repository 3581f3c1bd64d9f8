//! `Span`: a checked piece of device memory that stream-ordered copies name (a part of a
//! `SharedBuffer` / `ImportedBuffer`, or framework memory), and [`Users`]: the streams
//! that enqueued work on a buffer, which the DLPack handshake orders a consumer after
//! ([`crate::handshake`]).
//!
//! A span holds the Rust [`devipc::DeviceSpan`], which keeps the allocation (or the
//! import's mapping) alive: closing the buffer while a span of it, or a request copying
//! through one, is alive releases the memory only once they are gone. A span is not a
//! DLPack view, so `close()` does not refuse because of it.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PySlice;

use devipc::{DeviceId, DevicePtr, DeviceSpan};

use crate::buffers::Buffer;
use crate::errors::{self, to_py};
use crate::runtime::Runtime;
use crate::slot::Detached;
use crate::stream::StreamCore;

/// The streams of this process that enqueued copies through a buffer (its spans), each
/// once: the work a DLPack consumer must be ordered after. One per buffer object, shared
/// by its spans; an entry goes when the handshake finds its stream's work done.
#[derive(Debug, Default)]
pub(crate) struct Users {
    streams: Mutex<Vec<Arc<StreamCore>>>,
}

impl Users {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<StreamCore>>> {
        // Each critical section is one push, retain or clone: a poisoned lock is consistent.
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `stream` enqueues work on the buffer.
    pub(crate) fn add(&self, stream: &Arc<StreamCore>) {
        let mut streams = self.lock();
        if !streams.iter().any(|s| Arc::ptr_eq(s, stream)) {
            streams.push(Arc::clone(stream));
        }
    }

    /// The streams noted so far.
    pub(crate) fn snapshot(&self) -> Vec<Arc<StreamCore>> {
        self.lock().clone()
    }

    /// Forgets `stream` (its work on the buffer is done). Call with the GIL released: it
    /// may drop the last reference to the stream.
    pub(crate) fn forget(&self, stream: &Arc<StreamCore>) {
        let gone: Vec<_> = {
            let mut streams = self.lock();
            let (gone, kept) = streams.drain(..).partition(|s| Arc::ptr_eq(s, stream));
            *streams = kept;
            gone
        };
        drop(gone);
    }
}

/// A piece of device memory for `Stream.copy` and friends: `buffer.span(start, stop)`,
/// a slice of another span (`span[a:b]`), or framework memory (`Span.external`).
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Span {
    span: Detached<DeviceSpan>,
    /// The buffer's users (`None` for framework memory, which no handshake covers).
    users: Option<Arc<Users>>,
}

impl Span {
    fn new(span: DeviceSpan, users: Option<Arc<Users>>) -> Span {
        Span {
            span: Detached::new(span),
            users,
        }
    }

    /// `start..stop` (`stop` `None`: the end) of `len` bytes, checked.
    fn range(start: usize, stop: Option<usize>, len: usize) -> PyResult<std::ops::Range<usize>> {
        let stop = stop.unwrap_or(len);
        if start > stop || stop > len {
            return Err(errors::invalid_argument(format!(
                "bytes {start}..{stop} are not a range within {len} bytes"
            )));
        }
        Ok(start..stop)
    }

    /// The span `start..stop` of a buffer object.
    pub(crate) fn of_buffer(buf: &Buffer, start: usize, stop: Option<usize>) -> PyResult<Span> {
        let held = buf.held()?;
        let range = Span::range(start, stop, held.len())?;
        let span = held.span(range).map_err(to_py)?;
        Ok(Span::new(span, Some(Arc::clone(&held.users))))
    }
}

/// What a copy names: the Rust span, and the users of the buffer it is part of.
pub(crate) struct Target {
    pub(crate) span: DeviceSpan,
    pub(crate) users: Option<Arc<Users>>,
}

impl Target {
    /// Notes `stream` among the users of the span's buffer.
    pub(crate) fn used_by(&self, stream: &Arc<StreamCore>) {
        if let Some(users) = &self.users {
            users.add(stream);
        }
    }
}

/// The span `obj` names: a `Span`, or a whole buffer (`SharedBuffer`, `ImportedBuffer`).
pub(crate) fn target(obj: &Bound<'_, PyAny>) -> PyResult<Target> {
    if let Ok(span) = obj.cast::<Span>() {
        let span = span.get();
        return Ok(Target {
            span: (*span.span).clone(),
            users: span.users.clone(),
        });
    }
    if let Ok(buf) = obj.cast::<Buffer>() {
        let held = buf.get().held()?;
        let span = held.span(0..held.len()).map_err(to_py)?;
        return Ok(Target {
            span,
            users: Some(Arc::clone(&held.users)),
        });
    }
    Err(errors::invalid_argument(format!(
        "expected a devipc buffer or Span (buffer.span(start, stop)), not {}",
        obj.get_type().name()?
    )))
}

#[pymethods]
impl Span {
    /// A span of framework memory devipc did not allocate or import: `nbytes` bytes at
    /// device address `ptr` on `device` of `runtime`'s vendor runtime (e.g. a torch
    /// tensor's `data_ptr()`).
    ///
    /// The caller's responsibility, which devipc cannot check: the memory is device memory
    /// of that runtime on `device` in this process, and stays allocated (not freed, not
    /// reused by the framework's caching allocator) until every request that copies
    /// through this span, or a slice of it, has completed. The DLPack handshake does not
    /// cover it (it is no devipc buffer).
    #[staticmethod]
    #[pyo3(signature = (runtime, ptr, nbytes, device=0))]
    fn external(runtime: &Runtime, ptr: u64, nbytes: usize, device: u32) -> PyResult<Span> {
        let rt = runtime.get()?;
        let count = rt.device_count().map_err(to_py)?;
        if device >= count {
            return Err(to_py(devipc::Error::InvalidDevice {
                device: DeviceId(device),
                count,
            }));
        }
        if ptr.checked_add(nbytes as u64).is_none() {
            return Err(errors::invalid_argument(format!(
                "{nbytes} bytes at {ptr:#x} overflow the address space"
            )));
        }
        // SAFETY: the Python caller's promise, stated in this method's docstring (the
        // memory is the runtime's, on `device`, and outlives the requests through it),
        // as framework stream and pointer arguments are everywhere in Python; the device
        // was checked, and the range does not wrap.
        #[allow(unsafe_code, reason = "framework memory named by the Python caller")]
        let span = unsafe { DeviceSpan::external(&rt, DeviceId(device), DevicePtr(ptr), nbytes) };
        Ok(Span::new(span, None))
    }

    /// Length in bytes.
    fn __len__(&self) -> usize {
        self.span.len()
    }

    /// Length in bytes (as `len(span)`).
    #[getter]
    fn nbytes(&self) -> usize {
        self.span.len()
    }

    /// The device address of its first byte in this process.
    #[getter]
    fn ptr(&self) -> u64 {
        self.span.ptr().0
    }

    /// The device the memory is on.
    #[getter]
    fn device(&self) -> u32 {
        self.span.device().0
    }

    /// The part `start..stop` (offsets within this span; `stop` `None`: the end), checked.
    #[pyo3(signature = (start=0, stop=None))]
    fn span(&self, start: usize, stop: Option<usize>) -> PyResult<Span> {
        let range = Span::range(start, stop, self.span.len())?;
        let sub = self.span.slice(range).map_err(to_py)?;
        Ok(Span::new(sub, self.users.clone()))
    }

    /// `span[a:b]`: a sub-span (Python slice rules, negative offsets included; step 1).
    fn __getitem__(&self, index: &Bound<'_, PyAny>) -> PyResult<Span> {
        let slice = index.cast::<PySlice>().map_err(|_| {
            errors::invalid_argument("a span is indexed by a slice (span[a:b]), not by an item")
        })?;
        let len = isize::try_from(self.span.len()).unwrap_or(isize::MAX);
        let parts = slice.indices(len)?;
        if parts.step != 1 {
            return Err(errors::invalid_argument(format!(
                "a span slice has step 1, not {}",
                parts.step
            )));
        }
        let start = usize::try_from(parts.start).unwrap_or(0);
        let stop = usize::try_from(parts.stop).unwrap_or(0).max(start);
        self.span(start, Some(stop))
    }

    fn __repr__(&self) -> String {
        format!(
            "<devipc.Span of {} bytes at {:#x} on device {}>",
            self.span.len(),
            self.span.ptr().0,
            self.span.device().0
        )
    }
}
