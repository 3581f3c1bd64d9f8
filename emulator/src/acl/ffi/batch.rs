//! Entry point of the batched copy (safe layer: `batch`): `aclrtMemcpyBatchAsync`.

use std::ptr;

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::batch::{self, Copy, Descriptor};
use crate::acl::errors::AclResult;
use crate::acl::memory;

use super::{non_null, run};

/// `aclrtMemcpyBatchAsync`: `numBatches` copies, each host to device or device to host,
/// on `stream` (NULL: the default stream), checked as the ACL wrapper and the runtime
/// check them (see `batch`): NULL arrays, a zero count, `destMaxs[i] < sizes[i]` or
/// non-zero reserved attribute bytes are 100000 with `*failIndex` untouched; bad attribute
/// indexes 107000 with `*failIndex = SIZE_MAX`; the first failing descriptor stops the
/// batch with `*failIndex` = its index, the copies before it enqueued.
///
/// # Safety
///
/// Non-NULL `dsts`, `destMaxs`, `srcs` and `sizes` hold `numBatches` elements, `attrs`
/// and `attrsIndexes` hold `numAttrs`, `failIndex` is writable; host operands are valid for
/// their sizes until the stream has run the copies. Device operands and the stream are
/// checked.
pub unsafe extern "C" fn aclrtMemcpyBatchAsync(
    dsts: *mut *mut c_void,
    destMaxs: *mut usize,
    srcs: *mut *mut c_void,
    sizes: *mut usize,
    numBatches: usize,
    attrs: *mut aclrtMemcpyBatchAttr,
    attrsIndexes: *mut usize,
    numAttrs: usize,
    failIndex: *mut usize,
    stream: aclrtStream,
) -> aclError {
    run("aclrtMemcpyBatchAsync", || {
        // The wrapper checks failIndex first, then the arrays in parameter order.
        let fail_out = non_null(failIndex, "failIndex")?;
        let dsts = non_null(dsts, "dsts")?;
        let dest_maxs = non_null(destMaxs, "destMaxs")?;
        let srcs = non_null(srcs, "srcs")?;
        let sizes = non_null(sizes, "sizes")?;
        let attrs = non_null(attrs, "attrs")?;
        let indexes = non_null(attrsIndexes, "attrsIndexes")?;
        // SAFETY: every array is non-NULL (checked) and holds `numBatches` (descriptors)
        // or `numAttrs` (attributes) elements, the caller's contract.
        let (descriptors, attrs, indexes) = unsafe {
            let descriptors: Vec<Descriptor> = (0..numBatches)
                .map(|i| Descriptor {
                    dst: dsts.add(i).read().expose_provenance(),
                    dest_max: dest_maxs.add(i).read(),
                    src: srcs.add(i).read().expose_provenance(),
                    len: sizes.add(i).read(),
                })
                .collect();
            let attrs = std::slice::from_raw_parts(attrs.as_ptr(), numAttrs).to_vec();
            let indexes = std::slice::from_raw_parts(indexes.as_ptr(), numAttrs).to_vec();
            (descriptors, attrs, indexes)
        };
        batch::check_wrapper(numBatches, &descriptors, &attrs)?;
        let planned = batch::plan(stream.addr(), &descriptors, &attrs, &indexes)?;
        if let Some((Some(index), _)) = &planned.failed {
            // SAFETY: non-NULL (checked) and writable (the caller's contract).
            unsafe { fail_out.write(*index) };
        }
        batch::submit(stream.addr(), planned.copies, run_copy)?;
        match planned.failed {
            Some((_, failure)) => Err(failure),
            None => Ok(()),
        }
    })
}

/// Runs one copy of a batch on its stream: checked again (memory freed or revoked since
/// the call fails it), then copied.
fn run_copy(c: &Copy) -> AclResult<()> {
    let d = c.descriptor;
    let _mapped = memory::check_copy(d.dst, d.dest_max, d.src, d.len, c.kind, true)?;
    // SAFETY: device operands lie inside live mappings of this process (checked again and
    // kept mapped by `_mapped`), host operands are valid for `len` bytes until the stream
    // ran the copy (the caller's contract); `copy` allows overlap. The addresses were
    // exposed by the caller's pointers.
    unsafe {
        ptr::copy(
            ptr::with_exposed_provenance::<u8>(d.src),
            ptr::with_exposed_provenance_mut::<u8>(d.dst),
            d.len,
        )
    };
    Ok(())
}
