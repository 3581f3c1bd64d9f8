//! `Request`: the completion of copies enqueued on a `Stream` (the Rust
//! [`devipc::Request`]). `is_complete()` asks, `wait(timeout)` blocks (GIL released, in
//! slices, Ctrl-C between them), `result()` waits and gives a read's bytes. Dropping an
//! unfinished request returns at once: devipc's background drainer finishes it, and
//! keeps the memory it copies through until then.

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::to_py;
use crate::slot::release;
use crate::wait::sliced;

/// What the request copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Device to device (`copy`, `copy_batch`).
    Device,
    /// Host to device (`write`).
    Write,
    /// Device to host (`read`): its result is the bytes.
    Read,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Device => "copy",
            Kind::Write => "write",
            Kind::Read => "read",
        }
    }
}

#[derive(Debug)]
struct State {
    /// The Rust request until it completed (and, for a read, its bytes were taken), or
    /// until it failed (it keeps the failure for the next calls).
    request: Option<devipc::Request>,
    /// A read's bytes, once complete.
    bytes: Option<Py<PyBytes>>,
}

/// The completion of copies enqueued on a stream.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Request {
    state: Mutex<State>,
    kind: Kind,
    nbytes: usize,
}

impl Request {
    /// Wraps `request`, which copies `nbytes` bytes as `kind` says.
    pub(crate) fn new(request: devipc::Request, kind: Kind, nbytes: usize) -> Request {
        Request {
            state: Mutex::new(State {
                request: Some(request),
                bytes: None,
            }),
            kind,
            nbytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state whole (a take, or a call on the request):
        // a poisoned lock is consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After a successful wait: lets the Rust request go, keeping a read's bytes.
    fn settle(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.lock().request.take();
        let Some(request) = taken else {
            return Ok(());
        };
        if self.kind == Kind::Read {
            // Complete: `into_host` returns at once.
            let host = py.detach(|| request.into_host()).map_err(to_py)?;
            self.lock().bytes = Some(PyBytes::new(py, &host).unbind());
        } else {
            release(request);
        }
        Ok(())
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(request) = state.request.take() {
            // Never blocks: an unfinished request goes to devipc's drainer.
            release(request);
        }
    }
}

#[pymethods]
impl Request {
    /// Whether the copies completed (without waiting). A copy that failed while it ran
    /// raises here (or in the first of `wait` / `result` to see it).
    fn is_complete(&self, py: Python<'_>) -> PyResult<bool> {
        let done = py
            .detach(|| match self.lock().request.as_mut() {
                Some(r) => r.is_complete(),
                None => Ok(true),
            })
            .map_err(to_py)?;
        if done {
            self.settle(py)?;
        }
        Ok(done)
    }

    /// Waits until the copies completed. `timeout` in seconds (`None`: as long as it
    /// takes) gives `TimedOutError` when it passes (the request is still pending then).
    /// The GIL is released while waiting; Ctrl-C interrupts the wait within 50 ms.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        sliced(py, timeout, "waiting for the request", |slice| {
            match self.lock().request.as_mut() {
                Some(r) => r.wait(Some(slice)),
                None => Ok(()),
            }
        })?;
        self.settle(py)
    }

    /// Waits as `wait(timeout)` does, then returns a read's bytes (`Stream.read`), or
    /// `None` for a copy or a write.
    #[pyo3(signature = (timeout=None))]
    fn result(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyBytes>>> {
        self.wait(py, timeout)?;
        Ok(self.lock().bytes.as_ref().map(|b| b.clone_ref(py)))
    }

    /// `"copy"` (device to device, one or a batch), `"write"` or `"read"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// How many bytes it copies (a batch: all its pairs).
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    fn __repr__(&self) -> String {
        let state = if self.lock().request.is_none() {
            "complete"
        } else {
            "pending"
        };
        format!(
            "<devipc.Request {} of {} bytes ({state})>",
            self.kind.name(),
            self.nbytes
        )
    }
}
