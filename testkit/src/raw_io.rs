//! [`RawIo`]: the raw copies of [`DeviceIpc`] for tests that drive a backend directly.

use devipc_core::{DeviceIpc, DevicePtr, Result};

/// `DeviceIpc::read`/`write` without an `unsafe` block at every call. For tests only:
/// every pointer a test passes must come from a live allocation or mapping of the same
/// backend (the emulator checks each copy, so a test that breaks this fails loudly).
pub trait RawIo {
    /// [`DeviceIpc::write`].
    fn write_raw(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// [`DeviceIpc::read`].
    fn read_raw(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;
}

impl<T: DeviceIpc + ?Sized> RawIo for T {
    fn write_raw(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the trait's contract: tests pass pointers into live objects only.
        unsafe { self.write(dst, src) }
    }
    fn read_raw(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: as above.
        unsafe { self.read(src, dst) }
    }
}
