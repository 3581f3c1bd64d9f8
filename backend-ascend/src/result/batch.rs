//! Batched asynchronous copies (issue 25): `aclrtMemcpyBatchAsync` where the runtime has it
//! and the batch is all host-to-device / device-to-host (the only directions it supports),
//! a loop of `aclrtMemcpyAsync` otherwise (device-to-device copies, which memory imported
//! by key from another device allows as the only copy, api-facts C.4). Part of the
//! `result` layer (see [`result`](crate::result) for the checked call); the backend's
//! `copy_async` (`stream.rs`) calls it.
//!
//! Both paths have the same outcome: the copies are enqueued on the stream in order, and a
//! failure names the first copy that was not enqueued (the runtime enqueues descriptor by
//! descriptor, `ascend.batch.earlier-copies-run`). Copies of zero bytes are left out, since
//! the batch refuses them (`ascend.batch.descriptor-valid`); the index still counts them.
//! The vendor batch gets one `aclrtMemcpyBatchAttr` per run of copies of the same direction,
//! naming the host and the device the copies' device memory is on.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::types::{
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_LOCATION_TYPE_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, aclrtMemLocation, aclrtMemcpyBatchAttr,
    aclrtMemcpyKind, aclrtStream,
};
use devipc_core::Error;

use super::{as_ptr, memcpy_async, vendor_error};

/// Which way a copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Host memory to device memory.
    HostToDevice,
    /// Device memory to host memory.
    DeviceToHost,
    /// Device memory to device memory (never through the vendor batch).
    DeviceToDevice,
}

impl Direction {
    fn kind(self) -> aclrtMemcpyKind {
        match self {
            Direction::HostToDevice => ACL_MEMCPY_HOST_TO_DEVICE,
            Direction::DeviceToHost => ACL_MEMCPY_DEVICE_TO_HOST,
            Direction::DeviceToDevice => ACL_MEMCPY_DEVICE_TO_DEVICE,
        }
    }
}

/// One copy of a batch: `len` bytes from `src` to `dst`, a buffer of `dst_max` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchCopy {
    /// Destination address.
    pub dst: u64,
    /// Bytes the destination buffer holds from `dst` (`destMax`).
    pub dst_max: usize,
    /// Source address.
    pub src: u64,
    /// Bytes to copy.
    pub len: usize,
    /// Which way it goes.
    pub direction: Direction,
}

/// Enqueues `copies` on `stream`, in order: one `aclrtMemcpyBatchAsync` when the runtime
/// has it and no copy is device to device, else one `aclrtMemcpyAsync` each. `device` is
/// the device (this process's id) the copies' device memory is on. On failure, `(i,
/// error)`: `copies[..i]` are enqueued, `copies[i..]` are not (for a failure of the call
/// as a whole, `i` is 0).
///
/// # Safety
/// `stream` is null (the default stream) or a live stream of the current device. Every
/// operand is memory of the kind its direction names, at least `len` bytes (`dst_max` for
/// the destination), and stays valid until the stream has run the copies.
pub(crate) unsafe fn memcpy_batch_async(
    api: &AclApi,
    copies: &[BatchCopy],
    device: i32,
    stream: usize,
) -> Result<(), (usize, Error)> {
    let kept: Vec<usize> = (0..copies.len()).filter(|&i| copies[i].len > 0).collect();
    if kept.is_empty() {
        return Ok(());
    }
    let host_device = kept
        .iter()
        .all(|&i| copies[i].direction != Direction::DeviceToDevice);
    match api.aclrtMemcpyBatchAsync {
        // SAFETY: the caller's contract, passed on.
        Some(batch) if host_device => unsafe {
            vendor_batch(api, batch, copies, &kept, device, stream)
        },
        // SAFETY: the caller's contract, passed on.
        _ => unsafe { loop_async(api, copies, &kept, stream) },
    }
}

/// The table's `aclrtMemcpyBatchAsync` field type.
type BatchFn = unsafe extern "C" fn(
    *mut *mut std::ffi::c_void,
    *mut usize,
    *mut *mut std::ffi::c_void,
    *mut usize,
    usize,
    *mut aclrtMemcpyBatchAttr,
    *mut usize,
    usize,
    *mut usize,
    aclrtStream,
) -> devipc_ascend_sys::types::aclError;

/// The attribute of a direction: where its destination and source are.
fn attribute(direction: Direction, device: i32) -> aclrtMemcpyBatchAttr {
    let host = aclrtMemLocation {
        id: 0,
        r#type: ACL_MEM_LOCATION_TYPE_HOST,
    };
    let dev = aclrtMemLocation {
        id: device as u32,
        r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
    };
    let (dst, src) = match direction {
        Direction::HostToDevice => (dev, host),
        _ => (host, dev),
    };
    aclrtMemcpyBatchAttr {
        dstLoc: dst,
        srcLoc: src,
        rsv: [0; 16],
    }
}

/// One `aclrtMemcpyBatchAsync` of the copies at `kept` (none device to device).
///
/// # Safety
/// As [`memcpy_batch_async`].
unsafe fn vendor_batch(
    api: &AclApi,
    batch: BatchFn,
    copies: &[BatchCopy],
    kept: &[usize],
    device: i32,
    stream: usize,
) -> Result<(), (usize, Error)> {
    let mut dsts: Vec<_> = kept.iter().map(|&i| as_ptr(copies[i].dst)).collect();
    let mut dst_maxs: Vec<usize> = kept.iter().map(|&i| copies[i].dst_max).collect();
    let mut srcs: Vec<_> = kept.iter().map(|&i| as_ptr(copies[i].src)).collect();
    let mut sizes: Vec<usize> = kept.iter().map(|&i| copies[i].len).collect();
    // One attribute per run of one direction, starting where the run starts.
    let mut attrs = Vec::new();
    let mut starts = Vec::new();
    for (n, &i) in kept.iter().enumerate() {
        let d = copies[i].direction;
        if n == 0 || copies[kept[n - 1]].direction != d {
            attrs.push(attribute(d, device));
            starts.push(n);
        }
    }
    let mut fail_index = usize::MAX;
    // SAFETY: every array lives across the call and holds `kept.len()` (descriptors) or
    // `attrs.len()` (attributes) elements; the caller guarantees the operands and the
    // stream until the copies ran.
    let code = unsafe {
        batch(
            dsts.as_mut_ptr(),
            dst_maxs.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            kept.len(),
            attrs.as_mut_ptr(),
            starts.as_mut_ptr(),
            attrs.len(),
            &mut fail_index,
            stream as aclrtStream,
        )
    };
    if code == ACL_SUCCESS {
        return Ok(());
    }
    let at = kept.get(fail_index).copied().unwrap_or(0);
    Err((at, vendor_error(api, "aclrtMemcpyBatchAsync", code)))
}

/// One `aclrtMemcpyAsync` per copy at `kept`, stopping at the first failure.
///
/// # Safety
/// As [`memcpy_batch_async`].
unsafe fn loop_async(
    api: &AclApi,
    copies: &[BatchCopy],
    kept: &[usize],
    stream: usize,
) -> Result<(), (usize, Error)> {
    for &i in kept {
        let c = copies[i];
        // SAFETY: the caller guarantees the operands and the stream until the copy ran.
        unsafe {
            memcpy_async(
                api,
                c.dst,
                c.dst_max,
                c.src,
                c.len,
                c.direction.kind(),
                stream,
            )
        }
        .map_err(|e| (i, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use devipc_ascend_sys::codes::ACL_ERROR_RT_PARAM_INVALID;

    use super::*;

    const N: usize = 4096;

    /// The in-process emulator with device 0 set on this thread, and the same table without
    /// the batch (a runtime older than the function).
    fn paths() -> [(&'static str, AclApi); 2] {
        let api = devipc_emulator::acl::acl_api();
        // SAFETY: NULL config path; device 0 exists in the default emulator.
        unsafe {
            (api.aclInit)(std::ptr::null());
            assert_eq!((api.aclrtSetDevice)(0), ACL_SUCCESS);
        }
        assert!(api.aclrtMemcpyBatchAsync.is_some());
        let mut looped = devipc_emulator::acl::acl_api();
        looped.aclrtMemcpyBatchAsync = None;
        [
            ("aclrtMemcpyBatchAsync", api),
            ("aclrtMemcpyAsync loop", looped),
        ]
    }

    fn malloc(api: &AclApi) -> u64 {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { (api.aclrtMalloc)(&mut p, N, 0) }, ACL_SUCCESS);
        p as u64
    }

    fn sync(api: &AclApi) {
        // SAFETY: the default stream.
        let code = unsafe { (api.aclrtSynchronizeStream)(std::ptr::null_mut()) };
        assert_eq!(code, ACL_SUCCESS);
    }

    fn free(api: &AclApi, p: u64) {
        // SAFETY: a live allocation of this test, freed once.
        assert_eq!(unsafe { (api.aclrtFree)(as_ptr(p)) }, ACL_SUCCESS);
    }

    fn copy(dst: u64, src: u64, len: usize, direction: Direction) -> BatchCopy {
        BatchCopy {
            dst,
            dst_max: N,
            src,
            len,
            direction,
        }
    }

    #[test]
    fn host_device_batches_run_in_order_on_both_paths() {
        for (path, api) in paths() {
            let (a, b) = (malloc(&api), malloc(&api));
            let host_in = vec![5u8; N];
            let mut host_out = vec![0u8; N];
            let (hi, ho) = (host_in.as_ptr() as u64, host_out.as_mut_ptr() as u64);
            let copies = [
                copy(a, hi, N, Direction::HostToDevice),
                copy(b, hi, 64, Direction::HostToDevice),
                copy(ho, a, 0, Direction::DeviceToHost),
                copy(ho, a + 8, 32, Direction::DeviceToHost),
                copy(ho + 32, b, 16, Direction::DeviceToHost),
            ];
            // SAFETY: the default stream; buffers outlive the sync.
            let done = unsafe { memcpy_batch_async(&api, &copies, 0, 0) };
            assert!(done.is_ok(), "{path}: {done:?}");
            sync(&api);
            assert_eq!(&host_out[..48], &[5u8; 48], "{path}");
            assert!(host_out[48..].iter().all(|&x| x == 0), "{path}");
            free(&api, a);
            free(&api, b);
        }
    }

    #[test]
    fn device_to_device_copies_take_the_loop() {
        let [(_, api), _] = paths();
        let (a, b) = (malloc(&api), malloc(&api));
        let host_in = vec![9u8; N];
        let mut host_out = vec![0u8; N];
        let copies = [
            copy(a, host_in.as_ptr() as u64, N, Direction::HostToDevice),
            copy(b, a, N, Direction::DeviceToDevice),
            copy(host_out.as_mut_ptr() as u64, b, N, Direction::DeviceToHost),
        ];
        // SAFETY: the default stream; buffers outlive the sync.
        let done = unsafe { memcpy_batch_async(&api, &copies, 0, 0) };
        assert!(done.is_ok(), "{done:?}");
        sync(&api);
        assert_eq!(host_out, host_in);
        free(&api, a);
        free(&api, b);
    }

    #[test]
    fn a_failing_copy_is_named_and_the_ones_before_it_run() {
        for (path, api) in paths() {
            let a = malloc(&api);
            let host_in = vec![3u8; N];
            let mut host_out = vec![0u8; N];
            let hi = host_in.as_ptr() as u64;
            let copies = [
                copy(a, hi, 128, Direction::HostToDevice),
                copy(a, hi, 0, Direction::HostToDevice),
                // Runs past the end of the block at `a`.
                copy(a + N as u64, hi, N, Direction::HostToDevice),
                copy(host_out.as_mut_ptr() as u64, a, N, Direction::DeviceToHost),
            ];
            // SAFETY: the default stream; buffers outlive the sync.
            match unsafe { memcpy_batch_async(&api, &copies, 0, 0) } {
                Err((2, Error::Vendor { code, .. })) => {
                    assert_eq!(code, ACL_ERROR_RT_PARAM_INVALID, "{path}")
                }
                other => panic!("{path}: expected copy 2 to fail, got {other:?}"),
            }
            sync(&api);
            let mut back = vec![0u8; 128];
            // SAFETY: `a` holds at least 128 bytes; `back` is 128 bytes.
            let code = unsafe {
                (api.aclrtMemcpy)(
                    back.as_mut_ptr().cast(),
                    128,
                    as_ptr(a),
                    128,
                    ACL_MEMCPY_DEVICE_TO_HOST,
                )
            };
            assert_eq!(code, ACL_SUCCESS);
            assert_eq!(back, vec![3u8; 128], "{path}: copy 0 ran");
            assert!(host_out.iter().all(|&x| x == 0), "{path}: copy 3 did not");
            free(&api, a);
        }
    }
}
