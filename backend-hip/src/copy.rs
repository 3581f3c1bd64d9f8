//! Host <-> device copies (`write`, `read`) of any memory devipc can name: allocations of
//! both mechanisms (`hip-ipc-mem`, `hip-vmm-fd`), imports of both, and framework memory.
//!
//! A copy is one `hipMemcpy` on the calling thread's device, so it binds a device that can
//! reach the memory first: the owner's for devipc's own allocations, the import's device
//! for a `hip-vmm-fd` import (VMM memory is reachable only from the devices it was
//! granted to), else the thread's as it is.

use devipc_core::own_memory;
use devipc_core::{DevicePtr, Result};

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::result;

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
