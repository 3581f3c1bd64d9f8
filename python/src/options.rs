//! The options objects, one per options type of the Rust API: `ExportOptions`,
//! `AllocateOptions`, `ShareOptions` and `ConnectOptions`. Each Rust builder method is a
//! keyword argument of the Python constructor (`ExportOptions::any_process()` is
//! `ExportOptions(any_process=True)`), with the same defaults (`ConnectOptions`'s `timeout`
//! is 30 s in both).
//!
//! The methods that take one also keep their flag arguments (`any_process=`, `timeout=`,
//! ...) as a shorthand: an options object or flags, not both ([`no_flags_with`]).

use std::time::Duration;

use pyo3::prelude::*;

use devipc::raw::Mechanism;

use crate::errors;
use crate::signal::duration;

/// `Runtime.connect`'s default `timeout`, in seconds: Rust's
/// [`DEFAULT_CONNECT_TIMEOUT`](devipc::rendezvous::DEFAULT_CONNECT_TIMEOUT).
pub(crate) const CONNECT_TIMEOUT_SECS: f64 =
    devipc::rendezvous::DEFAULT_CONNECT_TIMEOUT.as_secs() as f64;

/// The default permission bits of a share's socket file (Rust's default too).
const SOCKET_MODE: u32 = 0o600;

/// `InvalidArgumentError` when an options object and one of the flags `given` (its name,
/// whether it was passed) are both passed to `method`.
pub(crate) fn no_flags_with<T>(
    method: &str,
    options: &Option<T>,
    given: &[(&str, bool)],
) -> PyResult<()> {
    if options.is_none() {
        return Ok(());
    }
    match given.iter().find(|(_, passed)| *passed) {
        Some((flag, _)) => Err(errors::invalid_argument(format!(
            "{method}: pass either an options object or the `{flag}` argument, not both"
        ))),
        None => Ok(()),
    }
}

/// Who may import an export: `ExportOptions()` only the processes `grant` names (the
/// default), `ExportOptions(any_process=True)` any process (`grant` becomes unnecessary).
#[pyclass(
    frozen,
    eq,
    from_py_object,
    name = "ExportOptions",
    module = "devipc._devipc"
)]
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PyExportOptions {
    /// Whether any process may import.
    #[pyo3(get)]
    any_process: bool,
}

impl PyExportOptions {
    /// The Rust options.
    pub(crate) fn rust(&self) -> devipc::ExportOptions {
        if self.any_process {
            devipc::ExportOptions::any_process()
        } else {
            devipc::ExportOptions::default()
        }
    }
}

#[pymethods]
impl PyExportOptions {
    #[new]
    #[pyo3(signature = (*, any_process=false))]
    fn new(any_process: bool) -> Self {
        PyExportOptions { any_process }
    }

    fn __repr__(&self) -> String {
        format!("ExportOptions(any_process={})", py_bool(self.any_process))
    }
}

/// How `Runtime.allocate` makes memory, which decides how it is shared: `mechanism` is a
/// mechanism's name (`"hip-vmm-fd"`: HIP virtual memory shared as a file descriptor), or
/// `None` for the backend's default.
#[pyclass(
    frozen,
    eq,
    from_py_object,
    name = "AllocateOptions",
    module = "devipc._devipc"
)]
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PyAllocateOptions {
    mechanism: Option<Mechanism>,
}

impl PyAllocateOptions {
    /// The Rust options.
    pub(crate) fn rust(&self) -> devipc::AllocateOptions {
        match self.mechanism {
            Some(m) => devipc::AllocateOptions::mechanism(m),
            None => devipc::AllocateOptions::default(),
        }
    }
}

#[pymethods]
impl PyAllocateOptions {
    #[new]
    #[pyo3(signature = (*, mechanism=None))]
    fn new(mechanism: Option<&str>) -> PyResult<Self> {
        let mechanism = match mechanism {
            None => None,
            Some(name) => Some(
                Mechanism::ALL
                    .into_iter()
                    .find(|m| m.name() == name && !m.is_signal())
                    .ok_or_else(|| {
                        let names: Vec<&str> = Mechanism::ALL
                            .iter()
                            .filter(|m| !m.is_signal())
                            .map(|m| m.name())
                            .collect();
                        errors::invalid_argument(format!(
                            "unknown memory mechanism {name:?}; one of {}",
                            names.join(", ")
                        ))
                    })?,
            ),
        };
        Ok(PyAllocateOptions { mechanism })
    }

    /// The mechanism's name, or `None` (the backend's default).
    #[getter]
    fn mechanism(&self) -> Option<&'static str> {
        self.mechanism.map(Mechanism::name)
    }

    fn __repr__(&self) -> String {
        match self.mechanism {
            Some(m) => format!("AllocateOptions(mechanism={:?})", m.name()),
            None => "AllocateOptions(mechanism=None)".to_owned(),
        }
    }
}

/// How `SharedBuffer.share` serves importers: how the buffer and signals are exported
/// (`export_options`, default granted processes only: each importer is granted as it
/// connects), the time a connected importer has for the exchange (`io_timeout` seconds;
/// `None`: 5 s), the other uids accepted (`allow_uids`; ours always is) and the socket
/// file's permission bits (`socket_mode`, default 0o600).
#[pyclass(
    frozen,
    eq,
    from_py_object,
    name = "ShareOptions",
    module = "devipc._devipc"
)]
#[derive(Clone, PartialEq)]
pub(crate) struct PyShareOptions {
    /// How the buffer and signals are exported.
    #[pyo3(get)]
    export_options: PyExportOptions,
    /// Seconds a connected importer has for the exchange (`None`: the default, 5 s).
    #[pyo3(get)]
    io_timeout: Option<f64>,
    /// Other uids accepted.
    #[pyo3(get)]
    allow_uids: Vec<u32>,
    /// Permission bits of the socket file.
    #[pyo3(get)]
    socket_mode: u32,
}

/// [`PyShareOptions`] as the Rust builder's arguments.
pub(crate) struct ShareSettings {
    /// For `ShareOptions::export_options`.
    pub(crate) export: devipc::ExportOptions,
    /// For `ShareOptions::io_timeout`, if set.
    pub(crate) io_timeout: Option<Duration>,
    /// For `ShareOptions::allow_uid`, each.
    pub(crate) allow_uids: Vec<u32>,
    /// For `ShareOptions::socket_mode`.
    pub(crate) socket_mode: u32,
}

impl PyShareOptions {
    /// The options `SharedBuffer.share`'s flags give (`None`: the default).
    pub(crate) fn from_flags(io_timeout: Option<f64>, any_process: Option<bool>) -> Self {
        PyShareOptions {
            export_options: PyExportOptions {
                any_process: any_process.unwrap_or(false),
            },
            io_timeout,
            allow_uids: Vec::new(),
            socket_mode: SOCKET_MODE,
        }
    }

    /// The settings, checked.
    pub(crate) fn settings(&self) -> PyResult<ShareSettings> {
        Ok(ShareSettings {
            export: self.export_options.rust(),
            io_timeout: self.io_timeout.map(duration).transpose()?,
            allow_uids: self.allow_uids.clone(),
            socket_mode: self.socket_mode,
        })
    }
}

#[pymethods]
impl PyShareOptions {
    #[new]
    #[pyo3(signature = (*, export_options=None, io_timeout=None, allow_uids=Vec::new(), socket_mode=SOCKET_MODE))]
    fn new(
        export_options: Option<PyExportOptions>,
        io_timeout: Option<f64>,
        allow_uids: Vec<u32>,
        socket_mode: u32,
    ) -> PyResult<Self> {
        if let Some(t) = io_timeout {
            duration(t)?;
        }
        Ok(PyShareOptions {
            export_options: export_options.unwrap_or(PyExportOptions { any_process: false }),
            io_timeout,
            allow_uids,
            socket_mode,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "ShareOptions(export_options={}, io_timeout={}, allow_uids={:?}, socket_mode=0o{:o})",
            self.export_options.__repr__(),
            py_option(self.io_timeout),
            self.allow_uids,
            self.socket_mode
        )
    }
}

/// How `Runtime.connect` reaches an exporter: the time the whole rendezvous may take
/// (`timeout` seconds, default 30, as in Rust), whether to retry while nobody listens yet
/// (`wait_for_server`, default no: fail at once) and the other uids trusted as exporter
/// (`allow_uids`; ours always is).
#[pyclass(
    frozen,
    eq,
    from_py_object,
    name = "ConnectOptions",
    module = "devipc._devipc"
)]
#[derive(Clone, PartialEq)]
pub(crate) struct PyConnectOptions {
    /// Seconds the whole rendezvous may take.
    #[pyo3(get)]
    timeout: f64,
    /// Whether to retry while the exporter does not listen yet.
    #[pyo3(get)]
    wait_for_server: bool,
    /// Other uids trusted as exporter.
    #[pyo3(get)]
    allow_uids: Vec<u32>,
}

/// [`PyConnectOptions`] as the Rust builder's arguments.
pub(crate) struct ConnectSettings {
    /// For `ConnectOptions::timeout`.
    pub(crate) timeout: Duration,
    /// For `ConnectOptions::wait_for_server`.
    pub(crate) wait_for_server: bool,
    /// For `ConnectOptions::allow_uid`, each.
    pub(crate) allow_uids: Vec<u32>,
}

impl PyConnectOptions {
    /// The options `Runtime.connect`'s flags give (`None`: the default).
    pub(crate) fn from_flags(timeout: Option<f64>, wait_for_server: Option<bool>) -> Self {
        PyConnectOptions {
            timeout: timeout.unwrap_or(CONNECT_TIMEOUT_SECS),
            wait_for_server: wait_for_server.unwrap_or(false),
            allow_uids: Vec::new(),
        }
    }

    /// The settings, checked.
    pub(crate) fn settings(&self) -> PyResult<ConnectSettings> {
        Ok(ConnectSettings {
            timeout: duration(self.timeout)?,
            wait_for_server: self.wait_for_server,
            allow_uids: self.allow_uids.clone(),
        })
    }
}

#[pymethods]
impl PyConnectOptions {
    #[new]
    #[pyo3(signature = (*, timeout=CONNECT_TIMEOUT_SECS, wait_for_server=false, allow_uids=Vec::new()))]
    fn new(timeout: f64, wait_for_server: bool, allow_uids: Vec<u32>) -> PyResult<Self> {
        duration(timeout)?;
        Ok(PyConnectOptions {
            timeout,
            wait_for_server,
            allow_uids,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "ConnectOptions(timeout={:?}, wait_for_server={}, allow_uids={:?})",
            self.timeout,
            py_bool(self.wait_for_server),
            self.allow_uids
        )
    }
}

/// `True` / `False`.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// A float or `None`, as Python prints it.
fn py_option(v: Option<f64>) -> String {
    v.map_or_else(|| "None".to_owned(), |t| format!("{t:?}"))
}
