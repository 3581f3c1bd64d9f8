//! The thin `result` layer over the [`AclApi`] table (cudarc's `driver/result.rs`): one
//! small function per ACL call devipc makes, taking plain arguments, turning the
//! out-parameters into return values and the status into [`Result`] through the
//! checked-call helpers of the first section (`acl!`, `acl_opt!`, [`check`]: an error
//! keeps the api name, the code, its symbolic name and the runtime's message, and an
//! optional function the runtime lacks is [`Error::Unsupported`]).
//!
//! It sits between the table and the backend code (`vmm`, `ipc_key`, `notify`, `device`,
//! `backend`), which holds no out-pointer boilerplate and calls C only through here. The
//! calls of the `ascend-notify` mechanism (IPC Notify, and the events its wait polls) are
//! in `result/notify.rs`, those of `ascend-ipc-key` in `result/ipc_key.rs` and the stream
//! calls in `result/stream.rs`, all re-exported here; every other call is in this file,
//! and so is [`Rollback`], the list of release calls a multi-step acquire owes if it
//! fails midway. Each function holds the one `unsafe` block of its call, with the C
//! contract in its `SAFETY:` comment. A function that hands the runtime a
//! device address, a stream or a vendor handle whose validity only the caller can know is
//! an `unsafe fn` with a `# Safety` section; the others are safe: their arguments are
//! plain values, Rust buffers, or out-parameters filled here.
//!
//! Vendor handles (`aclrtDrvMemHandle`, `aclrtNotify`, `aclrtStream`, `aclrtEvent`) cross
//! this layer as their addresses (`usize`), device addresses as `u64`, as the backend's
//! records keep them. A call whose caller takes one failure code as an answer rather than
//! an error (`aclInit` repeated, no current device, a wait that timed out, ...) says so
//! in its return type, and builds no error for that code, so the runtime's per-thread
//! message is left unread; a query whose failure is no error at all returns an
//! [`Option`].

use std::ffi::{CStr, c_char, c_void};

use devipc_ascend_sys::codes::{
    ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_RT_CONTEXT_NULL, ACL_SUCCESS,
};
use devipc_ascend_sys::consts::{ACL_IPC_KEY_LEN, ACL_PKG_VERSION_MAX_SIZE};
use devipc_ascend_sys::types::{
    ACL_MEM_HANDLE_TYPE_NONE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, aclError,
    aclrtDrvMemHandle, aclrtMemAccessDesc, aclrtMemGranularityOptions, aclrtMemMallocPolicy,
    aclrtMemcpyKind, aclrtPhysicalMemProp, aclrtStream,
};
use devipc_ascend_sys::{AclApi, error_description, error_name};
use devipc_core::{BackendKind, Error, Result};

// --- the checked call ----------------------------------------------------------------------
//
// The checked-call helpers: every ACL call of the [`result`](crate::result) layer (the
// only module that calls the table) goes through `acl!` (required functions),
// `acl_opt!` (functions a runtime may lack) or [`check`] (where the caller takes one
// code as an answer first), which turn a non-zero `aclError` into
// [`Error::Vendor`] with the api name, the code, its symbolic name and the runtime's
// message, resolved at the moment of failure (the library may be gone when the error is
// printed, and `aclGetRecentErrMsg` is per thread and overwritten by the next call).
//
// An optional function the loaded runtime does not export is
// [`Error::Unsupported`] naming the symbol, never a panic.

/// Calls the required function `api.$f(args)` and checks the status:
/// `acl!(api, aclrtSetDevice(0))`.
///
/// Expands to an `unsafe` call, so it must sit inside an `unsafe` block whose `SAFETY:`
/// comment covers the call's C contract.
macro_rules! acl {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_ascend_sys::AclApi = &$api;
        let code = (api.$f)($($arg),*);
        $crate::result::check(api, stringify!($f), code)
    }};
}

/// Calls the optional function `api.$f(args)` and checks the status; when the runtime
/// lacks `$f` the result is [`Error::Unsupported`] and nothing is called (the arguments
/// are not evaluated).
///
/// Expands to an `unsafe` call, like `acl!`.
macro_rules! acl_opt {
    ($api:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let api: &devipc_ascend_sys::AclApi = &$api;
        match api.$f {
            Some(f) => {
                let code = f($($arg),*);
                $crate::result::check(api, stringify!($f), code)
            }
            None => Err($crate::result::too_old(stringify!($f))),
        }
    }};
}

/// The optional function `api.$f`, or [`Error::Unsupported`] naming it: for callers that
/// need the raw status (to accept a code besides success).
macro_rules! optional {
    ($api:expr, $f:ident) => {
        $api.$f
            .ok_or_else(|| $crate::result::too_old(stringify!($f)))
    };
}
pub(crate) use optional;

/// `Ok(())` for `ACL_SUCCESS`, otherwise the [`Error::Vendor`] for `code`.
pub(crate) fn check(api: &AclApi, call: &'static str, code: aclError) -> Result<()> {
    if code == ACL_SUCCESS {
        Ok(())
    } else {
        Err(vendor_error(api, call, code))
    }
}

/// Builds the [`Error::Vendor`] for a failed call: the name from devipc's code table
/// (`aclError(<code>)` for a code newer than the table), the message from
/// `aclGetRecentErrMsg` copied now, or the table's description when the runtime has none.
pub(crate) fn vendor_error(api: &AclApi, call: &'static str, code: aclError) -> Error {
    let name = error_name(code).map_or_else(|| format!("aclError({code})"), str::to_owned);
    // SAFETY: aclGetRecentErrMsg takes no arguments and returns NULL or a NUL-terminated
    // string owned by the runtime's per-thread state, valid until the thread's next ACL
    // call; it is copied at once below.
    let recent = copy_c_str(unsafe { (api.aclGetRecentErrMsg)() });
    let message = match recent {
        Some(m) if !m.trim().is_empty() => m.trim().to_owned(),
        _ => error_description(code).unwrap_or_default().to_owned(),
    };
    Error::Vendor {
        backend: BackendKind::Ascend,
        api: call,
        code,
        name,
        message,
    }
}

/// The error for calling an optional function the loaded runtime does not export.
pub(crate) fn too_old(symbol: &'static str) -> Error {
    Error::unsupported(
        BackendKind::Ascend,
        format!("{symbol} (this CANN is too old)"),
    )
}

/// Copies a NUL-terminated string the runtime returned, if any.
fn copy_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer from aclGetRecentErrMsg points at a NUL-terminated string
    // that stays alive until this thread's next ACL call; nothing is called during the copy.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

// --- the calls -----------------------------------------------------------------------------

/// A 65-byte IPC key buffer (memory or notify), as the runtime wrote it; every key this
/// layer returns holds a NUL, and every key it is given is checked for one.
pub(crate) type Key = [u8; ACL_IPC_KEY_LEN];

/// An address as the C `void *` the ACL functions take.
pub(crate) fn as_ptr(addr: u64) -> *mut c_void {
    addr as usize as *mut c_void
}

/// A `void *` the runtime returned, as an address.
fn as_addr(ptr: *mut c_void) -> u64 {
    ptr as usize as u64
}

/// Checks that a key the runtime wrote is NUL-terminated within the buffer.
pub(crate) fn check_written_key(key: &Key, api: &'static str) -> Result<()> {
    if key.contains(&0) {
        Ok(())
    } else {
        Err(Error::invalid_argument(format!(
            "{api} wrote a key without a NUL in its {ACL_IPC_KEY_LEN} bytes"
        )))
    }
}

/// The key as the C string the runtime reads, after checking that it holds a NUL (so
/// the runtime cannot read past the buffer). Keys enter devipc checked, so the check
/// never fails in practice.
fn key_ptr(key: &Key) -> Result<*const c_char> {
    if key.contains(&0) {
        Ok(key.as_ptr().cast())
    } else {
        Err(Error::invalid_argument(format!(
            "an IPC key without a NUL in its {ACL_IPC_KEY_LEN} bytes"
        )))
    }
}

// ---------------------------------------------------------------------------------------
// Initialisation, devices, version
// ---------------------------------------------------------------------------------------

/// `aclInit(NULL)`: `Ok(true)` when this call initialised ACL, `Ok(false)` when it was
/// initialised already (`ACL_ERROR_REPEAT_INITIALIZE`, which counts like a success).
pub(crate) fn init(api: &AclApi) -> Result<bool> {
    // SAFETY: a NULL config path is documented as "no configuration file".
    let code = unsafe { (api.aclInit)(std::ptr::null()) };
    match code {
        ACL_SUCCESS => Ok(true),
        ACL_ERROR_REPEAT_INITIALIZE => Ok(false),
        _ => Err(vendor_error(api, "aclInit", code)),
    }
}

/// `aclFinalize`; `ACL_ERROR_REPEAT_FINALIZE` (someone finalized ACL already) is
/// success: nothing is left to do.
pub(crate) fn finalize(api: &AclApi) -> Result<()> {
    // SAFETY: no arguments.
    let code = unsafe { (api.aclFinalize)() };
    if code == ACL_ERROR_REPEAT_FINALIZE {
        return Ok(());
    }
    check(api, "aclFinalize", code)
}

/// `aclrtSetDevice`: makes `device` current on this thread.
pub(crate) fn set_device(api: &AclApi, device: i32) -> Result<()> {
    // SAFETY: plain value argument; the runtime validates the id.
    unsafe { acl!(api, aclrtSetDevice(device)) }
}

/// `aclrtGetDevice`: the thread's current device, or `None` when it has none
/// (`ACL_ERROR_RT_CONTEXT_NULL`, 107002).
pub(crate) fn get_device(api: &AclApi) -> Result<Option<i32>> {
    let mut current: i32 = -1;
    // SAFETY: `current` is a valid out-pointer for the duration of the call.
    let code = unsafe { (api.aclrtGetDevice)(&mut current) };
    if code == ACL_ERROR_RT_CONTEXT_NULL {
        return Ok(None);
    }
    check(api, "aclrtGetDevice", code)?;
    Ok(Some(current))
}

/// `aclrtGetDeviceCount` (a count of 0 is returned as it is).
pub(crate) fn get_device_count(api: &AclApi) -> Result<u32> {
    let mut count: u32 = 0;
    // SAFETY: `count` is a valid out-pointer.
    unsafe { acl!(api, aclrtGetDeviceCount(&mut count)) }?;
    Ok(count)
}

/// `aclrtDeviceGetBareTgid` (optional): the host pid of this process, or `None` when the
/// call needs a device context and the thread has none (`ACL_ERROR_RT_CONTEXT_NULL`).
pub(crate) fn device_get_bare_tgid(api: &AclApi) -> Result<Option<i32>> {
    let get = optional!(api, aclrtDeviceGetBareTgid)?;
    let mut pid: i32 = 0;
    // SAFETY: `pid` is a valid out-pointer for the duration of the call.
    let code = unsafe { get(&mut pid) };
    if code == ACL_ERROR_RT_CONTEXT_NULL {
        return Ok(None);
    }
    check(api, "aclrtDeviceGetBareTgid", code)?;
    Ok(Some(pid))
}

/// `aclsysGetVersionStr` (optional) for the package `pkg`: the version string, or `None`
/// when the runtime lacks the function, the query fails or the answer is not UTF-8 (a
/// failed version query is no error).
pub(crate) fn sys_get_version_str(api: &AclApi, pkg: &CStr) -> Option<String> {
    let get = api.aclsysGetVersionStr?;
    let mut pkg = pkg.to_bytes_with_nul().to_vec();
    let mut buf = [0u8; ACL_PKG_VERSION_MAX_SIZE];
    // SAFETY: `pkg` is a NUL-terminated name; `buf` has the ACL_PKG_VERSION_MAX_SIZE
    // bytes the function may write.
    let code = unsafe {
        get(
            pkg.as_mut_ptr().cast::<c_char>(),
            buf.as_mut_ptr().cast::<c_char>(),
        )
    };
    if code != ACL_SUCCESS {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).ok().map(str::to_owned)
}

/// `aclrtGetVersion` (optional, deprecated): `(major, minor, patch)`, or `None` when the
/// runtime lacks the function or the query fails.
pub(crate) fn get_version(api: &AclApi) -> Option<(i32, i32, i32)> {
    let get = api.aclrtGetVersion?;
    let (mut major, mut minor, mut patch) = (0i32, 0i32, 0i32);
    // SAFETY: three valid out-pointers.
    let code = unsafe { get(&mut major, &mut minor, &mut patch) };
    (code == ACL_SUCCESS).then_some((major, minor, patch))
}

/// `aclrtGetLogicDevIdByUserDevId` (optional, CANN 8.x): the driver's logical id of the
/// device this process calls `user` (its index under `ASCEND_RT_VISIBLE_DEVICES`).
pub(crate) fn logic_dev_id_by_user_dev_id(api: &AclApi, user: i32) -> Result<i32> {
    let mut logic: i32 = -1;
    // SAFETY: `logic` is a valid out-pointer; `user` is a plain value the runtime checks.
    unsafe { acl_opt!(api, aclrtGetLogicDevIdByUserDevId(user, &mut logic)) }?;
    Ok(logic)
}

/// `aclrtGetPhyDevIdByLogicDevId` (optional, CANN 8.x): the physical chip id of the
/// driver's logical device `logic` (they differ inside a container).
pub(crate) fn phy_dev_id_by_logic_dev_id(api: &AclApi, logic: i32) -> Result<i32> {
    let mut physical: i32 = -1;
    // SAFETY: `physical` is a valid out-pointer; `logic` is a plain value.
    unsafe { acl_opt!(api, aclrtGetPhyDevIdByLogicDevId(logic, &mut physical)) }?;
    Ok(physical)
}

/// `aclrtDeviceGetUuid` (optional, newer CANN): the 16 bytes the runtime reports for the
/// device this process calls `device`.
pub(crate) fn device_get_uuid(api: &AclApi, device: i32) -> Result<[u8; 16]> {
    let mut uuid = devipc_ascend_sys::types::aclrtUuid { bytes: [0; 16] };
    // SAFETY: `uuid` is a valid out-pointer to an `aclrtUuid` for the duration of the call.
    unsafe { acl_opt!(api, aclrtDeviceGetUuid(device, &mut uuid)) }?;
    Ok(uuid.bytes.map(|b| b as u8))
}

/// `aclrtDeviceEnablePeerAccess`: lets the current device access `peer`'s memory.
pub(crate) fn device_enable_peer_access(api: &AclApi, peer: i32) -> Result<()> {
    // SAFETY: plain value arguments; flags are reserved (0).
    unsafe { acl!(api, aclrtDeviceEnablePeerAccess(peer, 0)) }
}

// ---------------------------------------------------------------------------------------
// Memory: aclrtMalloc, VMM, copies
// ---------------------------------------------------------------------------------------

/// `aclrtMalloc` of `size` bytes on the current device: the block's address.
pub(crate) fn malloc(api: &AclApi, size: usize, policy: aclrtMemMallocPolicy) -> Result<u64> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer; size and policy are plain values the runtime
    // validates.
    unsafe { acl!(api, aclrtMalloc(&mut ptr, size, policy)) }?;
    Ok(as_addr(ptr))
}

/// `aclrtFree` of an `aclrtMalloc` block.
///
/// # Safety
/// `ptr` is a block `aclrtMalloc` returned, not freed yet, that no queued task still
/// uses; it is not used after this call.
pub(crate) unsafe fn free(api: &AclApi, ptr: u64) -> Result<()> {
    // SAFETY: the caller guarantees a live block that nothing uses any more.
    unsafe { acl!(api, aclrtFree(as_ptr(ptr))) }
}

/// `aclrtMemGetAllocationGranularity` (optional): the VMM granularity for `prop`.
pub(crate) fn mem_get_allocation_granularity(
    api: &AclApi,
    prop: &mut aclrtPhysicalMemProp,
    option: aclrtMemGranularityOptions,
) -> Result<usize> {
    let mut granularity: usize = 0;
    // SAFETY: `prop` and `granularity` are valid for the call; the option is a plain
    // value the runtime validates.
    unsafe {
        acl_opt!(
            api,
            aclrtMemGetAllocationGranularity(prop, option, &mut granularity)
        )
    }?;
    Ok(granularity)
}

/// `aclrtMallocPhysical` of `size` bytes with `prop`: the physical handle, as an address.
pub(crate) fn malloc_physical(
    api: &AclApi,
    size: usize,
    prop: &aclrtPhysicalMemProp,
) -> Result<usize> {
    let mut handle: aclrtDrvMemHandle = std::ptr::null_mut();
    // SAFETY: `handle` is a valid out-pointer, `prop` a valid property block; the runtime
    // validates the size; flags are reserved (0).
    unsafe { acl!(api, aclrtMallocPhysical(&mut handle, size, prop, 0)) }?;
    Ok(handle as usize)
}

/// `aclrtFreePhysical` of a physical handle.
///
/// # Safety
/// `handle` is a live physical handle (from `aclrtMallocPhysical` or
/// `aclrtMemImportFromShareableHandle`), no longer mapped, not used after this call.
pub(crate) unsafe fn free_physical(api: &AclApi, handle: usize) -> Result<()> {
    // SAFETY: the caller guarantees a live, unmapped handle released once.
    unsafe { acl!(api, aclrtFreePhysical(handle as aclrtDrvMemHandle)) }
}

/// `aclrtReserveMemAddress` of `size` bytes aligned to `alignment` (0: the default),
/// anywhere (`expectPtr` NULL): the reserved address.
pub(crate) fn reserve_mem_address(api: &AclApi, size: usize, alignment: usize) -> Result<u64> {
    let mut va: *mut c_void = std::ptr::null_mut();
    // SAFETY: `va` is a valid out-pointer; expectPtr NULL and flags 0 are the documented
    // defaults; the runtime validates size and alignment.
    unsafe {
        acl!(
            api,
            aclrtReserveMemAddress(&mut va, size, alignment, std::ptr::null_mut(), 0)
        )
    }?;
    Ok(as_addr(va))
}

/// `aclrtReleaseMemAddress` of a reserved range.
///
/// # Safety
/// `va` is an address `aclrtReserveMemAddress` returned, unmapped, not released yet.
pub(crate) unsafe fn release_mem_address(api: &AclApi, va: u64) -> Result<()> {
    // SAFETY: the caller guarantees a reserved, unmapped range released once.
    unsafe { acl!(api, aclrtReleaseMemAddress(as_ptr(va))) }
}

/// `aclrtMapMem`: maps the physical handle `handle` (`size` bytes, offset 0) at `va`.
///
/// # Safety
/// `va` is a range of at least `size` bytes reserved with `aclrtReserveMemAddress` and
/// not mapped yet; `handle` is a live physical handle of `size` bytes.
pub(crate) unsafe fn map_mem(api: &AclApi, va: u64, size: usize, handle: usize) -> Result<()> {
    // SAFETY: the caller guarantees the reserved range and the live handle; offset and
    // flags must be 0.
    unsafe {
        acl!(
            api,
            aclrtMapMem(as_ptr(va), size, 0, handle as aclrtDrvMemHandle, 0)
        )
    }
}

/// `aclrtUnmapMem` of a mapped range.
///
/// # Safety
/// `va` is a range `aclrtMapMem` mapped, not unmapped yet, that nothing uses any more.
pub(crate) unsafe fn unmap_mem(api: &AclApi, va: u64) -> Result<()> {
    // SAFETY: the caller guarantees a mapped range unmapped once.
    unsafe { acl!(api, aclrtUnmapMem(as_ptr(va))) }
}

/// `aclrtMemSetAccess` (optional) of `size` bytes at `va` with the descriptors `desc`.
///
/// # Safety
/// `va`/`size` are exactly a range mapped with `aclrtMapMem`.
pub(crate) unsafe fn mem_set_access(
    api: &AclApi,
    va: u64,
    size: usize,
    desc: &mut [aclrtMemAccessDesc],
) -> Result<()> {
    // SAFETY: the caller guarantees the mapped range; `desc` is a live buffer of
    // `desc.len()` descriptors.
    unsafe {
        acl_opt!(
            api,
            aclrtMemSetAccess(as_ptr(va), size, desc.as_mut_ptr(), desc.len())
        )
    }
}

/// `aclrtMemExportToShareableHandle` (optional) of a physical handle, with handle type
/// NONE (what V1 export requires) and `flags`: the shareable handle.
///
/// # Safety
/// `handle` is a live physical handle from `aclrtMallocPhysical`.
pub(crate) unsafe fn mem_export_to_shareable_handle(
    api: &AclApi,
    handle: usize,
    flags: u64,
) -> Result<u64> {
    let mut shareable: u64 = 0;
    // SAFETY: the caller guarantees a live handle; `shareable` is a valid out-pointer.
    unsafe {
        acl_opt!(
            api,
            aclrtMemExportToShareableHandle(
                handle as aclrtDrvMemHandle,
                ACL_MEM_HANDLE_TYPE_NONE,
                flags,
                &mut shareable
            )
        )
    }?;
    Ok(shareable)
}

/// `aclrtMemSetPidToShareableHandle` (optional): the trustlist of a shareable handle.
pub(crate) fn mem_set_pid_to_shareable_handle(
    api: &AclApi,
    shareable: u64,
    pids: &mut [i32],
) -> Result<()> {
    // SAFETY: the shareable handle is a plain value the runtime validates; `pids` is a
    // live buffer of `pids.len()` int32 values.
    unsafe {
        acl_opt!(
            api,
            aclrtMemSetPidToShareableHandle(shareable, pids.as_mut_ptr(), pids.len())
        )
    }
}

/// `aclrtMemImportFromShareableHandle` (optional) onto `device`: the physical handle, as
/// an address.
pub(crate) fn mem_import_from_shareable_handle(
    api: &AclApi,
    shareable: u64,
    device: i32,
) -> Result<usize> {
    let mut handle: aclrtDrvMemHandle = std::ptr::null_mut();
    // SAFETY: `handle` is a valid out-pointer; the shareable handle and device id are
    // plain values the runtime validates.
    unsafe {
        acl_opt!(
            api,
            aclrtMemImportFromShareableHandle(shareable, device, &mut handle)
        )
    }?;
    Ok(handle as usize)
}

/// `aclrtMemGetAddressRange` (optional): the base and size of the allocation holding
/// `ptr`.
///
/// Safe for any `ptr`: the runtime looks the address up in its own allocation table and
/// fails for one it does not know; nothing is read or written at it.
pub(crate) fn mem_get_address_range(api: &AclApi, ptr: u64) -> Result<(u64, usize)> {
    let mut base: *mut c_void = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `ptr` is only looked up (see above); both out-pointers are valid for the
    // call.
    unsafe {
        acl_opt!(
            api,
            aclrtMemGetAddressRange(as_ptr(ptr), &mut base, &mut size)
        )
    }?;
    Ok((as_addr(base), size))
}

/// `aclrtMemGetAddressRange` as a query whose failure is no error: the base and size, or
/// `None` when the runtime lacks the function or the call fails (no error is built).
/// Safe for any `ptr`, as [`mem_get_address_range`].
pub(crate) fn query_address_range(api: &AclApi, ptr: u64) -> Option<(u64, usize)> {
    let range = api.aclrtMemGetAddressRange?;
    let mut base: *mut c_void = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `ptr` is only looked up; both out-pointers are valid for the call.
    let code = unsafe { range(as_ptr(ptr), &mut base, &mut size) };
    (code == ACL_SUCCESS).then_some((as_addr(base), size))
}

/// `aclrtMemcpy` host to device: the `src.len()` bytes of `src` to `dst`, whose buffer
/// holds `dest_max` bytes.
///
/// # Safety
/// `dst` is device memory of at least `dest_max` bytes (the runtime checks the address
/// against its mappings, but not that it is the memory the caller means) that no queued
/// task is using.
pub(crate) unsafe fn memcpy_host_to_device(
    api: &AclApi,
    dst: u64,
    dest_max: usize,
    src: &[u8],
) -> Result<()> {
    // SAFETY: the caller guarantees the device side; `src` is a live host slice of
    // `src.len()` bytes.
    unsafe {
        acl!(
            api,
            aclrtMemcpy(
                as_ptr(dst),
                dest_max,
                src.as_ptr().cast(),
                src.len(),
                ACL_MEMCPY_HOST_TO_DEVICE
            )
        )
    }
}

/// `aclrtMemcpy` device to host: `dst.len()` bytes from `src` into `dst`.
///
/// # Safety
/// `src` is device memory of at least `dst.len()` bytes that no queued task is writing.
pub(crate) unsafe fn memcpy_device_to_host(api: &AclApi, dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: the caller guarantees the device side; `dst` is a live, exclusively
    // borrowed host slice of `dst.len()` bytes.
    unsafe {
        acl!(
            api,
            aclrtMemcpy(
                dst.as_mut_ptr().cast(),
                dst.len(),
                as_ptr(src),
                dst.len(),
                ACL_MEMCPY_DEVICE_TO_HOST
            )
        )
    }
}

/// `aclrtMemcpyAsync` (optional): queues a copy of `count` bytes from `src` to `dst`
/// (a buffer of `dest_max` bytes) of direction `kind` on `stream`.
///
/// # Safety
/// `dst` and `src` are memory of the kind `kind` names, of at least `dest_max` and
/// `count` bytes, and stay valid (not freed, not unmapped) until the copy completed on
/// the stream; `stream` is a live stream of the current device (or null, the default
/// stream).
pub(crate) unsafe fn memcpy_async(
    api: &AclApi,
    dst: u64,
    dest_max: usize,
    src: u64,
    count: usize,
    kind: aclrtMemcpyKind,
    stream: usize,
) -> Result<()> {
    // SAFETY: the caller guarantees both operands until the copy completes, and the
    // stream.
    unsafe {
        acl_opt!(
            api,
            aclrtMemcpyAsync(
                as_ptr(dst),
                dest_max,
                as_ptr(src),
                count,
                kind,
                stream as aclrtStream
            )
        )
    }
}

// ---------------------------------------------------------------------------------------
// Key IPC of aclrtMalloc memory: in `result/ipc_key.rs`
// ---------------------------------------------------------------------------------------

mod ipc_key;

pub(crate) use ipc_key::{
    ipc_mem_close, ipc_mem_get_export_key, ipc_mem_import_by_key, ipc_mem_set_import_pid,
};

// ---------------------------------------------------------------------------------------
// Notify IPC and events: in `result/notify.rs`
// ---------------------------------------------------------------------------------------

mod notify;

pub(crate) use notify::{
    create_event_ex_with_flag, create_notify, destroy_event, destroy_notify, notify_get_export_key,
    notify_import_by_key, notify_set_import_pid, query_event_status, record_event, record_notify,
    reset_notify, synchronize_event_with_timeout, try_notify_import_by_key, wait_and_reset_notify,
};

mod ipc_event;

pub(crate) use ipc_event::{IPC_EVENT_HANDLE_LEN, ipc_get_event_handle, ipc_open_event_handle};

// ---------------------------------------------------------------------------------------
// Streams: in `result/stream.rs`
// ---------------------------------------------------------------------------------------

mod stream;

pub(crate) use stream::{
    create_stream, destroy_stream, destroy_stream_force, stream_wait_event, synchronize_event,
    synchronize_stream,
};

// ---------------------------------------------------------------------------------------
// Batched copies (issue 25): in `result/batch.rs`
// ---------------------------------------------------------------------------------------

mod batch;

#[allow(unused_imports, reason = "the data plane (issue 25) will call them")]
pub(crate) use batch::{BatchCopy, Direction, memcpy_batch_async};

// ---------------------------------------------------------------------------------------
// Rollback: the release calls owed if a multi-step acquire fails midway
// ---------------------------------------------------------------------------------------
//
// [`Rollback`]: what a multi-step acquire has got so far, released if it fails midway.
//
// A VMM allocation is four vendor calls (`aclrtMallocPhysical`, `aclrtReserveMemAddress`,
// `aclrtMapMem`, `aclrtMemSetAccess`), an import four more. Each successful acquire is
// pushed onto a `Rollback` at once, before the next fallible call (STYLE pattern 6); if
// the function returns early the guard undoes the steps in reverse order, and only
// [`Rollback::commit`] hands them over to a record in a handle table. Undo failures are
// logged (`log::error!`): the original error is the one the caller sees. An operation that needs its
// objects only while it runs (the staging buffer and stream of a staged copy) ends with
// [`Rollback::release`] instead, which releases them and reports the first failure.

/// One acquired vendor object and how to release it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Undo {
    /// `aclrtFreePhysical` of a physical handle (an address).
    FreePhysical(usize),
    /// `aclrtReleaseMemAddress` of a reserved range.
    ReleaseAddress(u64),
    /// `aclrtUnmapMem` of a mapped range.
    Unmap(u64),
    /// `aclrtIpcMemClose` of an imported or exported key.
    IpcClose([u8; ACL_IPC_KEY_LEN]),
    /// `aclrtDestroyNotify` of a notify (an address).
    DestroyNotify(usize),
    /// `aclrtFree` of an `aclrtMalloc` block.
    Free(u64),
    /// `aclrtDestroyStream` of a stream (an address).
    DestroyStream(usize),
}

impl Undo {
    /// Releases the object; the caller has bound its device.
    pub(crate) fn run(self, api: &AclApi) -> devipc_core::Result<()> {
        // SAFETY: each value was produced by the matching acquire call and is released
        // once: the `Rollback` (or record) holding it is consumed by this release, in the
        // order the acquires require (unmap before releasing the address, the address
        // before freeing the physical handle, a stream before the buffer its tasks use).
        unsafe {
            match self {
                Undo::FreePhysical(handle) => free_physical(api, handle),
                Undo::ReleaseAddress(va) => release_mem_address(api, va),
                Undo::Unmap(va) => unmap_mem(api, va),
                Undo::IpcClose(key) => ipc_mem_close(api, &key),
                Undo::DestroyNotify(notify) => destroy_notify(api, notify),
                Undo::Free(ptr) => free(api, ptr),
                Undo::DestroyStream(stream) => destroy_stream(api, stream),
            }
        }
    }
}

/// Steps to undo if the current operation fails; see the module docs.
///
/// Declare it *after* the [`DeviceScope`](crate::device::DeviceScope) of the operation,
/// so that it is dropped (and undoes) while the device is still bound.
#[must_use = "a Rollback undoes its steps when dropped unless committed"]
pub(crate) struct Rollback<'a> {
    api: &'a AclApi,
    steps: Vec<Undo>,
}

impl<'a> Rollback<'a> {
    /// An empty rollback.
    pub(crate) fn new(api: &'a AclApi) -> Self {
        Rollback {
            api,
            steps: Vec::with_capacity(4),
        }
    }

    /// Records an acquired object.
    pub(crate) fn push(&mut self, undo: Undo) {
        self.steps.push(undo);
    }

    /// The operation succeeded: the caller owns everything acquired.
    pub(crate) fn commit(mut self) {
        self.steps.clear();
    }

    /// The operation is done with what it acquired: releases every step now, in reverse
    /// order, and returns the first failure (the later steps are still released).
    pub(crate) fn release(mut self) -> devipc_core::Result<()> {
        let mut first = Ok(());
        while let Some(step) = self.steps.pop() {
            let result = step.run(self.api);
            if first.is_ok() {
                first = result;
            } else if let Err(e) = result {
                log::error!("devipc-ascend: releasing {step:?} failed as well: {e}");
            }
        }
        first
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        while let Some(step) = self.steps.pop() {
            if let Err(e) = step.run(self.api) {
                log::error!("devipc-ascend: undoing {step:?} after a failed operation failed: {e}");
            }
        }
    }
}
