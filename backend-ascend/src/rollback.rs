//! [`Rollback`]: what a multi-step acquire has got so far, released if it fails midway.
//!
//! A VMM allocation is four vendor calls (`aclrtMallocPhysical`, `aclrtReserveMemAddress`,
//! `aclrtMapMem`, `aclrtMemSetAccess`), an import four more. Each successful acquire is
//! pushed onto a `Rollback` at once, before the next fallible call (STYLE pattern 6); if
//! the function returns early the guard undoes the steps in reverse order, and only
//! [`Rollback::commit`] hands them over to a record in a handle table. Undo failures are
//! logged (`log::error!`): the original error is the one the caller sees. An operation that needs its
//! objects only while it runs (the staging buffer and stream of a staged copy) ends with
//! [`Rollback::release`] instead, which releases them and reports the first failure.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use crate::result;

/// One acquired vendor object and how to release it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Undo {
    /// `aclrtFreePhysical` of a physical handle (an address).
    FreePhysical(usize),
    /// `aclrtReleaseMemAddress` of a reserved range.
    ReleaseAddress(u64),
    /// `aclrtUnmapMem` of a mapped range.
    Unmap(u64),
    /// `aclrtIpcMemClose` of an imported or exported key.
    IpcClose([u8; ACL_IPC_KEY_LEN]),
    /// `aclrtDestroyNotify` of a notify (an address).
    DestroyNotify(usize),
    /// `aclrtFree` of an `aclrtMalloc` block.
    Free(u64),
    /// `aclrtDestroyStream` of a stream (an address).
    DestroyStream(usize),
}

impl Undo {
    /// Releases the object; the caller has bound its device.
    pub(crate) fn run(self, api: &AclApi) -> devipc_core::Result<()> {
        // SAFETY: each value was produced by the matching acquire call and is released
        // once: the `Rollback` (or record) holding it is consumed by this release, in the
        // order the acquires require (unmap before releasing the address, the address
        // before freeing the physical handle, a stream before the buffer its tasks use).
        unsafe {
            match self {
                Undo::FreePhysical(handle) => result::free_physical(api, handle),
                Undo::ReleaseAddress(va) => result::release_mem_address(api, va),
                Undo::Unmap(va) => result::unmap_mem(api, va),
                Undo::IpcClose(key) => result::ipc_mem_close(api, &key),
                Undo::DestroyNotify(notify) => result::destroy_notify(api, notify),
                Undo::Free(ptr) => result::free(api, ptr),
                Undo::DestroyStream(stream) => result::destroy_stream(api, stream),
            }
        }
    }
}

/// Steps to undo if the current operation fails; see the module docs.
///
/// Declare it *after* the [`DeviceScope`](crate::device::DeviceScope) of the operation,
/// so that it is dropped (and undoes) while the device is still bound.
#[must_use = "a Rollback undoes its steps when dropped unless committed"]
pub(crate) struct Rollback<'a> {
    api: &'a AclApi,
    steps: Vec<Undo>,
}

impl<'a> Rollback<'a> {
    /// An empty rollback.
    pub(crate) fn new(api: &'a AclApi) -> Self {
        Rollback {
            api,
            steps: Vec::with_capacity(4),
        }
    }

    /// Records an acquired object.
    pub(crate) fn push(&mut self, undo: Undo) {
        self.steps.push(undo);
    }

    /// The operation succeeded: the caller owns everything acquired.
    pub(crate) fn commit(mut self) {
        self.steps.clear();
    }

    /// The operation is done with what it acquired: releases every step now, in reverse
    /// order, and returns the first failure (the later steps are still released).
    pub(crate) fn release(mut self) -> devipc_core::Result<()> {
        let mut first = Ok(());
        while let Some(step) = self.steps.pop() {
            let result = step.run(self.api);
            if first.is_ok() {
                first = result;
            } else if let Err(e) = result {
                log::error!("devipc-ascend: releasing {step:?} failed as well: {e}");
            }
        }
        first
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        while let Some(step) = self.steps.pop() {
            if let Err(e) = step.run(self.api) {
                log::error!("devipc-ascend: undoing {step:?} after a failed operation failed: {e}");
            }
        }
    }
}
