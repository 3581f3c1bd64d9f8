//! [`HipBackend`]: [`DeviceIpc`] on the HIP runtime.
//!
//! The backend owns its [`HipApi`] table and every vendor object it hands out a handle
//! for (allocations, IPC mappings, signals); each lives in a [`HandleTable`] until the
//! matching release call, and whatever is still live when the backend is dropped is
//! released then.
//!
//! Its `impl DeviceIpc` does each call's work itself, calling the vendor through
//! `result.rs`; the records it keeps, the token and release helpers its `Drop` shares,
//! and how each mechanism works are in `memory.rs`, `external.rs` (framework memory),
//! `signal.rs` and `deferred.rs`.

use std::ffi::c_int;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devipc_core::external_exports::{RuntimeDomain, SharedExports};
use devipc_core::own_memory::{self, BlockMap};
use devipc_core::token::SignalTokenParts;
use devipc_core::{
    AllocateOptions, Allocation, BackendInfo, BackendKind, Capabilities, DeviceId, DeviceIpc,
    DevicePtr, DeviceUuid, Error, ExportOptions, HandleTable, Mapping, Mechanism, MemToken,
    PciBusId, PhysicalDevice, PhysicalDeviceCache, ProcessId, RawStream, Result, RuntimeVersion,
    SignalHandle, SignalToken, TokenOrigin,
};
use devipc_hip_sys::{
    HIP_IPC_HANDLE_SIZE, HipApi, hipErrorNoDevice, hipErrorPeerAccessAlreadyEnabled,
    hipEventDisableTiming, hipEventInterprocess, hipIpcEventHandle_t, hipIpcMemHandle_t,
    ipc_mem_lazy_enable_peer_access,
};
use devipc_shm::lease::{Binding, held};
use devipc_shm::process::ProcessIdentity;
use devipc_shm::word_file::{NAME_LEN, WordFile};

use crate::device::DeviceScope;
use crate::event::{
    SignalRecord, Waited, event_ptr, open_word, semaphore, wait_error, wait_raised,
};
use crate::external::{EXTERNAL, ExternalExport, NEXT_EXTERNAL_GENERATION_BASE};
use crate::ipc_mem::deferred::Deferred;
use crate::ipc_mem::{AllocRecord, MappingRecord, handle_tag};
use crate::result;
use crate::result::vendor_error;
use crate::vmm::{self, VmmPayload};

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
    /// Each device's PCI bus id and UUID, asked once.
    pub(crate) physical: PhysicalDeviceCache,
    pub(crate) lazy_peer_flag: std::ffi::c_uint,
    /// `hipRuntimeGetVersion`'s `HIP_VERSION` encoding (ABI choices depend on it).
    pub(crate) hip_version: c_int,
    pub(crate) origin: TokenOrigin,
    pub(crate) allocations: HandleTable<AllocRecord>,
    pub(crate) mappings: HandleTable<MappingRecord>,
    pub(crate) signals: HandleTable<SignalRecord>,
    pub(crate) deferred: Deferred,
    /// `export_external`s not closed yet, by device and allocation base: the table every
    /// HIP backend of this process on the same runtime shares ([`crate::external`]).
    pub(crate) external: SharedExports<ExternalExport>,
    /// `hip-vmm-fd` imports of this backend, by base, with the device they were imported
    /// on: host copies to them bind it (the thread's device may have no access).
    pub(crate) vmm_imports: BlockMap,
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
        capabilities.vmm_fd = vmm::check_support(&api, version).is_ok();
        capabilities.vmm_fabric = vmm::probe_fabric(&api, version, 0);
        let info = BackendInfo {
            kind: BackendKind::Hip,
            source: api.source().clone(),
            runtime_version: RuntimeVersion::from_hip_encoded(version),
            capabilities,
        };
        // Lease tables of exporters that were killed: nobody else removes them.
        devipc_shm::lease::held::sweep_orphans_now_and_then();
        // The runtime's hipFree tells its library (or the emulator, or a fake) apart.
        let external = EXTERNAL.join(RuntimeDomain::new(&info, api.hipFree as usize));
        Ok(HipBackend {
            lazy_peer_flag: ipc_mem_lazy_enable_peer_access(version),
            hip_version: version,
            info,
            device_count,
            physical: PhysicalDeviceCache::new(device_count),
            origin: TokenOrigin::current(ProcessId::current()),
            api: api.clone(),
            allocations: HandleTable::new("allocation"),
            mappings: HandleTable::new("mapping"),
            signals: HandleTable::new("signal"),
            deferred: Deferred::new(api.clone()),
            external,
            vmm_imports: BlockMap::new(),
        })
    }

    /// How many times this process fetched an exporter's fd with `pidfd_getfd` for an
    /// import (attempts, successful or not). For tests: an import must never fetch before
    /// its lease and producer checks passed.
    #[doc(hidden)]
    pub fn fd_fetches() -> usize {
        vmm::FD_FETCHES.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The function table this backend calls.
    pub fn api(&self) -> &Arc<HipApi> {
        &self.api
    }

    /// The `hipIpcOpenMemHandle` flag value this runtime accepts (0 on ROCm 5, 1 on 6+).
    pub fn lazy_peer_flag(&self) -> std::ffi::c_uint {
        self.lazy_peer_flag
    }

    /// Whether this runtime shares virtual memory as a file descriptor
    /// ([`Mechanism::HipVmmFd`], `allocate_with`): `Ok` on ROCm 6.2 and later with every
    /// VMM function, otherwise the [`Error::Unsupported`] that `allocate_with` would give,
    /// naming the version or the missing functions.
    pub fn vmm_fd_support(&self) -> Result<()> {
        vmm::check_support(&self.api, self.hip_version)
    }

    /// The identity a token of `device` carries: unknown (and logged) when the runtime
    /// cannot tell, since the token is still good for an import that names the device.
    pub(crate) fn token_physical(&self, device: DeviceId) -> PhysicalDevice {
        self.physical_device(device).unwrap_or_else(|e| {
            log::warn!("devipc-hip: tokens of device {device} carry no physical identity: {e}");
            PhysicalDevice::UNKNOWN
        })
    }

    /// `device` as the runtime's `int`, after checking it is in range.
    pub(crate) fn check_device(&self, device: DeviceId) -> Result<c_int> {
        device.check(self.device_count)?.as_c_int()
    }

    /// Binds a device with access to the `len` bytes at `ptr`, if devipc knows them, for a
    /// host copy: copies run on the calling thread's device, and VMM memory is reachable
    /// only from the devices it was granted to. For a devipc allocation that is its owner's
    /// device; for a `hip-vmm-fd` import of this backend, the device it was imported on
    /// (imports also grant the exporter's device, see `import_vmm`, but the thread's device
    /// may be neither: audit N5).
    fn bind_owner(&self, ptr: DevicePtr, len: usize) -> Result<Option<DeviceScope<'_>>> {
        let span = ptr.0..ptr.0.saturating_add(len as u64);
        own_memory::overlapping(span.clone())
            .or_else(|| self.vmm_imports.overlapping(span))
            .map(|(_, _, device)| DeviceScope::bind(&self.api, self.check_device(device)?))
            .transpose()
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
    ///
    /// In a child `fork`ed after the backend started, nothing is released: every object,
    /// lease and the reaper thread are the parent's (see `devipc_core::fork`).
    fn drop(&mut self) {
        if self.is_inherited() {
            return;
        }
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
        // The framework's memory stays; the tokens of the exports no other live backend
        // of the process made too stop working.
        for (_, export) in self.external.lock().leave() {
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

    /// The PCI bus id (`hipDeviceGetPCIBusId`) and, where the runtime has it
    /// (`hipDeviceGetUuid`, ROCm 5.1+) and it is not all zeros, the UUID.
    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
        let dev = self.check_device(device)?;
        self.physical.get_or_query(device, || {
            let text = result::device_get_pci_bus_id(&self.api, dev)?;
            let pci_bus_id = text.parse::<PciBusId>().map_err(|_| {
                Error::invalid_argument(format!(
                    "hipDeviceGetPCIBusId gave `{text}` for device {dev}, not a PCI bus id"
                ))
            })?;
            // A runtime without the call, or one that cannot tell, leaves the UUID unknown.
            let uuid = result::device_get_uuid(&self.api, dev)
                .ok()
                .and_then(DeviceUuid::from_runtime);
            Ok(PhysicalDevice {
                pci_bus_id: Some(pci_bus_id),
                uuid,
                physical_id: None,
            })
        })
    }

    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        let dev = self.check_device(device)?;
        let peer_dev = self.check_device(peer)?;
        if device == peer {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        match result::device_enable_peer_access(&self.api, peer_dev, 0) {
            Err(Error::Vendor { code, .. }) if code == hipErrorPeerAccessAlreadyEnabled => Ok(()),
            other => other,
        }
    }

    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let addr = result::malloc(&self.api, size)?;
        let registration = own_memory::register(DevicePtr(addr), size, device);
        let id = self.allocations.insert(AllocRecord {
            device,
            ptr: addr,
            size,
            lease: None,
            vmm: None,
            registration,
        });
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(addr),
            size,
        })
    }

    /// `None`: [`DeviceIpc::allocate`] (`hipMalloc`, `hip-ipc-mem`): the default, since
    /// VMM IPC needs ROCm 6.2. [`Mechanism::HipVmmFd`]: virtual memory (`hipMemCreate`
    /// asking for a POSIX fd, reserved, mapped, read-write for `device`), `size` rounded up
    /// to the allocation granularity; [`Error::Unsupported`] naming the version before
    /// ROCm 6.2 or without the VMM functions.
    fn allocate_with(
        &self,
        device: DeviceId,
        size: usize,
        opts: AllocateOptions,
    ) -> Result<Allocation> {
        match opts.mechanism {
            None | Some(Mechanism::HipIpcMem) => return self.allocate(device, size),
            Some(Mechanism::HipVmmFd) => {}
            Some(other) => {
                return Err(Error::unsupported(
                    BackendKind::Hip,
                    format!("allocating memory for the {other} mechanism"),
                ));
            }
        }
        self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        self.vmm_fd_support()?;
        let alloc = vmm::allocate(&self.api, self.hip_version, device, size)?;
        let (ptr, size) = (alloc.range.va, alloc.range.size);
        let registration = own_memory::register(DevicePtr(ptr), size, device);
        let id = self.allocations.insert(AllocRecord {
            device,
            ptr,
            size,
            lease: None,
            vmm: Some(Arc::new(alloc)),
            registration,
        });
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(ptr),
            size,
        })
    }

    fn free(&self, alloc: Allocation) -> Result<()> {
        self.allocation(&alloc)?;
        let record = self.allocations.remove(alloc.id)?;
        self.free_or_defer(record.clone())
            .inspect_err(|_| self.allocations.restore(alloc.id, record))
    }

    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        let record = self.allocation(alloc)?;
        Allocation::check_range(&range, record.size)?;
        if let Some(vmm) = &record.vmm {
            // The fd stays open (in the record) until the allocation is released.
            let exported = vmm.exported(&self.api)?;
            let lease = self.export_lease(alloc.id, exported.identity.tag())?;
            let payload = VmmPayload {
                pidfd: true,
                fd: exported.raw(),
                identity: exported.identity,
                lease: *lease.name(),
            };
            return self.mem_token(
                Mechanism::HipVmmFd,
                record.device,
                payload.encode(),
                record.size,
                range,
                alloc.id.get(),
            );
        }
        let handle = self.ipc_handle(record.device, record.ptr)?;
        let lease = self.export_lease(alloc.id, handle_tag(&handle.to_bytes()))?;
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(lease.name());
        self.mem_token(
            Mechanism::HipIpcMem,
            record.device,
            payload,
            record.size,
            range,
            alloc.id.get(),
        )
    }

    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        self.export_framework_block(device, ptr, len)
    }

    /// HIP keeps no exporter-side handle for an IPC export; devipc ends the export's lease
    /// (its tokens stop importing), refused while an importer still maps the block (the
    /// framework's `hipFree` would pull the memory from under it), like Ascend's key close.
    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        self.close_framework_block(device, ptr)
    }

    /// HIP has no access control: any process holding the token may import, so granting
    /// only checks that the token is one of ours.
    fn grant(&self, token: &MemToken, _peers: &[ProcessId]) -> Result<()> {
        self.check_token(token.mechanism(), token.emulated(), mem_mechanism(token))
    }

    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        if token.mechanism() == Mechanism::HipVmmFd {
            return self.import_vmm(token, None, device);
        }
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcMem)?;
        let dev = self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it).
        let home = self.home_device(token.device(), token.physical_device())?;
        if token.origin() == self.origin {
            // Never left to the runtime: ROCm 5.6+ refuses hipIpcOpenMemHandle of one's own
            // handle (hipErrorInvalidContext), ROCm 5.2 has no such check and maps the
            // allocation a second time, whose lease hold would make our own free wait for
            // us. The facade serves same-process imports from the local allocation (DESIGN
            // 5.1) and never gets here.
            return Err(Error::Unsupported {
                backend: BackendKind::Hip,
                what: "importing a hip-ipc-mem token in the process that exported it (use \
                       the exporter's pointer; the devipc facade does)"
                    .into(),
            });
        }
        let payload = token.payload();
        // Every devipc HIP token names the exporter's lease: without it the free of the
        // memory could not wait for this import, nor a replayed token be refused.
        if payload.len() != HIP_IPC_HANDLE_SIZE + NAME_LEN {
            return Err(Error::invalid_token(format!(
                "a hip-ipc-mem payload is {} bytes (handle and lease), not {}",
                HIP_IPC_HANDLE_SIZE + NAME_LEN,
                payload.len()
            )));
        }
        let (handle, lease_name) = payload.split_at(HIP_IPC_HANDLE_SIZE);
        let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
        bytes.copy_from_slice(handle);
        if let Some(home) = home.filter(|&home| home != device) {
            // Runtimes before the lazy flag took effect (rocm-systems PR #817) need peer
            // access enabled explicitly for a cross-device open. A device this process does
            // not see cannot be named: the open is left to the runtime (and its flag).
            self.enable_peer_access(device, home)?;
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        // Hold the exporter's lease before mapping, so its free waits for our close; the
        // hold fails when the exporter freed the memory or the token's generation is not
        // the exported object's. From here on every failure drops the hold, and after
        // the open closes the mapping too.
        // The lease must be the one its exporter made for this very handle, in the token's
        // producer's table, for the token's generation: a token pairing one object's
        // handle with another (live) object's lease is refused.
        let lease = held::hold_for(
            lease_name,
            &Binding {
                generation: Some(token.generation()),
                tag: Some(handle_tag(handle)),
                creator: Some(ProcessIdentity {
                    pid: i32::try_from(token.origin().pid.0)
                        .map_err(|_| Error::invalid_token("producer pid out of range"))?,
                    start_time: token.origin().start_time,
                    pid_ns: u32::try_from(token.origin().host.pid_namespace).unwrap_or(0),
                }),
            },
        )?;
        let handle = hipIpcMemHandle_t::from_bytes(bytes);
        let addr = match result::ipc_open_mem_handle(&self.api, handle, self.lazy_peer_flag) {
            Ok(addr) => addr,
            Err(e) => {
                held::drop_hold(&lease);
                return Err(e);
            }
        };
        let record = MappingRecord {
            device,
            base: addr,
            lease: Some(lease),
            vmm: None,
        };
        // The token's sizes are claims; the runtime knows the opened allocation's real
        // extent. A range beyond it (forged or corrupted) is refused, and the open undone.
        let size = match self
            .opened_size(addr)
            .and_then(|size| token.range_within(size).map(|_| size))
        {
            Ok(size) => size,
            Err(e) => {
                self.undo_import(&record);
                return Err(e);
            }
        };
        let id = self.mappings.insert(record);
        Mapping::for_token(id, device, DevicePtr(addr), size, token).inspect_err(|_| {
            if let Ok(record) = self.mappings.remove(id) {
                self.undo_import(&record);
            }
        })
    }

    /// A dup of the fd this backend exported for `token` (a `hip-vmm-fd` token of this
    /// process whose allocation, or `export_external` block, is still exported); the
    /// record stays pinned while it is duplicated.
    fn export_fd(&self, token: &MemToken) -> Result<std::os::fd::OwnedFd> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipVmmFd)?;
        if token.origin() != self.origin {
            return Err(Error::invalid_argument(
                "export_fd of a token another process exported: only its exporter has the fd",
            ));
        }
        let payload = VmmPayload::decode(token.payload())?;
        let not_exported = || {
            Error::invalid_argument(format!(
                "this process no longer exports the memory of this hip-vmm-fd token \
                 (generation {}): it was freed or closed, or the token names another object",
                token.generation()
            ))
        };
        let exported = if token.generation() >= NEXT_EXTERNAL_GENERATION_BASE {
            self.external
                .lock()
                .iter()
                .map(|(_, e)| e)
                .find(|e| e.generation == token.generation())
                .and_then(|e| e.vmm.clone())
                .ok_or_else(not_exported)?
        } else {
            let (_, record) = self
                .allocations
                .pin_raw(token.generation())
                .map_err(|_| not_exported())?;
            let exported = record
                .vmm
                .as_ref()
                .and_then(|v| v.exported_if_any())
                .ok_or_else(not_exported)?;
            // Dup while pinned: a free on another thread waits for this.
            if exported.identity != payload.identity {
                return Err(not_exported());
            }
            return exported.dup();
        };
        if exported.identity != payload.identity {
            return Err(not_exported());
        }
        exported.dup()
    }

    fn import_fd(
        &self,
        token: &MemToken,
        fd: std::os::fd::OwnedFd,
        device: DeviceId,
    ) -> Result<Mapping> {
        self.import_vmm(token, Some(fd), device)
    }

    fn close(&self, mapping: Mapping) -> Result<()> {
        let record = self.mappings.remove(mapping.id)?;
        self.release_mapping(&record)
            .inspect_err(|_| self.mappings.restore(mapping.id, record))
    }

    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let _scope = self.bind_owner(dst, src.len())?;
        // SAFETY: the trait's contract: `dst..dst + src.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_htod(&self.api, dst.0, src) }
    }

    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let _scope = self.bind_owner(src, dst.len())?;
        // SAFETY: the trait's contract: `src..src + dst.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_dtoh(&self.api, dst, src.0) }
    }

    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        let dev = self.check_device(device)?;
        let dir = devipc_shm::private_dir::runtime_dir_for_devipc()?;
        // Once per process: remove the words of signals whose creator crashed.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            let _ = devipc_shm::word_file::sweep_orphans(&dir);
        });
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let event = result::event_create_with_flags(
            &self.api,
            hipEventInterprocess | hipEventDisableTiming,
        )?;
        let word = match WordFile::create(&dir) {
            Ok(word) => word,
            Err(e) => {
                // SAFETY: the event was created above, never handed out, and is destroyed
                // once, here.
                let _ = unsafe { result::event_destroy(&self.api, event) };
                return Err(Error::io(
                    format!("creating a signal word in {}", dir.display()),
                    e,
                ));
            }
        };
        let id = self.signals.insert(SignalRecord {
            device,
            event: event as usize,
            word: Arc::new(word),
            created: true,
        });
        Ok(SignalHandle { id, device })
    }

    fn export_signal(&self, signal: &SignalHandle, _opts: ExportOptions) -> Result<SignalToken> {
        let record = self.signal(signal)?;
        let (event, word, device, created) =
            (record.event, &record.word, record.device, record.created);
        if !created {
            return Err(Error::invalid_argument(
                "an imported signal cannot be exported again; export the original",
            ));
        }
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`).
        let handle = unsafe { result::ipc_get_event_handle(&self.api, event_ptr(event)) }?;
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(word.name());
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::HipIpcEvent,
            emulated: self.info.source.is_emulated(),
            device,
            physical: self.token_physical(device),
            origin: self.origin,
            generation: signal.id.get(),
            payload,
        })
    }

    /// As for memory: HIP has no access control.
    fn grant_signal(&self, token: &SignalToken, _peers: &[ProcessId]) -> Result<()> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcEvent)
    }

    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcEvent)?;
        let dev = self.check_device(device)?;
        if token.origin() == self.origin {
            // As for memory: the runtime refuses to open its own event handle
            // (hipErrorInvalidContext); the facade shares the local signal instead.
            return Err(Error::Unsupported {
                backend: BackendKind::Hip,
                what: "importing a hip-ipc-event token in the process that exported it (use \
                       the exporter's signal; the devipc facade does)"
                    .into(),
            });
        }
        let payload = token.payload();
        if payload.len() != HIP_IPC_HANDLE_SIZE + NAME_LEN {
            return Err(Error::invalid_token(format!(
                "a hip-ipc-event payload is {} bytes, not {}",
                HIP_IPC_HANDLE_SIZE + NAME_LEN,
                payload.len()
            )));
        }
        let (handle_bytes, name) = payload.split_at(HIP_IPC_HANDLE_SIZE);
        let dir = devipc_shm::private_dir::runtime_dir_for_devipc()?;
        let word = open_word(&dir, name)?;
        let mut handle = [0u8; HIP_IPC_HANDLE_SIZE];
        handle.copy_from_slice(handle_bytes);
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let event =
            result::ipc_open_event_handle(&self.api, hipIpcEventHandle_t::from_bytes(handle))?;
        let id = self.signals.insert(SignalRecord {
            device,
            event: event as usize,
            word: Arc::new(word),
            created: false,
        });
        Ok(SignalHandle { id, device })
    }

    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        let record = self.signal(signal)?;
        let (event, word, device) = (record.event, &record.word, record.device);
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`); the stream
        // is the caller's, live by `RawStream`'s constructor contract.
        unsafe { result::event_record(&self.api, event_ptr(event), stream.as_ptr()) }?;
        semaphore(word)?
            .record()
            .map_err(|e| wait_error(e, "signal notify"))
    }

    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let started = Instant::now();
        let record = self.signal(signal)?;
        let (event, device) = (record.event, record.device);
        // The word is a futex with the caller's own deadline: the wait ends within the
        // timeout plus scheduling, and the error states the time measured. A destroy of
        // the signal on another thread ends it too (it would otherwise wait for this wait).
        let deadline = timeout.and_then(|t| started.checked_add(t));
        match wait_raised(&record, deadline)? {
            Waited::Raised => {}
            Waited::TimedOut => {
                return Err(Error::timed_out(
                    format!(
                        "waiting for signal {} (limit {:?})",
                        signal.id,
                        timeout.unwrap_or_default()
                    ),
                    started,
                ));
            }
            Waited::Released => {
                return Err(Error::UnknownHandle {
                    kind: "signal",
                    id: signal.id.get(),
                });
            }
        }
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // SAFETY: the event came from the signal's record (live, see `HipBackend::signal`); the stream
        // is the caller's, live by `RawStream`'s constructor contract; flags 0.
        unsafe { result::stream_wait_event(&self.api, stream.as_ptr(), event_ptr(event), 0) }
    }

    fn destroy_signal(&self, signal: SignalHandle) -> Result<()> {
        let record = self.signals.remove(signal.id)?;
        self.release_signal(record)
    }
}

/// The mechanism a memory token of this backend should have: its own when it is a HIP
/// memory mechanism, else `hip-ipc-mem` (for the mismatch error).
fn mem_mechanism(token: &MemToken) -> Mechanism {
    match token.mechanism() {
        Mechanism::HipVmmFd => Mechanism::HipVmmFd,
        _ => Mechanism::HipIpcMem,
    }
}
