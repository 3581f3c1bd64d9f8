//! The buffers: [`SharedBuffer`] (device memory this process allocated to share) and
//! [`ImportedBuffer`] (a peer's export, or this process's own, mapped here), the
//! [`DeviceBuffer`] trait they both implement, and [`checked_span`], the one bounds check
//! every copy to or from either goes through.

use std::ops::Range;
use std::sync::Arc;

use devipc_core::{
    Allocation, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, MemToken, ProcessId, Result,
};

use crate::registry::{LocalExports, LocalTarget, Mapped};
use crate::runtime::Runtime;
use crate::span::{DeviceSpan, Keep};

// ---------------------------------------------------------------------------------------
// SharedBuffer: memory this process allocated.

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
        LocalExports::register(
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

    /// The bytes `range` of the buffer, for stream-ordered copies; the span keeps the
    /// memory allocated while a copy through it is in flight.
    pub fn span(&self, range: Range<usize>) -> Result<DeviceSpan> {
        DeviceSpan::of_buffer(
            &self.owned.rt,
            self.ptr(),
            self.len(),
            self.device(),
            range,
            Keep::Owned(self.owned.clone()),
        )
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

// ---------------------------------------------------------------------------------------
// ImportedBuffer: an export mapped into this process.

/// What keeps the memory of an [`ImportedBuffer`] mapped.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A vendor import, shared with other imports of the same handle.
    Mapped(Arc<Mapped>),
    /// This process's own export of a shared buffer (no vendor call), kept alive.
    Local(Arc<Owned>),
}

impl Source {
    /// The address of what keeps the memory mapped: equal for two views of one import.
    pub(crate) fn identity(&self) -> usize {
        match self {
            Source::Mapped(m) => Arc::as_ptr(m) as usize,
            Source::Local(o) => Arc::as_ptr(o) as usize,
        }
    }
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
        let view = LocalExports::lookup(token)?;
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

    /// The bytes `range` of the view, for stream-ordered copies; the span keeps the
    /// import mapped while a copy through it is in flight (closing the buffer then waits
    /// for the copy, without blocking).
    pub fn span(&self, range: Range<usize>) -> Result<DeviceSpan> {
        DeviceSpan::of_buffer(
            &self.rt,
            self.ptr,
            self.len,
            self.device,
            range,
            Keep::Imported(self.source.clone()),
        )
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

// ---------------------------------------------------------------------------------------
// DeviceBuffer: what both have in common.

/// Keeps [`DeviceBuffer`] implemented by devipc's buffers only.
mod sealed {
    /// Implemented by [`SharedBuffer`](crate::SharedBuffer) and
    /// [`ImportedBuffer`](crate::ImportedBuffer) only.
    pub trait Sealed {}
}

/// Device memory this process can copy to and from: a [`SharedBuffer`] it allocated or an
/// [`ImportedBuffer`] of a peer's (or its own) export. Code written against it works on
/// both, as a generic (`&impl DeviceBuffer`) or a trait object (`&dyn DeviceBuffer`).
///
/// Every copy is bounds-checked against the buffer: a span outside `0..len()` is
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) and copies nothing. The
/// methods are the buffers' own inherent methods, which stay callable without importing
/// the trait.
///
/// The trait is sealed (only devipc's buffers implement it), so methods can be added to it
/// without breaking anyone.
///
/// ```no_run
/// use devipc::{BackendKind, DeviceBuffer, ExportOptions, Runtime};
///
/// /// The buffer's first `n` bytes, wherever it came from.
/// fn head(buf: &impl DeviceBuffer, n: usize) -> devipc::Result<Vec<u8>> {
///     let mut bytes = vec![0; n.min(buf.len())];
///     buf.read(0, &mut bytes)?;
///     Ok(bytes)
/// }
///
/// # fn main() -> devipc::Result<()> {
/// let rt = Runtime::emulated(BackendKind::Hip)?;
/// let shared = rt.allocate(0, 4096)?;
/// shared.write(0, b"hello")?;
/// let imported = rt.import(&shared.export(ExportOptions::any_process())?, 0)?;
/// assert_eq!(head(&shared, 5)?, head(&imported, 5)?);
/// let both: [&dyn DeviceBuffer; 2] = [&shared, &imported];
/// assert!(both.iter().all(|b| b.len() == 4096));
/// # Ok(()) }
/// ```
pub trait DeviceBuffer: sealed::Sealed {
    /// Its device address in this process (for an import, the token's offset applied).
    fn ptr(&self) -> DevicePtr;

    /// Its length in bytes.
    fn len(&self) -> usize;

    /// Whether it has no bytes (never: buffers and tokens have at least one).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device the memory is on (for an import, the device it is mapped on).
    fn device(&self) -> DeviceId;

    /// Copies `src` into the buffer at `offset`.
    fn write(&self, offset: usize, src: &[u8]) -> Result<()>;

    /// Copies bytes at `offset` out of the buffer into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()>;

    /// The bytes `range` of the buffer, for stream-ordered copies
    /// ([`Stream::copy`](crate::Stream::copy)).
    fn span(&self, range: Range<usize>) -> Result<DeviceSpan>;

    /// The whole buffer as a span.
    fn whole(&self) -> DeviceSpan {
        // A buffer's own bounds always fit it.
        self.span(0..self.len())
            .expect("a buffer's whole range is inside it")
    }
}

impl sealed::Sealed for SharedBuffer {}

impl DeviceBuffer for SharedBuffer {
    fn ptr(&self) -> DevicePtr {
        SharedBuffer::ptr(self)
    }
    fn len(&self) -> usize {
        SharedBuffer::len(self)
    }
    fn is_empty(&self) -> bool {
        SharedBuffer::is_empty(self)
    }
    fn device(&self) -> DeviceId {
        SharedBuffer::device(self)
    }
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        SharedBuffer::write(self, offset, src)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        SharedBuffer::read(self, offset, dst)
    }
    fn span(&self, range: Range<usize>) -> Result<DeviceSpan> {
        SharedBuffer::span(self, range)
    }
}

impl sealed::Sealed for ImportedBuffer {}

impl DeviceBuffer for ImportedBuffer {
    fn ptr(&self) -> DevicePtr {
        ImportedBuffer::ptr(self)
    }
    fn len(&self) -> usize {
        ImportedBuffer::len(self)
    }
    fn is_empty(&self) -> bool {
        ImportedBuffer::is_empty(self)
    }
    fn device(&self) -> DeviceId {
        ImportedBuffer::device(self)
    }
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        ImportedBuffer::write(self, offset, src)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        ImportedBuffer::read(self, offset, dst)
    }
    fn span(&self, range: Range<usize>) -> Result<DeviceSpan> {
        ImportedBuffer::span(self, range)
    }
}

// ---------------------------------------------------------------------------------------
// The bounds check.

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

#[cfg(test)]
mod tests {
    use devipc_core::{BackendKind, Error, ExportOptions, ProcessId};

    use super::*;
    use crate::raw::Backend;
    use crate::recording_backend::RecordingBackend;
    use crate::runtime::Runtime;

    /// Uses only the trait, so it runs the same on either buffer.
    fn exercise(buf: &dyn DeviceBuffer) -> Result<[u8; 4]> {
        assert!(!buf.is_empty());
        buf.write(buf.len() - 4, &[1, 2, 3, 4])?;
        let mut got = [0; 4];
        buf.read(0, &mut got)?;
        let past_end = buf.read(buf.len() - 3, &mut [0; 4]).unwrap_err();
        assert!(
            matches!(past_end, Error::InvalidArgument { .. }),
            "{past_end}"
        );
        Ok(got)
    }

    #[test]
    fn shared_and_imported_buffers_are_device_buffers_with_their_own_methods() {
        let probe = RecordingBackend::with_identity(BackendKind::Hip, ProcessId::current(), 53);
        let rt = Runtime::from_backend(Backend::from(probe));
        let shared = rt.allocate(DeviceId(1), 64).unwrap();
        let token = shared.export(ExportOptions::default()).unwrap();
        let imported = rt.import(&token, DeviceId(1)).unwrap();
        let count = |m: &str| match rt.backend() {
            Backend::Recording(p) => p.count(m),
            #[allow(unreachable_patterns, reason = "other variants exist per feature")]
            _ => unreachable!("probe runtime"),
        };

        for buf in [&shared as &dyn DeviceBuffer, &imported] {
            assert_eq!(exercise(buf).unwrap(), [0xAB; 4], "the probe reads 0xAB");
        }
        assert_eq!(
            (count("write"), count("read")),
            (2, 2),
            "no copy past the end"
        );

        assert_eq!(DeviceBuffer::ptr(&shared), shared.ptr());
        assert_eq!(DeviceBuffer::len(&shared), shared.len());
        assert_eq!(DeviceBuffer::device(&shared), shared.device());
        assert_eq!(DeviceBuffer::ptr(&imported), imported.ptr());
        assert_eq!(DeviceBuffer::len(&imported), imported.len());
        assert_eq!(DeviceBuffer::device(&imported), imported.device());
        assert_eq!(DeviceBuffer::device(&imported), DeviceId::from(1));
    }
}
