//! Binding the thread's current HIP device for one call and restoring the caller's.
//!
//! HIP keeps the current device per thread, and the framework around devipc uses it too.
//! [`DeviceScope`] sets the device a call needs and puts the caller's back when dropped,
//! so devipc never leaves a thread on another device.

use std::ffi::c_int;

use devipc_core::Result;
use devipc_hip_sys::HipApi;

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
