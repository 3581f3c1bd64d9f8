//! [`Backend`]: one enum over the compiled-in backends, dispatching [`DeviceIpc`] statically.
//!
//! `impl DeviceIpc for Backend` forwards each method to the variant's backend through
//! [`dispatch!`], a `match` over the variants: no virtual call, and every method is
//! forwarded, those with a default body too, so a backend's own version is the one that
//! runs.

use std::ops::Range;
use std::os::fd::OwnedFd;
use std::time::Duration;

use devipc_core::{
    AllocateOptions, Allocation, BackendInfo, BackendKind, DeviceId, DeviceIpc, DevicePtr, Error,
    ExportOptions, Mapping, MemToken, PhysicalDevice, ProcessId, RawStream, Result, SignalHandle,
    SignalToken,
};

/// A started backend: one variant per backend compiled in (features `ascend`, `hip`).
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

/// `dispatch!(self, b => b.method(args))`: a `match` over `self`'s variants that binds
/// each variant's backend to `b` and evaluates the call on it.
macro_rules! dispatch {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "ascend")]
            Backend::Ascend($b) => $call,
            #[cfg(feature = "hip")]
            Backend::Hip($b) => $call,
            #[cfg(test)]
            Backend::Recording($b) => $call,
        }
    };
}

impl DeviceIpc for Backend {
    fn info(&self) -> &BackendInfo {
        dispatch!(self, b => b.info())
    }

    fn device_count(&self) -> Result<u32> {
        dispatch!(self, b => b.device_count())
    }

    fn process_id(&self) -> Result<ProcessId> {
        dispatch!(self, b => b.process_id())
    }

    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
        dispatch!(self, b => b.physical_device(device))
    }

    fn device_of_physical(&self, physical: &PhysicalDevice) -> Result<Option<DeviceId>> {
        dispatch!(self, b => b.device_of_physical(physical))
    }

    fn home_device(
        &self,
        exported_on: DeviceId,
        physical: &PhysicalDevice,
    ) -> Result<Option<DeviceId>> {
        dispatch!(self, b => b.home_device(exported_on, physical))
    }

    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        dispatch!(self, b => b.enable_peer_access(device, peer))
    }

    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        dispatch!(self, b => b.allocate(device, size))
    }

    fn allocate_with(
        &self,
        device: DeviceId,
        size: usize,
        opts: AllocateOptions,
    ) -> Result<Allocation> {
        dispatch!(self, b => b.allocate_with(device, size, opts))
    }

    fn free(&self, alloc: Allocation) -> Result<()> {
        dispatch!(self, b => b.free(alloc))
    }

    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        dispatch!(self, b => b.export(alloc, range, opts))
    }

    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        dispatch!(self, b => b.export_external(device, ptr, len, opts))
    }

    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        dispatch!(self, b => b.close_external(device, ptr))
    }

    fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()> {
        dispatch!(self, b => b.grant(token, peers))
    }

    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        dispatch!(self, b => b.import(token, device))
    }

    fn export_fd(&self, token: &MemToken) -> Result<OwnedFd> {
        dispatch!(self, b => b.export_fd(token))
    }

    fn import_fd(&self, token: &MemToken, fd: OwnedFd, device: DeviceId) -> Result<Mapping> {
        dispatch!(self, b => b.import_fd(token, fd, device))
    }

    fn close(&self, mapping: Mapping) -> Result<()> {
        dispatch!(self, b => b.close(mapping))
    }

    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the caller's guarantee for `dst`, passed on to the variant's backend.
        dispatch!(self, b => unsafe { b.write(dst, src) })
    }

    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller's guarantee for `src`, passed on to the variant's backend.
        dispatch!(self, b => unsafe { b.read(src, dst) })
    }

    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        dispatch!(self, b => b.create_signal(device))
    }

    fn export_signal(&self, signal: &SignalHandle, opts: ExportOptions) -> Result<SignalToken> {
        dispatch!(self, b => b.export_signal(signal, opts))
    }

    fn grant_signal(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        dispatch!(self, b => b.grant_signal(token, peers))
    }

    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        dispatch!(self, b => b.import_signal(token, device))
    }

    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        dispatch!(self, b => b.notify(signal, stream))
    }

    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        dispatch!(self, b => b.wait(signal, stream, timeout))
    }

    fn destroy_signal(&self, signal: SignalHandle) -> Result<()> {
        dispatch!(self, b => b.destroy_signal(signal))
    }
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
    /// Starts the vendor runtime of `kind` (discovers and loads its library): the one place
    /// that names each backend's constructor.
    ///
    /// Fails with [`Error::Unsupported`] when `kind` was not compiled in, and with the
    /// backend's own error (e.g. [`Error::LibraryNotFound`]) when it cannot start.
    pub fn open(kind: BackendKind) -> Result<Backend> {
        match kind {
            #[cfg(feature = "ascend")]
            BackendKind::Ascend => Ok(Backend::from(devipc_ascend::AscendBackend::open()?)),
            #[cfg(feature = "hip")]
            BackendKind::Hip => Ok(Backend::from(devipc_hip::HipBackend::open()?)),
            #[allow(
                unreachable_patterns,
                reason = "reachable when a backend feature is off"
            )]
            other => Err(not_compiled(other)),
        }
    }

    /// Starts the devipc emulator speaking `kind`'s ABI (feature `emulator`): host shared
    /// memory, no device.
    pub fn emulated(kind: BackendKind) -> Result<Backend> {
        if !Backend::is_compiled(kind) {
            return Err(not_compiled(kind));
        }
        cfg_if::cfg_if! {
            if #[cfg(feature = "emulator")] {
                match kind {
                    #[cfg(feature = "ascend")]
                    BackendKind::Ascend => Ok(Backend::from(devipc_ascend::AscendBackend::emulated()?)),
                    #[cfg(feature = "hip")]
                    BackendKind::Hip => Ok(Backend::from(devipc_hip::HipBackend::emulated()?)),
                    #[allow(unreachable_patterns, reason = "reachable when a backend feature is off")]
                    other => Err(not_compiled(other)),
                }
            } else {
                Err(Error::unsupported(
                    kind,
                    "the emulated runtime: devipc was compiled without the `emulator` feature",
                ))
            }
        }
    }

    /// The backend kinds compiled into this build, in a stable order.
    pub const COMPILED: &'static [BackendKind] = &[
        #[cfg(feature = "ascend")]
        BackendKind::Ascend,
        #[cfg(feature = "hip")]
        BackendKind::Hip,
    ];

    /// Whether `kind` was compiled in.
    pub fn is_compiled(kind: BackendKind) -> bool {
        Backend::COMPILED.contains(&kind)
    }

    /// Which vendor this backend talks to.
    pub fn kind(&self) -> BackendKind {
        self.info().kind
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

/// [`Error::Unsupported`] for a backend kind this build lacks.
fn not_compiled(kind: BackendKind) -> Error {
    Error::unsupported(
        kind,
        format!(
            "this build: devipc was compiled without the `{kind}` feature (enable it in Cargo.toml)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording_backend::RecordingBackend;

    /// Calls every trait method through `Backend` and checks each reached the variant, in
    /// order, with its result passed back unchanged.
    #[test]
    fn dispatches_every_method_to_the_variant() {
        let backend = Backend::from(RecordingBackend::new(BackendKind::Hip));
        let d = DeviceId(1);
        let s = RawStream::DEFAULT;
        assert_eq!(backend.kind(), BackendKind::Hip);
        assert_eq!(backend.device_count().unwrap(), 3);
        assert_eq!(backend.process_id().unwrap(), ProcessId::current());
        let physical = backend.physical_device(d).unwrap();
        assert_eq!(physical.physical_id, Some(11));
        assert_eq!(backend.device_of_physical(&physical).unwrap(), Some(d));
        backend.enable_peer_access(d, DeviceId(0)).unwrap();
        let alloc = backend.allocate(d, 64).unwrap();
        assert_eq!((alloc.device, alloc.size), (d, 64));
        let token = backend
            .export(&alloc, 0..64, ExportOptions::default())
            .unwrap();
        backend
            .export_external(d, DevicePtr(0x10), 64, ExportOptions::any_process())
            .unwrap();
        backend.close_external(d, DevicePtr(0x10)).unwrap();
        backend.grant(&token, &[ProcessId(9)]).unwrap();
        let mapping = backend.import(&token, d).unwrap();
        assert_eq!(mapping.len, 64);
        let mut buf = [0u8; 2];
        // SAFETY: the probe never dereferences the pointer.
        unsafe {
            backend.write(mapping.ptr, &[1, 2]).unwrap();
            backend.read(mapping.ptr, &mut buf).unwrap();
        }
        assert_eq!(buf, [0xAB, 0xAB]);
        backend.close(mapping).unwrap();
        backend.free(alloc).unwrap();
        let sig = backend.create_signal(d).unwrap();
        let stoken = backend
            .export_signal(&sig, ExportOptions::default())
            .unwrap();
        backend.grant_signal(&stoken, &[ProcessId(9)]).unwrap();
        let peer = backend.import_signal(&stoken, d).unwrap();
        backend.notify(&sig, s).unwrap();
        let waited = backend.wait(&peer, s, Some(Duration::from_millis(5)));
        assert!(matches!(waited, Err(devipc_core::Error::Timeout { .. })));
        backend.destroy_signal(peer).unwrap();
        backend.destroy_signal(sig).unwrap();

        let Backend::Recording(probe) = &backend else {
            panic!("Backend::from(RecordingBackend) must give the Recording variant");
        };
        assert_eq!(
            probe.calls(),
            [
                "info",
                "device_count",
                "process_id",
                "physical_device",
                "device_of_physical",
                "enable_peer_access",
                "allocate",
                "export",
                "export_external",
                "close_external",
                "grant",
                "import",
                "write",
                "read",
                "close",
                "free",
                "create_signal",
                "export_signal",
                "grant_signal",
                "import_signal",
                "notify",
                "wait",
                "destroy_signal",
                "destroy_signal",
            ]
        );
    }

    #[test]
    fn compiled_kinds_follow_the_features() {
        assert_eq!(
            Backend::is_compiled(BackendKind::Ascend),
            cfg!(feature = "ascend")
        );
        assert_eq!(
            Backend::is_compiled(BackendKind::Hip),
            cfg!(feature = "hip")
        );
        assert!(!Backend::COMPILED.is_empty());
    }
}
