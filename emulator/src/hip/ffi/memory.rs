//! Entry points of device memory (safe layer: `memory`): `hipMalloc` / `hipFree`, the
//! synchronous and asynchronous copies, the fill, address ranges and pointer attributes.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::types::*;

use crate::hip::errors::{HipResult, call};
use crate::hip::{memory, rules, stream};

use super::non_null;

/// `hipError_t hipMalloc(void** ptr, size_t size)`: shared device memory on the current
/// device, charged to `DEVIPC_EMU_MEM_LIMIT` (`hipErrorOutOfMemory` over it); size 0
/// writes NULL and succeeds.
///
/// # Safety
/// `ptr` must be NULL or valid for writing one pointer.
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t {
    call("hipMalloc", || {
        let out = non_null(ptr, "ptr")?;
        let base = memory::malloc(size)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipFree(void* ptr)`: frees a `hipMalloc` allocation of this process (NULL
/// is a no-op). Processes that opened its IPC handle keep the memory until they close.
///
/// # Safety
/// None: the pointer is looked up, never dereferenced. The caller must not use the
/// memory afterwards.
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> hipError_t {
    call("hipFree", || memory::free(ptr as usize))
}

/// `hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind
/// kind)`: a synchronous copy. Operands the kind puts on the device (for
/// `hipMemcpyDefault`: operands inside device memory) must lie wholly inside device
/// memory of this process, else `hipErrorInvalidValue`; an unknown kind is
/// `hipErrorInvalidMemcpyDirection`. The copy is null-stream work the caller waits for,
/// so it comes after the work pending on the device's streams (see the stream module).
///
/// # Safety
/// Host operands must be valid for reading (`src`) or writing (`dst`) `size_bytes`
/// bytes, as in C; device operands are checked.
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    size_bytes: usize,
    kind: hipMemcpyKind,
) -> hipError_t {
    // SAFETY: the caller's contract, passed on.
    call("hipMemcpy", || unsafe {
        memcpy_sync(dst, src, size_bytes, kind)
    })
}

/// `hipMemcpy`'s work: plans the copy and runs it as null-stream work the caller waits
/// for.
///
/// # Safety
/// As `hipMemcpy`: host operands valid for `size_bytes` bytes.
unsafe fn memcpy_sync(
    dst: *mut c_void,
    src: *const c_void,
    size_bytes: usize,
    kind: hipMemcpyKind,
) -> HipResult<()> {
    let Some(plan) = memory::plan_memcpy(dst as usize, src as usize, size_bytes, kind)? else {
        return Ok(());
    };
    let job = CopyJob(plan);
    let null = stream::resolve(0)?;
    stream::run_synchronous(
        &null,
        Box::new(move || {
            // SAFETY: device operands lie inside mappings of this process kept by the
            // plan (and checked live again by `run`); host operands are valid for `len`
            // bytes by the caller's contract, and the caller waits for this copy.
            unsafe { job.run() }
        }),
    )
}

/// `hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t sizeBytes)`:
/// `hipMemcpy(dst, src, sizeBytes, hipMemcpyHostToDevice)`, as in CLR
/// (`hip.mem.htod-dtoh-are-directed-copies`).
///
/// # Safety
/// `src` must be valid for reading `size_bytes` bytes; `dst` is checked to lie inside
/// device memory of this process.
pub unsafe extern "C" fn hipMemcpyHtoD(
    dst: hipDeviceptr_t,
    src: *mut c_void,
    size_bytes: usize,
) -> hipError_t {
    // SAFETY: the caller's contract, passed on.
    call("hipMemcpyHtoD", || unsafe {
        directed_copy(dst, src, size_bytes, devipc_hip_sys::hipMemcpyHostToDevice)
    })
}

/// `hipMemcpyHtoD` / `hipMemcpyDtoH`: `hipMemcpy` with the kind fixed; with
/// `hip.mem.htod-dtoh-are-directed-copies` switched off, the operands are checked and
/// nothing is copied.
///
/// # Safety
/// As `hipMemcpy`: host operands valid for `size_bytes` bytes.
unsafe fn directed_copy(
    dst: *mut c_void,
    src: *const c_void,
    size_bytes: usize,
    kind: hipMemcpyKind,
) -> HipResult<()> {
    if !rules::enforced(rules::MEM_HTOD_DTOH_ARE_DIRECTED_COPIES) {
        return memory::plan_memcpy(dst as usize, src as usize, size_bytes, kind).map(drop);
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { memcpy_sync(dst, src, size_bytes, kind) }
}

/// `hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t sizeBytes)`:
/// `hipMemcpy(dst, src, sizeBytes, hipMemcpyDeviceToHost)`, as in CLR
/// (`hip.mem.htod-dtoh-are-directed-copies`).
///
/// # Safety
/// `dst` must be valid for writing `size_bytes` bytes; `src` is checked to lie inside
/// device memory of this process.
pub unsafe extern "C" fn hipMemcpyDtoH(
    dst: *mut c_void,
    src: hipDeviceptr_t,
    size_bytes: usize,
) -> hipError_t {
    // SAFETY: the caller's contract, passed on.
    call("hipMemcpyDtoH", || unsafe {
        directed_copy(dst, src, size_bytes, devipc_hip_sys::hipMemcpyDeviceToHost)
    })
}

/// Raw operands of a planned copy, moved to the thread that runs it.
struct CopyJob(memory::CopyPlan);

impl CopyJob {
    /// Copies the bytes, unless a device operand was revoked since the copy was checked
    /// (its exporter freed it: the device would fault; the error is the copy's).
    ///
    /// # Safety
    /// The host operands of the plan must still be valid for `len` bytes (the caller of
    /// `hipMemcpy` / `hipMemcpyAsync` promised so until the copy runs); the device
    /// operands are kept mapped by the plan itself.
    unsafe fn run(self) -> HipResult<()> {
        let plan = self.0;
        let _pins = plan.pin_live()?;
        // SAFETY: the caller's contract above; `copy` allows overlap.
        unsafe { std::ptr::copy(plan.src as *const u8, plan.dst as *mut u8, plan.len) };
        Ok(())
    }
}

/// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind
/// kind, hipStream_t stream)`: validated like `hipMemcpy` when called (an unknown stream
/// is `hipErrorInvalidHandle`), run when `stream` reaches it: at once on an idle stream,
/// else in order on the stream's worker. A failure of the copy itself surfaces at the
/// next synchronisation of the stream.
///
/// # Safety
/// Host operands must be valid for reading (`src`) or writing (`dst`) `size_bytes` bytes
/// until the copy has run (after `hipStreamSynchronize`), as in C; device operands are
/// checked.
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    size_bytes: usize,
    kind: hipMemcpyKind,
    stream: hipStream_t,
) -> hipError_t {
    call("hipMemcpyAsync", || {
        let plan = memory::plan_memcpy(dst as usize, src as usize, size_bytes, kind)?;
        let job = plan.map(CopyJob);
        stream::submit_work(
            stream as usize,
            Box::new(move || match job {
                // SAFETY: the caller of hipMemcpyAsync keeps its host operands valid
                // until the stream has run the copy (this function's contract).
                Some(job) => unsafe { job.run() },
                None => Ok(()),
            }),
        )
    })
}

/// `hipError_t hipMemset(void* dst, int value, size_t sizeBytes)`: fills device memory of
/// this process with the low byte of `value`.
///
/// # Safety
/// None: `dst` is checked to lie inside device memory of this process.
pub unsafe extern "C" fn hipMemset(
    dst: *mut c_void,
    value: c_int,
    size_bytes: usize,
) -> hipError_t {
    call("hipMemset", || {
        // Arguments are checked by the call; the fill is null-stream work it waits for.
        memory::check_memset(dst as usize, size_bytes)?;
        let null = stream::resolve(0)?;
        let dst = dst as usize;
        stream::run_synchronous(
            &null,
            Box::new(move || memory::memset(dst, value, size_bytes)),
        )
    })
}

/// `hipError_t hipMemGetAddressRange(hipDeviceptr_t* pbase, size_t* psize,
/// hipDeviceptr_t dptr)`: base and size of the allocation (or IPC mapping) holding
/// `dptr`; an unknown pointer is `hipErrorNotFound`, as CLR 6.2 returns.
///
/// # Safety
/// `pbase` and `psize` must each be NULL or valid for writing one value.
pub unsafe extern "C" fn hipMemGetAddressRange(
    pbase: *mut hipDeviceptr_t,
    psize: *mut usize,
    dptr: hipDeviceptr_t,
) -> hipError_t {
    call("hipMemGetAddressRange", || {
        let out_base = non_null(pbase, "pbase")?;
        let out_size = non_null(psize, "psize")?;
        let (base, size) = memory::address_range(dptr as usize)?;
        // SAFETY: both non-null (checked) and valid for writes (the caller's contract).
        unsafe {
            out_base.write(base as hipDeviceptr_t);
            out_size.write(size);
        }
        Ok(())
    })
}

/// `hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void*
/// ptr)`: the memory type (numbered as the emulated version numbers it), device and
/// addresses of `ptr`; unknown memory is `hipErrorInvalidValue` before ROCm 6.0 and
/// `hipMemoryTypeUnregistered` from 6.0 (see `memory::pointer_attributes`).
///
/// # Safety
/// `attributes` must be NULL or valid for writing one `hipPointerAttribute_t`; `ptr` is
/// looked up, never dereferenced.
pub unsafe extern "C" fn hipPointerGetAttributes(
    attributes: *mut hipPointerAttribute_t,
    ptr: *const c_void,
) -> hipError_t {
    call("hipPointerGetAttributes", || {
        let out = non_null(attributes, "attributes")?;
        let attrs = memory::pointer_attributes(ptr as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(attrs) };
        Ok(())
    })
}
