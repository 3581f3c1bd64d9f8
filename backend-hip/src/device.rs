//! The devices: the one a call binds, their identity and peer access, and the host
//! copies (`write`, `read`), whose whole question is which device to bind.
//!
//! HIP keeps the current device per thread, and the framework around devipc uses it too.
//! [`DeviceScope`] sets the device a call needs and puts the caller's back when dropped,
//! so devipc never leaves a thread on another device. Device ids are range-checked here
//! (`check_device`), a device's physical identity (PCI bus id, UUID) is asked here for
//! `physical_device` and the tokens, and peer access is enabled here.
//!
//! A host <-> device copy of any memory devipc can name (allocations and imports of both
//! mechanisms, framework memory) is one `hipMemcpy` on the calling thread's device, so it
//! binds a device that can reach the memory first: the owner's for devipc's own
//! allocations, the import's device for a `hip-vmm-fd` import (VMM memory is reachable
//! only from the devices it was granted to), else the thread's as it is.

use std::ffi::c_int;

use devipc_core::own_memory;
use devipc_core::{DeviceId, DevicePtr, DeviceUuid, Error, PciBusId, PhysicalDevice, Result};
use devipc_hip_sys::{HipApi, hipErrorPeerAccessAlreadyEnabled};

use crate::backend::HipBackend;
use crate::result;

/// The caller's device, restored on drop. Not `Send`: it belongs to the thread it bound.
pub(crate) struct DeviceScope<'a> {
    api: &'a HipApi,
    previous: Option<c_int>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> DeviceScope<'a> {
    /// Makes `device` current on this thread until the scope ends.
    pub(crate) fn bind(api: &'a HipApi, device: c_int) -> Result<Self> {
        // A thread that never chose a device has nothing to restore.
        let previous = result::get_device(api).ok();
        if previous != Some(device) {
            // The id was range-checked by the caller.
            result::set_device(api, device)?;
        }
        Ok(DeviceScope {
            api,
            previous: previous.filter(|&p| p != device),
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for DeviceScope<'_> {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            if let Err(e) = result::set_device(self.api, previous) {
                log::error!("devipc-hip: could not restore the thread's device {previous}: {e}");
            }
        }
    }
}

impl HipBackend {
    /// `device` as the runtime's `int`, after checking it is in range.
    pub(crate) fn check_device(&self, device: DeviceId) -> Result<c_int> {
        device.check(self.device_count)?.as_c_int()
    }

    /// `physical_device`: the PCI bus id (`hipDeviceGetPCIBusId`) and, where the runtime
    /// has it (`hipDeviceGetUuid`, ROCm 5.1+) and it is not all zeros, the UUID; asked once
    /// per device.
    pub(crate) fn query_physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
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

    /// The identity a token of `device` carries: unknown (and logged) when the runtime
    /// cannot tell, since the token is still good for an import that names the device.
    pub(crate) fn token_physical(&self, device: DeviceId) -> PhysicalDevice {
        self.query_physical_device(device).unwrap_or_else(|e| {
            log::warn!("devipc-hip: tokens of device {device} carry no physical identity: {e}");
            PhysicalDevice::UNKNOWN
        })
    }

    /// `enable_peer_access`: `hipDeviceEnablePeerAccess` on `device` for `peer`; already
    /// enabled, or the same device, is success.
    pub(crate) fn enable_peer(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
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
}

/// Host copies: `write` and `read` of the trait.
impl HipBackend {
    /// `write`: `src` to the device memory at `dst`.
    ///
    /// # Safety
    /// As for [`DeviceIpc::write`](devipc_core::DeviceIpc::write): `dst..dst + src.len()`
    /// is memory this backend allocated or mapped (or external memory it owns) that stays
    /// so during the call.
    pub(crate) unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let _scope = self.bind_owner(dst, src.len())?;
        // SAFETY: the trait's contract: `dst..dst + src.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_htod(&self.api, dst.0, src) }
    }

    /// `read`: the device memory at `src` into `dst`.
    ///
    /// # Safety
    /// As for [`DeviceIpc::read`](devipc_core::DeviceIpc::read): `src..src + dst.len()` is
    /// memory this backend allocated or mapped (or external memory it owns) that stays so
    /// during the call.
    pub(crate) unsafe fn copy_to_host(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let _scope = self.bind_owner(src, dst.len())?;
        // SAFETY: the trait's contract: `src..src + dst.len()` is memory this backend
        // allocated or mapped (or external memory it owns) that stays so during the call.
        unsafe { result::memcpy_dtoh(&self.api, dst, src.0) }
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
}
