//! Batched asynchronous copies (issue 25): `hipMemcpyBatchAsync` where the runtime has it
//! (HIP 7.1), a loop of `hipMemcpyAsync` otherwise. Part of the `result` layer (see
//! [`result`](crate::result) for the checked call and its conventions); the backend's
//! `copy_async` (`stream.rs`) calls it.
//!
//! Both paths have the same outcome: the copies are enqueued on the stream in order, and a
//! failure names the first copy that was not enqueued (the ones before it were: CLR's
//! batch enqueues descriptor by descriptor, `hip.batch.earlier-copies-run`). Copies of zero
//! bytes are left out, since the batch refuses them (`hip.batch.zero-size-rejected`) while
//! `hipMemcpyAsync` treats them as no-ops; the index still counts them. Every copy is
//! `hipMemcpyDefault`: the runtime infers each direction.

use devipc_core::Error;
use devipc_hip_sys::{HipApi, hipMemcpyDefault, hipStream_t, hipSuccess};

use super::{as_ptr, vendor_error};

/// One copy of a batch: `len` bytes from `src` to `dst` (device or host addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchCopy {
    /// Destination address.
    pub dst: u64,
    /// Source address.
    pub src: u64,
    /// Bytes to copy.
    pub len: usize,
}

/// Enqueues `copies` on `stream`, in order: one `hipMemcpyBatchAsync` when the runtime
/// has it, else one `hipMemcpyAsync` each. On failure, `(i, error)`: `copies[..i]` are
/// enqueued, `copies[i..]` are not, and `error` is the runtime's for copy `i` (for a
/// failure of the call as a whole, `i` is 0).
///
/// # Safety
/// `stream` is null (the null stream) or a live stream of the current device. Every
/// device operand lies in memory this process allocated or mapped, and every operand (host
/// memory too) stays valid until the stream has run the copies, as for `hipMemcpyAsync`.
pub(crate) unsafe fn memcpy_batch_async(
    api: &HipApi,
    copies: &[BatchCopy],
    stream: hipStream_t,
) -> Result<(), (usize, Error)> {
    // The runtime's batch refuses zero sizes: pass only the others, remembering where
    // each came from.
    let kept: Vec<usize> = (0..copies.len()).filter(|&i| copies[i].len > 0).collect();
    if kept.is_empty() {
        return Ok(());
    }
    match api.hipMemcpyBatchAsync {
        // SAFETY: the caller's contract, passed on.
        Some(batch) => unsafe { vendor_batch(api, batch, copies, &kept, stream) },
        // SAFETY: the caller's contract, passed on.
        None => unsafe { loop_async(api, copies, &kept, stream) },
    }
}

/// The table's `hipMemcpyBatchAsync` field type.
type BatchFn = unsafe extern "C" fn(
    *mut *mut std::ffi::c_void,
    *mut *mut std::ffi::c_void,
    *mut usize,
    usize,
    *mut devipc_hip_sys::hipMemcpyAttributes,
    *mut usize,
    usize,
    *mut usize,
    hipStream_t,
) -> devipc_hip_sys::hipError_t;

/// One `hipMemcpyBatchAsync` of the copies at `kept`.
///
/// # Safety
/// As [`memcpy_batch_async`].
unsafe fn vendor_batch(
    api: &HipApi,
    batch: BatchFn,
    copies: &[BatchCopy],
    kept: &[usize],
    stream: hipStream_t,
) -> Result<(), (usize, Error)> {
    let mut dsts: Vec<_> = kept.iter().map(|&i| as_ptr(copies[i].dst)).collect();
    let mut srcs: Vec<_> = kept.iter().map(|&i| as_ptr(copies[i].src)).collect();
    let mut sizes: Vec<usize> = kept.iter().map(|&i| copies[i].len).collect();
    let mut fail_idx = usize::MAX;
    // SAFETY: the three arrays hold `kept.len()` elements and live across the call;
    // `numAttrs` is 0, so `attrs` and `attrsIdxs` are not read (CLR supports none); the
    // caller guarantees the stream and the operands until the copies ran.
    let code = unsafe {
        batch(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            kept.len(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            &mut fail_idx,
            stream,
        )
    };
    if code == hipSuccess {
        return Ok(());
    }
    // A descriptor's failure names it; anything else failed before the first one.
    let at = kept.get(fail_idx).copied().unwrap_or(0);
    Err((at, vendor_error(api, "hipMemcpyBatchAsync", code)))
}

/// One `hipMemcpyAsync` per copy at `kept`, stopping at the first failure.
///
/// # Safety
/// As [`memcpy_batch_async`].
unsafe fn loop_async(
    api: &HipApi,
    copies: &[BatchCopy],
    kept: &[usize],
    stream: hipStream_t,
) -> Result<(), (usize, Error)> {
    let copy = api.hipMemcpyAsync;
    for &i in kept {
        let c = copies[i];
        // SAFETY: the caller guarantees the operands and the stream until the copy ran.
        let code = unsafe {
            copy(
                as_ptr(c.dst),
                as_ptr(c.src),
                c.len,
                hipMemcpyDefault,
                stream,
            )
        };
        if code != hipSuccess {
            return Err((i, vendor_error(api, "hipMemcpyAsync", code)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::sync::Once;

    use devipc_hip_sys::{hipErrorInvalidValue, hipMemcpyDeviceToHost, hipMemcpyHostToDevice};

    use super::*;

    const N: usize = 4096;

    /// The in-process emulator answering as HIP 7.1 (the first with the batch); this test
    /// binary's only emulator user, so the version is set before its configuration is read.
    fn emulated() -> HipApi {
        static VERSION: Once = Once::new();
        VERSION.call_once(|| {
            // SAFETY: runs once, before any test of this binary reads the environment
            // through the emulator; the guard is leaked so the value stays.
            let guard = unsafe {
                devipc_testkit::EnvGuard::set(&[(
                    "DEVIPC_EMU_HIP_VERSION",
                    Some(OsStr::new("7.1")),
                )])
            };
            std::mem::forget(guard);
        });
        let api = devipc_emulator::hip::hip_api();
        assert!(api.hipMemcpyBatchAsync.is_some(), "HIP 7.1 has the batch");
        api
    }

    /// Both ways a batch reaches the runtime.
    fn paths() -> [(&'static str, HipApi); 2] {
        let mut looped = emulated();
        looped.hipMemcpyBatchAsync = None;
        [
            ("hipMemcpyBatchAsync", emulated()),
            ("hipMemcpyAsync loop", looped),
        ]
    }

    fn malloc(api: &HipApi) -> u64 {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { (api.hipMalloc)(&mut p, N) }, hipSuccess);
        p as u64
    }

    fn fill(api: &HipApi, dst: u64, byte: u8) {
        let host = vec![byte; N];
        // SAFETY: `dst` is a live N-byte allocation, `host` N bytes.
        let code =
            unsafe { (api.hipMemcpy)(as_ptr(dst), host.as_ptr().cast(), N, hipMemcpyHostToDevice) };
        assert_eq!(code, hipSuccess);
    }

    fn read(api: &HipApi, src: u64) -> Vec<u8> {
        let mut host = vec![0u8; N];
        // SAFETY: `src` is a live N-byte allocation, `host` N bytes.
        let code = unsafe {
            (api.hipMemcpy)(
                host.as_mut_ptr().cast(),
                as_ptr(src),
                N,
                hipMemcpyDeviceToHost,
            )
        };
        assert_eq!(code, hipSuccess);
        host
    }

    fn sync(api: &HipApi) {
        // SAFETY: the null stream.
        let code = unsafe { (api.hipStreamSynchronize)(std::ptr::null_mut()) };
        assert_eq!(code, hipSuccess);
    }

    fn free(api: &HipApi, p: u64) {
        // SAFETY: a live allocation of this test, freed once.
        assert_eq!(unsafe { (api.hipFree)(as_ptr(p)) }, hipSuccess);
    }

    #[test]
    fn every_kind_of_copy_runs_in_order_on_both_paths() {
        for (path, api) in paths() {
            let (a, b) = (malloc(&api), malloc(&api));
            let host_in = vec![7u8; N];
            let mut host_out = vec![0u8; N];
            let copies = [
                BatchCopy {
                    dst: a,
                    src: host_in.as_ptr() as u64,
                    len: N,
                },
                BatchCopy {
                    dst: b,
                    src: a,
                    len: N,
                },
                BatchCopy {
                    dst: b,
                    src: a,
                    len: 0,
                },
                BatchCopy {
                    dst: host_out.as_mut_ptr() as u64,
                    src: b + 16,
                    len: 32,
                },
            ];
            // SAFETY: the null stream; the allocations and host vectors outlive the sync.
            let done = unsafe { memcpy_batch_async(&api, &copies, std::ptr::null_mut()) };
            assert!(done.is_ok(), "{path}: {done:?}");
            sync(&api);
            assert_eq!(read(&api, b), vec![7u8; N], "{path}");
            assert_eq!(&host_out[..32], &[7u8; 32], "{path}");
            assert!(host_out[32..].iter().all(|&x| x == 0), "{path}");
            free(&api, a);
            free(&api, b);
        }
    }

    #[test]
    fn a_failing_copy_is_named_and_the_ones_before_it_run() {
        for (path, api) in paths() {
            let (a, b, c) = (malloc(&api), malloc(&api), malloc(&api));
            fill(&api, a, 1);
            fill(&api, b, 2);
            fill(&api, c, 3);
            let copies = [
                BatchCopy {
                    dst: b,
                    src: a,
                    len: N,
                },
                BatchCopy {
                    dst: c,
                    src: a,
                    len: 0,
                },
                // Past the end of `c`.
                BatchCopy {
                    dst: c + 8,
                    src: a,
                    len: N,
                },
                BatchCopy {
                    dst: c,
                    src: a,
                    len: N,
                },
            ];
            // SAFETY: the null stream; the allocations outlive the sync.
            let failed = unsafe { memcpy_batch_async(&api, &copies, std::ptr::null_mut()) };
            match failed {
                Err((2, Error::Vendor { code, .. })) => {
                    assert_eq!(code, hipErrorInvalidValue, "{path}")
                }
                other => panic!("{path}: expected copy 2 to fail, got {other:?}"),
            }
            sync(&api);
            assert_eq!(read(&api, b), vec![1u8; N], "{path}: copy 0 ran");
            assert_eq!(read(&api, c), vec![3u8; N], "{path}: copy 3 did not");
            for p in [a, b, c] {
                free(&api, p);
            }
        }
    }

    #[test]
    fn an_empty_batch_calls_nothing() {
        let mut api = emulated();
        api.hipMemcpyBatchAsync = None;
        let zero = [BatchCopy {
            dst: 0,
            src: 0,
            len: 0,
        }];
        // SAFETY: nothing is enqueued: every copy is empty.
        let empty = unsafe { memcpy_batch_async(&api, &zero, std::ptr::null_mut()) };
        assert!(empty.is_ok());
        // SAFETY: nothing is enqueued: there is no copy.
        let none = unsafe { memcpy_batch_async(&api, &[], std::ptr::null_mut()) };
        assert!(none.is_ok());
    }
}
