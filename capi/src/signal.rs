//! Signals: a cross-process binary semaphore (the safe API's `Signal`): notify once, and
//! one wait (here or in a peer) returns and resets it. Create, export (a signal token),
//! grant, import, notify, wait with a timeout, free. And stream-ordered generations:
//! `devipc_signal_post` on a stream, a peer's `devipc_signal_wait_for` on its stream.

use std::sync::Arc;

use safe::{DeviceId, Signal};

use crate::boundary::{Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::options::{devipc_export_options, export_options};
use crate::runtime::{devipc_runtime, pid_list, runtime};
use crate::status::devipc_status;
use crate::stream::devipc_stream;
use crate::token::{devipc_signal_token, signal_token};

/// A signal (the safe API's `Signal`). It keeps its runtime alive.
pub struct devipc_signal {
    _opaque: [u8; 0],
}

impl Handle for devipc_signal {
    type Target = Signal;
    const KIND: &'static str = "signal";
}

/// `devipc_signal_wait`'s timeout for "wait forever".
pub const DEVIPC_WAIT_FOREVER: i64 = -1;

pub(crate) fn signal(sig: *const devipc_signal) -> Outcome<Arc<Signal>> {
    handle::get(sig, "sig")
}

/// Creates an exportable signal on `device` and stores its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_create_signal(
    rt: *const devipc_runtime,
    device: u32,
    out: *mut *mut devipc_signal,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.create_signal(DeviceId(device))?)
    })
}

/// Opens a peer's signal on `device` and stores its handle in `*out`. A token this
/// process exported shares the local signal.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_import_signal(
    rt: *const devipc_runtime,
    token: *const devipc_signal_token,
    device: u32,
    out: *mut *mut devipc_signal,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(runtime(rt)?.import_signal(&*signal_token(token)?, DeviceId(device))?)
    })
}

/// Exports the signal: a new token handle in `*out`. `opts` NULL: only granted processes
/// may import (`devipc_signal_grant`).
///
/// # Safety
/// `opts` is NULL or a `devipc_export_options` with its `struct_size` set; `out` is
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_export(
    sig: *const devipc_signal,
    opts: *const devipc_export_options,
    out: *mut *mut devipc_signal_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let sig = signal(sig)?;
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { export_options(opts) }?;
        out.set(sig.export(opts)?)
    })
}

/// Lets the processes `pids[0..count]` import the signal's `token`.
///
/// # Safety
/// `pids` is valid for reads of `count` ids (NULL when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_grant(
    sig: *const devipc_signal,
    token: *const devipc_signal_token,
    pids: *const u32,
    count: usize,
) -> devipc_status {
    call(|| {
        let sig = signal(sig)?;
        let token = signal_token(token)?;
        // SAFETY: the caller's guarantee for `pids` and `count`.
        let pids = unsafe { pid_list(pids, count)? };
        Ok(sig.grant(&token, &pids)?)
    })
}

/// Raises the signal after the work queued so far on the default stream.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_signal_notify(sig: *const devipc_signal) -> devipc_status {
    call(|| Ok(signal(sig)?.notify()?))
}

/// Blocks until the signal is raised, then resets it. `timeout_ms` negative
/// (`DEVIPC_WAIT_FOREVER`) waits forever; past the timeout the call returns
/// `DEVIPC_ERR_TIMEOUT` (no earlier than the timeout, at most a small slack after it).
#[unsafe(no_mangle)]
pub extern "C" fn devipc_signal_wait(sig: *const devipc_signal, timeout_ms: i64) -> devipc_status {
    call(|| Ok(signal(sig)?.wait(ffi::timeout(timeout_ms))?))
}

/// Posts the signal's next generation on `stream` (of the signal's runtime and device)
/// and stores it in `*generation` (1, 2, ...: the same in every process). A peer's
/// `devipc_signal_wait_for` of that generation orders its stream's later work after the
/// work queued on `stream` before this call, on the device. A post more than four
/// generations ahead of the waits issued so far waits for them, up to `timeout_ms`
/// (`DEVIPC_WAIT_FOREVER`: as long as it takes), then `DEVIPC_ERR_TIMEOUT`; a post that
/// timed out posted nothing and may be retried.
///
/// # Safety
/// `generation` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_post(
    sig: *const devipc_signal,
    stream: *const devipc_stream,
    timeout_ms: i64,
    generation: *mut u64,
) -> devipc_status {
    call(|| {
        let posted =
            signal(sig)?.post(&*crate::stream::stream(stream)?, ffi::timeout(timeout_ms))?;
        // SAFETY: the caller's guarantee for `generation`.
        unsafe { ffi::put(generation, "generation", posted) }
    })
}

/// Makes `stream`'s later work wait, on the device, for the work queued before the post
/// of `generation`. Blocks only until that post was made, up to `timeout_ms`
/// (`DEVIPC_ERR_TIMEOUT`); generation 0 is no wait. (HIP before ROCm 7.0, whose stream
/// wait blocks the calling thread until the posted work ran: within the timeout too.)
#[unsafe(no_mangle)]
pub extern "C" fn devipc_signal_wait_for(
    sig: *const devipc_signal,
    stream: *const devipc_stream,
    generation: u64,
    timeout_ms: i64,
) -> devipc_status {
    call(|| {
        let stream = crate::stream::stream(stream)?;
        Ok(signal(sig)?.wait_for(&stream, generation, ffi::timeout(timeout_ms))?)
    })
}

/// Stores the latest generation posted in `*posted` and the latest one a wait was issued
/// for in `*waited`, as every process holding the signal sees them.
///
/// # Safety
/// `posted` and `waited` are valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_generations(
    sig: *const devipc_signal,
    posted: *mut u64,
    waited: *mut u64,
) -> devipc_status {
    call(|| {
        let g = signal(sig)?.generations()?;
        // SAFETY: the caller's guarantee for `posted` and `waited`.
        unsafe {
            ffi::put(posted, "posted", g.posted)?;
            ffi::put(waited, "waited", g.waited)
        }
    })
}

/// Stores the device the signal belongs to in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_device(
    sig: *const devipc_signal,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let device = signal(sig)?.device().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", device) }
    })
}

/// Frees the signal handle in `*sig` and sets `*sig` to NULL (NULL: nothing to do). The
/// signal is destroyed once no same-process import of it is open.
///
/// # Safety
/// `sig` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_free(sig: *mut *mut devipc_signal) -> devipc_status {
    // SAFETY: the caller's guarantee for `sig`.
    call(|| unsafe { handle::free(sig, "sig") })
}
