//! [`HipBackend`]: [`DeviceIpc`] on the HIP runtime.
//!
//! The backend owns its [`HipApi`] table and every vendor object it hands out a handle
//! for (allocations, mappings, signals); each lives in a [`HandleTable`] until the
//! matching release call, and whatever is still live when the backend is dropped is
//! released then.
//!
//! This file holds the struct, the records its tables keep, how it starts (`open`,
//! `emulated`, `from_api`) and ends (`Drop`), and its `impl DeviceIpc`, whose methods
//! choose the mechanism and call the file that implements it; none does a mechanism's
//! work here. The mechanisms, named as in the emulator (`emulator/src/hip/`) and the
//! conformance catalogue (`conformance/src/catalogue/hip/`):
//!
//! | file | mechanism | trait methods |
//! |---|---|---|
//! | `ipc_mem.rs` (+ `ipc_mem/deferred.rs`) | `hip-ipc-mem`: `hipMalloc` memory, `hipIpc*MemHandle` | allocate, export, import, free (deferred while imported), close |
//! | `vmm.rs` (+ `vmm/`) | `hip-vmm-fd`: VMM memory shared as a dma-buf fd | allocate_with, export, import, export_fd, import_fd, free, close |
//! | `external.rs` | framework memory of either kind | export_external, close_external |
//! | `event.rs` | `hip-ipc-event`: signals | create_signal ... destroy_signal |
//! | `generation.rs` | signals with generations: a ring of IPC events | post_signal, wait_signal_generation, signal_generations |
//! | `stream.rs` | the data plane: streams, local events, asynchronous copies | create_stream ... copy_async |
//! | `device.rs` | the device a call binds, its identity, peer access, host copies of any memory | physical_device, enable_peer_access, write, read |
//!
//! Every vendor call goes through `result.rs`.

use std::ffi::c_int;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use devipc_core::external_exports::{RuntimeDomain, SharedExports};
use devipc_core::own_memory::{self, BlockMap};
use devipc_core::token::MemTokenParts;
use devipc_core::{
    AllocateOptions, Allocation, BackendInfo, BackendKind, Capabilities, CopyDesc, DeviceId,
    DeviceIpc, DevicePtr, Error, EventHandle, ExportOptions, HandleTable, Mapping, Mechanism,
    MemToken, PhysicalDevice, PhysicalDeviceCache, Pinned, ProcessId, RawStream, Result,
    RuntimeVersion, SignalGenerations, SignalHandle, SignalToken, StreamHandle, TokenOrigin,
};
use devipc_hip_sys::{HipApi, hipErrorNoDevice, ipc_mem_lazy_enable_peer_access};
use devipc_shm::lease::{Lease, held};

use crate::event::SignalRecord;
use crate::external::{EXTERNAL, ExternalExport};
use crate::ipc_mem::{self, Deferred};
use crate::result::{self, vendor_error};
use crate::stream::{EventRecord, StreamRecord};
use crate::vmm::{self, VmmAlloc, VmmRange};

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
    /// devipc's streams and local events (`stream.rs`).
    pub(crate) streams: HandleTable<StreamRecord>,
    pub(crate) events: HandleTable<EventRecord>,
    pub(crate) deferred: Deferred,
    /// `export_external`s not closed yet, by device and allocation base: the table every
    /// HIP backend of this process on the same runtime shares ([`crate::external`]).
    pub(crate) external: SharedExports<ExternalExport>,
    /// `hip-vmm-fd` imports of this backend, by base, with the device they were imported
    /// on: host copies to them bind it (the thread's device may have no access).
    pub(crate) vmm_imports: BlockMap,
}

/// What the backend keeps for an [`Allocation`] of either memory mechanism.
#[derive(Debug, Clone)]
pub(crate) struct AllocRecord {
    pub(crate) device: DeviceId,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    /// Importers' holds, created by the first export (see `ipc_mem/deferred.rs`).
    pub(crate) lease: Option<Arc<Lease>>,
    /// `Some` for virtual memory of `allocate_with` (`hip-vmm-fd`), `None` for `hipMalloc`
    /// (`hip-ipc-mem`).
    pub(crate) vmm: Option<Arc<VmmAlloc>>,
    /// The block's entry in devipc's own memory ([`own_memory`]), ended after the vendor
    /// free: exactly this one, never a later block's at the same address.
    pub(crate) registration: own_memory::Registration,
}

/// What the backend keeps for a [`Mapping`]: the base the import mapped (for
/// `hip-ipc-mem`, what `hipIpcOpenMemHandle` returned and `hipIpcCloseMemHandle` takes),
/// and the exporter's lease this process holds.
#[derive(Debug, Clone)]
pub(crate) struct MappingRecord {
    pub(crate) device: DeviceId,
    pub(crate) base: u64,
    pub(crate) lease: Option<Arc<Lease>>,
    /// `Some` for a `hip-vmm-fd` import: the imported handle's mapping (`base` is its
    /// address), released instead of `hipIpcCloseMemHandle`.
    pub(crate) vmm: Option<Arc<VmmRange>>,
}

impl AllocRecord {
    /// Frees the memory of a record already taken out of the allocation table (the
    /// reaper thread calls it without the backend): `hipFree`, or for VMM memory unmap,
    /// address free, handle release and the close of the exported fd.
    pub(crate) fn release(&self, api: &HipApi) -> Result<()> {
        match &self.vmm {
            Some(vmm) => vmm.release(api)?,
            None => ipc_mem::free(api, self)?,
        }
        // Only now: until the vendor freed it, the block is devipc's (export_external). The
        // address may already be another block's (another thread's allocation got it and
        // registered it): only this record's registration is removed (audit N4).
        own_memory::unregister_exactly(self.registration);
        Ok(())
    }
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
            streams: HandleTable::new("stream"),
            events: HandleTable::new("event"),
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

    /// A token of this process for `range` of an object of `object_size` bytes.
    pub(crate) fn mem_token(
        &self,
        mechanism: Mechanism,
        device: DeviceId,
        payload: Vec<u8>,
        object_size: usize,
        range: Range<usize>,
        generation: u64,
    ) -> Result<MemToken> {
        MemToken::new(MemTokenParts {
            mechanism,
            emulated: self.info.source.is_emulated(),
            device,
            physical: self.token_physical(device),
            origin: self.origin,
            generation,
            object_size: object_size as u64,
            offset: range.start as u64,
            len: (range.end - range.start) as u64,
            payload,
        })
    }

    /// The record behind `alloc`, checked against what the caller holds, and pinned: a
    /// `free` of a clone of the handle on another thread waits until it is dropped.
    pub(crate) fn allocation(&self, alloc: &Allocation) -> Result<Pinned<'_, AllocRecord>> {
        let record = self.allocations.pin(alloc.id)?;
        alloc.check_matches(DevicePtr(record.ptr), record.size, record.device)?;
        Ok(record)
    }

    /// Ends a mapping already taken out of the table (`hipIpcCloseMemHandle`, or for a VMM
    /// import unmap, address free and handle release), then releases this process's hold
    /// on the exporter's lease.
    pub(crate) fn release_mapping(&self, record: &MappingRecord) -> Result<()> {
        match &record.vmm {
            Some(range) => self.release_vmm_import(record, range)?,
            None => ipc_mem::close(&self.api, record)?,
        }
        if let Some(lease) = &record.lease {
            held::drop_hold(lease);
        }
        Ok(())
    }

    /// Closes a mapping whose import failed after the open, and drops its hold (kept when
    /// the close fails: the memory is still mapped then).
    pub(crate) fn undo_import(&self, record: &MappingRecord) {
        if let Err(close) = self.release_mapping(record) {
            log::error!("devipc-hip: undoing a refused import failed: {close}");
        }
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
        for (_, record) in self.events.drain() {
            if let Err(e) = record.release(self) {
                log::error!("devipc-hip: destroying a leftover event failed: {e}");
            }
        }
        for (_, record) in self.streams.drain() {
            if let Err(e) = record.release(self) {
                log::error!("devipc-hip: destroying a leftover stream failed: {e}");
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
        self.query_physical_device(device)
    }

    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        self.enable_peer(device, peer)
    }

    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        self.allocate_ipc_mem(device, size)
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
            None | Some(Mechanism::HipIpcMem) => self.allocate_ipc_mem(device, size),
            Some(Mechanism::HipVmmFd) => self.allocate_vmm(device, size),
            Some(other) => Err(Error::unsupported(
                BackendKind::Hip,
                format!("allocating memory for the {other} mechanism"),
            )),
        }
    }

    /// Either mechanism: at once, or deferred while importers map the memory
    /// (`ipc_mem/deferred.rs`).
    fn free(&self, alloc: Allocation) -> Result<()> {
        self.free_allocation(alloc)
    }

    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        let record = self.allocation(alloc)?;
        Allocation::check_range(&range, record.size)?;
        match &record.vmm {
            Some(vmm) => self.export_vmm(alloc.id, &record, vmm, range),
            None => self.export_ipc_mem(alloc.id, &record, range),
        }
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
        match token.mechanism() {
            Mechanism::HipVmmFd => self.import_vmm(token, None, device),
            _ => self.import_ipc_mem(token, device),
        }
    }

    /// A dup of the fd this backend exported for `token` (a `hip-vmm-fd` token of this
    /// process whose allocation, or `export_external` block, is still exported); the
    /// record stays pinned while it is duplicated.
    fn export_fd(&self, token: &MemToken) -> Result<std::os::fd::OwnedFd> {
        self.export_vmm_fd(token)
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
        // SAFETY: the trait's contract, passed on.
        unsafe { self.copy_to_device(dst, src) }
    }

    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the trait's contract, passed on.
        unsafe { self.copy_to_host(src, dst) }
    }

    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        self.create_event(device)
    }

    fn export_signal(&self, signal: &SignalHandle, _opts: ExportOptions) -> Result<SignalToken> {
        self.export_event(signal)
    }

    /// As for memory: HIP has no access control.
    fn grant_signal(&self, token: &SignalToken, _peers: &[ProcessId]) -> Result<()> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipIpcEvent)
    }

    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.import_event(token, device)
    }

    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        self.notify_event(signal, stream)
    }

    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.wait_event(signal, stream, timeout)
    }

    fn create_stream(&self, device: DeviceId) -> Result<StreamHandle> {
        self.new_stream(device)
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        self.end_stream(stream)
    }

    fn synchronize_stream(&self, device: DeviceId, stream: RawStream) -> Result<()> {
        self.sync_stream(device, stream)
    }

    fn create_event(&self, device: DeviceId) -> Result<EventHandle> {
        self.new_event(device)
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        self.end_event(event)
    }

    fn record_event(&self, event: &EventHandle, stream: RawStream) -> Result<()> {
        self.record(event, stream)
    }

    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        self.query(event)
    }

    fn synchronize_event(&self, event: &EventHandle, timeout: Option<Duration>) -> Result<()> {
        self.sync_event(event, timeout)
    }

    fn stream_wait_event(
        &self,
        device: DeviceId,
        stream: RawStream,
        event: &EventHandle,
    ) -> Result<()> {
        self.stream_waits_for(device, stream, event)
    }

    /// One `hipMemcpyAsync` per descriptor (`stream.rs`).
    ///
    /// # Safety
    /// As [`DeviceIpc::copy_async`].
    unsafe fn copy_async(
        &self,
        device: DeviceId,
        stream: RawStream,
        copies: &[CopyDesc],
    ) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.enqueue_copies(device, stream, copies) }
    }

    fn destroy_signal(&self, signal: SignalHandle) -> Result<()> {
        self.destroy_event(signal)
    }

    fn post_signal(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<u64> {
        self.post_generation(signal, stream, timeout)
    }

    fn wait_signal_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        generation: u64,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.wait_generation(signal, stream, generation, timeout)
    }

    fn signal_generations(&self, signal: &SignalHandle) -> Result<SignalGenerations> {
        self.generations_of(signal)
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
