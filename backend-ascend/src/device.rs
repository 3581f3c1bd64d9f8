//! Binding the thread's current ACL device for one call and restoring the caller's; peer
//! access between devices.
//!
//! ACL keeps the current device (and its default context) per thread, and the framework
//! around devipc uses it too. [`DeviceScope`] makes the device a call needs current
//! (`aclrtSetDevice`) and puts the caller's back when dropped, so devipc never moves a
//! thread that had a device onto another one.
//!
//! A thread that had **no** device (`aclrtGetDevice` fails with
//! `ACL_ERROR_RT_CONTEXT_NULL`, 107002) is left on the device devipc set. ACL has no call
//! that unbinds a thread: the only undo is `aclrtResetDevice`, which drops the process's
//! reference on the device's default context and, at zero, releases every resource made
//! in it: the memory devipc just mapped, the notify it just created, and anything the
//! framework made on that device. Leaving the binding is harmless (the thread merely has
//! a current device now, as after any ACL call that needs one); resetting is not.

use devipc_ascend_sys::AclApi;
use devipc_core::{DeviceId, Result};

use crate::backend::{AscendBackend, lock};
use crate::result;

/// The caller's device, restored on drop. Not `Send`: it belongs to the thread it bound.
pub(crate) struct DeviceScope<'a> {
    api: &'a AclApi,
    /// The device to put back; `None` when the thread was already on the bound device or
    /// had none (see the module docs).
    previous: Option<i32>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> DeviceScope<'a> {
    /// Makes `device` current on this thread until the scope ends.
    pub(crate) fn bind(api: &'a AclApi, device: i32) -> Result<Self> {
        let previous = current_device(api)?;
        if previous != Some(device) {
            result::set_device(api, device)?;
        }
        Ok(DeviceScope {
            api,
            previous: previous.filter(|&p| p != device),
            _not_send: std::marker::PhantomData,
        })
    }
}

/// The thread's current device, or `None` when it has none (107002). Any other failure
/// is an error: devipc cannot tell what to restore.
pub(crate) fn current_device(api: &AclApi) -> Result<Option<i32>> {
    result::get_device(api)
}

impl Drop for DeviceScope<'_> {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            if let Err(e) = result::set_device(self.api, previous) {
                log::error!("devipc-ascend: could not restore the thread's device {previous}: {e}");
            }
        }
    }
}

impl AscendBackend {
    /// `enable_peer_access`: lets `device` access `peer`'s memory
    /// (`aclrtDeviceEnablePeerAccess` with `device` bound), once per pair; a device and
    /// itself need nothing. The `ascend-vmm` import calls it for memory of another device,
    /// and the `ascend-notify` import where the runtime refuses its peer-access flag.
    pub(crate) fn enable_peer(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        let dev = self.check_device(device)?;
        let peer_dev = self.check_device(peer)?;
        if device == peer || lock(&self.peers_enabled).contains(&(device, peer)) {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::device_enable_peer_access(&self.api, peer_dev)?;
        lock(&self.peers_enabled).push((device, peer));
        Ok(())
    }
}
