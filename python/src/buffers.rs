//! `Buffer`, and its two kinds `SharedBuffer` (allocated here) and `ImportedBuffer` (a
//! peer's export mapped here): length, address, device, copies to and from `bytes` or any
//! buffer-protocol object, DLPack export, typed views, and `close()`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};

use devipc::rendezvous::ShareOptions;
use devipc::{ExportOptions, ProcessId};

use crate::dlpack::{self, Layout, TensorView};
use crate::errors::{self, to_py};
use crate::held::{Held, Mem};
use crate::options::{PyExportOptions, PyShareOptions, no_flags_with};
use crate::rendezvous::ShareServer;
use crate::slot::{Op, Slot};
use crate::span::Span;
use crate::tokens;

/// What `SharedBuffer` and `ImportedBuffer` have in common.
#[pyclass(frozen, subclass, module = "devipc._devipc")]
pub(crate) struct Buffer {
    pub(crate) slot: Slot<Held>,
}

impl Buffer {
    /// The Rust buffer, or `ClosedError`.
    pub(crate) fn held(&self) -> PyResult<Arc<Held>> {
        self.slot.get()
    }

    /// The Rust buffer for an operation that releases the GIL (`close()` waits for it).
    fn op(&self) -> PyResult<Op<'_, Held>> {
        self.slot.op()
    }
}

#[pymethods]
impl Buffer {
    /// Length in bytes.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.held()?.len())
    }

    /// Length in bytes (as `len(buf)`).
    #[getter]
    fn nbytes(&self) -> PyResult<usize> {
        Ok(self.held()?.len())
    }

    /// The device address in this process (on the emulator, a host address).
    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        Ok(self.held()?.ptr())
    }

    /// The device id the memory is on (an import: the device it is mapped on).
    #[getter]
    fn device(&self) -> PyResult<u32> {
        Ok(self.held()?.device().0)
    }

    /// Whether `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.slot.is_closed()
    }

    /// Copies `data` (bytes, bytearray, memoryview, a C-contiguous numpy array: any
    /// buffer-protocol object) into the buffer at `offset`.
    #[pyo3(signature = (data, offset=0))]
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>, offset: usize) -> PyResult<()> {
        // The bytes first: taking them may run Python code (a `__buffer__`), which must
        // not find an operation of this thread in progress (see `Op`).
        let bytes = contiguous_bytes(data)?;
        let held = self.op()?;
        py.detach(|| held.write(offset, &bytes)).map_err(to_py)
    }

    /// Copies `size` bytes at `offset` (default: to the end) out of the buffer.
    #[pyo3(signature = (offset=0, size=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        size: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let held = self.op()?;
        let size = match size {
            Some(n) => n,
            None => held.len().checked_sub(offset).ok_or_else(|| {
                errors::invalid_argument(format!(
                    "offset {offset} is past the end of the {}-byte buffer",
                    held.len()
                ))
            })?,
        };
        // Checked before allocating: a huge `size` is an error, not an allocation failure.
        if offset.checked_add(size).is_none_or(|end| end > held.len()) {
            return Err(errors::invalid_argument(format!(
                "{size} bytes at offset {offset} do not fit the {}-byte buffer",
                held.len()
            )));
        }
        let mut out = vec![0u8; size];
        py.detach(|| held.read(offset, &mut out)).map_err(to_py)?;
        drop(held);
        Ok(PyBytes::new(py, &out))
    }

    /// The bytes `start..stop` (`stop` `None`: the end) as a `Span`, for stream-ordered
    /// copies (`Stream.copy`, ...); checked against the buffer. A span keeps the memory
    /// alive (a `close()` meanwhile releases it once the span and the requests through it
    /// are gone); it is not a DLPack view.
    #[pyo3(signature = (start=0, stop=None))]
    fn span(&self, start: usize, stop: Option<usize>) -> PyResult<Span> {
        Span::of_buffer(self, start, stop)
    }

    /// A typed view of the buffer for `numpy.from_dlpack` / `torch.from_dlpack`: `dtype`
    /// by name (`"float32"`, ...), `shape` and `strides` in elements (strides default to
    /// C-contiguous), `offset` in bytes. Refused if it reaches outside the buffer.
    #[pyo3(signature = (dtype, shape, strides=None, offset=0))]
    fn view(
        &self,
        dtype: &str,
        shape: Vec<i64>,
        strides: Option<Vec<i64>>,
        offset: u64,
    ) -> PyResult<TensorView> {
        let held = self.held()?;
        let layout = Layout::checked(dtype, shape, strides, offset, held.len())?;
        Ok(TensorView::new(held, layout))
    }

    /// Exports all bytes as a 1-D uint8 DLPack tensor (zero-copy).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let held = self.held()?;
        let layout = Layout::bytes(held.len());
        dlpack::dlpack(py, held, layout, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)` of the memory, as DLPack numbers them: `(1, 0)` (CPU) on
    /// the emulator, `(10, n)` ROCm, `(12, n)` Ascend (kDLExtDev).
    fn __dlpack_device__(&self) -> PyResult<(u32, i32)> {
        let held = self.held()?;
        Ok(dlpack::device_tuple(&held))
    }

    /// Releases the memory now (a shared buffer is freed, an import closed), after the
    /// copies and exports running on other threads have ended (they see `ClosedError`
    /// afterwards). Refused with `BufferInUseError` while DLPack views of it are alive; a
    /// second `close()` does nothing. Without it, the memory is released when the object
    /// and its views are gone. Releases the GIL.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.close_unviewed(py)
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
    ) -> PyResult<bool> {
        self.slot.close_unviewed(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.slot.get() {
            Ok(h) => format!(
                "<devipc buffer of {} bytes at {:#x} on device {}>",
                h.len(),
                h.ptr(),
                h.device().0
            ),
            Err(_) => "<devipc buffer (closed)>".to_owned(),
        }
    }
}

/// The bytes of a buffer-protocol object (copied: the GIL is released during the device
/// copy, and the object could change meanwhile).
pub(crate) fn contiguous_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let view = PyMemoryView::from(data).map_err(|_| {
        errors::invalid_argument(
            "data must support the buffer protocol (bytes, bytearray, memoryview, numpy array)",
        )
    })?;
    let flat = view
        .call_method1("cast", ("B",))
        .map_err(|e| errors::invalid_argument(format!("data must be C-contiguous: {e}")))?;
    let bytes = flat.call_method0("tobytes")?;
    Ok(bytes.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// Memory this process allocated to share (`Runtime.allocate`).
#[pyclass(frozen, extends = Buffer, module = "devipc._devipc")]
pub(crate) struct SharedBuffer {}

impl SharedBuffer {
    /// A new Python object for `held` (a [`Mem::Shared`]).
    pub(crate) fn create(py: Python<'_>, held: Held) -> PyResult<Py<SharedBuffer>> {
        let init = PyClassInitializer::from(Buffer {
            slot: Slot::new(held, "the shared buffer"),
        })
        .add_subclass(SharedBuffer {});
        Py::new(py, init)
    }
}

/// The devipc buffer of a `SharedBuffer` object, for an operation that releases the GIL.
fn shared<'a>(slf: &'a Bound<'_, SharedBuffer>) -> PyResult<Shared<'a>> {
    let op = slf.as_super().get().op()?;
    match &op.mem {
        Mem::Shared(_) => Ok(Shared(op)),
        Mem::Imported(_) => Err(errors::invalid_argument("not a shared buffer")),
    }
}

/// An operation on a `SharedBuffer` ([`Op`]), whose memory is a [`Mem::Shared`].
struct Shared<'a>(Op<'a, Held>);

impl Shared<'_> {
    fn buf(&self) -> &devipc::SharedBuffer {
        match &self.0.mem {
            Mem::Shared(b) => b,
            // `shared` checked it.
            Mem::Imported(_) => unreachable!("a Shared holds a shared buffer"),
        }
    }
}

#[pymethods]
impl SharedBuffer {
    /// Exports the buffer (or `size` bytes at `offset`) as a token string. The peer needs
    /// a `grant` unless `options` (an `ExportOptions`) says any process, or the shorthand
    /// `any_process` is true (or the backend has no access control).
    #[pyo3(signature = (offset=0, size=None, options=None, *, any_process=None))]
    fn export(
        slf: &Bound<'_, Self>,
        offset: usize,
        size: Option<usize>,
        options: Option<PyExportOptions>,
        any_process: Option<bool>,
    ) -> PyResult<String> {
        let opts = export_options("SharedBuffer.export", options, any_process)?;
        let op = shared(slf)?;
        let buf = op.buf();
        let end = match size {
            Some(n) => offset.checked_add(n),
            None => Some(buf.len()),
        }
        .ok_or_else(|| errors::invalid_argument("offset + size overflows"))?;
        let token = slf
            .py()
            .detach(|| buf.export_range(offset..end, opts))
            .map_err(to_py)?;
        Ok(token.to_text())
    }

    /// Lets the processes `pids` (their `Runtime.process_id`) import `token`.
    fn grant(slf: &Bound<'_, Self>, token: &str, pids: Vec<u32>) -> PyResult<()> {
        let token = tokens::mem(token)?;
        let peers: Vec<ProcessId> = pids.into_iter().map(ProcessId).collect();
        let op = shared(slf)?;
        let buf = op.buf();
        slf.py().detach(|| buf.grant(&token, &peers)).map_err(to_py)
    }

    /// Serves the buffer at the Unix socket `path` (see `Runtime.connect`); the returned
    /// server grants each importer as it connects (`ShareServer.accept`). `options` (a
    /// `ShareOptions`), or the shorthands `io_timeout` and `any_process`, say how.
    #[pyo3(signature = (path, signals=Vec::new(), options=None, *, io_timeout=None, any_process=None))]
    fn share(
        slf: &Bound<'_, Self>,
        path: std::path::PathBuf,
        signals: Vec<PyRef<'_, crate::signal::Signal>>,
        options: Option<PyShareOptions>,
        io_timeout: Option<f64>,
        any_process: Option<bool>,
    ) -> PyResult<ShareServer> {
        no_flags_with(
            "SharedBuffer.share",
            &options,
            &[
                ("io_timeout", io_timeout.is_some()),
                ("any_process", any_process.is_some()),
            ],
        )?;
        let settings = options
            .unwrap_or_else(|| PyShareOptions::from_flags(io_timeout, any_process))
            .settings()?;
        let mut opts = ShareOptions::new()
            .export_options(settings.export)
            .socket_mode(settings.socket_mode);
        if let Some(t) = settings.io_timeout {
            opts = opts.io_timeout(t);
        }
        for uid in settings.allow_uids {
            opts = opts.allow_uid(uid);
        }
        let signals = signals
            .iter()
            .map(|s| s.get())
            .collect::<PyResult<Vec<_>>>()?;
        let op = shared(slf)?;
        let buf = op.buf();
        let server = slf
            .py()
            .detach(|| -> devipc::Result<devipc::rendezvous::ShareServer> {
                let mut server = buf.share(&path, opts)?;
                for signal in &signals {
                    server.add_signal(signal)?;
                }
                Ok(server)
            })
            .map_err(to_py)?;
        Ok(ShareServer::new(server))
    }
}

/// The export options of `method`: `options` (an `ExportOptions`) or the `any_process`
/// shorthand (absent: granted peers only), not both.
pub(crate) fn export_options(
    method: &str,
    options: Option<PyExportOptions>,
    any_process: Option<bool>,
) -> PyResult<ExportOptions> {
    no_flags_with(method, &options, &[("any_process", any_process.is_some())])?;
    Ok(match options {
        Some(o) => o.rust(),
        None if any_process == Some(true) => ExportOptions::any_process(),
        None => ExportOptions::default(),
    })
}

/// A peer's (or this process's own) exported memory, mapped here (`Runtime.import_buffer`).
#[pyclass(frozen, extends = Buffer, module = "devipc._devipc")]
pub(crate) struct ImportedBuffer {
    local: bool,
}

impl ImportedBuffer {
    /// A new Python object for `held` (a [`Mem::Imported`]).
    pub(crate) fn create(py: Python<'_>, held: Held) -> PyResult<Py<ImportedBuffer>> {
        let local = matches!(&held.mem, Mem::Imported(b) if b.is_local());
        let init = PyClassInitializer::from(Buffer {
            slot: Slot::new(held, "the imported buffer"),
        })
        .add_subclass(ImportedBuffer { local });
        Py::new(py, init)
    }
}

#[pymethods]
impl ImportedBuffer {
    /// Whether this is a view of this process's own export (no vendor import).
    #[getter]
    fn is_local(&self) -> bool {
        self.local
    }
}
