//! Entry point of the batched copy (safe layer: `batch`): `hipMemcpyBatchAsync`.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::batch::{self, Descriptor};
use crate::hip::errors::{HipResult, call};
use crate::hip::memory::CopyPlan;

/// `hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes, size_t count,
/// hipMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, size_t* failIdx,
/// hipStream_t stream)` (HIP 7.1): the `count` descriptors checked in order as
/// `hipMemcpyAsync(dsts[i], srcs[i], sizes[i], hipMemcpyDefault, stream)` (zero bytes
/// fail), the ones before the first failure enqueued on `stream` as one operation;
/// `*failIdx` is `SIZE_MAX`, or the failing index. An unknown stream is
/// `hipErrorInvalidHandle`; NULL arrays or `count == 0` `hipErrorInvalidValue`;
/// `numAttrs > 0` `hipErrorNotSupported` (see `batch`). Below HIP 7.1
/// `hipErrorNotSupported` (the in-process table has no such field there).
///
/// # Safety
/// Non-NULL `dsts`, `srcs` and `sizes` hold `count` elements, a non-NULL `failIdx` is
/// writable; host operands are valid for their sizes until the stream has run the copies,
/// as for `hipMemcpyAsync`. Device operands are checked; `attrs` and `attrsIdxs` are never
/// read.
pub unsafe extern "C" fn hipMemcpyBatchAsync(
    dsts: *mut *mut c_void,
    srcs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
    attrs: *mut hipMemcpyAttributes,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    fail_idx: *mut usize,
    stream: hipStream_t,
) -> hipError_t {
    // CLR reads neither when numAttrs is 0 and refuses any other value.
    let _ = (attrs, attrs_idxs);
    call("hipMemcpyBatchAsync", || {
        let arrays = !(dsts.is_null() || srcs.is_null() || sizes.is_null() || fail_idx.is_null());
        batch::check_call(stream as usize, arrays, count, num_attrs)?;
        let descriptors: Vec<Descriptor> = (0..count)
            .map(|i| {
                // SAFETY: the three arrays are non-NULL (checked) and hold `count`
                // elements (the caller's contract); `i < count`.
                unsafe {
                    Descriptor {
                        dst: (*dsts.add(i)) as usize,
                        src: (*srcs.add(i)) as usize,
                        len: *sizes.add(i),
                    }
                }
            })
            .collect();
        let planned = batch::plan(&descriptors);
        if let Some(index) = planned.fail_index() {
            // SAFETY: non-NULL (checked) and writable (the caller's contract).
            unsafe { fail_idx.write(index) };
        }
        batch::submit(stream as usize, planned.copies, run_copy)?;
        match planned.failed {
            Some((_, failure)) => Err(failure),
            None => Ok(()),
        }
    })
}

/// Runs one planned copy, unless a device operand was revoked since it was checked.
fn run_copy(plan: CopyPlan) -> HipResult<()> {
    let _pins = plan.pin_live()?;
    // SAFETY: device operands lie inside mappings kept by the plan and pinned live above;
    // host operands are valid for `len` bytes until the stream ran the copy, by the
    // contract of hipMemcpyBatchAsync; `copy` allows overlap.
    unsafe { std::ptr::copy(plan.src as *const u8, plan.dst as *mut u8, plan.len) };
    Ok(())
}
