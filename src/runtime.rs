//! [`Runtime`]: a started backend, shared by every buffer and signal made from it; and
//! [`Backend`], the enum over the compiled-in backends that it drives.
//!
//! Every method of `Runtime` is here, except two groups: the constructors that choose and
//! start a backend (`open`, `emulated`, `from_env`, `from_env_or`, `from_choice`: which
//! backend a runtime starts, in `selection.rs`) and the rendezvous's
//! [`connect`](Runtime::connect) (`rendezvous/connect.rs`) and
//! [`share_external`](Runtime::share_external) (`rendezvous/server.rs`). The RAII types
//! built on a runtime ([`SharedBuffer`](crate::SharedBuffer),
//! [`ImportedBuffer`](crate::ImportedBuffer), [`Signal`](crate::Signal)) each hold a clone
//! of it, so the backend lives as long as anything made from it.
//!
//! Each call of the safe API reaches the vendor through `impl DeviceIpc for Backend`,
//! which forwards every method to the variant's backend through [`dispatch!`], a `match`
//! over the variants: no virtual call, and every method is forwarded, those with a default
//! body too, so a backend's own version is the one that runs.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use devipc_core::{
    AllocateOptions, BackendInfo, BackendKind, Birth, DeviceId, DeviceIpc, DevicePtr, Error,
    ExportOptions, ExportedFrom, Mechanism, MemToken, PhysicalDevice, ProcessId, RawStream, Result,
    SignalToken, TokenOrigin,
};

use crate::buffer::{ImportedBuffer, SharedBuffer};
use crate::event::Event;
use crate::registry::{ImportCache, LocalExports, LocalTarget};
use crate::signal::Signal;
use crate::stream::Stream;

/// A started backend. Cheap to clone; clones share the backend.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

/// What every clone of a [`Runtime`] shares.
#[derive(Debug)]
pub(crate) struct RuntimeInner {
    /// The backend; reached through [`RuntimeInner::backend`], which refuses it in a
    /// forked child. Released only in the process that started it (see `Drop`).
    owned_backend: Option<Backend>,
    /// The process that started the runtime ([`devipc_core::fork`]).
    birth: Birth,
    /// This process as tokens name it (the backend's process id; Ascend: bare tgid).
    pub(crate) origin: TokenOrigin,
    /// Live imports of this vendor runtime in this process, shared between importers of
    /// the same handle and between runtimes of one backend (DESIGN 5.2).
    pub(crate) imports: Arc<ImportCache>,
    /// Failed releases of objects made from this runtime, for
    /// [`Runtime::take_release_errors`].
    release_errors: Mutex<ReleaseErrors>,
}

/// The last [`Runtime::RELEASE_ERRORS_KEPT`] errors of releases run in `Drop`, and how
/// many older ones were discarded.
#[derive(Debug, Default)]
struct ReleaseErrors {
    kept: VecDeque<Error>,
    discarded: u64,
}

impl Runtime {
    /// Wraps an already started [`raw::Backend`](crate::raw::Backend).
    ///
    /// The process id tokens are compared against is the backend's
    /// [`process_id`](DeviceIpc::process_id); if the backend cannot tell, `getpid()`.
    pub fn from_backend(backend: Backend) -> Runtime {
        let pid = backend
            .process_id()
            .unwrap_or_else(|_| ProcessId::current());
        Runtime {
            inner: Arc::new(RuntimeInner {
                origin: TokenOrigin::current(pid),
                imports: ImportCache::for_backend(&backend),
                owned_backend: Some(backend),
                birth: Birth::here(),
                release_errors: Mutex::default(),
            }),
        }
    }

    /// The raw backend, for calls the safe API does not wrap (see [`raw`](crate::raw) for
    /// that layer's contract). In a child forked after the runtime started, the safe API
    /// refuses the runtime ([`Error::InheritedAcrossFork`]); the raw backend is left to the
    /// vendor runtime, which refuses a context inherited across `fork` as well.
    pub fn backend(&self) -> &Backend {
        self.inner.raw_backend()
    }

    /// Whether this runtime was started by the calling process, not inherited from the
    /// parent of a `fork` (see [`devipc_core::fork`]). An inherited runtime refuses every
    /// call with [`Error::InheritedAcrossFork`] and releases nothing when dropped.
    pub fn is_usable_here(&self) -> bool {
        !self.inner.birth.is_inherited()
    }

    /// Kind, library source, version and capabilities of the backend.
    pub fn info(&self) -> &BackendInfo {
        self.inner.raw_backend().info()
    }

    /// The id peers must [`grant`](crate::SharedBuffer::grant) so this process may import
    /// (Ascend: the bare tgid, the host pid even inside a container; HIP: `getpid`).
    pub fn process_id(&self) -> ProcessId {
        self.inner.origin.pid
    }

    /// Number of devices visible to this process.
    pub fn device_count(&self) -> Result<u32> {
        self.inner.backend()?.device_count()
    }

    // ---- Memory: allocate and export here, import a peer's export ----

    /// Allocates `size` bytes of exportable memory on `device`, made the backend's
    /// default way for its runtime (HIP: `hipMalloc`, shared as `hip-ipc-mem`).
    pub fn allocate(&self, device: impl Into<DeviceId>, size: usize) -> Result<SharedBuffer> {
        let alloc = self.inner.backend()?.allocate(device.into(), size)?;
        Ok(SharedBuffer::new(self, alloc))
    }

    /// As [`Runtime::allocate`], for the mechanism `opts` names (HIP:
    /// [`Mechanism::HipVmmFd`](crate::raw::Mechanism::HipVmmFd), virtual memory shared as
    /// a file descriptor). A mechanism the runtime lacks is [`Error::Unsupported`].
    pub fn allocate_with(
        &self,
        device: impl Into<DeviceId>,
        size: usize,
        opts: AllocateOptions,
    ) -> Result<SharedBuffer> {
        let alloc = self
            .inner
            .backend()?
            .allocate_with(device.into(), size, opts)?;
        Ok(SharedBuffer::new(self, alloc))
    }

    /// Exports memory the framework allocated itself (`aclrtMalloc` / `hipMalloc`): `len`
    /// bytes at `ptr` on `device`. The memory must stay allocated while peers use it.
    pub fn export_external(
        &self,
        device: impl Into<DeviceId>,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        let token = self
            .inner
            .backend()?
            .export_external(device.into(), ptr, len, opts)?;
        let object_base = DevicePtr(ptr.0.wrapping_sub(token.offset()));
        LocalExports::register(
            &token,
            LocalTarget::External(Arc::downgrade(&self.inner)),
            object_base,
        );
        Ok(token)
    }

    /// Ends the exports of the framework block holding `ptr` on `device` (see
    /// [`DeviceIpc::close_external`]); call it after every importer closed and before the
    /// framework frees the block. From then on the block's tokens no longer import in
    /// this process either (they would name whatever the framework puts there next).
    pub fn close_external(&self, device: impl Into<DeviceId>, ptr: DevicePtr) -> Result<()> {
        let device = device.into();
        self.inner.backend()?.close_external(device, ptr)?;
        LocalExports::forget_external(device, ptr);
        Ok(())
    }

    /// Lets `peers` import `token` (see [`SharedBuffer::grant`]).
    pub fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()> {
        self.inner.backend()?.grant(token, peers)
    }

    /// The physical identity of this process's `device`: what its tokens carry (HIP: PCI
    /// bus id and UUID; Ascend: physical chip id and UUID; fields the runtime cannot tell
    /// are `None`). The same device has the same identity in every process of the host,
    /// whatever visibility mask each runs under.
    pub fn physical_device(&self, device: impl Into<DeviceId>) -> Result<PhysicalDevice> {
        self.inner.backend()?.physical_device(device.into())
    }

    /// This process's index of the device `token` was exported from, found by the
    /// physical identity the token carries, or `None` when that device is not visible
    /// here (another visibility mask). Producer and consumer may run under different masks
    /// (`HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`,
    /// `ASCEND_RT_VISIBLE_DEVICES`), so the token's own [`device`](MemToken::device) is the
    /// producer's index and may name another device here.
    ///
    /// Errors: a token of another backend ([`Error::BackendMismatch`]) or host
    /// ([`Error::InvalidArgument`]); [`Error::Unsupported`] when the token carries no
    /// identity (format version 2, or an exporter whose runtime could not name its
    /// devices) or shares no known field with this runtime's: then import with an explicit
    /// device index.
    pub fn local_device_of(&self, token: &impl ExportedFrom) -> Result<Option<DeviceId>> {
        self.check_backend(token.backend(), token.mechanism())?;
        let info = self.info();
        if token.emulated() != info.source.is_emulated() {
            let side = |emulated: bool| {
                if emulated {
                    "the devipc emulator"
                } else {
                    "a real runtime"
                }
            };
            return Err(Error::BackendMismatch {
                expected: format!("a token from {}", side(info.source.is_emulated())),
                found: format!("a token from {}", side(token.emulated())),
            });
        }
        self.inner.check_same_host(token.origin())?;
        let physical = token.physical_device();
        if !physical.is_known() {
            return Err(Error::unsupported(
                info.kind,
                format!(
                    "placing a token without a physical device identity (format version 2, \
                     or its exporter's runtime could not name device {}): import it with an \
                     explicit device index",
                    token.device()
                ),
            ));
        }
        self.inner.backend()?.device_of_physical(physical)
    }

    /// Maps `token`'s memory on this process's index of the exporter's own device (see
    /// [`Runtime::local_device_of`]), whatever visibility masks the two processes run
    /// under. [`Error::DeviceNotVisible`] when that device is not visible here; to map it
    /// onto another device, use [`Runtime::import`] with an explicit index.
    ///
    /// The identity is the token's claim, like everything in it: a forged one can only
    /// choose which of this process's devices the import targets (a cross-device import
    /// the caller could also ask for by index). What the view reaches is bounded by the
    /// runtime's real size of the object, and access by the exporter's grant, as always.
    pub fn import_on_exporter_device(&self, token: &MemToken) -> Result<ImportedBuffer> {
        match self.local_device_of(token)? {
            Some(device) => self.import(token, device),
            None => Err(Error::DeviceNotVisible {
                device: *token.physical_device(),
                visibility: devipc_core::physical::visibility_in_force(self.info().kind),
            }),
        }
    }

    /// Maps `token`'s memory on `device`.
    ///
    /// A token this process exported is served from the local allocation without a vendor
    /// call (DESIGN 5.1); a token already imported here shares the existing mapping
    /// (DESIGN 5.2).
    pub fn import(&self, token: &MemToken, device: impl Into<DeviceId>) -> Result<ImportedBuffer> {
        self.import_inner(token, None, device.into())
    }

    /// As [`Runtime::import`], for a token whose mechanism
    /// [carries a file descriptor](crate::raw::Mechanism::carries_fd) (HIP virtual memory),
    /// with the descriptor the exporter sent beside it (over a Unix socket with
    /// `SCM_RIGHTS`; the rendezvous does this for you). The descriptor is checked against
    /// the token and consumed; an import already live in this process is shared instead.
    pub fn import_with_fd(
        &self,
        token: &MemToken,
        fd: OwnedFd,
        device: impl Into<DeviceId>,
    ) -> Result<ImportedBuffer> {
        self.import_inner(token, Some(fd), device.into())
    }

    fn import_inner(
        &self,
        token: &MemToken,
        fd: Option<OwnedFd>,
        device: DeviceId,
    ) -> Result<ImportedBuffer> {
        self.check_backend(token.backend(), token.mechanism())?;
        let len = usize::try_from(token.len())
            .map_err(|_| Error::invalid_token("length does not fit this platform"))?;
        self.inner.check_same_host(token.origin())?;
        if token.origin() == self.inner.origin {
            return ImportedBuffer::local(self, token, device, len);
        }
        let mapped = self.inner.imports.get_or_import(self, token, fd, device)?;
        ImportedBuffer::mapped(mapped, token, device, len)
    }

    /// Number of distinct live vendor imports (each may serve several buffers).
    pub fn live_imports(&self) -> usize {
        self.inner.imports.len()
    }

    /// Vendor imports this process made so far through this runtime's vendor runtime
    /// (shared by every `Runtime` of the backend, like the import cache): cumulative, and
    /// not counting imports served by a live import (DESIGN 5.2) or the same-process
    /// shortcut (DESIGN 5.1). Compare two readings to count the imports of a piece of work.
    pub fn vendor_imports(&self) -> u64 {
        self.inner.imports.vendor_imports()
    }

    /// Refuses a token of another backend kind than this runtime's, and a runtime
    /// inherited across `fork`.
    fn check_backend(&self, backend: BackendKind, mechanism: Mechanism) -> Result<()> {
        self.inner.backend()?;
        let kind = self.info().kind;
        if backend != kind {
            return Err(Error::BackendMismatch {
                expected: format!("{} token", kind.with_article()),
                found: format!("{} token ({mechanism})", backend.with_article()),
            });
        }
        Ok(())
    }

    // ---- The data plane ----

    /// A new stream on `device`, devipc's own ([`Stream`]; a framework's stream enters
    /// through [`Stream::wrap`]).
    pub fn create_stream(&self, device: impl Into<DeviceId>) -> Result<Stream> {
        Stream::new(self, device.into())
    }

    /// A local, queryable event on `device` ([`Event`]).
    pub fn create_event(&self, device: impl Into<DeviceId>) -> Result<Event> {
        Event::new(self, device.into())
    }

    // ---- Signals ----

    /// Creates an exportable signal on `device`.
    pub fn create_signal(&self, device: impl Into<DeviceId>) -> Result<Signal> {
        let handle = self.inner.backend()?.create_signal(device.into())?;
        Ok(Signal::new(self, handle))
    }

    /// Opens a peer's signal on `device`. A token this process exported gives a `Signal`
    /// sharing the local handle, without a vendor call.
    pub fn import_signal(
        &self,
        token: &SignalToken,
        device: impl Into<DeviceId>,
    ) -> Result<Signal> {
        let device = device.into();
        self.check_backend(token.backend(), token.mechanism())?;
        self.inner.check_same_host(token.origin())?;
        if token.origin() == self.inner.origin {
            // The checks the vendor import would make, before sharing the local handle.
            self.inner
                .backend()?
                .device_count()
                .and_then(|n| device.check(n))?;
            return Signal::local(token);
        }
        let handle = self.inner.backend()?.import_signal(token, device)?;
        Ok(Signal::new(self, handle))
    }

    // ---- Release errors ----

    /// How many errors [`take_release_errors`](Runtime::take_release_errors) keeps: past
    /// that, the oldest is discarded (and counted by
    /// [`discarded_release_errors`](Runtime::discarded_release_errors)).
    pub const RELEASE_ERRORS_KEPT: usize = 64;

    /// The errors of releases that failed in `Drop` since the last call, oldest first,
    /// and forgets them: freeing a [`SharedBuffer`](crate::SharedBuffer), closing the
    /// vendor import behind an [`ImportedBuffer`](crate::ImportedBuffer), destroying a
    /// [`Signal`](crate::Signal). A drop cannot return its error, so it lands here, on the
    /// runtime (any clone of it) whose call made the vendor object (for an import that
    /// several runtimes share, the one whose import opened it); each is also logged with
    /// `log::error!`. At most [`RELEASE_ERRORS_KEPT`](Self::RELEASE_ERRORS_KEPT)
    /// are kept. An object that outlives every other clone of its runtime has nobody to
    /// take its error: then it is only logged.
    pub fn take_release_errors(&self) -> Vec<Error> {
        self.inner.release_errors().kept.drain(..).collect()
    }

    /// How many release errors were discarded, since the runtime started, because more
    /// than [`RELEASE_ERRORS_KEPT`](Self::RELEASE_ERRORS_KEPT) piled up between calls of
    /// [`take_release_errors`](Runtime::take_release_errors) (never reset: compare with
    /// an earlier reading). They were logged all the same.
    pub fn discarded_release_errors(&self) -> u64 {
        self.inner.release_errors().discarded
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        if self.birth.is_inherited() {
            // A forked child's copy: the backend's vendor context, reaper thread and
            // exports are the parent's. Releasing them here would free or close the
            // parent's objects (or join a thread that does not exist in this process);
            // the copy goes with the child.
            std::mem::forget(self.owned_backend.take());
        }
    }
}

impl RuntimeInner {
    /// The backend, refused in a child forked after the runtime started: the vendor
    /// context, the leases and the identity tokens carry are the parent's.
    pub(crate) fn backend(&self) -> Result<&Backend> {
        self.birth
            .check("this Runtime (and every buffer and signal made from it)")?;
        Ok(self.raw_backend())
    }

    /// The backend, unchecked: for `info`, the raw layer's own contract and releases in
    /// `Drop` (which check [`RuntimeInner::is_inherited`] first).
    pub(crate) fn raw_backend(&self) -> &Backend {
        self.owned_backend
            .as_ref()
            .expect("the backend is present until the runtime drops")
    }

    /// Whether the calling process inherited this runtime across `fork`: then objects
    /// made from it let go without releasing anything (the parent owns them).
    pub(crate) fn is_inherited(&self) -> bool {
        self.birth.is_inherited()
    }

    /// Refuses a token produced on another booted host: device memory and signals are
    /// shared between processes of one node only, and the vendor would fail on it with a
    /// less helpful error (or, worse, name an unrelated object).
    pub(crate) fn check_same_host(&self, origin: TokenOrigin) -> Result<()> {
        if self.origin.host.other_host(&origin.host) {
            return Err(Error::invalid_argument(
                "the token was produced on another host (its boot id differs): devipc shares \
                 device memory and signals between processes of one node only",
            ));
        }
        Ok(())
    }

    /// Keeps `error`, a release that failed in `Drop` (the caller logged it), for
    /// [`Runtime::take_release_errors`].
    pub(crate) fn release_failed(&self, error: Error) {
        let mut errors = self.release_errors();
        if errors.kept.len() >= Runtime::RELEASE_ERRORS_KEPT {
            errors.kept.pop_front();
            errors.discarded += 1;
        }
        errors.kept.push_back(error);
    }

    fn release_errors(&self) -> std::sync::MutexGuard<'_, ReleaseErrors> {
        // Every critical section is one push, pop or drain, so a poisoned lock is
        // consistent (and a drop must not panic).
        self.release_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

// ---- Backend: the dispatch to the backend compiled in ----

/// A started backend: one variant per backend compiled in (features `ascend`, `hip`),
/// implementing [`DeviceIpc`] by a `match` over the variants. [`Backend::open`] and
/// [`Backend::emulated`] start one.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "a Runtime holds its one Backend behind an Arc; boxing would add an indirection to every call"
)]
#[non_exhaustive]
pub enum Backend {
    /// Huawei Ascend (feature `ascend`).
    #[cfg(feature = "ascend")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ascend")))]
    Ascend(devipc_ascend::AscendBackend),
    /// AMD HIP (feature `hip`).
    #[cfg(feature = "hip")]
    #[cfg_attr(docsrs, doc(cfg(feature = "hip")))]
    Hip(devipc_hip::HipBackend),
    /// Records every call; proves the dispatch in tests.
    #[cfg(test)]
    Recording(crate::recording_backend::RecordingBackend),
}

#[cfg(feature = "ascend")]
impl From<devipc_ascend::AscendBackend> for Backend {
    fn from(backend: devipc_ascend::AscendBackend) -> Self {
        Backend::Ascend(backend)
    }
}

#[cfg(feature = "hip")]
impl From<devipc_hip::HipBackend> for Backend {
    fn from(backend: devipc_hip::HipBackend) -> Self {
        Backend::Hip(backend)
    }
}

#[cfg(test)]
impl From<crate::recording_backend::RecordingBackend> for Backend {
    fn from(backend: crate::recording_backend::RecordingBackend) -> Self {
        Backend::Recording(backend)
    }
}

impl Backend {
    /// Which vendor this backend talks to.
    pub fn kind(&self) -> BackendKind {
        self.info().kind
    }

    /// Emulator only: holds (`on`) or releases `stream`, as if a long kernel occupied it
    /// (see [`crate::testing::hold_stream`]).
    pub fn hold_stream_for_tests(&self, stream: RawStream, on: bool) -> Result<()> {
        match self {
            #[cfg(feature = "ascend")]
            Backend::Ascend(b) => b.hold_stream_for_tests(stream, on),
            #[cfg(feature = "hip")]
            Backend::Hip(b) => b.hold_stream_for_tests(stream, on),
            #[cfg(test)]
            Backend::Recording(_) => Err(devipc_core::Error::unsupported(
                self.kind(),
                "holding a stream",
            )),
        }
    }

    /// `size` bytes on `device` as a framework's own allocator makes them (`hipMalloc`,
    /// `aclrtMalloc`), outside devipc's bookkeeping: memory for `export_external`, e.g. to
    /// exercise that path without a framework. Free it with [`Backend::framework_free`].
    pub fn framework_malloc(&self, device: DeviceId, size: usize) -> Result<DevicePtr> {
        match self {
            #[cfg(feature = "ascend")]
            Backend::Ascend(b) => b.framework_malloc(device, size),
            #[cfg(feature = "hip")]
            Backend::Hip(b) => b.framework_malloc(device, size),
            #[cfg(test)]
            Backend::Recording(_) => Err(devipc_core::Error::unsupported(
                self.kind(),
                "framework_malloc",
            )),
        }
    }

    /// Frees what [`Backend::framework_malloc`] returned, after ending its
    /// `export_external` exports (refused while an importer still maps the block).
    ///
    /// # Safety
    /// `ptr` came from `framework_malloc` of this backend on `device`, is not freed yet,
    /// and no view of it remains in this process.
    pub unsafe fn framework_free(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        match self {
            // SAFETY: the caller's guarantee, passed on.
            #[cfg(feature = "ascend")]
            Backend::Ascend(b) => unsafe { b.framework_free(device, ptr) },
            // SAFETY: the caller's guarantee, passed on.
            #[cfg(feature = "hip")]
            Backend::Hip(b) => unsafe { b.framework_free(device, ptr) },
            #[cfg(test)]
            Backend::Recording(_) => Err(devipc_core::Error::unsupported(
                self.kind(),
                "framework_free",
            )),
        }
    }

    /// Names the vendor runtime this backend drives. Backends with the same domain in one
    /// process share the runtime's per-process state (and the vendor's per-process rules),
    /// so they share one import cache.
    pub(crate) fn cache_domain(&self) -> String {
        match self {
            #[cfg(test)]
            Backend::Recording(probe) => format!("probe-{}", probe.instance()),
            #[allow(
                unreachable_patterns,
                reason = "the probe variant exists in tests only"
            )]
            other => {
                let info = other.info();
                format!("{}:{}", info.kind, info.source)
            }
        }
    }
}

#[cfg(test)]
mod tests;
