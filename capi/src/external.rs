//! Framework memory: exporting device memory the framework allocated itself
//! (`aclrtMalloc`, `hipMalloc`), and ending those exports; plus, for tests and examples
//! without a framework, memory made the way a framework's allocator makes it.

use safe::{DeviceId, DevicePtr};

use crate::boundary::call;
use crate::handle;
use crate::options::{devipc_export_options, export_options};
use crate::runtime::{devipc_runtime, runtime};
use crate::status::devipc_status;
use crate::token::devipc_mem_token;

/// Exports `len` bytes at the device address `ptr` on `device`, memory the framework
/// allocated itself, and stores the token's handle in `*out`. The memory must stay
/// allocated while peers use it; end the exports with `devipc_runtime_close_external`
/// before the framework frees it.
///
/// # Safety
/// `opts` is NULL or a `devipc_export_options` with its `struct_size` set; `out` is
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_export_external(
    rt: *const devipc_runtime,
    device: u32,
    ptr: u64,
    len: usize,
    opts: *const devipc_export_options,
    out: *mut *mut devipc_mem_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let rt = runtime(rt)?;
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { export_options(opts) }?;
        out.set(rt.export_external(DeviceId(device), DevicePtr(ptr), len, opts)?)
    })
}

/// Ends the exports of the framework block holding `ptr` on `device`: call it after every
/// importer closed and before the framework frees the block.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_runtime_close_external(
    rt: *const devipc_runtime,
    device: u32,
    ptr: u64,
) -> devipc_status {
    call(|| Ok(runtime(rt)?.close_external(DeviceId(device), DevicePtr(ptr))?))
}

/// Test aid: `size` bytes on `device` as the framework's allocator makes them
/// (`hipMalloc`, `aclrtMalloc`), outside devipc's bookkeeping, for trying
/// `devipc_runtime_export_external` without a framework. Stores the device address in
/// `*ptr`; free it with `devipc_testing_framework_free`.
///
/// # Safety
/// `ptr` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_testing_framework_malloc(
    rt: *const devipc_runtime,
    device: u32,
    size: usize,
    ptr: *mut u64,
) -> devipc_status {
    call(|| {
        let rt = runtime(rt)?;
        let block = safe::testing::framework_malloc(&rt, DeviceId(device), size)?;
        // SAFETY: the caller's guarantee for `ptr`.
        let stored = unsafe { crate::ffi::put(ptr, "ptr", block.0) };
        if stored.is_err() {
            // SAFETY: just allocated by framework_malloc of `rt` on `device`; nothing
            // else saw it.
            let _ = unsafe { safe::testing::framework_free(&rt, DeviceId(device), block) };
        }
        stored
    })
}

/// Frees what `devipc_testing_framework_malloc` returned, after ending its external
/// exports; refused (`DEVIPC_ERR_INVALID_ARGUMENT`) while an importer still maps it.
///
/// # Safety
/// `ptr` came from `devipc_testing_framework_malloc` of this runtime on `device` and is
/// not freed yet; no import of it remains open in this process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_testing_framework_free(
    rt: *const devipc_runtime,
    device: u32,
    ptr: u64,
) -> devipc_status {
    call(|| {
        let rt = runtime(rt)?;
        // SAFETY: the caller's guarantee, passed on.
        Ok(unsafe { safe::testing::framework_free(&rt, DeviceId(device), DevicePtr(ptr)) }?)
    })
}
