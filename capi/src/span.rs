//! Spans: the bounds-checked pieces of device memory that stream-ordered copies read and
//! write (the safe API's `DeviceSpan`), made from a buffer, an import or framework memory.
//! A span keeps its memory allocated (or mapped) while it lives, and a request that copies
//! through it keeps it until the copy completed: the buffer's or import's own handle may
//! be freed meanwhile.

use std::sync::Arc;

use safe::{DeviceBuffer, DeviceId, DevicePtr, DeviceSpan};

use crate::boundary::{Failure, Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::runtime::{devipc_runtime, runtime};
use crate::status::devipc_status;

/// A bounds-checked span of device memory for stream-ordered copies (the safe API's
/// `DeviceSpan`). It keeps its memory alive.
pub struct devipc_span {
    _opaque: [u8; 0],
}

impl Handle for devipc_span {
    type Target = DeviceSpan;
    const KIND: &'static str = "span";
}

/// The span `span` names.
pub(crate) fn span(span: *const devipc_span, what: &'static str) -> Outcome<Arc<DeviceSpan>> {
    handle::get(span, what)
}

/// `offset..offset + len`, checked for overflow.
fn range(offset: usize, len: usize) -> Outcome<std::ops::Range<usize>> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| Failure::invalid(format!("range {offset} + {len} overflows")))?;
    Ok(offset..end)
}

/// The `len` bytes at `offset` of a buffer, as a new span handle in `*out`. A range
/// outside the buffer is `DEVIPC_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_span(
    buf: *const crate::buffer::devipc_buffer,
    offset: usize,
    len: usize,
    out: *mut *mut devipc_span,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let buf: Arc<safe::SharedBuffer> = handle::get(buf, "buf")?;
        out.set(buf.span(range(offset, len)?)?)
    })
}

/// The `len` bytes at `offset` of an import, as a new span handle in `*out` (bounded by
/// the size the vendor reports for the mapped object).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_span(
    imp: *const crate::import::devipc_import,
    offset: usize,
    len: usize,
    out: *mut *mut devipc_span,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let imp: Arc<safe::ImportedBuffer> = handle::get(imp, "imp")?;
        out.set(DeviceBuffer::span(&*imp, range(offset, len)?)?)
    })
}

/// A span of framework memory devipc did not allocate or import (a block of the
/// framework's allocator): `len` bytes at the device address `ptr` on `device` of the
/// runtime's vendor runtime, as a new span handle in `*out`.
///
/// # Safety
/// `ptr .. ptr + len` is device memory of the runtime's vendor runtime on `device` in this
/// process, and stays allocated (not freed or reused) until every request copying through
/// the span (or a slice of it) completed; devipc cannot check either. `out` is valid for
/// a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_span_external(
    rt: *const devipc_runtime,
    device: u32,
    ptr: u64,
    len: usize,
    out: *mut *mut devipc_span,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let rt = runtime(rt)?;
        // SAFETY: the caller's guarantee for the memory, passed on.
        out.set(unsafe { DeviceSpan::external(&rt, DeviceId(device), DevicePtr(ptr), len) })
    })
}

/// The `len` bytes at `offset` of a span, as a new span handle in `*out`, checked again.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_span_slice(
    spn: *const devipc_span,
    offset: usize,
    len: usize,
    out: *mut *mut devipc_span,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(span(spn, "spn")?.slice(range(offset, len)?)?)
    })
}

/// Stores the span's length in bytes in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_span_len(
    spn: *const devipc_span,
    out: *mut usize,
) -> devipc_status {
    call(|| {
        let len = span(spn, "spn")?.len();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", len) }
    })
}

/// Frees the span handle in `*spn` and sets `*spn` to NULL (NULL: nothing to do). Requests
/// that copy through the span keep its memory until they completed.
///
/// # Safety
/// `spn` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_span_free(spn: *mut *mut devipc_span) -> devipc_status {
    // SAFETY: the caller's guarantee for `spn`.
    call(|| unsafe { handle::free(spn, "spn") })
}
