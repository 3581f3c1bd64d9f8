//! Blocking waits of the data plane from Python (`Request.wait`, `Event.wait`,
//! `Stream.synchronize`, a `Signal.wait` on a stream): the GIL released, in slices of
//! [`SLICE`], with Ctrl-C (`KeyboardInterrupt`) noticed between them, as `Signal.wait`
//! does.

use std::time::{Duration, Instant};

use pyo3::prelude::*;

use devipc::Error;

use crate::errors::to_py;
use crate::signal::duration;

/// How long one slice of a wait lasts: the longest a Ctrl-C waits to be noticed.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// Calls `once(slice)` with the GIL released until it returns anything but
/// [`Error::Timeout`]; `timeout` in seconds (`None`: forever) gives `TimedOutError` naming
/// `what` when it passes. Between slices, pending Python signals run (Ctrl-C raises).
pub(crate) fn sliced(
    py: Python<'_>,
    timeout: Option<f64>,
    what: &str,
    mut once: impl FnMut(Duration) -> devipc::Result<()> + Send,
) -> PyResult<()> {
    let started = Instant::now();
    let deadline = timeout.map(duration).transpose()?.map(|t| started + t);
    loop {
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
            None => SLICE,
        };
        match py.detach(|| once(slice)) {
            Ok(()) => return Ok(()),
            Err(Error::Timeout { .. }) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(to_py(Error::timed_out(
                        format!("{what} (limit {:.3}s)", timeout.unwrap_or_default()),
                        started,
                    )));
                }
                py.check_signals()?;
            }
            Err(e) => return Err(to_py(e)),
        }
    }
}
