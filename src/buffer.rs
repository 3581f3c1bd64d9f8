//! [`DeviceBuffer`]: what [`SharedBuffer`] and [`ImportedBuffer`] have in common.

use devipc_core::{DeviceId, DevicePtr, Result};

use crate::imported::ImportedBuffer;
use crate::shared::SharedBuffer;

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
/// use devipc::{BackendKind, DeviceBuffer, DeviceId, ExportOptions, Runtime};
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
/// let shared = rt.allocate(DeviceId(0), 4096)?;
/// shared.write(0, b"hello")?;
/// let imported = rt.import(&shared.export(ExportOptions::any_process())?, 0.into())?;
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
