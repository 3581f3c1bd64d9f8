//! Test aids: device memory as a framework's own allocator makes it, and (on the
//! emulator) a stream held busy so that work enqueued on it is provably in flight.
//!
//! [`Runtime::export_external`] shares memory devipc did not allocate: a block of a
//! framework's allocator (`hipMalloc`, `aclrtMalloc`). To try that path without a
//! framework (tests, examples, the conformance suite), [`framework_malloc`] makes such a
//! block and [`framework_free`] frees it. Applications export their framework's memory
//! instead and never need these.
//!
//! ```no_run
//! use devipc::{BackendKind, DeviceId, ExportOptions, Runtime, testing};
//!
//! # fn main() -> devipc::Result<()> {
//! let rt = Runtime::emulated(BackendKind::Hip)?;
//! let block = testing::framework_malloc(&rt, DeviceId(0), 1 << 20)?;
//! let token = rt.export_external(0, block, 1 << 20, ExportOptions::any_process())?;
//! // ... a peer imports `token` and closes its import ...
//! # drop(token);
//! // SAFETY: `block` came from `framework_malloc` of `rt` on device 0, is not freed yet,
//! // and no view of it remains in this process.
//! unsafe { testing::framework_free(&rt, DeviceId(0), block) }?;
//! # Ok(()) }
//! ```

use devipc_core::{DeviceId, DevicePtr, Result};

#[cfg(doc)]
use crate::Error;
use crate::registry::LocalExports;
use crate::runtime::Runtime;
use crate::stream::Stream;

/// `size` bytes on `device` as a framework's own allocator makes them (`hipMalloc`,
/// `aclrtMalloc`), for [`Runtime::export_external`] without a framework (tests,
/// examples); see [`Backend::framework_malloc`](crate::raw::Backend::framework_malloc).
/// Free it with [`framework_free`].
pub fn framework_malloc(rt: &Runtime, device: DeviceId, size: usize) -> Result<DevicePtr> {
    rt.inner.backend()?.framework_malloc(device, size)
}

/// Frees what [`framework_malloc`] returned, after ending its external exports.
///
/// The exports are the process's, not one runtime's: those made through any `Runtime`
/// of this process on the same vendor runtime end here too (a framework may allocate
/// through one runtime and export through another). While an importer still maps the
/// block the free is refused with [`Error::InvalidArgument`] and nothing is freed or
/// ended; call it again once every importer closed (a killed importer does not count).
///
/// # Safety
/// `ptr` came from `framework_malloc` of `rt` on `device`, is not freed yet, and no view
/// of it remains in this process.
pub unsafe fn framework_free(rt: &Runtime, device: DeviceId, ptr: DevicePtr) -> Result<()> {
    let backend = rt.inner.backend()?;
    // SAFETY: the caller's guarantee, passed on.
    unsafe { backend.framework_free(device, ptr) }?;
    LocalExports::forget_external(device, ptr);
    Ok(())
}

/// Emulator only: holds `stream`, as if a long kernel occupied it: the work enqueued on it
/// from now on stays queued (copies, event records: a request is then provably in flight)
/// until [`release_stream`]. [`Error::Unsupported`] on a real runtime.
///
/// Release every stream you hold: a synchronisation of a held stream waits for the
/// release (from another thread), and a process that dies holding one loses its queued
/// work.
pub fn hold_stream(stream: &Stream) -> Result<()> {
    let rt = &stream.inner.rt;
    rt.inner
        .backend()?
        .hold_stream_for_tests(stream.raw(), true)
}

/// Emulator only: releases a stream [`hold_stream`] held: its queued work runs in order,
/// and the call returns once the work queued while it was held has run.
pub fn release_stream(stream: &Stream) -> Result<()> {
    let rt = &stream.inner.rt;
    rt.inner
        .backend()?
        .hold_stream_for_tests(stream.raw(), false)
}

/// Waits until the background drain released every request and stream this process
/// dropped before they completed (see [`Request`](crate::Request)), at most `timeout`;
/// whether it did. For tests and orderly shutdowns that must not exit with memory still
/// held for copies in flight (a process that exits lets go of it anyway, with its device
/// context).
pub fn wait_for_drained(timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if crate::request::undrained() == 0 {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
