//! `Runtime`: a started backend (real or emulated). Buffers and signals made from it keep
//! their own reference to the Rust runtime, so `Runtime.close()` ends this handle only:
//! what was made from it stays usable until it is closed or collected, as in Rust.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use devipc::rendezvous::ConnectOptions;
use devipc::{BackendKind, DeviceId, DevicePtr, ProcessId};

use crate::buffers::{ImportedBuffer, SharedBuffer, export_options};
use crate::errors::to_py;
use crate::held::{Held, Mem};
use crate::options::{PyAllocateOptions, PyConnectOptions, PyExportOptions, no_flags_with};
use crate::rendezvous::Connected;
use crate::signal::Signal;
use crate::slot::Slot;
use crate::stream::{Event, Stream, wrap_new};
use crate::tokens;

/// A started backend.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct Runtime {
    inner: Slot<devipc::Runtime>,
    /// The live blocks of `framework_malloc`, as (device, address), each with the runtime
    /// that frees it (also after `close()`): only those are freed.
    framework: Mutex<HashMap<(u32, u64), Arc<devipc::Runtime>>>,
    /// The framework blocks this runtime's `export_external` exported and its
    /// `close_external` (or `framework_free`) has not ended, as (device, block base) →
    /// block size, from the tokens (the block starts `offset` bytes before the exported
    /// address): which storages share one block (`external_block`).
    external: Mutex<BTreeMap<(u32, u64), u64>>,
}

/// `"ascend"` or `"hip"` as a [`BackendKind`].
fn kind(name: &str) -> PyResult<BackendKind> {
    name.parse::<BackendKind>().map_err(to_py)
}

impl Runtime {
    fn wrap(rt: devipc::Runtime) -> Runtime {
        Runtime {
            inner: Slot::new(rt, "the runtime"),
            framework: Mutex::new(HashMap::new()),
            external: Mutex::new(BTreeMap::new()),
        }
    }

    fn external(&self) -> std::sync::MutexGuard<'_, BTreeMap<(u32, u64), u64>> {
        // Each critical section is one lookup, insertion or removal.
        self.external.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The recorded block holding `ptr` on `device`, as its key and size.
    fn external_block_of(&self, device: u32, ptr: u64) -> Option<((u32, u64), u64)> {
        let blocks = self.external();
        let (&key, &size) = blocks.range(..=(device, ptr)).next_back()?;
        (key.0 == device && ptr - key.1 < size.max(1)).then_some((key, size))
    }

    /// Forgets the recorded block holding `ptr` on `device`, if any.
    fn forget_external_block(&self, device: u32, ptr: u64) {
        if let Some((key, _)) = self.external_block_of(device, ptr) {
            self.external().remove(&key);
        }
    }

    /// The Rust runtime, or `ClosedError`.
    pub(crate) fn get(&self) -> PyResult<Arc<devipc::Runtime>> {
        self.inner.get()
    }

    fn held(rt: &devipc::Runtime, mem: Mem) -> Held {
        let info = rt.info();
        Held::new(mem, info.kind, info.source.is_emulated())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // The framework blocks' runtimes may be the last references to the backend, whose
        // drop joins its threads: outside the GIL, as the slot's own reference.
        let blocks = std::mem::take(
            self.framework
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        crate::slot::release(blocks);
    }
}

#[pymethods]
impl Runtime {
    /// Starts what `DEVIPC_BACKEND` names (`ascend|hip|emulated-ascend|emulated-hip|auto`;
    /// unset: the first real runtime that starts).
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<Runtime> {
        py.detach(devipc::Runtime::from_env)
            .map(Runtime::wrap)
            .map_err(to_py)
    }

    /// Starts the devipc emulator speaking `kind`'s ABI (`"ascend"` or `"hip"`): host
    /// shared memory, no device needed.
    #[staticmethod]
    fn emulated(py: Python<'_>, kind: &str) -> PyResult<Runtime> {
        let kind = self::kind(kind)?;
        py.detach(|| devipc::Runtime::emulated(kind))
            .map(Runtime::wrap)
            .map_err(to_py)
    }

    /// Starts the real vendor runtime of `kind` (`"ascend"` or `"hip"`).
    #[staticmethod]
    fn open(py: Python<'_>, kind: &str) -> PyResult<Runtime> {
        let kind = self::kind(kind)?;
        py.detach(|| devipc::Runtime::open(kind))
            .map(Runtime::wrap)
            .map_err(to_py)
    }

    /// `"ascend"` or `"hip"`.
    #[getter]
    fn backend(&self) -> PyResult<String> {
        Ok(self.get()?.info().kind.to_string())
    }

    /// Whether this is the emulator.
    #[getter]
    fn emulated_backend(&self) -> PyResult<bool> {
        Ok(self.get()?.info().source.is_emulated())
    }

    /// Kind, library, version and capabilities, as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::doctor::info_dict(py, self.get()?.info())
    }

    /// The id peers grant so that this process may import (Ascend: the bare tgid).
    #[getter]
    fn process_id(&self) -> PyResult<u32> {
        Ok(self.get()?.process_id().0)
    }

    /// Number of devices visible to this process.
    fn device_count(&self) -> PyResult<u32> {
        self.get()?.device_count().map_err(to_py)
    }

    /// Allocates `size` bytes of exportable memory on `device`, made the backend's default
    /// way, or the way `options` (an `AllocateOptions`) names.
    #[pyo3(signature = (size, device=0, options=None))]
    fn allocate(
        &self,
        py: Python<'_>,
        size: usize,
        device: u32,
        options: Option<PyAllocateOptions>,
    ) -> PyResult<Py<SharedBuffer>> {
        let rt = self.get()?;
        let buf = py
            .detach(|| match options {
                Some(o) => rt.allocate_with(DeviceId(device), size, o.rust()),
                None => rt.allocate(DeviceId(device), size),
            })
            .map_err(to_py)?;
        SharedBuffer::create(py, Runtime::held(&rt, Mem::Shared(buf)))
    }

    /// Maps the memory of the token string `token` on `device`.
    #[pyo3(signature = (token, device=0))]
    fn import_buffer(
        &self,
        py: Python<'_>,
        token: &str,
        device: u32,
    ) -> PyResult<Py<ImportedBuffer>> {
        let rt = self.get()?;
        let token = tokens::mem(token)?;
        let buf = py
            .detach(|| rt.import(&token, DeviceId(device)))
            .map_err(to_py)?;
        ImportedBuffer::create(py, Runtime::held(&rt, Mem::Imported(buf)))
    }

    /// This process's index of the device the memory or signal token string `token` was
    /// exported from, found by the physical identity the token carries, or `None` when
    /// that device is not visible here (another visibility mask).
    fn local_device_of(&self, token: &str) -> PyResult<Option<u32>> {
        let rt = self.get()?;
        let found = match tokens::mem(token) {
            Ok(mem) => rt.local_device_of(&mem),
            Err(_) => rt.local_device_of(&tokens::signal(token)?),
        };
        Ok(found.map_err(to_py)?.map(|d| d.0))
    }

    /// Maps the memory of `token` on this process's index of the exporter's own device;
    /// `DeviceNotVisibleError` when that device is not visible here.
    fn import_on_exporter_device(
        &self,
        py: Python<'_>,
        token: &str,
    ) -> PyResult<Py<ImportedBuffer>> {
        let rt = self.get()?;
        let token = tokens::mem(token)?;
        let buf = py
            .detach(|| rt.import_on_exporter_device(&token))
            .map_err(to_py)?;
        ImportedBuffer::create(py, Runtime::held(&rt, Mem::Imported(buf)))
    }

    /// Exports memory a framework allocated itself (`size` bytes at device address `ptr`
    /// on `device`) as a token string, for the peers `options` (an `ExportOptions`) or the
    /// shorthand `any_process` allow. Keep it allocated while peers use it, and call
    /// `close_external` before the framework frees it.
    #[pyo3(signature = (ptr, size, device=0, options=None, *, any_process=None))]
    fn export_external(
        &self,
        py: Python<'_>,
        ptr: u64,
        size: usize,
        device: u32,
        options: Option<PyExportOptions>,
        any_process: Option<bool>,
    ) -> PyResult<String> {
        let opts = export_options("Runtime.export_external", options, any_process)?;
        let rt = self.get()?;
        let token = py
            .detach(|| rt.export_external(DeviceId(device), DevicePtr(ptr), size, opts))
            .map_err(to_py)?;
        let base = ptr.wrapping_sub(token.offset());
        let end = base.saturating_add(token.object_size().max(1));
        let mut blocks = self.external();
        // A block recorded over the same addresses was freed without close_external.
        let stale: Vec<_> = blocks
            .range((device, 0)..(device, end))
            .filter(|&(&(_, b), &n)| b.saturating_add(n.max(1)) > base)
            .map(|(&k, _)| k)
            .collect();
        for k in stale {
            blocks.remove(&k);
        }
        blocks.insert((device, base), token.object_size());
        Ok(token.to_text())
    }

    /// The framework block holding device address `ptr` on `device` that this runtime's
    /// `export_external` exported and that is not closed yet, as `(base, size)`; `None`
    /// if there is none. Storages carved from one block share its exports, which one
    /// `close_external` ends (`devipc.torch.close_external` closes each block once).
    #[pyo3(signature = (ptr, device=0))]
    fn external_block(&self, ptr: u64, device: u32) -> PyResult<Option<(u64, u64)>> {
        self.get()?;
        Ok(self
            .external_block_of(device, ptr)
            .map(|((_, base), size)| (base, size)))
    }

    /// Ends the exports of the framework block holding `ptr` on `device`.
    #[pyo3(signature = (ptr, device=0))]
    fn close_external(&self, py: Python<'_>, ptr: u64, device: u32) -> PyResult<()> {
        let rt = self.get()?;
        py.detach(|| rt.close_external(DeviceId(device), DevicePtr(ptr)))
            .map_err(to_py)?;
        self.forget_external_block(device, ptr);
        Ok(())
    }

    /// Lets the processes `pids` import the memory token `token`.
    fn grant(&self, py: Python<'_>, token: &str, pids: Vec<u32>) -> PyResult<()> {
        let token = tokens::mem(token)?;
        let peers: Vec<ProcessId> = pids.into_iter().map(ProcessId).collect();
        let rt = self.get()?;
        py.detach(|| rt.grant(&token, &peers)).map_err(to_py)
    }

    /// Creates an exportable signal on `device`.
    #[pyo3(signature = (device=0))]
    fn create_signal(&self, py: Python<'_>, device: u32) -> PyResult<Signal> {
        let rt = self.get()?;
        let signal = py
            .detach(|| rt.create_signal(DeviceId(device)))
            .map_err(to_py)?;
        Ok(Signal::new(signal, &rt))
    }

    /// Opens the signal token string `token` on `device`.
    #[pyo3(signature = (token, device=0))]
    fn import_signal(&self, py: Python<'_>, token: &str, device: u32) -> PyResult<Signal> {
        let rt = self.get()?;
        let token = tokens::signal(token)?;
        let signal = py
            .detach(|| rt.import_signal(&token, DeviceId(device)))
            .map_err(to_py)?;
        Ok(Signal::new(signal, &rt))
    }

    /// A new stream on `device`, devipc's own (destroyed in the background once this
    /// object, the requests on it and the buffers it copied through are gone). A
    /// framework's stream enters through `Stream.wrap`.
    #[pyo3(signature = (device=0))]
    fn create_stream(&self, py: Python<'_>, device: u32) -> PyResult<Stream> {
        let rt = self.get()?;
        let stream = py
            .detach(|| rt.create_stream(DeviceId(device)))
            .map_err(to_py)?;
        Ok(wrap_new(stream, rt))
    }

    /// A local, queryable event on `device` (`Stream.record`, `Event.wait`).
    #[pyo3(signature = (device=0))]
    fn create_event(&self, py: Python<'_>, device: u32) -> PyResult<Event> {
        let rt = self.get()?;
        let event = py
            .detach(|| rt.create_event(DeviceId(device)))
            .map_err(to_py)?;
        Ok(Event::new(event))
    }

    /// Obtains the buffer and signals served at the Unix socket `path`
    /// (`SharedBuffer.share`) and imports them on `device`. `options` (a
    /// `ConnectOptions`), or the shorthands `timeout` (seconds, default 30) and
    /// `wait_for_server` (retry until the exporter listens), bound and shape the exchange.
    #[pyo3(signature = (path, device=0, options=None, *, timeout=None, wait_for_server=None))]
    fn connect(
        &self,
        py: Python<'_>,
        path: PathBuf,
        device: u32,
        options: Option<PyConnectOptions>,
        timeout: Option<f64>,
        wait_for_server: Option<bool>,
    ) -> PyResult<Connected> {
        no_flags_with(
            "Runtime.connect",
            &options,
            &[
                ("timeout", timeout.is_some()),
                ("wait_for_server", wait_for_server.is_some()),
            ],
        )?;
        let settings = options
            .unwrap_or_else(|| PyConnectOptions::from_flags(timeout, wait_for_server))
            .settings()?;
        let rt = self.get()?;
        let mut opts = ConnectOptions::new()
            .timeout(settings.timeout)
            .wait_for_server(settings.wait_for_server);
        for uid in settings.allow_uids {
            opts = opts.allow_uid(uid);
        }
        let connected = py
            .detach(|| rt.connect_with(&path, DeviceId(device), opts))
            .map_err(to_py)?;
        let signals = connected
            .signals
            .into_iter()
            .map(|s| Py::new(py, Signal::new(s, &rt)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Connected {
            buffer: ImportedBuffer::create(
                py,
                Runtime::held(&rt, Mem::Imported(connected.buffer)),
            )?,
            signals,
            pid: connected.exporter.pid,
            uid: connected.exporter.uid,
        })
    }

    /// Distinct vendor imports alive in this process for this backend.
    fn live_imports(&self) -> PyResult<usize> {
        Ok(self.get()?.live_imports())
    }

    /// Vendor imports made so far in this process for this backend (cumulative; an
    /// import served by a live one is not counted).
    fn vendor_imports(&self) -> PyResult<u64> {
        Ok(self.get()?.vendor_imports())
    }

    /// The releases that failed in the background (freeing, closing, destroying when an
    /// object was collected) since the last call, as `DevipcError` instances.
    fn take_release_errors(&self) -> PyResult<Vec<PyErr>> {
        Ok(self
            .get()?
            .take_release_errors()
            .into_iter()
            .map(to_py)
            .collect())
    }

    /// Ends this handle: its methods then raise `ClosedError`. Buffers and signals made
    /// from it stay usable (each holds the backend) until closed or collected. A second
    /// `close()` does nothing. When the last reference to the backend goes (this handle
    /// and everything made from it), a closed buffer whose free still waits for another
    /// process's import is left to this process's exit (as in Rust): close buffers after
    /// their importers did, or keep the runtime, in a long-lived process.
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

    fn __repr__(&self) -> String {
        match self.get() {
            Ok(rt) => format!("<devipc.Runtime {}>", rt.info().describe()),
            Err(_) => "<devipc.Runtime (closed)>".to_owned(),
        }
    }
}

/// The test aids of `devipc.testing` ([`crate::testing`]): memory as a framework allocates
/// it, outside devipc's buffers.
impl Runtime {
    /// Allocates `size` bytes on `device` as a framework's own allocator does (`hipMalloc`,
    /// `aclrtMalloc`), outside devipc's buffers: memory for `export_external` without a
    /// framework (tests, examples). Returns the device address; free it with
    /// `framework_free`. Python: `devipc.testing.framework_malloc` ([`crate::testing`]).
    pub(crate) fn framework_malloc(
        &self,
        py: Python<'_>,
        size: usize,
        device: u32,
    ) -> PyResult<u64> {
        let rt = self.get()?;
        let ptr = py
            .detach(|| devipc::testing::framework_malloc(&rt, DeviceId(device), size))
            .map_err(to_py)?;
        self.framework
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((device, ptr.0), rt);
        Ok(ptr.0)
    }

    /// Frees a block `framework_malloc` returned, after ending its `export_external`
    /// exports (refused while another process still maps it); works after `close()` too.
    /// Drop every view of it in this process first. Python:
    /// `devipc.testing.framework_free`.
    pub(crate) fn framework_free(&self, py: Python<'_>, ptr: u64, device: u32) -> PyResult<()> {
        let live = || {
            self.framework
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        // Taken out before the free (and put back if it fails): no other thread frees it
        // meanwhile, and no lock is held while the GIL is released.
        let Some(rt) = live().remove(&(device, ptr)) else {
            return Err(to_py(devipc::Error::invalid_argument(format!(
                "{ptr:#x} on device {device} is not a live block of this runtime's \
                 framework_malloc"
            ))));
        };
        // SAFETY: the block came from `devipc::testing::framework_malloc` of `rt` on
        // `device` and was not freed (it was in the live set, which only this call took it
        // out of); the caller dropped its views, as documented (Python's buffers over it are its own ctypes
        // objects).
        let freed = py.detach(|| unsafe {
            devipc::testing::framework_free(&rt, DeviceId(device), DevicePtr(ptr))
        });
        match freed {
            Ok(()) => self.forget_external_block(device, ptr),
            Err(_) => {
                live().insert((device, ptr), rt);
            }
        }
        freed.map_err(to_py)
    }
}
