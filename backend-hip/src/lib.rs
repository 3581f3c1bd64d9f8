//! devipc backend for the HIP runtime (hipIpc memory handles, IPC events).
//!
//! This crate sits below the `devipc` facade and implements
//! [`DeviceIpc`](devipc_core::DeviceIpc) on the vendor C ABI. Its implementation lands with
//! the "HIP backend" issue; until then [`HipBackend`] is uninhabited: [`HipBackend::open`] reports
//! [`Error::Unsupported`] and no value of the type can exist, so the trait methods below
//! are statically unreachable rather than stubs.

use std::ops::Range;
use std::time::Duration;

use devipc_core::{
    Allocation, BackendInfo, BackendKind, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions,
    Mapping, MemToken, ProcessId, RawStream, Result, SignalHandle, SignalToken,
};

/// The Hip backend. Uninhabited until its implementation lands (see the crate docs).
#[derive(Debug)]
pub enum HipBackend {}

impl HipBackend {
    /// Opens the backend. Always [`Error::Unsupported`] in this version.
    pub fn open() -> Result<Self> {
        Err(Error::unsupported(
            BackendKind::Hip,
            "devipc operations: this version of devipc-hip does not implement its backend yet",
        ))
    }
}

impl DeviceIpc for HipBackend {
    fn info(&self) -> &BackendInfo {
        match *self {}
    }
    fn device_count(&self) -> Result<u32> {
        match *self {}
    }
    fn process_id(&self) -> Result<ProcessId> {
        match *self {}
    }
    fn enable_peer_access(&self, _device: DeviceId, _peer: DeviceId) -> Result<()> {
        match *self {}
    }
    fn allocate(&self, _device: DeviceId, _size: usize) -> Result<Allocation> {
        match *self {}
    }
    fn free(&self, _alloc: Allocation) -> Result<()> {
        match *self {}
    }
    fn export(
        &self,
        _alloc: &Allocation,
        _range: Range<usize>,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        match *self {}
    }
    fn export_external(
        &self,
        _device: DeviceId,
        _ptr: DevicePtr,
        _len: usize,
        _opts: ExportOptions,
    ) -> Result<MemToken> {
        match *self {}
    }
    fn grant(&self, _token: &MemToken, _peers: &[ProcessId]) -> Result<()> {
        match *self {}
    }
    fn import(&self, _token: &MemToken, _device: DeviceId) -> Result<Mapping> {
        match *self {}
    }
    fn close(&self, _mapping: Mapping) -> Result<()> {
        match *self {}
    }
    fn write(&self, _dst: DevicePtr, _src: &[u8]) -> Result<()> {
        match *self {}
    }
    fn read(&self, _src: DevicePtr, _dst: &mut [u8]) -> Result<()> {
        match *self {}
    }
    fn create_signal(&self, _device: DeviceId) -> Result<SignalHandle> {
        match *self {}
    }
    fn export_signal(&self, _signal: &SignalHandle, _opts: ExportOptions) -> Result<SignalToken> {
        match *self {}
    }
    fn grant_signal(&self, _token: &SignalToken, _peers: &[ProcessId]) -> Result<()> {
        match *self {}
    }
    fn import_signal(&self, _token: &SignalToken, _device: DeviceId) -> Result<SignalHandle> {
        match *self {}
    }
    fn notify(&self, _signal: &SignalHandle, _stream: RawStream) -> Result<()> {
        match *self {}
    }
    fn wait(
        &self,
        _signal: &SignalHandle,
        _stream: RawStream,
        _timeout: Option<Duration>,
    ) -> Result<()> {
        match *self {}
    }
    fn destroy_signal(&self, _signal: SignalHandle) -> Result<()> {
        match *self {}
    }
}
