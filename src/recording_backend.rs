//! A test-only backend that records which trait method reached it, to prove that
//! [`Backend`](crate::raw::Backend) dispatches every [`DeviceIpc`] method to its variant.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use devipc_core::token::{MemTokenParts, SignalTokenParts};
use devipc_core::{
    Allocation, BackendInfo, BackendKind, Capabilities, DeviceId, DeviceIpc, DevicePtr, Error,
    ExportOptions, HandleTable, LibrarySource, Mapping, Mechanism, MemToken, PhysicalDevice,
    ProcessId, RawStream, Result, SignalHandle, SignalToken, TokenOrigin,
};

static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Records the name of each method called on it.
#[derive(Debug)]
pub struct RecordingBackend {
    info: BackendInfo,
    calls: Mutex<Vec<&'static str>>,
    /// What `process_id` reports and tokens name as their producer.
    pid: ProcessId,
    /// Fill byte of the tokens' vendor payload (their identity).
    payload: u8,
    /// Mints the handles it returns.
    handles: HandleTable<()>,
    /// Unique per probe: each probe is its own "vendor runtime".
    instance: u64,
    /// Whether `free`, `close` and `destroy_signal` fail (see [`RecordingBackend::fail_releases`]).
    fail_releases: AtomicBool,
}

/// The real size of every object the probe "maps", whatever a token claims.
pub const RECORDED_OBJECT_SIZE: usize = 4096;

impl RecordingBackend {
    /// A probe reporting itself as `kind`.
    pub fn new(kind: BackendKind) -> Self {
        RecordingBackend::with_identity(kind, ProcessId::current(), 7)
    }

    /// A probe whose process id is `pid` and whose tokens carry payload bytes `payload`
    /// (tests that export give each probe its own, so their exports stay apart in the
    /// process-wide table of local exports).
    pub fn with_identity(kind: BackendKind, pid: ProcessId, payload: u8) -> Self {
        RecordingBackend {
            pid,
            payload,
            info: BackendInfo {
                kind,
                source: LibrarySource::Emulated,
                runtime_version: None,
                capabilities: Capabilities::default(),
            },
            calls: Mutex::new(Vec::new()),
            handles: HandleTable::new("probe"),
            instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fail_releases: AtomicBool::new(false),
        }
    }

    /// From now on `free`, `close` and `destroy_signal` fail with a vendor error naming
    /// the call (`fail = true`), or succeed again.
    pub fn fail_releases(&self, fail: bool) {
        self.fail_releases.store(fail, Ordering::SeqCst);
    }

    /// A release's result: the vendor error [`fail_releases`](Self::fail_releases) asks
    /// for, or success.
    fn released(&self, api: &'static str) -> Result<()> {
        if !self.fail_releases.load(Ordering::SeqCst) {
            return Ok(());
        }
        Err(Error::Vendor {
            backend: self.info.kind,
            api,
            code: 400,
            name: "probeErrorReleaseRefused".into(),
            message: "the probe was told to fail releases".into(),
        })
    }

    /// This probe's unique number.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// The methods called so far, in order.
    pub fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().unwrap().clone()
    }

    /// How many times `method` was called.
    pub fn count(&self, method: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == method)
            .count()
    }

    fn record(&self, name: &'static str) {
        self.calls.lock().unwrap().push(name);
    }

    fn mem_token(&self) -> Result<MemToken> {
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::HipIpcMem,
            emulated: true,
            device: DeviceId(0),
            physical: chip(DeviceId(0)),
            origin: TokenOrigin::current(self.pid),
            generation: 1,
            object_size: 64,
            offset: 0,
            len: 64,
            payload: vec![self.payload; 64],
        })
    }
}

/// The probe's device `d` is physical chip `10 + d`.
fn chip(device: DeviceId) -> PhysicalDevice {
    PhysicalDevice {
        physical_id: Some(10 + device.0),
        ..PhysicalDevice::UNKNOWN
    }
}

impl DeviceIpc for RecordingBackend {
    fn info(&self) -> &BackendInfo {
        self.record("info");
        &self.info
    }
    fn device_count(&self) -> Result<u32> {
        self.record("device_count");
        Ok(3)
    }
    fn process_id(&self) -> Result<ProcessId> {
        self.record("process_id");
        Ok(self.pid)
    }
    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
        self.record("physical_device");
        Ok(chip(device))
    }
    fn device_of_physical(&self, physical: &PhysicalDevice) -> Result<Option<DeviceId>> {
        self.record("device_of_physical");
        Ok(physical
            .physical_id
            .and_then(|id| id.checked_sub(10))
            .filter(|d| *d < 3)
            .map(DeviceId))
    }
    fn enable_peer_access(&self, _device: DeviceId, _peer: DeviceId) -> Result<()> {
        self.record("enable_peer_access");
        Ok(())
    }
    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        self.record("allocate");
        Ok(Allocation {
            id: self.handles.insert(()),
            device,
            ptr: DevicePtr(0x1000),
            size,
        })
    }
    fn free(&self, _alloc: Allocation) -> Result<()> {
        self.record("free");
        self.released("probeFree")
    }
    fn export(
        &self,
        _alloc: &Allocation,
        _range: Range<usize>,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        self.record("export");
        self.mem_token()
    }
    fn export_external(
        &self,
        _device: DeviceId,
        _ptr: DevicePtr,
        _len: usize,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        self.record("export_external");
        self.mem_token()
    }
    fn close_external(&self, _device: DeviceId, _ptr: DevicePtr) -> Result<()> {
        self.record("close_external");
        Ok(())
    }
    fn grant(&self, _token: &MemToken, _peers: &[ProcessId]) -> Result<()> {
        self.record("grant");
        Ok(())
    }
    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.record("import");
        let id = self.handles.insert(());
        Mapping::for_token(id, device, DevicePtr(0x2000), RECORDED_OBJECT_SIZE, token)
    }
    fn close(&self, _mapping: Mapping) -> Result<()> {
        self.record("close");
        self.released("probeClose")
    }
    unsafe fn write(&self, _dst: DevicePtr, _src: &[u8]) -> Result<()> {
        self.record("write");
        Ok(())
    }
    unsafe fn read(&self, _src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        self.record("read");
        dst.fill(0xAB);
        Ok(())
    }
    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        self.record("create_signal");
        Ok(SignalHandle {
            id: self.handles.insert(()),
            device,
        })
    }
    fn export_signal(&self, signal: &SignalHandle, _opts: ExportOptions) -> Result<SignalToken> {
        self.record("export_signal");
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::HipIpcEvent,
            emulated: true,
            device: signal.device,
            physical: chip(signal.device),
            origin: TokenOrigin::current(self.pid),
            generation: 1,
            // Unique per signal, as a vendor's handle is.
            payload: [
                vec![self.payload; 64],
                signal.id.get().to_le_bytes().to_vec(),
            ]
            .concat(),
        })
    }
    fn grant_signal(&self, _token: &SignalToken, _peers: &[ProcessId]) -> Result<()> {
        self.record("grant_signal");
        Ok(())
    }
    fn import_signal(&self, _token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.record("import_signal");
        Ok(SignalHandle {
            id: self.handles.insert(()),
            device,
        })
    }
    fn notify(&self, _signal: &SignalHandle, _stream: RawStream) -> Result<()> {
        self.record("notify");
        Ok(())
    }
    fn wait(
        &self,
        _signal: &SignalHandle,
        _stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.record("wait");
        Err(Error::Timeout {
            what: "probe wait".into(),
            after: timeout.unwrap_or_default(),
        })
    }
    fn destroy_signal(&self, _signal: SignalHandle) -> Result<()> {
        self.record("destroy_signal");
        self.released("probeDestroySignal")
    }
}
