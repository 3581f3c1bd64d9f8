//! Python exceptions for devipc's [`Error`]: a `DevipcError` base and one subclass per
//! error kind, each carrying the error's fields as attributes.
//!
//! Every exception has `kind` (the variant's stable name, [`Error::kind`]), `backend`,
//! `api`, `code`, `name` and `message` (the vendor fields of [`Error::Vendor`]; `None`
//! where a kind has no such field, except `message`, which is the full text otherwise) and
//! `details`, a dict of the kind's other fields. A variant added to [`Error`] later maps to
//! `DevipcError` itself until it gets a class here (the match has a fallback arm).
//!
//! Two kinds come from the bindings, not from the Rust API: [`ClosedError`] (an object used
//! after `close()`) and [`BufferInUseError`] (closing a buffer that DLPack views still use).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::{PyTypeInfo, create_exception};

use devipc::Error;

create_exception!(
    _devipc,
    DevipcError,
    PyException,
    "Base class of every devipc error. Attributes: kind, backend, api, code, name, message, details."
);
create_exception!(
    _devipc,
    LibraryNotFoundError,
    DevipcError,
    "No candidate path held a loadable vendor library."
);
create_exception!(
    _devipc,
    MissingSymbolError,
    DevipcError,
    "The vendor library lacks a symbol devipc requires."
);
create_exception!(
    _devipc,
    VendorError,
    DevipcError,
    "A vendor call failed: backend, api, code, name and message say which and why."
);
create_exception!(
    _devipc,
    NoBackendStartedError,
    DevipcError,
    "No backend could start; details['attempts'] has each backend's error."
);
create_exception!(
    _devipc,
    ConfigError,
    DevipcError,
    "devipc's own configuration (an environment variable, a directory) is unusable."
);
create_exception!(
    _devipc,
    InvalidTokenError,
    DevipcError,
    "A string is not a valid devipc token."
);
create_exception!(
    _devipc,
    BackendMismatchError,
    DevipcError,
    "A token belongs to another backend than the runtime asked to use it."
);
create_exception!(
    _devipc,
    UnsupportedError,
    DevipcError,
    "The backend or this runtime version cannot do what was asked."
);
create_exception!(
    _devipc,
    InvalidDeviceError,
    DevipcError,
    "A device id outside the devices the backend reports."
);
create_exception!(
    _devipc,
    DeviceNotVisibleError,
    DevipcError,
    "The token's device is not among the devices this process sees (another visibility mask)."
);
create_exception!(
    _devipc,
    InvalidArgumentError,
    DevipcError,
    "An argument is out of range or inconsistent."
);
create_exception!(
    _devipc,
    UnknownHandleError,
    DevipcError,
    "A handle already closed or freed, or of another runtime."
);
create_exception!(
    _devipc,
    InheritedAcrossForkError,
    DevipcError,
    "A runtime, buffer or signal used in a child forked after it was made: open a new Runtime in the child (or use the 'spawn' start method)."
);
create_exception!(
    _devipc,
    TimedOutError,
    DevipcError,
    "A blocking operation did not complete in time."
);
create_exception!(
    _devipc,
    DevipcIOError,
    DevipcError,
    "An operating-system call failed."
);
create_exception!(
    _devipc,
    ClosedError,
    DevipcError,
    "The object was closed: it can no longer be used."
);
create_exception!(
    _devipc,
    BufferInUseError,
    DevipcError,
    "A buffer cannot be closed while DLPack views of it are alive."
);

/// Registers every exception class in the module, named as the `devipc` package
/// re-exports them (so that they pickle by that name).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let add = |name: &str, class: Bound<'_, pyo3::types::PyType>| -> PyResult<()> {
        class.setattr("__module__", "devipc")?;
        m.add(name, class)
    };
    add("DevipcError", py.get_type::<DevipcError>())?;
    add(
        "LibraryNotFoundError",
        py.get_type::<LibraryNotFoundError>(),
    )?;
    add("MissingSymbolError", py.get_type::<MissingSymbolError>())?;
    add("VendorError", py.get_type::<VendorError>())?;
    add(
        "NoBackendStartedError",
        py.get_type::<NoBackendStartedError>(),
    )?;
    add("ConfigError", py.get_type::<ConfigError>())?;
    add("InvalidTokenError", py.get_type::<InvalidTokenError>())?;
    add(
        "BackendMismatchError",
        py.get_type::<BackendMismatchError>(),
    )?;
    add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    add("InvalidDeviceError", py.get_type::<InvalidDeviceError>())?;
    add(
        "DeviceNotVisibleError",
        py.get_type::<DeviceNotVisibleError>(),
    )?;
    add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    add("UnknownHandleError", py.get_type::<UnknownHandleError>())?;
    add(
        "InheritedAcrossForkError",
        py.get_type::<InheritedAcrossForkError>(),
    )?;
    add("TimedOutError", py.get_type::<TimedOutError>())?;
    add("DevipcIOError", py.get_type::<DevipcIOError>())?;
    add("ClosedError", py.get_type::<ClosedError>())?;
    add("BufferInUseError", py.get_type::<BufferInUseError>())?;
    Ok(())
}

/// The Python exception for `e`, with its fields as attributes.
pub(crate) fn to_py(e: Error) -> PyErr {
    Python::attach(|py| match build(py, &e) {
        Ok(err) => err,
        // Building the attributes failed (out of memory): the bare class and text.
        Err(_) => DevipcError::new_err(e.to_string()),
    })
}

/// The class, the vendor fields and the details of `e`.
fn build(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let details = PyDict::new(py);
    let mut backend: Option<String> = None;
    let mut vendor: Option<(&str, i32, &str, &str)> = None;
    let class = match e {
        Error::LibraryNotFound { backend: b, tried } => {
            backend = Some(b.to_string());
            let list = PyList::empty(py);
            for t in tried {
                let item = PyDict::new(py);
                item.set_item("path", t.path.display().to_string())?;
                item.set_item("origin", &t.origin)?;
                item.set_item("error", &t.error)?;
                list.append(item)?;
            }
            details.set_item("tried", list)?;
            LibraryNotFoundError::type_object(py)
        }
        Error::MissingSymbol { library, symbol } => {
            details.set_item("library", library.display().to_string())?;
            details.set_item("symbol", *symbol)?;
            MissingSymbolError::type_object(py)
        }
        Error::Vendor {
            backend: b,
            api,
            code,
            name,
            message,
        } => {
            backend = Some(b.to_string());
            vendor = Some((api, *code, name, message));
            VendorError::type_object(py)
        }
        Error::NoBackendStarted { attempts } => {
            let list = PyList::empty(py);
            for a in attempts {
                let item = PyDict::new(py);
                item.set_item("backend", a.backend.to_string())?;
                item.set_item("kind", a.error.kind())?;
                item.set_item("error", a.error.to_string())?;
                list.append(item)?;
            }
            details.set_item("attempts", list)?;
            NoBackendStartedError::type_object(py)
        }
        Error::Config { what, problem } => {
            details.set_item("what", what)?;
            details.set_item("problem", problem)?;
            ConfigError::type_object(py)
        }
        Error::InvalidToken { reason } => {
            details.set_item("reason", reason)?;
            InvalidTokenError::type_object(py)
        }
        Error::BackendMismatch { expected, found } => {
            details.set_item("expected", expected)?;
            details.set_item("found", found)?;
            BackendMismatchError::type_object(py)
        }
        Error::Unsupported { backend: b, what } => {
            backend = Some(b.to_string());
            details.set_item("what", what)?;
            UnsupportedError::type_object(py)
        }
        Error::InvalidDevice { device, count } => {
            details.set_item("device", device.0)?;
            details.set_item("count", *count)?;
            InvalidDeviceError::type_object(py)
        }
        Error::DeviceNotVisible { device, visibility } => {
            details.set_item("device", device.to_string())?;
            details.set_item("visibility", visibility.clone())?;
            DeviceNotVisibleError::type_object(py)
        }
        Error::InvalidArgument { what } => {
            details.set_item("what", what)?;
            InvalidArgumentError::type_object(py)
        }
        Error::UnknownHandle { kind, id } => {
            details.set_item("handle_kind", *kind)?;
            details.set_item("id", *id)?;
            UnknownHandleError::type_object(py)
        }
        Error::InheritedAcrossFork {
            what,
            creator,
            current,
        } => {
            details.set_item("what", *what)?;
            details.set_item("creator", *creator)?;
            details.set_item("current", *current)?;
            InheritedAcrossForkError::type_object(py)
        }
        Error::Timeout { what, after } => {
            details.set_item("what", what)?;
            details.set_item("after", after.as_secs_f64())?;
            TimedOutError::type_object(py)
        }
        Error::Io { context, source } => {
            details.set_item("context", context)?;
            details.set_item("errno", source.raw_os_error())?;
            DevipcIOError::type_object(py)
        }
        // `Error` is non-exhaustive: a variant added later is a DevipcError until it gets
        // its own class above.
        #[allow(
            unreachable_patterns,
            reason = "future variants of a non-exhaustive enum"
        )]
        _ => DevipcError::type_object(py),
    };
    let text = e.to_string();
    let value = class.call1((text.clone(),))?;
    value.setattr("kind", e.kind())?;
    value.setattr("backend", backend)?;
    match vendor {
        Some((api, code, name, message)) => {
            value.setattr("api", api)?;
            value.setattr("code", code)?;
            value.setattr("name", name)?;
            value.setattr("message", message)?;
        }
        None => {
            value.setattr("api", py.None())?;
            value.setattr("code", py.None())?;
            value.setattr("name", py.None())?;
            value.setattr("message", text)?;
        }
    }
    value.setattr("details", details)?;
    Ok(PyErr::from_value(value))
}

/// [`ClosedError`] for `what` (e.g. `"the runtime"`).
pub(crate) fn closed(what: &str) -> PyErr {
    plain::<ClosedError>(
        "closed",
        format!("{what} was closed: it can no longer be used"),
    )
}

/// An exception of the bindings' own kinds, with the same attributes as [`to_py`]'s.
pub(crate) fn plain<T: PyTypeInfo>(kind: &str, text: String) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let value = T::type_object(py).call1((text.clone(),))?;
            value.setattr("kind", kind)?;
            for field in ["backend", "api", "code", "name"] {
                value.setattr(field, py.None())?;
            }
            value.setattr("message", &text)?;
            value.setattr("details", PyDict::new(py))?;
            Ok(PyErr::from_value(value))
        };
        build().unwrap_or_else(|e| e)
    })
}

/// [`InvalidArgumentError`] with `what`, as [`Error::InvalidArgument`] would give.
pub(crate) fn invalid_argument(what: impl Into<String>) -> PyErr {
    to_py(Error::invalid_argument(what))
}
