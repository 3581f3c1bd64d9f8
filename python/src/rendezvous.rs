//! The rendezvous over a Unix socket: `SharedBuffer.share(path)` gives a [`ShareServer`];
//! `Runtime.connect(path)` gives a [`Connected`] (the buffer and the signals).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use devipc::Error;

use crate::errors::to_py;
use crate::signal::duration;
use crate::slot::Slot;

/// How long one slice of `accept` lasts: the longest a Ctrl-C waits to be noticed.
const SLICE: Duration = Duration::from_millis(100);

/// A socket at which a buffer (and signals) are handed to importers.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct ShareServer {
    inner: Slot<devipc::rendezvous::ShareServer>,
}

impl ShareServer {
    /// Wraps `server`.
    pub(crate) fn new(server: devipc::rendezvous::ShareServer) -> ShareServer {
        ShareServer {
            inner: Slot::new(server, "the share server"),
        }
    }

    fn get(&self) -> PyResult<Arc<devipc::rendezvous::ShareServer>> {
        self.inner.get()
    }
}

#[pymethods]
impl ShareServer {
    /// The socket's absolute path.
    #[getter]
    fn path(&self) -> PyResult<String> {
        Ok(self.get()?.path().display().to_string())
    }

    /// The memory token importers receive.
    #[getter]
    fn token(&self) -> PyResult<String> {
        Ok(self.get()?.token().to_text())
    }

    /// Serves the next importer (checks its uid, grants its process id, sends the tokens)
    /// and returns what is known of it: `{"process_id", "pid", "uid", "gid"}`. `timeout`
    /// in seconds (`None`: forever) gives `TimedOutError`. Releases the GIL; Ctrl-C
    /// interrupts it (`KeyboardInterrupt`), and so does `close()` on another thread
    /// (`ClosedError`; an importer being served when `close()` began is served before
    /// `close()` returns, none after).
    #[pyo3(signature = (timeout=None))]
    fn accept<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        let started = Instant::now();
        let deadline = timeout.map(duration).transpose()?.map(|t| started + t);
        let peer = loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            // One operation per slice (see `Slot`): `close()` waits for the slice under
            // way, and the next one raises `ClosedError`.
            let server = self.inner.op()?;
            let served = py.detach(|| server.accept_timeout(slice.max(Duration::from_millis(1))));
            drop(server);
            match served {
                Ok(peer) => break peer,
                Err(Error::Timeout { .. }) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(to_py(Error::timed_out(
                            "waiting for an importer to connect",
                            started,
                        )));
                    }
                    py.check_signals()?;
                }
                Err(e) => return Err(to_py(e)),
            }
        };
        let info = PyDict::new(py);
        info.set_item("process_id", peer.process_id.0)?;
        info.set_item("pid", peer.credentials.pid)?;
        info.set_item("uid", peer.credentials.uid)?;
        info.set_item("gid", peer.credentials.gid)?;
        Ok(info)
    }

    /// Removes the socket and stops serving (importers keep what they imported): an
    /// `accept()` on another thread raises `ClosedError`, and no importer is served after
    /// `close()` returns. Releases the GIL.
    fn close(&self, py: Python<'_>) {
        self.inner.close(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }
}

/// What `Runtime.connect` obtained: `buffer`, `signals` (in the exporter's order) and the
/// exporter's `pid` and `uid`.
#[pyclass(frozen, get_all, module = "devipc._devipc")]
pub(crate) struct Connected {
    /// The exporter's buffer, mapped here.
    pub(crate) buffer: Py<crate::buffers::ImportedBuffer>,
    /// The exporter's signals.
    pub(crate) signals: Vec<Py<crate::signal::Signal>>,
    /// The exporter's pid (0 if it is in a pid namespace we cannot see).
    pub(crate) pid: u32,
    /// The exporter's uid.
    pub(crate) uid: u32,
}
