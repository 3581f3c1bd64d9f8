//! The result layer: one small function per HIP runtime call devipc makes.
//!
//! Sits between the `HipApi` function table (`devipc-hip-sys`) and the backend code
//! (`memory.rs`, `signal.rs`, `device.rs`, `backend.rs`), as cudarc's `driver/result.rs`.
//! Each function takes plain arguments, hands the runtime its out-parameters, checks the
//! status with `hip!` (so a failure is an
//! [`Error::Vendor`](devipc_core::Error::Vendor) with the api name, the code, its symbolic
//! name and the runtime's message) and returns the out-value. Each holds the only `unsafe`
//! block for its call, with the C contract in its `SAFETY:` comment.
//!
//! A function whose argument the runtime would use as a live object (a device pointer it
//! frees, copies through or exports, an event or a stream) is an `unsafe fn` whose
//! `# Safety` section says what the caller guarantees; the others (plain values, handles
//! passed by value, address lookups) are safe. Device addresses are `u64`, as in the
//! backend's records; events and streams are the runtime's pointer types.
//!
//! No function here binds a device: the caller holds a
//! [`DeviceScope`](crate::device::DeviceScope) where the call needs one.

use std::ffi::{CStr, c_int, c_uint, c_void};

use devipc_core::{BackendKind, Error, Result};
use devipc_hip_sys::{
    HipApi, hipDeviceptr_t, hipError_t, hipEvent_t, hipIpcEventHandle_t, hipIpcMemHandle_t,
    hipMemcpyDeviceToHost, hipMemcpyHostToDevice, hipStream_t, hipSuccess,
};

// --- the checked call ----------------------------------------------------------------------
//
// Every call below goes through `hip!`, which turns a non-zero `hipError_t` into
// `Error::Vendor` with the api name, the code, its symbolic name and the runtime's
// message, resolved at the moment of failure (the library may be gone when the error is
// printed).

/// Calls `api.$f(args)` and checks the status: `hip!(api, hipMalloc(&mut p, n))`.
///
/// Expands to an `unsafe` call, so it must sit inside an `unsafe` block whose `SAFETY:`
/// comment covers the call's C contract. Used only by [`crate::result`].
macro_rules! hip {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_hip_sys::HipApi = &$api;
        let code = (api.$f)($($arg),*);
        $crate::result::check(api, stringify!($f), code)
    }};
}

/// `Ok(())` for `hipSuccess`, otherwise the [`Error::Vendor`] for `code`.
pub(crate) fn check(api: &HipApi, call: &'static str, code: hipError_t) -> Result<()> {
    if code == hipSuccess {
        Ok(())
    } else {
        Err(vendor_error(api, call, code))
    }
}

/// Builds the [`Error::Vendor`] for a failed call: name from `hipGetErrorName`, falling
/// back to devipc's table for codes the runtime calls `hipErrorUnknown`; message from
/// `hipGetErrorString` (left empty when it only repeats the name, as ROCm 5.2 does).
pub(crate) fn vendor_error(api: &HipApi, call: &'static str, code: hipError_t) -> Error {
    let runtime_name = get_error_name(api, code);
    let name = match (runtime_name, devipc_hip_sys::error_name(code)) {
        (Some(n), Some(ours)) if n == "hipErrorUnknown" && code != 999 => ours.to_owned(),
        (Some(n), _) => n,
        (None, Some(ours)) => ours.to_owned(),
        (None, None) => format!("hipError({code})"),
    };
    let message = get_error_string(api, code).unwrap_or_default();
    let message = if message == name {
        String::new()
    } else {
        message
    };
    Error::Vendor {
        backend: BackendKind::Hip,
        api: call,
        code,
        name,
        message,
    }
}

// --- conversions ---------------------------------------------------------------------------

/// A device address as the `void*` the runtime takes.
fn as_ptr(addr: u64) -> *mut c_void {
    addr as usize as *mut c_void
}

/// A `void*` the runtime wrote, as a device address.
fn as_addr(ptr: *mut c_void) -> u64 {
    ptr as usize as u64
}

// --- runtime and devices -----------------------------------------------------------------

/// `hipRuntimeGetVersion`: the runtime's encoded version (works without a device).
pub(crate) fn runtime_get_version(api: &HipApi) -> Result<c_int> {
    let mut version: c_int = 0;
    // SAFETY: `version` is a valid out-pointer for the duration of the call.
    unsafe { hip!(api, hipRuntimeGetVersion(&mut version)) }?;
    Ok(version)
}

/// `hipGetDeviceCount`: how many devices the runtime sees (`hipErrorNoDevice`, or 0 on
/// some runtimes, without one).
pub(crate) fn get_device_count(api: &HipApi) -> Result<c_int> {
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid out-pointer for the duration of the call.
    unsafe { hip!(api, hipGetDeviceCount(&mut count)) }?;
    Ok(count)
}

/// `hipGetDevice`: the calling thread's current device.
pub(crate) fn get_device(api: &HipApi) -> Result<c_int> {
    let mut device: c_int = -1;
    // SAFETY: `device` is a valid out-pointer for the duration of the call.
    unsafe { hip!(api, hipGetDevice(&mut device)) }?;
    Ok(device)
}

/// `hipSetDevice`: makes `device` the calling thread's current device.
pub(crate) fn set_device(api: &HipApi, device: c_int) -> Result<()> {
    // SAFETY: a plain value argument; the runtime range-checks it.
    unsafe { hip!(api, hipSetDevice(device)) }
}

/// `hipDeviceEnablePeerAccess`: lets the current device access `peer`'s memory. `flags`
/// must be 0; an already enabled peer gives `hipErrorPeerAccessAlreadyEnabled`.
pub(crate) fn device_enable_peer_access(api: &HipApi, peer: c_int, flags: c_uint) -> Result<()> {
    // SAFETY: plain value arguments; the runtime range-checks the device and the flags.
    unsafe { hip!(api, hipDeviceEnablePeerAccess(peer, flags)) }
}

// --- memory ------------------------------------------------------------------------------

/// `hipMalloc`: `size` bytes of device memory on the current device, exportable with
/// `hipIpcGetMemHandle`. The caller frees it with [`free`]. (HIP returns success and a
/// null pointer for 0 bytes; the backend refuses 0 before calling.)
pub(crate) fn malloc(api: &HipApi, size: usize) -> Result<u64> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer for the duration of the call; `size` is a
    // plain value.
    unsafe { hip!(api, hipMalloc(&mut ptr, size)) }?;
    Ok(as_addr(ptr))
}

/// `hipFree` of an allocation.
///
/// # Safety
/// `ptr` came from [`malloc`] (on the current device), has not been freed, and is not
/// used after this call, by this process or (through an IPC mapping) any other.
pub(crate) unsafe fn free(api: &HipApi, ptr: u64) -> Result<()> {
    // SAFETY: the caller guarantees `ptr` is a live allocation freed once, here.
    unsafe { hip!(api, hipFree(as_ptr(ptr))) }
}

/// `hipMemcpy` host to device: copies `src` to device memory at `dst` (synchronous).
///
/// # Safety
/// `dst..dst + src.len()` is device memory this process allocated or mapped, and stays
/// allocated or mapped until the call returns: the runtime writes through `dst` as is.
pub(crate) unsafe fn memcpy_htod(api: &HipApi, dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: `src` is a live host slice of `src.len()` bytes; the caller guarantees the
    // device range at `dst`.
    unsafe {
        hip!(
            api,
            hipMemcpy(
                as_ptr(dst),
                src.as_ptr().cast(),
                src.len(),
                hipMemcpyHostToDevice
            )
        )
    }
}

/// `hipMemcpy` device to host: copies device memory at `src` into `dst` (synchronous).
///
/// # Safety
/// `src..src + dst.len()` is device memory this process allocated or mapped, and stays
/// allocated or mapped until the call returns: the runtime reads through `src` as is.
pub(crate) unsafe fn memcpy_dtoh(api: &HipApi, dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: `dst` is a live, exclusively borrowed host slice of `dst.len()` bytes; the
    // caller guarantees the device range at `src`.
    unsafe {
        hip!(
            api,
            hipMemcpy(
                dst.as_mut_ptr().cast(),
                as_ptr(src),
                dst.len(),
                hipMemcpyDeviceToHost
            )
        )
    }
}

/// `hipMemGetAddressRange`: the base and size of the allocation holding `ptr`.
///
/// Safe for any `ptr`: the runtime only looks the address up in its allocation table and
/// never dereferences it; an unknown address gives `hipErrorNotFound` (api-facts B.3).
pub(crate) fn mem_get_address_range(api: &HipApi, ptr: u64) -> Result<(u64, usize)> {
    let mut base: hipDeviceptr_t = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: both out-pointers are valid for the duration of the call (ROCm writes them
    // without NULL checks); `ptr` is only a lookup key (see above).
    unsafe {
        hip!(
            api,
            hipMemGetAddressRange(&mut base, &mut size, as_ptr(ptr))
        )
    }?;
    Ok((as_addr(base), size))
}

// --- IPC memory --------------------------------------------------------------------------

/// `hipIpcGetMemHandle`: the IPC handle of the allocation holding `ptr` (the handle names
/// the whole allocation even for an interior pointer, api-facts C.1).
///
/// # Safety
/// `ptr` lies in a live allocation of the current device (from [`malloc`], or one the
/// runtime reported with [`mem_get_address_range`]) that is not freed during the call.
pub(crate) unsafe fn ipc_get_mem_handle(api: &HipApi, ptr: u64) -> Result<hipIpcMemHandle_t> {
    let mut handle = hipIpcMemHandle_t::zeroed();
    // SAFETY: `handle` is a valid out-pointer to a 64-byte handle; the caller guarantees
    // `ptr` names live device memory.
    unsafe { hip!(api, hipIpcGetMemHandle(&mut handle, as_ptr(ptr))) }?;
    Ok(handle)
}

/// `hipIpcOpenMemHandle`: maps another process's exported allocation on the current
/// device and returns its base. `flags` must be the runtime's
/// `hipIpcMemLazyEnablePeerAccess`. The caller closes it with [`ipc_close_mem_handle`].
pub(crate) fn ipc_open_mem_handle(
    api: &HipApi,
    handle: hipIpcMemHandle_t,
    flags: c_uint,
) -> Result<u64> {
    let mut base: *mut c_void = std::ptr::null_mut();
    // SAFETY: `base` is a valid out-pointer for the duration of the call; the handle is
    // passed by value (the runtime validates it) and `flags` is a plain value.
    unsafe { hip!(api, hipIpcOpenMemHandle(&mut base, handle, flags)) }?;
    Ok(as_addr(base))
}

/// `hipIpcCloseMemHandle`: unmaps what [`ipc_open_mem_handle`] mapped.
///
/// # Safety
/// `base` is what [`ipc_open_mem_handle`] returned, has not been closed, and the mapping
/// is not used after this call.
pub(crate) unsafe fn ipc_close_mem_handle(api: &HipApi, base: u64) -> Result<()> {
    // SAFETY: the caller guarantees `base` is a live mapping closed once, here.
    unsafe { hip!(api, hipIpcCloseMemHandle(as_ptr(base))) }
}

// --- events and streams ------------------------------------------------------------------

/// `hipEventCreateWithFlags`: a new event on the current device. IPC events need
/// `hipEventInterprocess | hipEventDisableTiming`. The caller destroys it with
/// [`event_destroy`].
pub(crate) fn event_create_with_flags(api: &HipApi, flags: c_uint) -> Result<hipEvent_t> {
    let mut event: hipEvent_t = std::ptr::null_mut();
    // SAFETY: `event` is a valid out-pointer for the duration of the call; `flags` is a
    // plain value the runtime checks.
    unsafe { hip!(api, hipEventCreateWithFlags(&mut event, flags)) }?;
    Ok(event)
}

/// `hipEventDestroy`.
///
/// # Safety
/// `event` came from [`event_create_with_flags`] or [`ipc_open_event_handle`], has not been
/// destroyed, and is not used after this call.
pub(crate) unsafe fn event_destroy(api: &HipApi, event: hipEvent_t) -> Result<()> {
    // SAFETY: the caller guarantees `event` is live and destroyed once, here.
    unsafe { hip!(api, hipEventDestroy(event)) }
}

/// `hipEventRecord`: records `event` on `stream`.
///
/// # Safety
/// `event` is a live event (not destroyed during the call), and `stream` is null (the
/// default stream) or a live stream of this runtime on the event's device.
pub(crate) unsafe fn event_record(
    api: &HipApi,
    event: hipEvent_t,
    stream: hipStream_t,
) -> Result<()> {
    // SAFETY: the caller guarantees both objects are live.
    unsafe { hip!(api, hipEventRecord(event, stream)) }
}

/// `hipStreamWaitEvent`: makes `stream`'s later work wait for `event`. `flags` must be 0.
///
/// # Safety
/// As [`event_record`].
pub(crate) unsafe fn stream_wait_event(
    api: &HipApi,
    stream: hipStream_t,
    event: hipEvent_t,
    flags: c_uint,
) -> Result<()> {
    // SAFETY: the caller guarantees both objects are live; `flags` is a plain value.
    unsafe { hip!(api, hipStreamWaitEvent(stream, event, flags)) }
}

/// `hipIpcGetEventHandle`: the IPC handle of an event created with
/// `hipEventInterprocess` (others give `hipErrorInvalidConfiguration`).
///
/// # Safety
/// `event` is a live event (not destroyed during the call).
pub(crate) unsafe fn ipc_get_event_handle(
    api: &HipApi,
    event: hipEvent_t,
) -> Result<hipIpcEventHandle_t> {
    let mut handle = hipIpcEventHandle_t::zeroed();
    // SAFETY: `handle` is a valid out-pointer to a 64-byte handle; the caller guarantees
    // the event is live.
    unsafe { hip!(api, hipIpcGetEventHandle(&mut handle, event)) }?;
    Ok(handle)
}

/// `hipIpcOpenEventHandle`: opens another process's interprocess event (in the exporting
/// process it gives `hipErrorInvalidContext`). The caller destroys it with
/// [`event_destroy`].
pub(crate) fn ipc_open_event_handle(
    api: &HipApi,
    handle: hipIpcEventHandle_t,
) -> Result<hipEvent_t> {
    let mut event: hipEvent_t = std::ptr::null_mut();
    // SAFETY: `event` is a valid out-pointer for the duration of the call; the handle is
    // passed by value (the runtime validates it).
    unsafe { hip!(api, hipIpcOpenEventHandle(&mut event, handle)) }?;
    Ok(event)
}

// --- errors ------------------------------------------------------------------------------

/// `hipGetErrorName`: the code's symbolic name, copied (`None` when the runtime returns
/// NULL). Not checked: it is what the checked-call helper uses to describe a failure.
pub(crate) fn get_error_name(api: &HipApi, code: hipError_t) -> Option<String> {
    // SAFETY: hipGetErrorName accepts any code and returns NULL or a static NUL-terminated
    // string owned by the runtime (alive while `api`, borrowed here, is); it is copied
    // before returning.
    unsafe {
        let ptr = (api.hipGetErrorName)(code);
        (!ptr.is_null()).then(|| CStr::from_ptr(ptr).to_string_lossy().into_owned())
    }
}

/// `hipGetErrorString`: the runtime's message for the code, copied (`None` for NULL).
/// ROCm 5.2 returns the name again.
pub(crate) fn get_error_string(api: &HipApi, code: hipError_t) -> Option<String> {
    // SAFETY: as in `get_error_name`, for hipGetErrorString.
    unsafe {
        let ptr = (api.hipGetErrorString)(code);
        (!ptr.is_null()).then(|| CStr::from_ptr(ptr).to_string_lossy().into_owned())
    }
}
