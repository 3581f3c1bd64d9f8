//! Tokens in Python are `str`: the text form ([`MemToken::to_text`]), which pickles and
//! crosses `multiprocessing` queues as any string does. This module parses them back
//! (never assuming a prefix: the format's own parser decides) and describes them.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use devipc::{MemToken, SignalToken};

use crate::errors::to_py;

/// Parses a memory token string (`InvalidTokenError` if it is not one).
pub(crate) fn mem(text: &str) -> PyResult<MemToken> {
    MemToken::from_text(text).map_err(to_py)
}

/// Parses a signal token string (`InvalidTokenError` if it is not one).
pub(crate) fn signal(text: &str) -> PyResult<SignalToken> {
    SignalToken::from_text(text).map_err(to_py)
}

/// What a memory token string claims (claims only: importing checks them): backend,
/// mechanism, emulated, device, producer pid, generation, object size, offset, length.
#[pyfunction]
pub(crate) fn token_info<'py>(py: Python<'py>, token: &str) -> PyResult<Bound<'py, PyDict>> {
    let t = mem(token)?;
    let info = PyDict::new(py);
    info.set_item("backend", t.backend().to_string())?;
    info.set_item("mechanism", t.mechanism().to_string())?;
    info.set_item("emulated", t.emulated())?;
    info.set_item("device", t.device().0)?;
    info.set_item("pid", t.origin().pid.0)?;
    info.set_item("generation", t.generation())?;
    info.set_item("object_size", t.object_size())?;
    info.set_item("offset", t.offset())?;
    info.set_item("len", t.len())?;
    Ok(info)
}
