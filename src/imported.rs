//! [`ImportedBuffer`]: a peer's exported memory, mapped into this process.

use std::sync::Arc;

use devipc_core::{DeviceId, DeviceIpc, DevicePtr, MemToken, Result};

use crate::import_cache::Mapped;
use crate::local_exports;
use crate::runtime::Runtime;
use crate::shared::{Owned, checked_span};

/// What keeps the memory of an [`ImportedBuffer`] mapped.
#[derive(Debug)]
#[expect(
    dead_code,
    reason = "the fields are never read: holding them keeps the memory mapped"
)]
enum Source {
    /// A vendor import, shared with other imports of the same handle.
    Mapped(Arc<Mapped>),
    /// This process's own export of a shared buffer (no vendor call), kept alive.
    Local(Arc<Owned>),
}

/// A view of memory another process (or this one) exported. Dropping it closes the
/// import once no other import of the same handle is left.
///
/// Its range was checked against the size the vendor runtime reported for the mapped
/// object (never only against the token's own claim), and it keeps the object mapped.
#[derive(Debug)]
pub struct ImportedBuffer {
    /// The runtime whose backend mapped (or owns) the memory, and copies to and from it.
    rt: Runtime,
    source: Source,
    ptr: DevicePtr,
    len: usize,
    device: DeviceId,
}

impl ImportedBuffer {
    /// A view of `token`'s range of `mapped` (a vendor import from the cache), seen from
    /// `device`.
    pub(crate) fn mapped(
        mapped: Arc<Mapped>,
        token: &MemToken,
        device: DeviceId,
        len: usize,
    ) -> Result<ImportedBuffer> {
        Ok(ImportedBuffer {
            rt: mapped.rt.clone(),
            ptr: mapped.ptr_for(token)?,
            source: Source::Mapped(mapped),
            len,
            device,
        })
    }

    /// A view of this process's own export `token` (DESIGN 5.1: no vendor call), seen
    /// from `device` of `rt`.
    pub(crate) fn local(
        rt: &Runtime,
        token: &MemToken,
        device: DeviceId,
        len: usize,
    ) -> Result<ImportedBuffer> {
        let backend = rt.inner.backend()?;
        backend.device_count().and_then(|n| device.check(n))?;
        let view = local_exports::lookup(token)?;
        if device != view.device {
            backend.enable_peer_access(device, view.device)?;
        }
        Ok(ImportedBuffer {
            rt: view.owner,
            source: Source::Local(view.keepalive),
            ptr: view.ptr,
            len,
            device,
        })
    }

    /// Its device address in this process (the token's offset already applied).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Length of the imported range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: tokens carry at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device it is mapped on.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Whether this is a view of this process's own export (no vendor import).
    pub fn is_local(&self) -> bool {
        matches!(self.source, Source::Local(_))
    }

    /// Copies `src` into the imported memory at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let dst = checked_span(self.ptr, self.len, offset, src.len())?;
        let io = self.io()?;
        // SAFETY: the span lies inside this view, which was checked against the mapped
        // object's real size when it was made, and `source` keeps the object mapped.
        unsafe { io.write(dst, src) }
    }

    /// Copies imported bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let src = checked_span(self.ptr, self.len, offset, dst.len())?;
        let io = self.io()?;
        // SAFETY: as in `write`.
        unsafe { io.read(src, dst) }
    }

    /// The backend that mapped the memory, which copies to and from it.
    /// Refused in a child forked after the import was made.
    fn io(&self) -> Result<&crate::raw::Backend> {
        self.rt.inner.backend()
    }
}
