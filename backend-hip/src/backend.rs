//! [`HipBackend`]: [`DeviceIpc`] on the HIP runtime.
//!
//! The backend owns its [`HipApi`] table and every vendor object it hands out a handle
//! for (allocations, IPC mappings, signals); each lives in a [`HandleTable`] until the
//! matching release call, and whatever is still live when the backend is dropped is
//! released then.

use std::collections::HashMap;
use std::ffi::c_int;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use devipc_core::{
    Allocation, BackendInfo, BackendKind, Capabilities, DeviceId, DeviceIpc, DevicePtr, Error,
    ExportOptions, HandleTable, Mapping, Mechanism, MemToken, ProcessId, RawStream, Result,
    RuntimeVersion, SignalHandle, SignalToken, TokenOrigin,
};
use devipc_hip_sys::{HipApi, hipErrorNoDevice, ipc_mem_lazy_enable_peer_access};

use crate::call::vendor_error;
use crate::deferred::Deferred;
use crate::memory::{AllocRecord, ExternalExport, MappingRecord};
use crate::result;
use crate::signal::SignalRecord;

/// The HIP backend.
///
/// `Send + Sync` because every field is: the table holds only function pointers and the
/// HIP runtime API may be called from any thread; per-thread device state is bound and
/// restored around each call.
#[derive(Debug)]
pub struct HipBackend {
    pub(crate) api: Arc<HipApi>,
    pub(crate) info: BackendInfo,
    pub(crate) device_count: u32,
    pub(crate) lazy_peer_flag: std::ffi::c_uint,
    pub(crate) origin: TokenOrigin,
    pub(crate) allocations: HandleTable<AllocRecord>,
    pub(crate) mappings: HandleTable<MappingRecord>,
    pub(crate) signals: HandleTable<SignalRecord>,
    pub(crate) deferred: Deferred,
    /// `export_external`s not closed yet, by device and allocation base.
    pub(crate) external: Mutex<HashMap<(DeviceId, u64), ExternalExport>>,
}

impl HipBackend {
    /// Discovers and loads `libamdhip64` (DESIGN section 8) and starts the backend.
    ///
    /// Fails with [`Error::LibraryNotFound`] listing every path tried when there is no HIP
    /// runtime, and with [`Error::Vendor`] (`hipErrorNoDevice`) when it has no device.
    pub fn open() -> Result<Self> {
        HipBackend::from_api(Arc::new(HipApi::discover()?))
    }

    /// Starts the backend on the devipc emulator linked into this process (host shared
    /// memory, no device; see the `devipc-emulator` crate for its configuration).
    ///
    /// Fails with [`Error::Config`] when a `DEVIPC_EMU_*` variable is malformed or the
    /// emulator's state directory is refused (wrong owner or mode, a symlink).
    #[cfg(feature = "emulator")]
    pub fn emulated() -> Result<Self> {
        // A bad DEVIPC_EMU_* setting is a configuration error of devipc's own, not the
        // vendor code the C ABI would have to report it as.
        devipc_emulator::start()?;
        HipBackend::from_api(Arc::new(devipc_emulator::hip::hip_api()))
    }

    /// Starts the backend on a filled table (loaded, linked or the emulator's).
    pub fn from_api(api: Arc<HipApi>) -> Result<Self> {
        let version = result::runtime_get_version(&api)?;
        // Without a device: hipErrorNoDevice, or (some runtimes) success and 0, which is
        // reported as the former.
        let count = result::get_device_count(&api)?;
        if count <= 0 {
            return Err(vendor_error(&api, "hipGetDeviceCount", hipErrorNoDevice));
        }
        let device_count = count as u32;
        let mut capabilities = Capabilities::default();
        capabilities.access_control = false;
        capabilities.export_allocation = true;
        capabilities.export_external = true;
        capabilities.signals = true;
        capabilities.cross_device_import = device_count > 1;
        // Every HIP export is importable by any process, so "any process" is honoured.
        capabilities.disable_pid_validation = true;
        let info = BackendInfo {
            kind: BackendKind::Hip,
            source: api.source().clone(),
            runtime_version: RuntimeVersion::from_hip_encoded(version),
            capabilities,
        };
        // Lease tables of exporters that were killed: nobody else removes them.
        devipc_shm::lease::held::sweep_orphans_now_and_then();
        Ok(HipBackend {
            lazy_peer_flag: ipc_mem_lazy_enable_peer_access(version),
            info,
            device_count,
            origin: TokenOrigin::current(ProcessId::current()),
            api: api.clone(),
            allocations: HandleTable::new("allocation"),
            mappings: HandleTable::new("mapping"),
            signals: HandleTable::new("signal"),
            deferred: Deferred::new(api.clone()),
            external: Mutex::new(HashMap::new()),
        })
    }

    /// The function table this backend calls.
    pub fn api(&self) -> &Arc<HipApi> {
        &self.api
    }

    /// The `hipIpcOpenMemHandle` flag value this runtime accepts (0 on ROCm 5, 1 on 6+).
    pub fn lazy_peer_flag(&self) -> std::ffi::c_uint {
        self.lazy_peer_flag
    }

    /// The open `export_external`s.
    pub(crate) fn external_exports(
        &self,
    ) -> MutexGuard<'_, HashMap<(DeviceId, u64), ExternalExport>> {
        self.external.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `device` as the runtime's `int`, after checking it is in range.
    pub(crate) fn check_device(&self, device: DeviceId) -> Result<c_int> {
        device.check(self.device_count)?.as_c_int()
    }

    /// Rejects a token for another backend or mechanism, or from the emulator when this is
    /// a real runtime (and the reverse).
    pub(crate) fn check_token(
        &self,
        found: Mechanism,
        emulated: bool,
        expected: Mechanism,
    ) -> Result<()> {
        if found.backend() != BackendKind::Hip || found != expected {
            return Err(Error::BackendMismatch {
                expected: format!("a {expected} token for {}", self.info.describe()),
                found: format!("a {found} token"),
            });
        }
        if emulated != self.info.source.is_emulated() {
            let side = |e: bool| {
                if e {
                    "the devipc emulator"
                } else {
                    "a real HIP runtime"
                }
            };
            return Err(Error::BackendMismatch {
                expected: format!("a token from {}", side(self.info.source.is_emulated())),
                found: format!("a token from {}", side(emulated)),
            });
        }
        Ok(())
    }
}

impl Drop for HipBackend {
    /// Releases what the caller never released: signals, then mappings, then allocations
    /// (a mapping may view one of our own allocations through the facade). Failures are
    /// logged (`log::error!`); `Drop` never panics.
    fn drop(&mut self) {
        for (_, record) in self.signals.drain() {
            if let Err(e) = self.release_signal(record) {
                log::error!("devipc-hip: destroying a leftover signal failed: {e}");
            }
        }
        for (_, record) in self.mappings.drain() {
            if let Err(e) = self.release_mapping(&record) {
                log::error!("devipc-hip: closing a leftover IPC mapping failed: {e}");
            }
        }
        for (_, record) in self.allocations.drain() {
            if let Err(e) = self.free_or_defer(record) {
                log::error!("devipc-hip: freeing a leftover allocation failed: {e}");
            }
        }
        self.drop_deferred();
        // The framework's memory stays; its tokens stop working.
        for (_, export) in std::mem::take(&mut *self.external_exports()) {
            let _ = export.lease.remove();
        }
    }
}

impl DeviceIpc for HipBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn device_count(&self) -> Result<u32> {
        Ok(self.device_count)
    }
    fn process_id(&self) -> Result<ProcessId> {
        Ok(self.origin.pid)
    }
    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        self.enable_peer(device, peer)
    }
    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        self.allocate_memory(device, size)
    }
    fn free(&self, alloc: Allocation) -> Result<()> {
        self.free_memory(alloc)
    }
    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        self.export_allocation(alloc, range, opts)
    }
    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        self.export_external_memory(device, ptr, len, opts)
    }
    /// HIP keeps no exporter-side handle for an IPC export; devipc ends the export's lease
    /// (its tokens stop importing), refused while an importer still maps the block.
    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        self.close_external_memory(device, ptr)
    }
    /// HIP has no access control: any process holding the token may import, so granting
    /// only checks that the token is one of ours.
    fn grant(&self, token: &MemToken, _peers: &[ProcessId]) -> Result<()> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcMem)
    }
    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.import_memory(token, device)
    }
    fn close(&self, mapping: Mapping) -> Result<()> {
        self.close_mapping(mapping)
    }
    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the trait's contract is write_memory's.
        unsafe { self.write_memory(dst, src) }
    }
    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the trait's contract is read_memory's.
        unsafe { self.read_memory(src, dst) }
    }
    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        self.create_signal_impl(device)
    }
    fn export_signal(&self, signal: &SignalHandle, opts: ExportOptions) -> Result<SignalToken> {
        self.export_signal_impl(signal, opts)
    }
    /// As for memory: HIP has no access control.
    fn grant_signal(&self, token: &SignalToken, _peers: &[ProcessId]) -> Result<()> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcEvent)
    }
    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.import_signal_impl(token, device)
    }
    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        self.notify_impl(signal, stream)
    }
    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.wait_impl(signal, stream, timeout)
    }
    fn destroy_signal(&self, signal: SignalHandle) -> Result<()> {
        self.destroy_signal_impl(signal)
    }
}
