//! Python exceptions for devipc's [`Error`]: a `DevipcError` base and one subclass per
//! error kind, each carrying the error's fields as attributes, all in `devipc.errors`.
//!
//! The classes are made from the table of error kinds ([`ErrorKind::ALL`]: class name,
//! parent and docstring per kind), not listed here, plus the bindings' own kinds
//! ([`BINDING_KINDS`]). Every exception has `kind` (the variant's stable name,
//! [`Error::kind`]), `backend`, `api`, `code`, `name` and `message` (the vendor fields of
//! [`Error::Vendor`]; `None` where a kind has no such field, except `message`, which is
//! the full text otherwise) and `details`, a dict of the kind's other fields. A
//! `CopyError` (a pair of a batch refused when enqueued) also has `index` (the pair) and
//! `count` (the batch's length), and its cause as `__cause__`.
//!
//! Two kinds come from the bindings, not from the Rust API: [`CLOSED`] (an object used
//! after `close()`) and [`BUFFER_IN_USE`] (closing a buffer that DLPack views still use).

use std::collections::HashMap;
use std::ffi::CString;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};
use pyo3::{PyTypeInfo, create_exception};

use devipc::{Error, ErrorKind};

/// The module the classes live in (and pickle by).
const MODULE: &str = "devipc.errors";

create_exception!(
    _devipc,
    DevipcError,
    PyException,
    "Base class of every devipc error. Attributes: kind, backend, api, code, name, message, details."
);

/// One exception class: a row of the table of error kinds, or one of the bindings' own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassRow {
    /// The `kind` attribute: the stable snake_case name.
    pub(crate) kind: &'static str,
    /// The numeric code of the kind ([`ErrorKind::code`]); `None` for the bindings' own.
    pub(crate) code: Option<u32>,
    /// The class name.
    pub(crate) class: &'static str,
    /// The parent's class name: `DevipcError` or a class of an earlier row.
    pub(crate) parent: &'static str,
    /// The docstring.
    pub(crate) doc: &'static str,
}

impl From<ErrorKind> for ClassRow {
    fn from(k: ErrorKind) -> Self {
        ClassRow {
            kind: k.name(),
            code: Some(k.code()),
            class: k.python_class(),
            parent: k.python_parent(),
            doc: k.doc(),
        }
    }
}

/// An object used after `close()`.
pub(crate) const CLOSED: ClassRow = ClassRow {
    kind: "closed",
    code: None,
    class: "ClosedError",
    parent: "DevipcError",
    doc: "The object was closed: it can no longer be used.",
};

/// Closing a buffer that DLPack views still use.
pub(crate) const BUFFER_IN_USE: ClassRow = ClassRow {
    kind: "buffer_in_use",
    code: None,
    class: "BufferInUseError",
    parent: "DevipcError",
    doc: "A buffer cannot be closed while DLPack views of it are alive.",
};

/// A peer process of a Python-level channel (`devipc.refit`) is gone.
pub(crate) const PEER_LOST: ClassRow = ClassRow {
    kind: "peer_lost",
    code: None,
    class: "PeerLostError",
    parent: "DevipcError",
    doc: "A peer process of a channel is gone (it exited, was killed, or closed its end): \
          ``details`` names it.",
};

/// The kinds of the bindings themselves, after the table's.
const BINDING_KINDS: [ClassRow; 3] = [CLOSED, BUFFER_IN_USE, PEER_LOST];

/// Every class below `DevipcError`, in creation order: the table's, then the bindings'.
fn rows() -> impl Iterator<Item = ClassRow> {
    ErrorKind::ALL
        .iter()
        .map(|&k| ClassRow::from(k))
        .chain(BINDING_KINDS)
}

/// The classes by name, created once per process.
static CLASSES: PyOnceLock<HashMap<&'static str, Py<PyType>>> = PyOnceLock::new();

/// Creates `DevipcError`'s subclasses from [`rows`].
fn create(py: Python<'_>) -> PyResult<HashMap<&'static str, Py<PyType>>> {
    let base = DevipcError::type_object(py);
    base.setattr("__module__", MODULE)?;
    let mut made: HashMap<&'static str, Py<PyType>> = HashMap::new();
    for row in rows() {
        let parent = match made.get(row.parent) {
            Some(p) => p.bind(py).clone(),
            None if row.parent == "DevipcError" => base.clone(),
            None => {
                return Err(pyo3::exceptions::PySystemError::new_err(format!(
                    "{}: parent {} is not defined before it",
                    row.class, row.parent
                )));
            }
        };
        let cstr = |text: String| {
            CString::new(text).map_err(|e| pyo3::exceptions::PySystemError::new_err(e.to_string()))
        };
        let name = cstr(format!("{MODULE}.{}", row.class))?;
        let doc = cstr(row.doc.to_owned())?;
        let class = PyErr::new_type(py, &name, Some(&doc), Some(&parent), None)?;
        if made.insert(row.class, class).is_some() {
            return Err(pyo3::exceptions::PySystemError::new_err(format!(
                "two kinds name the class {}",
                row.class
            )));
        }
    }
    Ok(made)
}

/// The class named `class` (a row's), or `DevipcError` if the classes cannot be made.
fn class<'py>(py: Python<'py>, class: &str) -> Bound<'py, PyType> {
    match CLASSES.get_or_try_init(py, || create(py)) {
        Ok(classes) => match classes.get(class) {
            Some(c) => c.bind(py).clone(),
            None => DevipcError::type_object(py),
        },
        Err(_) => DevipcError::type_object(py),
    }
}

/// Makes the classes and hands them to the extension module: `_errors`, a dict of every
/// class by name (`DevipcError` first, then in table order), which `devipc.errors`
/// re-exports, and `_error_table`, the rows as dicts (for the tests).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let made = CLASSES.get_or_try_init(py, || create(py))?;
    let classes = PyDict::new(py);
    classes.set_item("DevipcError", DevipcError::type_object(py))?;
    let table = PyList::empty(py);
    for row in rows() {
        classes.set_item(row.class, made[row.class].bind(py))?;
        let item = PyDict::new(py);
        item.set_item("kind", row.kind)?;
        item.set_item("code", row.code)?;
        item.set_item("class", row.class)?;
        item.set_item("parent", row.parent)?;
        item.set_item("doc", row.doc)?;
        table.append(item)?;
    }
    m.add("_errors", classes)?;
    m.add("_error_table", table)?;
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
    // A refused copy's index, batch length and cause.
    let mut copy: Option<(usize, usize, PyErr)> = None;
    // The fields of each kind; the class comes from the table.
    match e {
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
        }
        Error::MissingSymbol { library, symbol } => {
            details.set_item("library", library.display().to_string())?;
            details.set_item("symbol", *symbol)?;
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
        }
        Error::Config { what, problem } => {
            details.set_item("what", what)?;
            details.set_item("problem", problem)?;
        }
        Error::InvalidToken { reason } => {
            details.set_item("reason", reason)?;
        }
        Error::BackendMismatch { expected, found } => {
            details.set_item("expected", expected)?;
            details.set_item("found", found)?;
        }
        Error::Unsupported { backend: b, what } => {
            backend = Some(b.to_string());
            details.set_item("what", what)?;
        }
        Error::InvalidDevice { device, count } => {
            details.set_item("device", device.0)?;
            details.set_item("count", *count)?;
        }
        Error::DeviceNotVisible { device, visibility } => {
            details.set_item("device", device.to_string())?;
            details.set_item("visibility", visibility.clone())?;
        }
        Error::InvalidArgument { what } => {
            details.set_item("what", what)?;
        }
        Error::UnknownHandle { kind, id } => {
            details.set_item("handle_kind", *kind)?;
            details.set_item("id", *id)?;
        }
        Error::InheritedAcrossFork {
            what,
            creator,
            current,
        } => {
            details.set_item("what", *what)?;
            details.set_item("creator", *creator)?;
            details.set_item("current", *current)?;
        }
        Error::Timeout { what, after } => {
            details.set_item("what", what)?;
            details.set_item("after", after.as_secs_f64())?;
        }
        Error::Io { context, source } => {
            details.set_item("context", context)?;
            details.set_item("errno", source.raw_os_error())?;
        }
        Error::Copy {
            index,
            count,
            source,
        } => {
            details.set_item("index", *index)?;
            details.set_item("count", *count)?;
            details.set_item("source_kind", source.kind())?;
            details.set_item("source", source.to_string())?;
            copy = Some((*index, *count, build(py, source)?));
        }
        // `Error` is non-exhaustive: a variant added later has its class (every variant
        // has a row in the table) but no details until it gets an arm above.
        #[allow(
            unreachable_patterns,
            reason = "future variants of a non-exhaustive enum"
        )]
        _ => {}
    }
    let class = class(py, e.error_kind().python_class());
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
    let err = PyErr::from_value(value);
    if let Some((index, count, cause)) = copy {
        let value = err.value(py);
        value.setattr("index", index)?;
        value.setattr("count", count)?;
        err.set_cause(py, Some(cause));
    }
    Ok(err)
}

/// `ClosedError` ([`CLOSED`]) for `what` (e.g. `"the runtime"`).
pub(crate) fn closed(what: &str) -> PyErr {
    plain(
        CLOSED,
        format!("{what} was closed: it can no longer be used"),
    )
}

/// An exception of the bindings' own kinds (`row`), with the same attributes as
/// [`to_py`]'s.
pub(crate) fn plain(row: ClassRow, text: String) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let value = class(py, row.class).call1((text.clone(),))?;
            value.setattr("kind", row.kind)?;
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

/// `_binding_error(kind, text, details)`: an exception of one of the bindings' own kinds
/// (`"peer_lost"`, `"closed"`, `"buffer_in_use"`), with the same attributes as every
/// other, for the package's Python modules (`devipc.refit` raises `PeerLostError`).
#[pyfunction]
#[pyo3(signature = (kind, text, details=None))]
pub(crate) fn _binding_error(
    py: Python<'_>,
    kind: &str,
    text: String,
    details: Option<Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let Some(row) = BINDING_KINDS.into_iter().find(|r| r.kind == kind) else {
        return Err(invalid_argument(format!(
            "{kind:?} is not a kind of the bindings"
        )));
    };
    let err = plain(row, text);
    let value = err.value(py);
    if let Some(d) = details {
        value.setattr("details", d)?;
    }
    Ok(value.clone().into_any().unbind())
}

/// `InvalidArgumentError` with `what`, as [`Error::InvalidArgument`] would give.
pub(crate) fn invalid_argument(what: impl Into<String>) -> PyErr {
    to_py(Error::invalid_argument(what))
}
