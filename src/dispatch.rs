//! The raw trait on [`Backend`]: each call goes to the variant's backend.

use std::ops::Range;
use std::os::fd::OwnedFd;
use std::time::Duration;

use devipc_core::{
    AllocateOptions, Allocation, BackendInfo, CopyDesc, DeviceId, DeviceIpc, DevicePtr,
    EventHandle, ExportOptions, Mapping, MemToken, PhysicalDevice, ProcessId, RawStream, Result,
    SignalGenerations, SignalHandle, SignalToken, StreamHandle,
};

use crate::runtime::Backend;

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

    fn post_signal(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<u64> {
        dispatch!(self, b => b.post_signal(signal, stream, timeout))
    }

    fn wait_signal_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        generation: u64,
        timeout: Option<Duration>,
    ) -> Result<()> {
        dispatch!(self, b => b.wait_signal_generation(signal, stream, generation, timeout))
    }

    fn signal_generations(&self, signal: &SignalHandle) -> Result<SignalGenerations> {
        dispatch!(self, b => b.signal_generations(signal))
    }

    fn create_stream(&self, device: DeviceId) -> Result<StreamHandle> {
        dispatch!(self, b => b.create_stream(device))
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        dispatch!(self, b => b.destroy_stream(stream))
    }

    fn synchronize_stream(&self, device: DeviceId, stream: RawStream) -> Result<()> {
        dispatch!(self, b => b.synchronize_stream(device, stream))
    }

    fn create_event(&self, device: DeviceId) -> Result<EventHandle> {
        dispatch!(self, b => b.create_event(device))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        dispatch!(self, b => b.destroy_event(event))
    }

    fn record_event(&self, event: &EventHandle, stream: RawStream) -> Result<()> {
        dispatch!(self, b => b.record_event(event, stream))
    }

    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        dispatch!(self, b => b.query_event(event))
    }

    fn synchronize_event(&self, event: &EventHandle, timeout: Option<Duration>) -> Result<()> {
        dispatch!(self, b => b.synchronize_event(event, timeout))
    }

    fn stream_wait_event(
        &self,
        device: DeviceId,
        stream: RawStream,
        event: &EventHandle,
    ) -> Result<()> {
        dispatch!(self, b => b.stream_wait_event(device, stream, event))
    }

    unsafe fn copy_async(
        &self,
        device: DeviceId,
        stream: RawStream,
        copies: &[CopyDesc],
    ) -> Result<()> {
        // SAFETY: the caller's guarantee for every descriptor and the stream, passed on.
        dispatch!(self, b => unsafe { b.copy_async(device, stream, copies) })
    }
}
