//! Streams: ordered queues of device work (the safe API's `Stream`), devipc's own or a
//! framework's, on which copies between spans are enqueued (one, a batch, host to device,
//! device to host), each returning a request; and events recorded on them.
//!
//! Every call binds the stream's device itself, whatever thread makes it.

use std::sync::Arc;

use safe::{DeviceId, DeviceSpan, RawStream, Stream};

use crate::boundary::{Failure, Outcome, call};
use crate::event::event;
use crate::ffi;
use crate::handle::{self, Handle};
use crate::request::{Pending, devipc_request};
use crate::runtime::{devipc_runtime, runtime};
use crate::span::{devipc_span, span};
use crate::status::devipc_status;

/// An ordered queue of device work on one device (the safe API's `Stream`). A stream
/// devipc created is destroyed, in the background, once its handle and every request on
/// it are gone.
pub struct devipc_stream {
    _opaque: [u8; 0],
}

impl Handle for devipc_stream {
    type Target = Stream;
    const KIND: &'static str = "stream";
}

/// The stream `stream` names.
pub(crate) fn stream(s: *const devipc_stream) -> Outcome<Arc<Stream>> {
    handle::get(s, "stream")
}

/// Creates a stream on `device` (devipc's own) and stores its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_create_stream(
    rt: *const devipc_runtime,
    device: u32,
    out: *mut *mut devipc_stream,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.create_stream(DeviceId(device))?)
    })
}

/// Wraps a framework's stream (`hipStream_t` / `aclrtStream` as an integer; 0: the
/// default stream) on `device`, which devipc uses but never destroys, and stores its
/// handle in `*out`.
///
/// # Safety
/// `raw` is 0 or a live stream of the runtime's vendor runtime on `device`, and stays
/// alive while the handle, or a request enqueued on it, lives. `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_wrap(
    rt: *const devipc_runtime,
    device: u32,
    raw: usize,
    out: *mut *mut devipc_stream,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let rt = runtime(rt)?;
        // SAFETY: the caller's guarantee for the stream, passed on.
        let raw = unsafe { RawStream::from_ptr(std::ptr::without_provenance_mut::<u8>(raw)) };
        // SAFETY: as above.
        out.set(unsafe { Stream::wrap(&rt, DeviceId(device), raw) }?)
    })
}

/// Stores the vendor stream's address (`hipStream_t` / `aclrtStream`) in `*out`, to hand
/// to a framework; valid while the stream's handle lives.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_as_raw(
    s: *const devipc_stream,
    out: *mut usize,
) -> devipc_status {
    call(|| {
        let raw = stream(s)?.as_raw();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", raw) }
    })
}

/// Stores the device the stream belongs to in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_device(
    s: *const devipc_stream,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let device = stream(s)?.device().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", device) }
    })
}

/// Enqueues a device-to-device copy of `src` into `dst` (spans of equal length, from any
/// buffer, import or framework block) and stores the request in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_copy(
    s: *const devipc_stream,
    dst: *const devipc_span,
    src: *const devipc_span,
    out: *mut *mut devipc_request,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let req = stream(s)?.copy(&*span(dst, "dst")?, &*span(src, "src")?)?;
        out.set(Pending::new(req))
    })
}

/// Enqueues the `count` device-to-device copies `src[i]` into `dst[i]` in one call, in
/// order, and stores the one request that completes when all did in `*out`. A refused pair
/// is `DEVIPC_ERR_COPY` (`devipc_last_error_copy_index` names it): devipc's own checks run
/// over every pair before anything is enqueued; a pair the vendor refuses at enqueue stops
/// the batch there (the copies before it run: synchronize before reusing them).
///
/// # Safety
/// `dst` and `src` are valid for reads of `count` span handles each; `out` is valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_copy_batch(
    s: *const devipc_stream,
    dst: *const *const devipc_span,
    src: *const *const devipc_span,
    count: usize,
    out: *mut *mut devipc_request,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let s = stream(s)?;
        // SAFETY: the caller's guarantee for `dst`, `src` and `count`.
        let (dst, src) = unsafe {
            (
                ffi::slice(dst, count, "dst")?,
                ffi::slice(src, count, "src")?,
            )
        };
        let mut pairs: Vec<(DeviceSpan, DeviceSpan)> = Vec::with_capacity(count);
        for (i, (d, s)) in dst.iter().zip(src).enumerate() {
            let pair =
                span(*d, "dst[i]").and_then(|d| Ok(((*d).clone(), (*span(*s, "src[i]")?).clone())));
            match pair {
                Ok(p) => pairs.push(p),
                Err(Failure::Devipc(e)) => {
                    return Err(safe::Error::copy_failed(i, count, e).into());
                }
                Err(other) => return Err(other),
            }
        }
        out.set(Pending::new(s.copy_batch(&pairs)?))
    })
}

/// Enqueues a host-to-device copy of the `len` bytes at `data` into `dst` (of `len`
/// bytes) and stores the request in `*out`. The bytes are copied before the call returns:
/// `data` may be reused at once.
///
/// # Safety
/// `data` is valid for reads of `len` bytes; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_write(
    s: *const devipc_stream,
    dst: *const devipc_span,
    data: *const std::ffi::c_void,
    len: usize,
    out: *mut *mut devipc_request,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let s = stream(s)?;
        let dst = span(dst, "dst")?;
        // SAFETY: the caller's guarantee for `data` and `len`.
        let bytes = unsafe { ffi::slice(data.cast::<u8>(), len, "data") }?.to_vec();
        out.set(Pending::new(s.write(&dst, bytes)?))
    })
}

/// Enqueues a device-to-host copy of `src` into a host buffer the request owns, and stores
/// the request in `*out`; `devipc_request_take_host` gives the bytes once it completed.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_read(
    s: *const devipc_stream,
    src: *const devipc_span,
    out: *mut *mut devipc_request,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(Pending::new(stream(s)?.read(&*span(src, "src")?)?))
    })
}

/// Records `ev` on the stream (the event must be of the stream's device): it completes
/// when the work enqueued so far did.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_stream_record(
    s: *const devipc_stream,
    ev: *const crate::event::devipc_event,
) -> devipc_status {
    call(|| Ok(stream(s)?.record(&*event(ev)?)?))
}

/// Makes the work enqueued on the stream from now on wait for `ev`'s latest record,
/// without blocking the host.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_stream_wait_event(
    s: *const devipc_stream,
    ev: *const crate::event::devipc_event,
) -> devipc_status {
    call(|| Ok(stream(s)?.wait_event(&*event(ev)?)?))
}

/// Blocks until the work enqueued on the stream so far is done; the first failure of that
/// work is the status.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_stream_synchronize(s: *const devipc_stream) -> devipc_status {
    call(|| Ok(stream(s)?.synchronize()?))
}

/// Frees the stream handle in `*s` and sets `*s` to NULL (NULL: nothing to do). Never
/// blocks: a stream devipc created is destroyed once the requests on it completed.
///
/// # Safety
/// `s` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_stream_free(s: *mut *mut devipc_stream) -> devipc_status {
    // SAFETY: the caller's guarantee for `s`.
    call(|| unsafe { handle::free(s, "stream") })
}

/// Test aid, emulator only: holds the stream as if a long kernel occupied it, so the work
/// enqueued from now on stays queued (a request is provably in flight) until
/// `devipc_testing_release_stream`. `DEVIPC_ERR_UNSUPPORTED` on a real runtime.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_testing_hold_stream(s: *const devipc_stream) -> devipc_status {
    call(|| Ok(safe::testing::hold_stream(&*stream(s)?)?))
}

/// Test aid, emulator only: releases a stream `devipc_testing_hold_stream` held; returns
/// once the work queued meanwhile ran.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_testing_release_stream(s: *const devipc_stream) -> devipc_status {
    call(|| Ok(safe::testing::release_stream(&*stream(s)?)?))
}
