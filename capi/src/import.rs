//! Imports: a peer's export (or this process's own) mapped here (the safe API's
//! `ImportedBuffer`): import on a device or on the exporter's own device, read and
//! write from the host, close. Importing the same token twice shares one vendor import;
//! the vendor import closes with the last handle.

use std::ffi::c_void;
use std::sync::Arc;

use safe::{DeviceId, ImportedBuffer};

use crate::boundary::{Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::runtime::{devipc_runtime, runtime};
use crate::status::devipc_status;
use crate::token::{devipc_mem_token, mem_token};

/// An export mapped into this process (the safe API's `ImportedBuffer`). It keeps the
/// mapping (and its runtime) alive until closed.
pub struct devipc_import {
    _opaque: [u8; 0],
}

impl Handle for devipc_import {
    type Target = ImportedBuffer;
    const KIND: &'static str = "import";
}

fn import(imp: *const devipc_import) -> Outcome<Arc<ImportedBuffer>> {
    handle::get(imp, "imp")
}

/// Maps `token`'s memory on this process's `device` (any device: a cross-device import
/// where the backend supports it) and stores the import's handle in `*out`. A token of
/// another backend is `DEVIPC_ERR_BACKEND_MISMATCH`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_import(
    rt: *const devipc_runtime,
    token: *const devipc_mem_token,
    device: u32,
    out: *mut *mut devipc_import,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.import(&*mem_token(token)?, DeviceId(device))?)
    })
}

/// Maps `token`'s memory on this process's index of the exporter's own device (found by
/// the physical identity the token carries, whatever visibility masks the two processes
/// run under) and stores the import's handle in `*out`. `DEVIPC_ERR_DEVICE_NOT_VISIBLE`
/// when that device is not visible here.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_import_on_exporter_device(
    rt: *const devipc_runtime,
    token: *const devipc_mem_token,
    out: *mut *mut devipc_import,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.import_on_exporter_device(&*mem_token(token)?)?)
    })
}

/// This process's index of the device `token` was exported from: `*visible` tells
/// whether that device is visible here, and `*device` (when visible) its index.
///
/// # Safety
/// `visible` and `device` are valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_local_device_of(
    rt: *const devipc_runtime,
    token: *const devipc_mem_token,
    visible: *mut bool,
    device: *mut u32,
) -> devipc_status {
    call(|| {
        if device.is_null() {
            return Err(crate::boundary::Failure::Null("device"));
        }
        let local = runtime(rt)?.local_device_of(&*mem_token(token)?)?;
        // SAFETY: the caller's guarantee for `visible`.
        unsafe { ffi::put(visible, "visible", local.is_some())? };
        // SAFETY: the caller's guarantee for `device` (checked not NULL above).
        unsafe { ffi::put(device, "device", local.map_or(0, |d| d.0)) }
    })
}

/// Closes the import handle in `*imp` and sets `*imp` to NULL (NULL: nothing to do). The
/// vendor import closes when no other import of the same export is open here.
///
/// # Safety
/// `imp` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_close(imp: *mut *mut devipc_import) -> devipc_status {
    // SAFETY: the caller's guarantee for `imp`.
    call(|| unsafe { handle::free(imp, "imp") })
}

/// Stores the length of the imported range in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_len(
    imp: *const devipc_import,
    out: *mut usize,
) -> devipc_status {
    call(|| {
        let len = import(imp)?.len();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", len) }
    })
}

/// Stores the device the import is mapped on in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_device(
    imp: *const devipc_import,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let device = import(imp)?.device().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", device) }
    })
}

/// Stores the import's device address in this process (the token's offset applied) in
/// `*out`; never dereference it on the host.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_ptr(
    imp: *const devipc_import,
    out: *mut u64,
) -> devipc_status {
    call(|| {
        let ptr = import(imp)?.ptr().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", ptr) }
    })
}

/// Stores in `*out` whether the import is a view of this process's own export (no vendor
/// import was made).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_is_local(
    imp: *const devipc_import,
    out: *mut bool,
) -> devipc_status {
    call(|| {
        let local = import(imp)?.is_local();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", local) }
    })
}

/// Copies `len` bytes from the host memory `src` into the imported memory at `offset`
/// (bounded by the size the vendor reports for the mapped object, never the token's claim).
///
/// # Safety
/// `src` is valid for reads of `len` bytes (NULL when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_write(
    imp: *const devipc_import,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> devipc_status {
    call(|| {
        let imp = import(imp)?;
        // SAFETY: the caller's guarantee for `src` and `len`.
        let src = unsafe { ffi::slice(src.cast::<u8>(), len, "src")? };
        Ok(imp.write(offset, src)?)
    })
}

/// Copies `len` imported bytes at `offset` into the host memory `dst`.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes (NULL when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_import_read(
    imp: *const devipc_import,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> devipc_status {
    call(|| {
        let imp = import(imp)?;
        // SAFETY: the caller's guarantee for `dst` and `len`.
        let dst = unsafe { ffi::slice_mut(dst.cast::<u8>(), len, "dst")? };
        Ok(imp.read(offset, dst)?)
    })
}
