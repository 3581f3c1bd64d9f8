//! `Signal`: a cross-process binary semaphore. `wait` releases the GIL and waits in short
//! slices, checking for Ctrl-C (`KeyboardInterrupt`) and `close()` between them. Given a
//! `Stream`, `notify` raises the signal after the work enqueued there so far, and `wait`
//! orders that stream's later work after the notifier's (the Rust `notify_on` /
//! `wait_on`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use devipc::{Error, ProcessId};

use crate::buffers::export_options;
use crate::errors::{self, to_py};
use crate::options::PyExportOptions;
use crate::slot::{Op, Slot};
use crate::stream::{Stream, domain};
use crate::tokens;

/// How long one slice of a wait lasts: the longest a Ctrl-C waits to be noticed.
const SLICE: Duration = Duration::from_millis(50);

/// A signal: `notify()` once, and one `wait()` (here or in a peer) returns and resets it.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Signal {
    inner: Slot<devipc::Signal>,
    /// The vendor runtime it belongs to ([`domain`]): a stream given to `notify` / `wait`
    /// must be of the same one.
    domain: String,
}

impl Signal {
    /// Wraps `signal`, made by `rt`.
    pub(crate) fn new(signal: devipc::Signal, rt: &devipc::Runtime) -> Signal {
        Signal {
            inner: Slot::new(signal, "the signal"),
            domain: domain(rt),
        }
    }

    /// The devipc stream of `stream` (`None`: the default stream), checked to be of this
    /// signal's vendor runtime and device (devipc checks again).
    fn devipc_stream(&self, stream: Option<&Stream>) -> PyResult<Option<devipc::Stream>> {
        let Some(stream) = stream else {
            return Ok(None);
        };
        let core = stream.core();
        let theirs = domain(&core.rt);
        if theirs != self.domain {
            return Err(errors::invalid_argument(format!(
                "a stream of {theirs} used with a signal of {}: both must be of the same \
                 vendor runtime",
                self.domain
            )));
        }
        let device = self.get()?.device();
        if core.stream.device() != device {
            return Err(errors::invalid_argument(format!(
                "a stream of device {} used with a signal of device {device}",
                core.stream.device()
            )));
        }
        Ok(Some(core.stream.clone()))
    }

    /// The signal, or `ClosedError`.
    pub(crate) fn get(&self) -> PyResult<Arc<devipc::Signal>> {
        self.inner.get()
    }

    /// The signal for an operation that releases the GIL (`close()` waits for it).
    fn op(&self) -> PyResult<Op<'_, devipc::Signal>> {
        self.inner.op()
    }
}

/// The longest timeout accepted (about 31 years): deadlines computed from it never
/// overflow. `None` means "forever" where a wait allows it.
const MAX_TIMEOUT_SECS: f64 = 1e9;

/// A timeout in seconds as a [`Duration`]; negative, NaN, infinite or above
/// [`MAX_TIMEOUT_SECS`] is refused.
pub(crate) fn duration(seconds: f64) -> PyResult<Duration> {
    if !(0.0..=MAX_TIMEOUT_SECS).contains(&seconds) {
        return Err(errors::invalid_argument(format!(
            "a timeout must be a number of seconds from 0 to {MAX_TIMEOUT_SECS:e}, not {seconds}"
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| errors::invalid_argument(e.to_string()))
}

#[pymethods]
impl Signal {
    /// The device the signal belongs to.
    #[getter]
    fn device(&self) -> PyResult<u32> {
        Ok(self.get()?.device().0)
    }

    /// Exports the signal as a token string for a peer. The peer needs a `grant` unless
    /// `options` (an `ExportOptions`) says any process, or the shorthand `any_process` is
    /// true.
    #[pyo3(signature = (options=None, *, any_process=None))]
    fn export(
        &self,
        py: Python<'_>,
        options: Option<PyExportOptions>,
        any_process: Option<bool>,
    ) -> PyResult<String> {
        let opts = export_options("Signal.export", options, any_process)?;
        let signal = self.op()?;
        let token = py.detach(|| signal.export(opts)).map_err(to_py)?;
        Ok(token.to_text())
    }

    /// Lets the processes `pids` import the signal `token`.
    fn grant(&self, py: Python<'_>, token: &str, pids: Vec<u32>) -> PyResult<()> {
        let token = tokens::signal(token)?;
        let peers: Vec<ProcessId> = pids.into_iter().map(ProcessId).collect();
        let signal = self.op()?;
        py.detach(|| signal.grant(&token, &peers)).map_err(to_py)
    }

    /// Raises the signal; given `stream` (a `Stream` of the signal's runtime and device),
    /// after the work enqueued there so far (else after the default stream's).
    #[pyo3(signature = (stream=None))]
    fn notify(&self, py: Python<'_>, stream: Option<PyRef<'_, Stream>>) -> PyResult<()> {
        let stream = self.devipc_stream(stream.as_deref())?;
        let signal = self.op()?;
        py.detach(|| match &stream {
            Some(s) => signal.notify_on_stream(s),
            None => signal.notify(),
        })
        .map_err(to_py)
    }

    /// Waits until the signal is raised, then resets it. `timeout` in seconds (`None`:
    /// forever) gives `TimedOutError` when it passes. The GIL is released while waiting,
    /// and Ctrl-C interrupts the wait (`KeyboardInterrupt`) within 50 ms, as does a
    /// `close()` on another thread (`ClosedError`).
    ///
    /// Except on an Ascend runtime without the event functions (`aclrtCreateEventExWithFlag`,
    /// `aclrtRecordEvent`, `aclrtQueryEventStatus`; CANN releases before them), whose
    /// notify wait counts whole seconds: there each slice lasts 1 s, so Ctrl-C and
    /// `close()` are noticed within 1 s and `timeout` is rounded up to whole seconds (a
    /// wait of 0.1 s times out after 1 s).
    ///
    /// Given `stream` (a `Stream` of the signal's runtime and device), the work enqueued
    /// there afterwards also waits for the notifier's work before its notify.
    #[pyo3(signature = (timeout=None, stream=None))]
    fn wait(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        stream: Option<PyRef<'_, Stream>>,
    ) -> PyResult<()> {
        let stream = self.devipc_stream(stream.as_deref())?;
        let started = Instant::now();
        let deadline = timeout.map(duration).transpose()?.map(|t| started + t);
        loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            // One operation per slice: a `close()` waits for this slice only, and the
            // next one raises `ClosedError`; none spans the signal handlers below.
            let signal = self.op()?;
            let waited = py.detach(|| match &stream {
                Some(s) => signal.wait_on_stream(s, Some(slice)),
                None => signal.wait(Some(slice)),
            });
            drop(signal);
            match waited {
                Ok(()) => return Ok(()),
                Err(Error::Timeout { .. }) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(to_py(Error::timed_out(
                            format!(
                                "waiting for the signal (limit {:.3}s)",
                                timeout.unwrap_or_default()
                            ),
                            started,
                        )));
                    }
                    py.check_signals()?;
                }
                Err(e) => return Err(to_py(e)),
            }
        }
    }

    /// Posts the signal's next generation on `stream` (a `Stream` of the signal's runtime
    /// and device) and returns it (1, 2, ...): a peer's `wait_for(stream, generation)`
    /// orders its stream's later work after the work enqueued on `stream` before this
    /// call, on the device. A post that would run more than four generations ahead of the
    /// waits issued so far waits for them, up to `timeout` seconds (`None`: as long as it
    /// takes; `TimedOutError`), GIL released, Ctrl-C noticed within 50 ms.
    #[pyo3(signature = (stream, timeout=None))]
    fn post(
        &self,
        py: Python<'_>,
        stream: PyRef<'_, Stream>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let stream = self
            .devipc_stream(Some(&stream))?
            .ok_or_else(|| errors::invalid_argument("post takes a stream"))?;
        let mut posted = 0;
        let closed = std::sync::atomic::AtomicBool::new(false);
        let result = crate::wait::sliced(py, timeout, "posting the signal", |slice| {
            let signal = self.op().map_err(|_| closed_meanwhile(&closed))?;
            posted = signal.post(&stream, Some(slice))?;
            Ok(())
        });
        check_closed(result, &closed)?;
        Ok(posted)
    }

    /// Makes `stream`'s later work wait, on the device, for the work enqueued before the
    /// post of `generation` (see `post`). Blocks only until that post was made, up to
    /// `timeout` seconds (`TimedOutError`), GIL released; generation 0 is no wait.
    #[pyo3(signature = (stream, generation, timeout=None))]
    fn wait_for(
        &self,
        py: Python<'_>,
        stream: PyRef<'_, Stream>,
        generation: u64,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let stream = self
            .devipc_stream(Some(&stream))?
            .ok_or_else(|| errors::invalid_argument("wait_for takes a stream"))?;
        let what = format!("waiting for generation {generation} of the signal");
        let closed = std::sync::atomic::AtomicBool::new(false);
        let result = crate::wait::sliced(py, timeout, &what, |slice| {
            let signal = self.op().map_err(|_| closed_meanwhile(&closed))?;
            signal.wait_for(&stream, generation, Some(slice))
        });
        check_closed(result, &closed)
    }

    /// `(posted, waited)`: the latest generation posted and the latest one a wait was
    /// issued for, as every process holding the signal sees them.
    #[getter]
    fn generations(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let signal = self.op()?;
        let g = py.detach(|| signal.generations()).map_err(to_py)?;
        Ok((g.posted, g.waited))
    }

    /// Destroys this process's handle now (once same-process imports of it are gone too).
    /// A `wait()` on another thread ends with `ClosedError` (after its current slice);
    /// a second `close()` does nothing. Releases the GIL.
    fn close(&self, py: Python<'_>) {
        self.inner.close(py);
    }

    /// Whether `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
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

/// Notes that the signal was closed between two slices of a call (the call then raises
/// `ClosedError`, see [`check_closed`]).
fn closed_meanwhile(flag: &std::sync::atomic::AtomicBool) -> Error {
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    Error::invalid_argument("the signal was closed")
}

/// `result`, or `ClosedError` when the signal was closed between its slices.
fn check_closed<T>(result: PyResult<T>, flag: &std::sync::atomic::AtomicBool) -> PyResult<T> {
    if flag.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(errors::closed("the signal"));
    }
    result
}
