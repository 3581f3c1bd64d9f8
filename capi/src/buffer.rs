//! Buffers: device memory this process allocated to share (the safe API's
//! `SharedBuffer`): allocate, read and write from the host, export (whole or a range),
//! free. Freeing waits for nothing: the memory stays allocated while a same-process import
//! of it is open, and the vendor's rules keep it for peers that still map it.

use std::ffi::c_void;
use std::sync::Arc;

use safe::{DeviceId, SharedBuffer};

use crate::boundary::{Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::options::{devipc_export_options, export_options};
use crate::runtime::{devipc_runtime, runtime};
use crate::status::devipc_status;
use crate::token::devipc_mem_token;

/// Device memory this process allocated (the safe API's `SharedBuffer`). It keeps its
/// runtime alive.
pub struct devipc_buffer {
    _opaque: [u8; 0],
}

impl Handle for devipc_buffer {
    type Target = SharedBuffer;
    const KIND: &'static str = "buffer";
}

pub(crate) fn buffer(buf: *const devipc_buffer) -> Outcome<Arc<SharedBuffer>> {
    handle::get(buf, "buf")
}

/// Allocates `size` bytes of exportable memory on `device` and stores its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_allocate(
    rt: *const devipc_runtime,
    device: u32,
    size: usize,
    out: *mut *mut devipc_buffer,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.allocate(DeviceId(device), size)?)
    })
}

/// Frees the buffer handle in `*buf` and sets `*buf` to NULL (NULL: nothing to do). The
/// memory is freed once no same-process import of it is open.
///
/// # Safety
/// `buf` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_free(buf: *mut *mut devipc_buffer) -> devipc_status {
    // SAFETY: the caller's guarantee for `buf`.
    call(|| unsafe { handle::free(buf, "buf") })
}

/// Stores the buffer's size in bytes in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_len(
    buf: *const devipc_buffer,
    out: *mut usize,
) -> devipc_status {
    call(|| {
        let len = buffer(buf)?.len();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", len) }
    })
}

/// Stores the device the buffer lives on in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_device(
    buf: *const devipc_buffer,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let device = buffer(buf)?.device().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", device) }
    })
}

/// Stores the buffer's device address in this process in `*out` (for the vendor's own
/// calls and kernels; never dereference it on the host).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_ptr(
    buf: *const devipc_buffer,
    out: *mut u64,
) -> devipc_status {
    call(|| {
        let ptr = buffer(buf)?.ptr().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", ptr) }
    })
}

/// Copies `len` bytes from the host memory `src` into the buffer at `offset`. A range
/// outside the buffer is `DEVIPC_ERR_INVALID_ARGUMENT` and copies nothing.
///
/// # Safety
/// `src` is valid for reads of `len` bytes (NULL when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_write(
    buf: *const devipc_buffer,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> devipc_status {
    call(|| {
        let buf = buffer(buf)?;
        // SAFETY: the caller's guarantee for `src` and `len`.
        let src = unsafe { ffi::slice(src.cast::<u8>(), len, "src")? };
        Ok(buf.write(offset, src)?)
    })
}

/// Copies `len` bytes of the buffer at `offset` into the host memory `dst`. A range
/// outside the buffer is `DEVIPC_ERR_INVALID_ARGUMENT` and copies nothing.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes (NULL when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_read(
    buf: *const devipc_buffer,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> devipc_status {
    call(|| {
        let buf = buffer(buf)?;
        // SAFETY: the caller's guarantee for `dst` and `len`.
        let dst = unsafe { ffi::slice_mut(dst.cast::<u8>(), len, "dst")? };
        Ok(buf.read(offset, dst)?)
    })
}

/// Exports the whole buffer: a new token handle in `*out`, for a peer (send its text or
/// bytes). `opts` NULL: only granted processes may import (`devipc_runtime_grant`).
///
/// # Safety
/// `opts` is NULL or a `devipc_export_options` with its `struct_size` set; `out` is
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_export(
    buf: *const devipc_buffer,
    opts: *const devipc_export_options,
    out: *mut *mut devipc_mem_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let buf = buffer(buf)?;
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { export_options(opts) }?;
        out.set(buf.export(opts)?)
    })
}

/// Exports the `len` bytes at `offset` of the buffer: the importer sees only that range.
/// A range outside the buffer (or empty) is `DEVIPC_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// As `devipc_buffer_export`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_export_range(
    buf: *const devipc_buffer,
    offset: usize,
    len: usize,
    opts: *const devipc_export_options,
    out: *mut *mut devipc_mem_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let buf = buffer(buf)?;
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { export_options(opts) }?;
        let end = offset.checked_add(len).ok_or_else(|| {
            crate::boundary::Failure::invalid(format!("range {offset} + {len} overflows"))
        })?;
        out.set(buf.export_range(offset..end, opts)?)
    })
}
