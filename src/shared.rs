//! [`SharedBuffer`]: device memory this process allocated to share.

use std::ops::Range;
use std::sync::Arc;

use devipc_core::{
    Allocation, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, MemToken, ProcessId, Result,
};

use crate::local_exports::{self, LocalTarget};
use crate::runtime::Runtime;

/// The allocation behind a [`SharedBuffer`], freed when the last owner (the buffer, or a
/// same-process import of it) drops.
#[derive(Debug)]
pub(crate) struct Owned {
    rt: Runtime,
    alloc: Option<Allocation>,
}

impl Owned {
    /// The runtime that allocated it.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }

    fn alloc(&self) -> &Allocation {
        // Only `drop` takes it.
        self.alloc.as_ref().expect("allocation present until drop")
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if self.rt.inner.is_inherited() {
            // The parent's allocation, copied by `fork`: the parent frees it.
            return;
        }
        if let Some(alloc) = self.alloc.take()
            && let Err(e) = self.rt.inner.raw_backend().free(alloc)
        {
            log::error!("devipc: freeing a shared buffer failed: {e}");
            self.rt.inner.release_failed(e);
        }
    }
}

/// Exportable device memory owned by this process. Dropping it frees the memory.
///
/// Export it as a [`MemToken`], [`grant`](SharedBuffer::grant) the peer, and send the
/// token; the peer imports it with [`Runtime::import`].
#[derive(Debug, Clone)]
pub struct SharedBuffer {
    owned: Arc<Owned>,
}

impl SharedBuffer {
    /// Takes ownership of `alloc`, made by `rt`'s backend ([`Runtime::allocate`]).
    pub(crate) fn new(rt: &Runtime, alloc: Allocation) -> SharedBuffer {
        SharedBuffer {
            owned: Arc::new(Owned {
                rt: rt.clone(),
                alloc: Some(alloc),
            }),
        }
    }

    /// The device the memory lives on.
    pub fn device(&self) -> DeviceId {
        self.owned.alloc().device
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.owned.alloc().size
    }

    /// Always false: allocations have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its device address in this process.
    pub fn ptr(&self) -> DevicePtr {
        self.owned.alloc().ptr
    }

    /// The runtime it was allocated from.
    pub fn runtime(&self) -> &Runtime {
        &self.owned.rt
    }

    /// Exports the whole buffer.
    pub fn export(&self, opts: ExportOptions) -> Result<MemToken> {
        self.export_range(0..self.len(), opts)
    }

    /// Exports `range` (byte offsets within the buffer); the importer sees only that range.
    pub fn export_range(&self, range: Range<usize>, opts: ExportOptions) -> Result<MemToken> {
        let alloc = self.owned.alloc();
        let token = self
            .owned
            .rt
            .inner
            .backend()?
            .export(alloc, range.clone(), opts)?;
        // Token offsets count from the exported object's start; ours is `range.start`.
        let object_base = DevicePtr(
            alloc
                .ptr
                .0
                .wrapping_add(range.start as u64)
                .wrapping_sub(token.offset()),
        );
        local_exports::register(
            &token,
            LocalTarget::Owned(Arc::downgrade(&self.owned)),
            object_base,
        );
        Ok(token)
    }

    /// Allows `peers` (their [`Runtime::process_id`]) to import `token`. Needed unless the
    /// token was exported with [`ExportOptions::any_process`] or the backend has no access
    /// control ([`Capabilities::access_control`](crate::Capabilities)).
    pub fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()> {
        self.owned.rt.grant(token, peers)
    }

    /// Copies `src` into the buffer at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let dst = checked_span(self.ptr(), self.len(), offset, src.len())?;
        // SAFETY: the span lies inside this buffer's allocation, which `self` keeps alive.
        let backend = self.owned.rt.inner.backend()?;
        // SAFETY: as above.
        unsafe { backend.write(dst, src) }
    }

    /// Copies bytes at `offset` out of the buffer into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let src = checked_span(self.ptr(), self.len(), offset, dst.len())?;
        // SAFETY: as in `write`.
        let backend = self.owned.rt.inner.backend()?;
        // SAFETY: as in `write`.
        unsafe { backend.read(src, dst) }
    }
}

/// `base + offset`, after checking that `offset..offset + n` lies within `len` bytes.
pub(crate) fn checked_span(
    base: DevicePtr,
    len: usize,
    offset: usize,
    n: usize,
) -> Result<DevicePtr> {
    match offset.checked_add(n) {
        Some(end) if end <= len => base.offset(offset),
        _ => Err(Error::invalid_argument(format!(
            "{n} bytes at offset {offset} do not fit the {len}-byte buffer"
        ))),
    }
}
