//! `doctor()`: what this process can start, as a dict (the `devipc doctor` command of the
//! Rust workspace reports more: every library path tried, peer access, a two-process
//! probe).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use devipc::{BackendInfo, BackendKind, Runtime};

/// `info` as a dict: backend, library, emulated, version, description, capabilities.
pub(crate) fn info_dict<'py>(py: Python<'py>, info: &BackendInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("backend", info.kind.to_string())?;
    d.set_item("library", info.source.to_string())?;
    d.set_item("emulated", info.source.is_emulated())?;
    d.set_item("version", info.runtime_version.map(|v| v.to_string()))?;
    d.set_item("description", info.describe())?;
    let c = info.capabilities;
    let caps = PyDict::new(py);
    caps.set_item("access_control", c.access_control)?;
    caps.set_item("export_allocation", c.export_allocation)?;
    caps.set_item("export_external", c.export_external)?;
    caps.set_item("signals", c.signals)?;
    caps.set_item("cross_device_import", c.cross_device_import)?;
    caps.set_item("disable_pid_validation", c.disable_pid_validation)?;
    caps.set_item("vmm_fd", c.vmm_fd)?;
    caps.set_item("vmm_fabric", c.vmm_fabric)?;
    d.set_item("capabilities", caps)?;
    Ok(d)
}

/// One entry per backend and flavour (real, emulated): `started`, and either the info and
/// `devices`, or `error` (text) and `error_kind`.
fn entry<'py>(
    py: Python<'py>,
    kind: BackendKind,
    emulated: bool,
    started: devipc::Result<Runtime>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = match &started {
        Ok(rt) => {
            let d = info_dict(py, rt.info())?;
            d.set_item("devices", rt.device_count().ok())?;
            d
        }
        Err(e) => {
            let d = PyDict::new(py);
            d.set_item("backend", kind.to_string())?;
            d.set_item("emulated", emulated)?;
            d.set_item("error", e.to_string())?;
            d.set_item("error_kind", e.kind())?;
            d
        }
    };
    d.set_item("started", started.is_ok())?;
    Ok(d)
}

/// Tries every backend, real and emulated, and reports each: a list of dicts with
/// `backend`, `emulated`, `started`, then `library`, `version`, `devices`,
/// `capabilities` (started) or `error`, `error_kind` (not started).
#[pyfunction]
pub(crate) fn doctor(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for kind in BackendKind::ALL {
        let real = py.detach(|| Runtime::open(kind));
        list.append(entry(py, kind, false, real)?)?;
        let emulated = py.detach(|| Runtime::emulated(kind));
        list.append(entry(py, kind, true, emulated)?)?;
    }
    Ok(list)
}
