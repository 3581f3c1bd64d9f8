//! The HIP C ABI: one `pub unsafe extern "C" fn` per function of
//! [`devipc_hip_sys::for_each_hip_fn!`], with exactly the list's signature, and
//! [`hip_api`], the [`HipApi`] table made of them.
//!
//! This file is the only `unsafe` of the HIP surface: each function checks its pointer
//! arguments for NULL (`hipErrorInvalidValue`), calls the safe logic of the other
//! modules through [`call`] (which records the last error and never lets a panic
//! unwind into C), and only then reads or writes through the caller's pointers. The
//! functions are plain Rust items, not `#[no_mangle]`: the vendor names stay out of the
//! process's dynamic symbol table. The `cdylib` re-exports them under the vendor names
//! with [`devipc_hip_sys::hip_export_c_abi!`]. The virtual-memory functions (`hipMem*`
//! of the VMM family, `hipPointerGetAttribute`) are in `vmm_shims.rs`.
#![allow(unsafe_code, non_snake_case)]

use devipc_hip_sys::HipApi;
use devipc_hip_sys::types::*;

use std::ffi::CStr;
use std::sync::OnceLock;

use devipc_hip_sys::{
    HIP_GET_PROC_ADDRESS_SUCCESS, HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, hipErrorInvalidHandle,
    hipErrorNotSupported,
};

mod vmm_shims;

pub use vmm_shims::*;

use super::errors::{self, Failure, HipResult, call};
use super::{event, host, ipc_mem, memory, peer, runtime, stream, versions};
use crate::config::HipVersion;

/// `p`, or `hipErrorInvalidValue` naming the parameter when it is NULL.
fn non_null<T>(p: *mut T, name: &str) -> HipResult<*mut T> {
    if p.is_null() {
        Err(Failure::invalid_value(format!("{name} is NULL")))
    } else {
        Ok(p)
    }
}

/// The version whose names and descriptions the error strings follow.
fn text_version() -> HipVersion {
    runtime::config().map_or(HipVersion::DEFAULT, |c| c.hip_version)
}

/// Builds the [`HipApi`] of the emulator: every field is the function of the same name in
/// [`crate::hip`], `LibrarySource::Emulated` (devipc-core) as its source. No library is loaded and no symbol is exported.
///
/// The optional functions follow the emulated version: `hipGetProcAddress` is `None`
/// below ROCm 6.2, as it is for a real 5.2 library (the exported C symbol of the cdylib
/// exists regardless and answers `hipErrorNotSupported` there); the VMM family and
/// `hipPointerGetAttribute` are `None` below ROCm 5.1.
pub fn hip_api() -> HipApi {
    // SAFETY: every function of crate::hip implements the HIP runtime C function of its
    // name with the table's exact prototype (a mismatch would not compile): out-pointers
    // are written only on success and only after a NULL check, handles are passed by
    // value, and no function unwinds.
    let mut api = unsafe { devipc_hip_sys::hip_api_from_module!(crate::hip) };
    let version = text_version();
    if !versions::has_get_proc_address(version) {
        api.hipGetProcAddress = None;
    }
    if !versions::has_vmm(version) {
        // ROCm 5.1 (VMM) and 5.0 (hipPointerGetAttribute) added these symbols.
        api.hipMemGetAllocationGranularity = None;
        api.hipMemCreate = None;
        api.hipMemRelease = None;
        api.hipMemAddressReserve = None;
        api.hipMemAddressFree = None;
        api.hipMemMap = None;
        api.hipMemUnmap = None;
        api.hipMemSetAccess = None;
        api.hipMemGetAccess = None;
        api.hipMemExportToShareableHandle = None;
        api.hipMemImportFromShareableHandle = None;
        api.hipMemRetainAllocationHandle = None;
        api.hipMemGetAllocationPropertiesFromHandle = None;
        api.hipPointerGetAttribute = None;
    }
    api
}

/// `hipError_t hipInit(unsigned int flags)`: initialises the emulator (optional, as in
/// HIP). `flags != 0` is `hipErrorInvalidValue`; no device is `hipErrorInvalidDevice`.
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipInit(flags: c_uint) -> hipError_t {
    call("hipInit", || runtime::init(flags))
}

/// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)`: writes
/// `DEVIPC_EMU_HIP_VERSION` encoded as `HIP_VERSION` (default 60200000).
///
/// # Safety
/// `runtime_version` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> hipError_t {
    call("hipRuntimeGetVersion", || {
        let out = non_null(runtime_version, "runtimeVersion")?;
        let v = runtime::version()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// `hipError_t hipDriverGetVersion(int* driverVersion)`: the same number as
/// `hipRuntimeGetVersion`.
///
/// # Safety
/// `driver_version` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDriverGetVersion(driver_version: *mut c_int) -> hipError_t {
    call("hipDriverGetVersion", || {
        let out = non_null(driver_version, "driverVersion")?;
        let v = runtime::version()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// `hipError_t hipGetDeviceCount(int* count)`: writes `DEVIPC_EMU_DEVICES`; with no
/// device writes 0 and returns `hipErrorNoDevice`.
///
/// # Safety
/// `count` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    call("hipGetDeviceCount", || {
        let out = non_null(count, "count")?;
        let n = runtime::device_count()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(n) };
        if n == 0 {
            return Err(runtime::no_device());
        }
        Ok(())
    })
}

/// `hipError_t hipSetDevice(int deviceId)`: the calling thread's device;
/// `hipErrorInvalidDevice` outside `0..DEVIPC_EMU_DEVICES`.
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipSetDevice(device_id: c_int) -> hipError_t {
    call("hipSetDevice", || runtime::set_device(device_id))
}

/// `hipError_t hipGetDevice(int* deviceId)`: the calling thread's device (0 until
/// `hipSetDevice`).
///
/// # Safety
/// `device_id` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipGetDevice(device_id: *mut c_int) -> hipError_t {
    call("hipGetDevice", || {
        let out = non_null(device_id, "deviceId")?;
        let d = runtime::get_device()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `hipError_t hipDeviceSynchronize(void)`: waits for this process's streams of the
/// current device (only held streams ever have pending work).
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipDeviceSynchronize() -> hipError_t {
    call("hipDeviceSynchronize", runtime::device_synchronize)
}

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
    call("hipMemcpy", || {
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

/// `hipError_t hipStreamCreate(hipStream_t* stream)`: a stream on the current device.
///
/// # Safety
/// `stream` must be NULL or valid for writing one `hipStream_t`.
pub unsafe extern "C" fn hipStreamCreate(stream: *mut hipStream_t) -> hipError_t {
    call("hipStreamCreate", || {
        let out = non_null(stream, "stream")?;
        let s = stream::create()?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(s as hipStream_t) };
        Ok(())
    })
}

/// `hipError_t hipStreamDestroy(hipStream_t stream)`: `hipErrorInvalidHandle` for NULL or
/// a stream not created in this process.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    call("hipStreamDestroy", || stream::destroy(stream as usize))
}

/// `hipError_t hipStreamSynchronize(hipStream_t stream)`: NULL is the null stream.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    call("hipStreamSynchronize", || {
        stream::synchronize(stream as usize)
    })
}

/// `hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr)`: a handle
/// naming the whole allocation that contains `devPtr` (interior pointers included; the
/// offset is recorded in the handle).
///
/// # Safety
/// `handle` must be NULL or valid for writing one `hipIpcMemHandle_t`; `dev_ptr` is
/// looked up, never dereferenced.
pub unsafe extern "C" fn hipIpcGetMemHandle(
    handle: *mut hipIpcMemHandle_t,
    dev_ptr: *mut c_void,
) -> hipError_t {
    call("hipIpcGetMemHandle", || {
        let out = non_null(handle, "handle")?;
        let bytes = ipc_mem::get_handle(dev_ptr as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(hipIpcMemHandle_t::from_bytes(bytes)) };
        Ok(())
    })
}

/// `hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int
/// flags)`: maps the exported allocation and writes its *base*. `flags` must equal the
/// emulated version's `hipIpcMemLazyEnablePeerAccess`; see [`super::rules`] for every
/// refusal.
///
/// # Safety
/// `dev_ptr` must be NULL or valid for writing one pointer.
pub unsafe extern "C" fn hipIpcOpenMemHandle(
    dev_ptr: *mut *mut c_void,
    handle: hipIpcMemHandle_t,
    flags: c_uint,
) -> hipError_t {
    call("hipIpcOpenMemHandle", || {
        let out = non_null(dev_ptr, "devPtr")?;
        let base = ipc_mem::open(&handle.to_bytes(), flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipIpcCloseMemHandle(void* devPtr)`: one close per open; the mapping goes
/// with the last. It first waits for the current device's null stream, and so by the
/// legacy rule for the work pending on its other streams (CLR:
/// `hip::getNullStream()->finish()` before anything else), so no queued copy still uses
/// the mapping.
///
/// # Safety
/// None: the pointer is looked up, never dereferenced. The caller must not use the
/// memory after its last close.
pub unsafe extern "C" fn hipIpcCloseMemHandle(dev_ptr: *mut c_void) -> hipError_t {
    call("hipIpcCloseMemHandle", || {
        stream::finish_null_stream()?;
        ipc_mem::close(dev_ptr as usize)
    })
}

/// `hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags)`: IPC events
/// need `hipEventInterprocess | hipEventDisableTiming`.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipEventCreateWithFlags(
    event: *mut hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    call("hipEventCreateWithFlags", || {
        let out = non_null(event, "event")?;
        let e = event::create(flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}

/// `hipError_t hipEventDestroy(hipEvent_t event)`.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventDestroy(event: hipEvent_t) -> hipError_t {
    call("hipEventDestroy", || event::destroy(event as usize))
}

/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)`: the record
/// completes when the stream reaches it (at once on an idle stream).
///
/// # Safety
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t {
    call("hipEventRecord", || {
        event::record(event as usize, stream as usize)
    })
}

/// `hipError_t hipEventSynchronize(hipEvent_t event)`: waits for the latest record;
/// returns at once for an event never recorded.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventSynchronize(event: hipEvent_t) -> hipError_t {
    call("hipEventSynchronize", || event::synchronize(event as usize))
}

/// `hipError_t hipEventQuery(hipEvent_t event)`: `hipSuccess` when the latest record
/// completed (or none was made), `hipErrorNotReady` while it is pending.
///
/// # Safety
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn hipEventQuery(event: hipEvent_t) -> hipError_t {
    call("hipEventQuery", || event::query(event as usize))
}

/// `hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int
/// flags)`: `flags` must be 0.
///
/// # Safety
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn hipStreamWaitEvent(
    stream: hipStream_t,
    event: hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    call("hipStreamWaitEvent", || {
        event::stream_wait(stream as usize, event as usize, flags)
    })
}

/// `hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event)`:
/// `hipErrorInvalidConfiguration` for an event without `hipEventInterprocess`.
///
/// # Safety
/// `handle` must be NULL or valid for writing one `hipIpcEventHandle_t`.
pub unsafe extern "C" fn hipIpcGetEventHandle(
    handle: *mut hipIpcEventHandle_t,
    event: hipEvent_t,
) -> hipError_t {
    call("hipIpcGetEventHandle", || {
        let out = non_null(handle, "handle")?;
        if event.is_null() {
            return Err(Failure::invalid_value("event is NULL"));
        }
        let bytes = event::get_handle(event as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(hipIpcEventHandle_t::from_bytes(bytes)) };
        Ok(())
    })
}

/// `hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle)`: a
/// new event of this process on the exported event; `hipErrorInvalidContext` in the
/// exporting process.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipIpcOpenEventHandle(
    event: *mut hipEvent_t,
    handle: hipIpcEventHandle_t,
) -> hipError_t {
    call("hipIpcOpenEventHandle", || {
        let out = non_null(event, "event")?;
        let e = event::open(&handle.to_bytes())?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}

/// `hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int
/// peerDeviceId)`: 1 for distinct devices, 0 for the same device.
///
/// # Safety
/// `can_access_peer` must be NULL or valid for writing one `int`.
pub unsafe extern "C" fn hipDeviceCanAccessPeer(
    can_access_peer: *mut c_int,
    device_id: c_int,
    peer_device_id: c_int,
) -> hipError_t {
    call("hipDeviceCanAccessPeer", || {
        let out = non_null(can_access_peer, "canAccessPeer")?;
        let can = peer::can_access(device_id, peer_device_id)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(can) };
        Ok(())
    })
}

/// `hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags)`: from the
/// current device, once per process and pair (`hipErrorPeerAccessAlreadyEnabled` after).
///
/// # Safety
/// None beyond the C contract: takes no pointers.
pub unsafe extern "C" fn hipDeviceEnablePeerAccess(
    peer_device_id: c_int,
    flags: c_uint,
) -> hipError_t {
    call("hipDeviceEnablePeerAccess", || {
        peer::enable(peer_device_id, flags)
    })
}

/// `const char* hipGetErrorName(hipError_t hip_error)`: the canonical name as the
/// emulated version spells it (`hipErrorUnknown` for codes it does not define). The
/// string is static.
///
/// # Safety
/// None: takes no pointers; the result is never NULL and lives as long as the process.
pub unsafe extern "C" fn hipGetErrorName(hip_error: hipError_t) -> *const c_char {
    std::panic::catch_unwind(|| errors::error_name_c(hip_error, text_version()))
        .unwrap_or(c"hipErrorUnknown")
        .as_ptr()
}

/// `const char* hipGetErrorString(hipError_t hipError)`: right after a call on this thread
/// failed with `hip_error`, the description plus what went wrong and the violated rule;
/// otherwise the static description (the name on ROCm 5.x). See [`super::errors`]. The
/// string lives as long as the process.
///
/// # Safety
/// None: takes no pointers; the result is never NULL and lives as long as the process.
pub unsafe extern "C" fn hipGetErrorString(hip_error: hipError_t) -> *const c_char {
    std::panic::catch_unwind(|| errors::error_string_c(hip_error, text_version()))
        .unwrap_or(c"unknown error")
        .as_ptr()
}

/// `hipError_t hipEventCreate(hipEvent_t* event)`: `hipEventCreateWithFlags(event, 0)`.
///
/// # Safety
/// `event` must be NULL or valid for writing one `hipEvent_t`.
pub unsafe extern "C" fn hipEventCreate(event: *mut hipEvent_t) -> hipError_t {
    call("hipEventCreate", || {
        let out = non_null(event, "event")?;
        let e = event::create(0)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(e as hipEvent_t) };
        Ok(())
    })
}

/// `hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop)`: the
/// milliseconds between the completion of `start`'s and `stop`'s latest records. NULL
/// events are `hipErrorInvalidHandle`, a NULL `ms` `hipErrorInvalidValue`; see
/// `event::elapsed_time` for the rest.
///
/// # Safety
/// `ms` must be NULL or valid for writing one `float`.
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: hipEvent_t,
    stop: hipEvent_t,
) -> hipError_t {
    call("hipEventElapsedTime", || {
        if start.is_null() || stop.is_null() {
            return Err(Failure::new(hipErrorInvalidHandle, "NULL event"));
        }
        let out = non_null(ms, "ms")?;
        let t = event::elapsed_time(start as usize, stop as usize)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(t) };
        Ok(())
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
        plan.check_live()?;
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

/// `hipError_t hipCtxCreate(hipCtx_t* ctx, unsigned int flags, hipDevice_t device)`: the
/// device's primary context, made the calling thread's current device; a device out of
/// range is `hipErrorInvalidValue` (CLR).
///
/// # Safety
/// `ctx` must be NULL or valid for writing one `hipCtx_t`.
pub unsafe extern "C" fn hipCtxCreate(
    ctx: *mut hipCtx_t,
    flags: c_uint,
    device: hipDevice_t,
) -> hipError_t {
    call("hipCtxCreate", || {
        let out = non_null(ctx, "ctx")?;
        let c = runtime::ctx_create(flags, device)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(c as hipCtx_t) };
        Ok(())
    })
}

/// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`: zeroed,
/// page-aligned host memory the emulated devices reach (see `host`); unknown flags or
/// `Coherent | NonCoherent` are `hipErrorInvalidValue`; size 0 writes NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for writing one pointer.
pub unsafe extern "C" fn hipHostMalloc(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    call("hipHostMalloc", || {
        let out = non_null(ptr, "ptr")?;
        let base = host::malloc(size, flags)?;
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(base as *mut c_void) };
        Ok(())
    })
}

/// `hipError_t hipHostFree(void* ptr)`: frees `hipHostMalloc` memory (NULL is a no-op).
///
/// # Safety
/// None: the pointer is looked up, never dereferenced. The caller must not use the
/// memory afterwards.
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> hipError_t {
    call("hipHostFree", || host::free(ptr as usize))
}

/// Collects `(name, address)` of every function of the list (a `for_each_hip_fn!`
/// callback), for `hipGetProcAddress`.
macro_rules! proc_addresses {
    (
        []
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        vec![
            $( (stringify!($rname), $rname as unsafe extern "C" fn($($rty),*) -> $rret as usize), )*
            $( (stringify!($oname), $oname as unsafe extern "C" fn($($oty),*) -> $oret as usize), )*
        ]
    };
}

/// The emulator's function of a HIP name, as an address.
fn proc_address(name: &str) -> Option<usize> {
    static TABLE: OnceLock<Vec<(&'static str, usize)>> = OnceLock::new();
    TABLE
        .get_or_init(|| devipc_hip_sys::for_each_hip_fn!(proc_addresses))
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, address)| address)
}

/// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion, uint64_t
/// flags, hipDriverProcAddressQueryResult* symbolStatus)` (ROCm 6.2+): the emulator's
/// function of that name, with `symbolStatus = HIP_GET_PROC_ADDRESS_SUCCESS`. A name the
/// emulator does not implement writes NULL and `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND` and
/// returns `hipErrorInvalidValue`, as CLR does for a missing symbol; so do a NULL or empty
/// `symbol` and a NULL `pfn`. `hipVersion` (CLR uses it only to pick the `R0600` device
/// property functions, which the emulator lacks) and `flags` (ignored by 6.2) are not
/// checked. Below ROCm 6.2, where the function does not exist, `hipErrorNotSupported`
/// (the in-process table has no such field there: see [`hip_api`]).
///
/// # Safety
/// `symbol` must be NULL or a NUL-terminated string; `pfn` and `symbol_status` must each
/// be NULL or valid for writing one value.
pub unsafe extern "C" fn hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    symbol_status: *mut hipDriverProcAddressQueryResult,
) -> hipError_t {
    let _ = (hip_version, flags);
    call("hipGetProcAddress", || {
        let version = runtime::config()?.hip_version;
        if !versions::has_get_proc_address(version) {
            return Err(Failure::new(
                hipErrorNotSupported,
                format!("hipGetProcAddress first shipped in ROCm 6.2; emulating HIP {version}"),
            ));
        }
        let out = non_null(pfn, "pfn")?;
        if symbol.is_null() {
            return Err(Failure::invalid_value("symbol is NULL"));
        }
        // SAFETY: non-null (checked) and NUL-terminated (the caller's contract).
        let name = unsafe { CStr::from_ptr(symbol) }
            .to_string_lossy()
            .into_owned();
        if name.is_empty() {
            return Err(Failure::invalid_value("symbol is empty"));
        }
        let found = proc_address(&name);
        let status = if found.is_some() {
            HIP_GET_PROC_ADDRESS_SUCCESS
        } else {
            HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
        };
        // SAFETY: non-null (checked) and valid for writes (the caller's contract).
        unsafe { out.write(found.unwrap_or(0) as *mut c_void) };
        if !symbol_status.is_null() {
            // SAFETY: non-null and valid for writes (the caller's contract).
            unsafe { symbol_status.write(status) };
        }
        match found {
            Some(_) => Ok(()),
            None => Err(Failure::invalid_value(format!(
                "{name}: the emulator implements no HIP function of that name"
            ))),
        }
    })
}
