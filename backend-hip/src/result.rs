//! The result layer: one small function per HIP runtime call devipc makes.
//!
//! Sits between the `HipApi` function table (`devipc-hip-sys`) and the backend code
//! (`ipc_mem.rs`, `vmm.rs`, `event.rs`, `device.rs`, ...), as cudarc's `driver/result.rs`.
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
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use devipc_core::{BackendKind, Error, Result};
use devipc_hip_sys::{
    HipApi, hipDeviceptr_t, hipError_t, hipEvent_t, hipIpcEventHandle_t, hipIpcMemHandle_t,
    hipMemAccessDesc, hipMemAllocationGranularity_flags, hipMemAllocationHandleType,
    hipMemAllocationProp, hipMemAllocationProp_R0502, hipMemGenericAllocationHandle_t,
    hipMemHandleTypePosixFileDescriptor, hipMemcpyDeviceToHost, hipMemcpyHostToDevice,
    hipPointerAttribute_t, hipStream_t, hipSuccess,
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
///
/// An optional function of the table (a newer call, `Option` field) is called as
/// `hip!(api, ?hipMemCreate(...))`: a runtime that lacks it gives
/// [`Error::Unsupported`] naming the function, without a call.
macro_rules! hip {
    ($api:expr, ?$f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_hip_sys::HipApi = &$api;
        match api.$f {
            Some(f) => {
                let code = f($($arg),*);
                $crate::result::check(api, stringify!($f), code)
            }
            None => Err($crate::result::missing(stringify!($f))),
        }
    }};
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_hip_sys::HipApi = &$api;
        let code = (api.$f)($($arg),*);
        $crate::result::check(api, stringify!($f), code)
    }};
}

mod stream;
pub(crate) use stream::*;

/// `Ok(())` for `hipSuccess`, otherwise the [`Error::Vendor`] for `code`.
pub(crate) fn check(api: &HipApi, call: &'static str, code: hipError_t) -> Result<()> {
    if code == hipSuccess {
        Ok(())
    } else {
        Err(vendor_error(api, call, code))
    }
}

/// The error for an optional function the runtime does not export.
pub(crate) fn missing(call: &'static str) -> Error {
    Error::Unsupported {
        backend: BackendKind::Hip,
        what: format!("{call}: this HIP runtime does not export it"),
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

/// `hipDeviceGetPCIBusId`: the PCI address of `device` as the runtime prints it
/// (`domain:bus:device.function`, e.g. `0000:03:00.0`).
pub(crate) fn device_get_pci_bus_id(api: &HipApi, device: c_int) -> Result<String> {
    // CLR writes at most 13 bytes ("%04x:%02x:%02x.%01x" + NUL); room for more.
    let mut text = [0 as std::ffi::c_char; 64];
    // SAFETY: `text` is writable for the `len` passed, which the runtime honours (it
    // refuses a `len` too small for its text); `device` is a plain value it range-checks.
    unsafe {
        hip!(
            api,
            hipDeviceGetPCIBusId(text.as_mut_ptr(), text.len() as c_int, device)
        )
    }?;
    let bytes: Vec<u8> = text
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    if bytes.len() == text.len() {
        return Err(Error::invalid_argument(
            "hipDeviceGetPCIBusId wrote no NUL-terminated text",
        ));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `hipDeviceGetUuid` (ROCm 5.1+): the 16 bytes the runtime reports for `device`.
pub(crate) fn device_get_uuid(api: &HipApi, device: c_int) -> Result<[u8; 16]> {
    let mut uuid = devipc_hip_sys::types::hipUUID { bytes: [0; 16] };
    // SAFETY: `uuid` is a valid out-pointer to a `hipUUID` for the duration of the call.
    unsafe { hip!(api, ?hipDeviceGetUuid(&mut uuid, device)) }?;
    Ok(uuid.bytes.map(|b| b as u8))
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

/// `hipPointerGetAttributes`: the device ordinal of the allocation holding `ptr`, `None`
/// when the runtime names none (`hipInvalidDeviceId`, ROCm 6.x for unregistered memory).
///
/// Safe for any `ptr`: the runtime looks the address up and never dereferences it.
pub(crate) fn pointer_device(api: &HipApi, ptr: u64) -> Result<Option<c_int>> {
    let mut attrs = hipPointerAttribute_t::zeroed();
    // SAFETY: `attrs` is a valid out-pointer to one attribute struct for the duration of
    // the call; `ptr` is only a lookup key (see above).
    unsafe { hip!(api, hipPointerGetAttributes(&mut attrs, as_ptr(ptr))) }?;
    Ok((attrs.device >= 0).then_some(attrs.device))
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

// --- virtual memory (VMM) ---------------------------------------------------------------
//
// Handles (`hipMemGenericAllocationHandle_t`) are the runtime's pointers: CLR dereferences
// them, so every function taking one is `unsafe` with "the handle is live" as its
// contract. `prop` is always given in the ROCm 5.3+ layout; `r0502` says the runtime
// reads the 5.2 layout, and the function passes the converted copy (api-facts B.4).

/// Passes `prop` to `f` in the layout the runtime reads (`r0502`: ROCm 5.2).
fn with_prop_layout<R>(
    prop: &hipMemAllocationProp,
    r0502: bool,
    f: impl FnOnce(*const hipMemAllocationProp) -> R,
) -> R {
    if r0502 {
        let old = hipMemAllocationProp_R0502::from_current(prop);
        // Same size (32 bytes); the runtime reads the old field order through the pointer.
        f((&old as *const hipMemAllocationProp_R0502).cast())
    } else {
        f(prop)
    }
}

/// `hipMemGetAllocationGranularity`: the size and alignment unit of VMM allocations
/// with `prop` (Pinned, Device-located).
pub(crate) fn mem_get_allocation_granularity(
    api: &HipApi,
    prop: &hipMemAllocationProp,
    r0502: bool,
    option: hipMemAllocationGranularity_flags,
) -> Result<usize> {
    let mut granularity: usize = 0;
    with_prop_layout(prop, r0502, |prop| {
        // SAFETY: `granularity` is a valid out-pointer and `prop` a valid 32-byte property
        // block in the runtime's layout, both for the duration of the call.
        unsafe {
            hip!(
                api,
                ?hipMemGetAllocationGranularity(&mut granularity, prop, option)
            )
        }
    })?;
    Ok(granularity)
}

/// `hipMemCreate`: a physical allocation of `size` bytes (a multiple of the granularity)
/// with `prop`. The caller releases it with [`mem_release`].
pub(crate) fn mem_create(
    api: &HipApi,
    size: usize,
    prop: &hipMemAllocationProp,
    r0502: bool,
) -> Result<hipMemGenericAllocationHandle_t> {
    let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
    with_prop_layout(prop, r0502, |prop| {
        // SAFETY: `handle` is a valid out-pointer and `prop` a valid property block in the
        // runtime's layout; `size` and the flags (0) are plain values.
        unsafe { hip!(api, ?hipMemCreate(&mut handle, size, prop, 0)) }
    })?;
    Ok(handle)
}

/// `hipMemRelease`: drops a handle (the memory lives on while mapped).
///
/// # Safety
/// `handle` came from [`mem_create`] or [`mem_import_from_shareable_handle`] (never from
/// [`mem_retain_allocation_handle`], which takes no reference), has not been released, and
/// is not used afterwards.
pub(crate) unsafe fn mem_release(
    api: &HipApi,
    handle: hipMemGenericAllocationHandle_t,
) -> Result<()> {
    // SAFETY: the caller guarantees the handle is live and released once, here.
    unsafe { hip!(api, ?hipMemRelease(handle)) }
}

/// `hipMemAddressReserve`: a virtual address range of `size` bytes (a multiple of the
/// granularity), aligned to `alignment` (0: the runtime's choice), no address hint. The
/// caller frees it with [`mem_address_free`].
pub(crate) fn mem_address_reserve(api: &HipApi, size: usize, alignment: usize) -> Result<u64> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer; the hint is NULL and the rest plain values.
    unsafe {
        hip!(
            api,
            ?hipMemAddressReserve(&mut ptr, size, alignment, std::ptr::null_mut(), 0)
        )
    }?;
    Ok(as_addr(ptr))
}

/// `hipMemAddressFree`: frees a reservation.
///
/// # Safety
/// `va..va + size` is a reservation from [`mem_address_reserve`] with nothing mapped in
/// it any more, freed once, here.
pub(crate) unsafe fn mem_address_free(api: &HipApi, va: u64, size: usize) -> Result<()> {
    // SAFETY: the caller guarantees the reservation is live, unmapped and freed once.
    unsafe { hip!(api, ?hipMemAddressFree(as_ptr(va), size)) }
}

/// `hipMemMap`: maps the whole of `handle` (`size` bytes, offset 0) at `va`, inside a
/// reservation. The range is not accessible until [`mem_set_access`].
///
/// # Safety
/// `handle` is live; `va..va + size` lies in a reservation of this process with nothing
/// mapped there.
pub(crate) unsafe fn mem_map(
    api: &HipApi,
    va: u64,
    size: usize,
    handle: hipMemGenericAllocationHandle_t,
) -> Result<()> {
    // SAFETY: the caller guarantees the handle and the free reserved range.
    unsafe { hip!(api, ?hipMemMap(as_ptr(va), size, 0, handle, 0)) }
}

/// `hipMemUnmap`: unmaps the whole mappings in `va..va + size`.
///
/// # Safety
/// `va..va + size` is exactly what [`mem_map`] mapped, and nobody (in this process) uses
/// it after this call.
pub(crate) unsafe fn mem_unmap(api: &HipApi, va: u64, size: usize) -> Result<()> {
    // SAFETY: the caller guarantees the mapping and that it is not used any more.
    unsafe { hip!(api, ?hipMemUnmap(as_ptr(va), size)) }
}

/// `hipMemSetAccess`: grants each descriptor's device its access to the whole mappings
/// in `va..va + size`.
///
/// # Safety
/// `va..va + size` is exactly what [`mem_map`] mapped, still mapped.
pub(crate) unsafe fn mem_set_access(
    api: &HipApi,
    va: u64,
    size: usize,
    descs: &[hipMemAccessDesc],
) -> Result<()> {
    // SAFETY: `descs` is a live slice of `descs.len()` descriptors; the caller guarantees
    // the mapping.
    unsafe {
        hip!(
            api,
            ?hipMemSetAccess(as_ptr(va), size, descs.as_ptr(), descs.len())
        )
    }
}

/// `hipMemExportToShareableHandle` as `handle_type` (POSIX file descriptor): a NEW file
/// descriptor (a dma-buf) owned by the caller. Before ROCm 6.2 the runtime answers
/// `hipErrorNotSupported`.
///
/// # Safety
/// `handle` is live (not released during the call).
pub(crate) unsafe fn mem_export_to_shareable_handle(
    api: &HipApi,
    handle: hipMemGenericAllocationHandle_t,
    handle_type: hipMemAllocationHandleType,
) -> Result<OwnedFd> {
    let mut fd: c_int = -1;
    // SAFETY: for a POSIX fd the runtime writes one `int` through the pointer, which is
    // valid for that; the caller guarantees the handle; flags 0.
    unsafe {
        hip!(
            api,
            ?hipMemExportToShareableHandle(
                (&mut fd as *mut c_int).cast(),
                handle,
                handle_type,
                0
            )
        )
    }?;
    if fd < 0 {
        return Err(Error::invalid_argument(format!(
            "hipMemExportToShareableHandle succeeded but wrote fd {fd}"
        )));
    }
    // SAFETY: on success the runtime wrote a new descriptor that nobody else owns (a
    // dma-buf fd of this process, CLR `ExportShareableVMMHandle`); it is owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // At once (audit N18): the runtime does not promise O_CLOEXEC, and a fork + exec on
    // another thread would hand the child a dma-buf of the allocation. The fd is closed
    // (dropped) if this fails.
    set_cloexec(&fd)?;
    Ok(fd)
}

/// Sets `FD_CLOEXEC` on `fd` (`fcntl(F_SETFD)`, in place: the descriptor keeps its number
/// and no inheritable copy is left behind, as a `F_DUPFD_CLOEXEC` + `close` would until
/// the close).
pub(crate) fn set_cloexec(fd: &OwnedFd) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFD/F_SETFD on a descriptor this process owns (borrowed for the call);
    // no pointer is passed.
    let done = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFD);
        flags >= 0 && libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags | libc::FD_CLOEXEC) == 0
    };
    if done {
        Ok(())
    } else {
        Err(Error::io(
            "making an exported VMM fd close-on-exec (fcntl F_SETFD)",
            std::io::Error::last_os_error(),
        ))
    }
}

/// `hipMemExportToShareableHandle` with `hipMemHandleTypeFabric`: the 64-byte
/// `hipMemFabricHandle_t` of an allocation created for it (HIP 7; no fd).
///
/// # Safety
/// `handle` is a live allocation handle of this runtime.
pub(crate) unsafe fn mem_export_fabric(
    api: &HipApi,
    handle: hipMemGenericAllocationHandle_t,
) -> Result<[u8; 64]> {
    let mut fabric = [0u8; 64];
    // SAFETY: for a fabric handle the runtime writes a `hipMemFabricHandle_t` (64 bytes)
    // through the pointer, which is valid for that; the caller guarantees the handle.
    unsafe {
        hip!(
            api,
            ?hipMemExportToShareableHandle(
                fabric.as_mut_ptr().cast(),
                handle,
                devipc_hip_sys::hipMemHandleTypeFabric,
                0
            )
        )
    }?;
    Ok(fabric)
}

/// `hipMemImportFromShareableHandle` of a POSIX fd: a handle to the memory another
/// process exported. `by_value`: the runtime takes the fd value as `osHandle` (ROCm
/// 7.1.0+), else a pointer to the `int` (6.2 .. 7.0.x; field notes 2026-11). The fd
/// stays the caller's; keep it open until the mapping's access is set (rocm-systems
/// #8304: the import is deferred). The caller releases the handle with [`mem_release`].
pub(crate) fn mem_import_from_shareable_handle(
    api: &HipApi,
    fd: BorrowedFd<'_>,
    by_value: bool,
) -> Result<hipMemGenericAllocationHandle_t> {
    let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
    let mut value: c_int = fd.as_raw_fd();
    let os_handle: *mut c_void = if by_value {
        value as isize as *mut c_void
    } else {
        (&mut value as *mut c_int).cast()
    };
    // SAFETY: `handle` is a valid out-pointer; `os_handle` is, per the runtime's
    // convention, the fd's value or a pointer to a live `int` holding it (valid during
    // the call); the fd is open (borrowed) for the call.
    unsafe {
        hip!(
            api,
            ?hipMemImportFromShareableHandle(
                &mut handle,
                os_handle,
                hipMemHandleTypePosixFileDescriptor,
            )
        )
    }?;
    Ok(handle)
}

/// `hipMemRetainAllocationHandle`: the handle of the VMM allocation mapped at `addr`.
/// CLR (`hip_vm.cpp`) takes NO reference (unlike CUDA's retain): never release the
/// result, which would drop the creator's reference. Memory that is not VMM (`hipMalloc`)
/// gives `hipErrorInvalidValue` there, but some ROCm 7.x releases are reported to crash
/// instead (second-hand; RCCL asks [`pointer_is_legacy_ipc_capable`] first), hence
/// `unsafe`.
///
/// # Safety
/// `addr` is not `hipMalloc` memory: the runtime answered the legacy-IPC attribute with
/// "not legacy", or refused `hipIpcGetMemHandle` of it (which exports any `hipMalloc`
/// memory of this process). Other addresses are only looked up in the runtime's mapping
/// table.
pub(crate) unsafe fn mem_retain_allocation_handle(
    api: &HipApi,
    addr: u64,
) -> Result<hipMemGenericAllocationHandle_t> {
    let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
    // SAFETY: `handle` is a valid out-pointer; `addr` is only a lookup key and not
    // hipMalloc memory (the caller's guarantee).
    unsafe {
        hip!(
            api,
            ?hipMemRetainAllocationHandle(&mut handle, as_ptr(addr))
        )
    }?;
    Ok(handle)
}

/// `hipPointerGetAttribute(HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE)`: whether the
/// memory at `addr` can be exported with `hipIpcGetMemHandle` (`hipMalloc` memory) rather
/// than being VMM memory. Runtimes before 7.12 do not answer (an error).
///
/// Safe for any `addr`: the runtime only looks it up.
pub(crate) fn pointer_is_legacy_ipc_capable(api: &HipApi, addr: u64) -> Result<bool> {
    let mut value: std::ffi::c_int = 0;
    // SAFETY: `value` is a writable int, the attribute's type; `addr` is a lookup key.
    unsafe {
        hip!(
            api,
            ?hipPointerGetAttribute(
                (&mut value as *mut std::ffi::c_int).cast(),
                devipc_hip_sys::HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE,
                as_ptr(addr)
            )
        )
    }?;
    Ok(value != 0)
}

/// `hipMemGetAllocationPropertiesFromHandle`: the allocation's properties, returned in
/// the ROCm 5.3+ layout whatever the runtime wrote (`r0502`).
///
/// # Safety
/// `handle` is live (not released during the call).
pub(crate) unsafe fn mem_get_allocation_properties_from_handle(
    api: &HipApi,
    handle: hipMemGenericAllocationHandle_t,
    r0502: bool,
) -> Result<hipMemAllocationProp> {
    if r0502 {
        let mut old = hipMemAllocationProp_R0502::zeroed();
        // SAFETY: `old` is a valid 32-byte out-block in the layout this runtime writes;
        // the caller guarantees the handle.
        unsafe {
            hip!(
                api,
                ?hipMemGetAllocationPropertiesFromHandle(
                    (&mut old as *mut hipMemAllocationProp_R0502).cast(),
                    handle
                )
            )
        }?;
        Ok(old.to_current())
    } else {
        let mut prop = hipMemAllocationProp::zeroed();
        // SAFETY: `prop` is a valid out-block in this runtime's layout; the caller
        // guarantees the handle.
        unsafe {
            hip!(
                api,
                ?hipMemGetAllocationPropertiesFromHandle(&mut prop, handle)
            )
        }?;
        Ok(prop)
    }
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

mod batch;

#[allow(unused_imports, reason = "the data plane (issue 25) will call them")]
pub(crate) use batch::{BatchCopy, memcpy_batch_async};
