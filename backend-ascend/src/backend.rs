//! [`AscendBackend`]: [`DeviceIpc`] on the ACL runtime.
//!
//! The backend owns its [`AclApi`] table and every vendor object it hands out a handle
//! for (VMM allocations, mappings, notifies); each lives in a [`HandleTable`] until the
//! matching release call, and whatever is still live when the backend is dropped is
//! released then. Keys exported for framework memory (`export_external`) are kept too,
//! until [`AscendBackend::close_external`] or the drop. How devipc shares ACL's
//! process-wide initialisation with the framework is documented on [`AscendBackend`].
//!
//! This file holds the struct, its start (`open`, `emulated`, `from_api`), its `Drop`,
//! the checks every mechanism shares (device ids, tokens, the identity tokens carry), and
//! `impl DeviceIpc`, whose methods check what they need to choose a mechanism and hand
//! the call to it in a few lines. Each mechanism's work is in the file named like it (and
//! like its counterparts in the emulator and the conformance catalogue):
//!
//! | mechanism | file | `DeviceIpc` methods |
//! |---|---|---|
//! | `ascend-vmm` | [`vmm`](crate::vmm) | allocate, free, export, grant, import, close |
//! | `ascend-ipc-key` | [`ipc_key`](crate::ipc_key) | export_external, close_external, grant, import, close |
//! | `ascend-notify` | [`notify`](crate::notify) | the signal methods |
//! | the data plane | `stream.rs` | streams, local events, asynchronous copies |
//!
//! and the support files: device binding, peer access and host copies (`read`/`write`)
//! in `device.rs`, export records in `record.rs`, the checked ACL calls (with the
//! `Rollback` of a failed multi-step acquire) in `result.rs`, and ACL's process-wide
//! initialisation in `init.rs`. Signals with generations add a ring of IPC events to a
//! notify (`generation.rs`: post_signal, wait_signal_generation, signal_generations).

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use devipc_ascend_sys::codes::{ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_NO_DEVICE};
use devipc_ascend_sys::{AclApi, error_name};
use devipc_core::external_exports::{RuntimeDomain, SharedExports};
use devipc_core::{
    Allocation, BackendInfo, BackendKind, Capabilities, CopyDesc, DeviceId, DeviceIpc, DevicePtr,
    DeviceUuid, Error, EventHandle, ExportOptions, HandleTable, HostIdentity, Mapping, Mechanism,
    MemToken, PhysicalDevice, PhysicalDeviceCache, ProcessId, RawStream, Result, RuntimeVersion,
    SignalGenerations, SignalHandle, SignalToken, StreamHandle, TokenOrigin,
};

use crate::device::DeviceScope;
use crate::device::Transfer;
use crate::init::AclInit;
use crate::ipc_key::{EXTERNAL, ExternalExport, KeyMapping};
use crate::notify::SignalRecord;
use crate::result;
use crate::result::vendor_error;
use crate::stream::{EventRecord, StreamRecord};
use crate::vmm::{AllocRecord, VmmObjects};

/// The Ascend backend.
///
/// # ACL initialisation
///
/// `aclInit` is process-wide, and the framework around devipc (torch_npu, MindSpore) has
/// usually called it already; ACL then answers `ACL_ERROR_REPEAT_INITIALIZE` (100002),
/// which devipc accepts. `aclFinalize` tears down every ACL resource of the process, so
/// devipc calls it only when devipc's own `aclInit` was the one that initialised ACL, and
/// only when the last devipc backend on that runtime goes away: the process keeps one
/// count of live backends per loaded runtime (two backends on one runtime must not
/// finalize ACL under each other), and a second backend does not call `aclInit` again.
///
/// # The current device
///
/// ACL keeps a current device per thread. Each call makes the device it needs current
/// (`aclrtSetDevice`) and puts the caller's back afterwards. A thread that had no device
/// (`aclrtGetDevice` fails with `ACL_ERROR_RT_CONTEXT_NULL`) is left on the device devipc
/// set: ACL's only way to unbind a thread is `aclrtResetDevice`, which drops the
/// process's reference on the device's default context and, at zero, releases what was
/// made in it, including the memory devipc just mapped.
///
/// # Process id
///
/// [`DeviceIpc::process_id`] is `aclrtDeviceGetBareTgid` (the host pid the NPU driver
/// knows, even inside a container: what trustlists expect), read once. A runtime without
/// that symbol predates every IPC family that needs the value; there it is `getpid()`.
///
/// # Threads
///
/// `Send + Sync` because every field is: the table holds only function pointers, the
/// records hold addresses as integers, and the ACL runtime may be called from any thread;
/// per-thread device state is bound and restored around each call.
#[derive(Debug)]
pub struct AscendBackend {
    pub(crate) api: Arc<AclApi>,
    pub(crate) info: BackendInfo,
    pub(crate) device_count: u32,
    /// Each device's physical id and UUID, asked once.
    pub(crate) physical: PhysicalDeviceCache,
    pub(crate) host: HostIdentity,
    /// This process's start time, for [`TokenOrigin::start_time`].
    pub(crate) start_time: u64,
    pid: OnceLock<ProcessId>,
    pub(crate) allocations: HandleTable<AllocRecord>,
    pub(crate) mappings: HandleTable<MappingRecord>,
    pub(crate) signals: HandleTable<SignalRecord>,
    /// devipc's streams and local events (`stream.rs`).
    pub(crate) streams: HandleTable<StreamRecord>,
    pub(crate) events: HandleTable<EventRecord>,
    /// Keys exported for framework memory, by (device, block base): the table every
    /// Ascend backend of this process on the same runtime shares ([`crate::ipc_key`]).
    pub(crate) external: SharedExports<ExternalExport>,
    /// Serialises the exports that create a vendor handle once and cache it (VMM
    /// shareable handles, notify keys), so two threads never create two.
    pub(crate) export_lock: Mutex<()>,
    /// The rings of signals with generations, by signal id (`generation.rs`).
    pub(crate) rings: crate::generation::Rings,
    /// Device pairs (device, peer) devipc already enabled peer access for.
    pub(crate) peers_enabled: Mutex<Vec<(DeviceId, DeviceId)>>,
    /// The process-wide ACL initialisation this backend holds; dropped last.
    init: AclInit,
}

/// What the backend keeps for a [`Mapping`], by mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MappingRecord {
    /// A VMM shareable handle imported, reserved and mapped here (`ascend-vmm`).
    Vmm(VmmObjects),
    /// An IPC key imported here (`ascend-ipc-key`).
    Key(KeyMapping),
}

impl AscendBackend {
    /// Discovers and loads the ACL runtime (DESIGN section 8) and starts the backend.
    ///
    /// Fails with [`Error::LibraryNotFound`] listing every path tried when there is no ACL
    /// runtime, and with [`Error::Vendor`] (`ACL_ERROR_RT_NO_DEVICE`) when it has no
    /// device.
    pub fn open() -> Result<Self> {
        AscendBackend::from_api(Arc::new(AclApi::discover()?))
    }

    /// Starts the backend on the devipc emulator linked into this process (feature
    /// `emulator`): every ACL function over host shared memory, across real processes,
    /// with the vendor's IPC rules and codes. Configured by the `DEVIPC_EMU_*` environment
    /// variables (state directory, device count, memory limit) on first use.
    ///
    /// Fails with [`Error::Config`] when a `DEVIPC_EMU_*` variable is malformed or the
    /// emulator's state directory is refused (wrong owner or mode, a symlink).
    #[cfg(feature = "emulator")]
    pub fn emulated() -> Result<Self> {
        // A bad DEVIPC_EMU_* setting is a configuration error of devipc's own, not the
        // vendor code the C ABI would have to report it as.
        devipc_emulator::start()?;
        AscendBackend::from_api(Arc::new(devipc_emulator::acl::acl_api()))
    }

    /// Starts the backend on a filled table (loaded from a library or the emulator's).
    ///
    /// Initialises ACL (accepting `ACL_ERROR_REPEAT_INITIALIZE`: the framework may have
    /// done it; see [`AscendBackend`]), counts the devices, reads the version and
    /// derives the capabilities from the functions the runtime exports.
    ///
    /// A runtime that reports no device (`ACL_ERROR_RT_NO_DEVICE`, or success with a count
    /// of 0) fails with [`Error::Vendor`] for `aclrtGetDeviceCount` with code
    /// `ACL_ERROR_RT_NO_DEVICE` (207004): the same kind of error as HIP's
    /// `hipErrorNoDevice`, so callers can tell "installed but no device" from "not
    /// installed" ([`Error::LibraryNotFound`]).
    pub fn from_api(api: Arc<AclApi>) -> Result<Self> {
        let init = AclInit::acquire(&api)?;
        // Key exporters that were killed left their lease tables; the first backend of a
        // process (then at most every 30 s) removes those of dead exporters.
        devipc_shm::lease::held::sweep_orphans_now_and_then();
        let device_count = device_count(&api)?;
        let info = BackendInfo {
            kind: BackendKind::Ascend,
            source: api.source().clone(),
            runtime_version: runtime_version(&api),
            capabilities: capabilities(&api, device_count),
        };
        // The runtime's aclrtFree tells its library (or the emulator, or a fake) apart.
        let external = EXTERNAL.join(RuntimeDomain::new(&info, api.aclrtFree as usize));
        Ok(AscendBackend {
            info,
            device_count,
            physical: PhysicalDeviceCache::new(device_count),
            host: HostIdentity::current(),
            start_time: devipc_core::identity::current_start_time(),
            pid: OnceLock::new(),
            allocations: HandleTable::new("allocation"),
            mappings: HandleTable::new("mapping"),
            signals: HandleTable::new("signal"),
            streams: HandleTable::new("stream"),
            events: HandleTable::new("event"),
            external,
            export_lock: Mutex::new(()),
            rings: Default::default(),
            peers_enabled: Mutex::new(Vec::new()),
            init,
            api,
        })
    }

    /// The function table this backend calls.
    pub fn api(&self) -> &Arc<AclApi> {
        &self.api
    }

    /// Whether devipc's `aclInit` initialised ACL in this process (so the last devipc
    /// backend on this runtime calls `aclFinalize`), rather than the framework.
    pub fn initialized_acl(&self) -> bool {
        self.init.devipc_initialized()
    }

    /// `device` as the runtime's `int32_t`, after checking it is in range.
    pub(crate) fn check_device(&self, device: DeviceId) -> Result<i32> {
        device.check(self.device_count)?.as_c_int()
    }

    /// The physical identity of `device` (this process's "user" device id): the chip id
    /// through user id -> driver logical id (`aclrtGetLogicDevIdByUserDevId`, the step
    /// `ASCEND_RT_VISIBLE_DEVICES` renumbers) -> physical id (`aclrtGetPhyDevIdByLogicDevId`,
    /// the step a container renumbers), and the UUID (`aclrtDeviceGetUuid`). A runtime
    /// without a call leaves its field unknown; a call that exists and fails is an error.
    fn query_physical(&self, device: DeviceId) -> Result<PhysicalDevice> {
        let user = self.check_device(device)?;
        let absent = |r: Result<i32>| match r {
            Err(Error::Unsupported { .. }) => Ok(None),
            other => other.map(Some),
        };
        let logic = absent(result::logic_dev_id_by_user_dev_id(&self.api, user))?;
        let physical_id = match logic {
            Some(logic) => absent(result::phy_dev_id_by_logic_dev_id(&self.api, logic))?,
            None => None,
        };
        let physical_id = physical_id
            .map(|id| {
                u32::try_from(id).map_err(|_| {
                    Error::invalid_argument(format!(
                        "aclrtGetPhyDevIdByLogicDevId gave physical id {id} for device {device}"
                    ))
                })
            })
            .transpose()?;
        let uuid = match result::device_get_uuid(&self.api, user) {
            Ok(bytes) => DeviceUuid::from_runtime(bytes),
            Err(Error::Unsupported { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(PhysicalDevice {
            pci_bus_id: None,
            uuid,
            physical_id,
        })
    }

    /// The identity a token of `device` carries: unknown (and logged) when the runtime
    /// cannot tell, since the token is still good for an import that names the device.
    pub(crate) fn token_physical(&self, device: DeviceId) -> PhysicalDevice {
        self.physical_device(device).unwrap_or_else(|e| {
            log::warn!("devipc-ascend: tokens of device {device} carry no physical identity: {e}");
            PhysicalDevice::UNKNOWN
        })
    }

    /// This process as the tokens it produces name it.
    pub(crate) fn origin(&self) -> Result<TokenOrigin> {
        Ok(TokenOrigin {
            pid: self.bare_tgid()?,
            start_time: self.start_time,
            host: self.host,
        })
    }

    /// The process id trustlists expect: `aclrtDeviceGetBareTgid` (the host pid, even
    /// inside a container), read once.
    ///
    /// A runtime without the symbol predates the whole IPC family that needs the value,
    /// so devipc falls back to `getpid()` there (only `process_id` can observe it). If
    /// the call needs a device context and the thread has none, it is retried with device
    /// 0 bound.
    fn bare_tgid(&self) -> Result<ProcessId> {
        if let Some(pid) = self.pid.get() {
            return Ok(*pid);
        }
        if self.api.aclrtDeviceGetBareTgid.is_none() {
            return Ok(*self.pid.get_or_init(ProcessId::current));
        }
        let pid = match result::device_get_bare_tgid(&self.api)? {
            Some(pid) => pid,
            None => {
                let _scope = DeviceScope::bind(&self.api, 0)?;
                // Still no context with device 0 bound: that is an error now.
                result::device_get_bare_tgid(&self.api)?.ok_or_else(|| {
                    vendor_error(
                        &self.api,
                        "aclrtDeviceGetBareTgid",
                        ACL_ERROR_RT_CONTEXT_NULL,
                    )
                })?
            }
        };
        let pid = u32::try_from(pid).map_err(|_| {
            Error::invalid_argument(format!("aclrtDeviceGetBareTgid returned {pid}"))
        })?;
        Ok(*self.pid.get_or_init(|| ProcessId(pid)))
    }

    /// Rejects a token for another backend or for none of the `expected` mechanisms, or
    /// from the emulator when this is a real runtime (and the reverse).
    fn check_token(&self, found: Mechanism, emulated: bool, expected: &[Mechanism]) -> Result<()> {
        if found.backend() != BackendKind::Ascend || !expected.contains(&found) {
            let names: Vec<&str> = expected.iter().map(|m| m.name()).collect();
            return Err(Error::BackendMismatch {
                expected: format!(
                    "a {} token for {}",
                    names.join(" or "),
                    self.info.describe()
                ),
                found: format!("a {found} token"),
            });
        }
        if emulated != self.info.source.is_emulated() {
            let side = |e: bool| {
                if e {
                    "the devipc emulator"
                } else {
                    "a real ACL runtime"
                }
            };
            return Err(Error::BackendMismatch {
                expected: format!("a token from {}", side(self.info.source.is_emulated())),
                found: format!("a token from {}", side(emulated)),
            });
        }
        Ok(())
    }

    /// Releases a mapping already taken out of the table, by its mechanism (resumable: on
    /// an error `record` says how far it got).
    pub(crate) fn release_mapping(&self, record: &mut MappingRecord) -> Result<()> {
        match record {
            MappingRecord::Vmm(vmm) => self.release_vmm(vmm),
            MappingRecord::Key(key) => self.release_key_mapping(key),
        }
    }

    /// Never finalize ACL for this runtime from now on (see [`AclInit::keep_initialized`]):
    /// a key is left open for a live importer.
    pub(crate) fn keep_acl_initialized(&self) {
        self.init.keep_initialized();
    }
}

/// Each method checks what it needs to choose the mechanism (a token's backend and
/// mechanism, the device) and hands the call to the mechanism's file: `ascend-vmm` in
/// [`vmm`](crate::vmm), `ascend-ipc-key` in [`ipc_key`](crate::ipc_key), `ascend-notify` in
/// [`notify`](crate::notify); host copies in `device.rs`.
impl DeviceIpc for AscendBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.device_count)
    }

    /// `aclrtDeviceGetBareTgid`, read once (see [`AscendBackend`]); the tokens' origin
    /// reads the same value.
    fn process_id(&self) -> Result<ProcessId> {
        self.bare_tgid()
    }

    /// The physical chip id and the UUID, where the runtime has the calls (see
    /// `AscendBackend::query_physical`).
    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
        self.physical
            .get_or_query(device, || self.query_physical(device))
    }

    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        self.enable_peer(device, peer)
    }

    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        self.allocate_vmm(device, size)
    }

    fn free(&self, alloc: Allocation) -> Result<()> {
        self.free_vmm(alloc)
    }

    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        self.export_vmm(alloc, range, opts)
    }

    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        self.export_key(device, ptr, len, opts)
    }

    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        // The inherent method is the public, documented entry point (see ipc_key.rs).
        AscendBackend::close_external(self, device, ptr)
    }

    fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendVmm, Mechanism::AscendIpcKey],
        )?;
        let dev = self.check_device(token.device())?;
        let mut pids = pid_args(peers)?;
        match token.mechanism() {
            Mechanism::AscendIpcKey => self.grant_key(token, dev, &mut pids),
            _ => self.grant_vmm(token, dev, &mut pids),
        }
    }

    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendVmm, Mechanism::AscendIpcKey],
        )?;
        self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it).
        let home = self.home_device(token.device(), token.physical_device())?;
        match token.mechanism() {
            Mechanism::AscendIpcKey => self.import_key(token, device, home),
            _ => self.import_vmm(token, device, home),
        }
    }

    fn close(&self, mapping: Mapping) -> Result<()> {
        let mut record = self.mappings.remove(mapping.id)?;
        self.release_mapping(&mut record).inspect_err(|_| {
            self.mappings.restore(mapping.id, record);
        })
    }

    /// `aclrtMemcpy` host to device, with the device of the devipc range holding `dst`
    /// bound, or through a staging buffer (`AscendBackend::host_copy`, in
    /// `device.rs`).
    ///
    /// # Safety
    /// As [`DeviceIpc::write`]: `dst..dst + src.len()` is
    /// device memory the caller may write, mapped until the call returns.
    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.host_copy(dst, Transfer::Write(src)) }
    }

    /// `aclrtMemcpy` device to host, binding the device (and staging) as `write` does.
    ///
    /// # Safety
    /// As [`DeviceIpc::read`]: `src..src + dst.len()` is
    /// device memory the caller may read, mapped until the call returns.
    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.host_copy(src, Transfer::Read(dst)) }
    }

    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        self.create_notify(device)
    }

    fn export_signal(&self, signal: &SignalHandle, opts: ExportOptions) -> Result<SignalToken> {
        self.export_notify(signal, opts)
    }

    fn grant_signal(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        self.grant_notify(token, peers)
    }

    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        self.import_notify(token, device)
    }

    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        self.record_notify(signal, stream)
    }

    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.wait_notify(signal, stream, timeout)
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

    /// One `aclrtMemcpyAsync` per descriptor, after devipc's checks of the vendor's copy
    /// rules (`stream.rs`).
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
        self.destroy_notify(signal)
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

/// The `int32_t` pid list the trustlist functions take; an empty list stays empty.
pub(crate) fn pid_args(peers: &[ProcessId]) -> Result<Vec<i32>> {
    peers.iter().map(|p| p.as_c_int()).collect()
}

/// Locks a mutex of the backend. Every critical section is a single map operation or a
/// vendor call whose failure is returned as a value, so a poisoned lock holds consistent
/// data and is recovered.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `aclrtGetDeviceCount`, with "no device" as a typed vendor error.
fn device_count(api: &AclApi) -> Result<u32> {
    let count = result::get_device_count(api)?;
    if count == 0 {
        return Err(Error::Vendor {
            backend: BackendKind::Ascend,
            api: "aclrtGetDeviceCount",
            code: ACL_ERROR_RT_NO_DEVICE,
            name: error_name(ACL_ERROR_RT_NO_DEVICE)
                .unwrap_or("ACL_ERROR_RT_NO_DEVICE")
                .to_owned(),
            message: "the ACL runtime reports 0 devices".to_owned(),
        });
    }
    Ok(count)
}

/// The runtime's version: the CANN `runtime` package version from `aclsysGetVersionStr`
/// (e.g. 8.5.0) when the runtime has it, else the ACL API version from the deprecated
/// `aclrtGetVersion` (e.g. 1.17.0), else unknown. A failed query is not an error.
fn runtime_version(api: &AclApi) -> Option<RuntimeVersion> {
    if let Some(v) = result::sys_get_version_str(api, c"runtime")
        .as_deref()
        .and_then(RuntimeVersion::parse_dotted)
    {
        return Some(v);
    }
    let (major, minor, patch) = result::get_version(api)?;
    Some(RuntimeVersion::new(
        u32::try_from(major).ok()?,
        u32::try_from(minor).ok()?,
        u32::try_from(patch).ok()?,
    ))
}

/// What the runtime supports, from the optional functions it exports.
fn capabilities(api: &AclApi, device_count: u32) -> Capabilities {
    let vmm_ipc = api.aclrtMemExportToShareableHandle.is_some()
        && api.aclrtMemSetPidToShareableHandle.is_some()
        && api.aclrtMemImportFromShareableHandle.is_some();
    let key_ipc = api.aclrtIpcMemGetExportKey.is_some()
        && api.aclrtIpcMemSetImportPid.is_some()
        && api.aclrtIpcMemImportByKey.is_some()
        && api.aclrtIpcMemClose.is_some();
    let notify_ipc = api.aclrtCreateNotify.is_some()
        && api.aclrtDestroyNotify.is_some()
        && api.aclrtNotifyGetExportKey.is_some()
        && api.aclrtNotifySetImportPid.is_some()
        && api.aclrtNotifyImportByKey.is_some()
        && api.aclrtRecordNotify.is_some()
        && api.aclrtWaitAndResetNotify.is_some();
    let mut caps = Capabilities::default();
    // Every Ascend export is trustlisted by default (aclrt*SetImportPid / SetPid...).
    caps.access_control = true;
    caps.export_allocation = vmm_ipc;
    caps.export_external = key_ipc;
    caps.signals = notify_ipc;
    caps.cross_device_import = device_count > 1 && (vmm_ipc || key_ipc);
    // The DISABLE_PID_VALIDATION flags are defined with each export family.
    caps.disable_pid_validation = vmm_ipc || key_ipc || notify_ipc;
    caps
}

impl Drop for AscendBackend {
    /// Releases what the caller never released: signals, then mappings, then keys
    /// exported for framework memory, then allocations (a mapping may view one of our own
    /// allocations through the facade). Failures are logged (`log::error!`); `Drop` never
    /// panics. ACL itself is finalized afterwards, when the `init` field drops.
    ///
    /// In a child `fork`ed after the backend started, nothing is released: every object
    /// is the parent's (see `devipc_core::fork`).
    fn drop(&mut self) {
        if self.init.birth.is_inherited() {
            return;
        }
        for (id, record) in self.signals.drain() {
            self.release_ring(id.get(), record.device);
            if let Err(e) = self.release_signal(record) {
                log::error!("devipc-ascend: destroying a leftover notify failed: {e}");
            }
        }
        for (_, record) in self.events.drain() {
            if let Err(e) = record.release(self) {
                log::error!("devipc-ascend: destroying a leftover event failed: {e}");
            }
        }
        for (_, record) in self.streams.drain() {
            if let Err(e) = record.release(self) {
                log::error!("devipc-ascend: destroying a leftover stream failed: {e}");
            }
        }
        for (_, mut record) in self.mappings.drain() {
            if let Err(e) = self.release_mapping(&mut record) {
                log::error!("devipc-ascend: closing a leftover mapping failed: {e}");
            }
        }
        // The keys no other live backend of the process exported too.
        let exports = self.external.lock().leave();
        for ((device, base), export) in exports {
            if let Err(e) = self.drop_external(device, base, &export) {
                log::error!("devipc-ascend: closing a leftover exported IPC key failed: {e}");
            }
        }
        for (_, mut record) in self.allocations.drain() {
            if let Err(e) = self.release_allocation(&mut record) {
                log::error!("devipc-ascend: freeing a leftover allocation failed: {e}");
            }
        }
    }
}
