//! The C entry points: every function of `devipc_ascend_sys::for_each_acl_fn!` with the
//! list's exact signature, as `pub unsafe extern "C" fn` under the vendor name, without
//! `#[no_mangle]` (the vendor names stay out of the dynamic symbol table; the cdylib
//! exports them with `acl_export_c_abi!`).
//!
//! This is the only module of the surface with `unsafe` code, and it does nothing but the
//! pointer work at the boundary: NULL checks (`ACL_ERROR_INVALID_PARAM`, rule
//! `ascend.param.null-pointer`), reading C strings, keys and pid arrays, writing
//! out-parameters, and the byte copies of `aclrtMemcpy` / `aclrtMemset` once the safe
//! layer has validated them. Every function runs its body through [`run`], which catches
//! panics (reported as `ACL_ERROR_RT_INTERNAL_ERROR`, never unwinding into C) and records
//! a failure as the thread's last error for `aclGetRecentErrMsg`.
//!
//! # Safety
//!
//! Callers uphold the vendor's contract: non-NULL pointers are valid for the access the
//! ACL documentation describes (an out-parameter is writable, a key is a NUL-terminated
//! string or a buffer of at least 65 bytes, a pid array holds `num` elements, host copy
//! operands cover `count` bytes). Device pointers and opaque handles are never trusted:
//! they are looked up in the process's tables first.
#![allow(unsafe_code)]
#![allow(
    non_snake_case,
    reason = "the vendor's function and parameter names are kept, as the function list requires"
)]

use std::ffi::CStr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};

use devipc_ascend_sys::codes::ACL_SUCCESS;
#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::error::EmuError;
use crate::handle::KEY_LEN;
use crate::state::meta::MAX_TRUSTLIST;

use super::errors::{self, AclFailure, AclResult};
use super::{
    device, event, init, ipc_key, memory, notify, process_state, rules, shareable, stream, vmm,
};

/// Runs one call's body: catches panics, records a failure as the thread's last error,
/// and returns the code.
fn run(function: &'static str, body: impl FnOnce() -> AclResult<()>) -> aclError {
    let outcome = catch_unwind(AssertUnwindSafe(body))
        .unwrap_or_else(|payload| Err(errors::internal_panic(payload.as_ref())));
    match outcome {
        Ok(()) => ACL_SUCCESS,
        Err(failure) => {
            // Recording only formats and stores a string; never let it unwind either.
            let _ = catch_unwind(AssertUnwindSafe(|| failure.record(function)));
            failure.code
        }
    }
}

/// `p` as a non-NULL pointer, or the NULL-pointer failure naming `what`.
fn non_null<T>(p: *mut T, what: &str) -> AclResult<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| AclFailure::null(what))
}

/// Checks that a `const` pointer is not NULL.
fn not_null<T>(p: *const T, what: &str) -> AclResult<()> {
    if p.is_null() {
        Err(AclFailure::null(what))
    } else {
        Ok(())
    }
}

/// An opaque handle value (stream, notify, physical handle) as given to C. Handles are
/// never dereferenced, so they carry no provenance.
fn handle_out(value: usize) -> *mut c_void {
    ptr::without_provenance_mut(value)
}

/// A device address as given to C: the caller dereferences it, so it takes the exposed
/// provenance of the mapping it lies in.
fn address_out(addr: usize) -> *mut c_void {
    ptr::with_exposed_provenance_mut(addr)
}

/// Reads a key: the bytes of a NUL-terminated string, at most [`KEY_LEN`] of them,
/// stopping at (and including) the first NUL.
///
/// # Safety
///
/// `key` is non-NULL and readable up to its first NUL or for [`KEY_LEN`] bytes, whichever
/// comes first (a key buffer of the vendor's contract).
unsafe fn read_key(key: *const c_char) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(KEY_LEN);
    for i in 0..KEY_LEN {
        // SAFETY: bytes 0..i were not NUL, so byte i is still inside the caller's string
        // or its 65-byte buffer (this function's contract).
        let b = unsafe { key.add(i).cast::<u8>().read() };
        bytes.push(b);
        if b == 0 {
            break;
        }
    }
    bytes
}

/// Reads a pid array after checking it: NULL or `num == 0` fails with `rule`'s code; more
/// than the trustlist can hold fails before anything is read.
///
/// # Safety
///
/// A non-NULL `pid` points to `num` readable `i32`s.
unsafe fn read_pids(pid: *mut i32, num: usize, rule: &'static str) -> AclResult<Vec<i32>> {
    if pid.is_null() || num == 0 {
        return Err(AclFailure::rule(
            rule,
            format!(
                "the pid array is {} with {num} entries",
                if pid.is_null() { "NULL" } else { "given" }
            ),
        ));
    }
    if num > MAX_TRUSTLIST {
        return Err(EmuError::LimitExceeded {
            what: "trustlist entries",
            limit: MAX_TRUSTLIST,
        }
        .into());
    }
    // SAFETY: non-NULL, `num` elements by this function's contract; `num` is small enough
    // that the slice's byte length fits an isize.
    Ok(unsafe { std::slice::from_raw_parts(pid, num) }.to_vec())
}

/// Writes a 65-byte key into a caller's buffer of at least `len >= 65` bytes.
///
/// # Safety
///
/// `out` is non-NULL and writable for `len` bytes, and the safe layer checked `len >= 65`.
unsafe fn write_key(out: *mut c_char, key: &[u8; KEY_LEN]) {
    // SAFETY: this function's contract; `key` is a distinct Rust array.
    unsafe { ptr::copy_nonoverlapping(key.as_ptr(), out.cast::<u8>(), KEY_LEN) };
}

// ---- init, errors, devices ---------------------------------------------------------------

/// `aclInit`: initialises ACL for this process (reference counted). `configPath` may be
/// NULL; otherwise it must name a readable file.
///
/// # Safety
///
/// A non-NULL `configPath` is a NUL-terminated string.
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    run("aclInit", || {
        let path = if configPath.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated by the contract.
            Some(
                unsafe { CStr::from_ptr(configPath) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        init::init(path.as_deref())
    })
}

/// `aclFinalize`: undoes one `aclInit`.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclFinalize() -> aclError {
    run("aclFinalize", init::finalize)
}

/// `aclGetRecentErrMsg`: gets and clears the calling thread's last error message (`""`
/// when there is none). The string stays valid until the next call on this thread.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    catch_unwind(errors::take_recent_message).unwrap_or(ptr::null())
}

/// `aclrtSetDevice`: makes `deviceId` the calling thread's current device.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    run("aclrtSetDevice", || device::set_device(deviceId))
}

/// `aclrtResetDevice`: releases one use of `deviceId` by this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    run("aclrtResetDevice", || device::reset_device(deviceId))
}

/// `aclrtGetDevice`: the calling thread's current device.
///
/// # Safety
///
/// A non-NULL `deviceId` is writable.
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    run("aclrtGetDevice", || {
        let out = non_null(deviceId, "deviceId")?;
        let d = device::get_device()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(d) };
        Ok(())
    })
}

/// `aclrtGetDeviceCount`: `DEVIPC_EMU_DEVICES`.
///
/// # Safety
///
/// A non-NULL `count` is writable.
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    run("aclrtGetDeviceCount", || {
        let out = non_null(count, "count")?;
        let n = process_state::device_count()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(n) };
        Ok(())
    })
}

// ---- memory --------------------------------------------------------------------------------

/// `aclrtMalloc`: allocates device memory on the current device.
///
/// # Safety
///
/// A non-NULL `devPtr` is writable.
pub unsafe extern "C" fn aclrtMalloc(
    devPtr: *mut *mut c_void,
    size: usize,
    policy: aclrtMemMallocPolicy,
) -> aclError {
    run("aclrtMalloc", || {
        let out = non_null(devPtr, "devPtr")?;
        let addr = memory::malloc(size, policy)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(addr)) };
        Ok(())
    })
}

/// `aclrtFree`: frees an `aclrtMalloc` block.
///
/// # Safety
///
/// None: `devPtr` is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
    run("aclrtFree", || {
        non_null(devPtr, "devPtr")?;
        memory::free(devPtr.addr())
    })
}

/// `aclrtMemcpy`: synchronous copy of `count` bytes (`destMax` is `dst`'s capacity).
///
/// # Safety
///
/// Host operands (per `kind`) are valid for `count` bytes; device operands are checked.
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: aclrtMemcpyKind,
) -> aclError {
    run("aclrtMemcpy", || {
        non_null(dst, "dst")?;
        not_null(src, "src")?;
        let _mapped = memory::check_copy(dst.addr(), destMax, src.addr(), count, kind, false)?;
        if count > 0 {
            // SAFETY: device operands lie inside live mappings of this process (checked
            // and kept mapped by `_mapped`); host operands are valid for `count` bytes by
            // the contract. `copy` allows overlap (a copy within one block).
            unsafe { ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), count) };
        }
        Ok(())
    })
}

/// `aclrtMemset`: fills `count` bytes of device or host memory with `value`.
///
/// # Safety
///
/// If `devPtr` is host memory it is writable for `count` bytes; device memory is checked.
pub unsafe extern "C" fn aclrtMemset(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
) -> aclError {
    run("aclrtMemset", || {
        non_null(devPtr, "devPtr")?;
        let _mapped = memory::check_fill(devPtr.addr(), maxCount, count)?;
        if count > 0 {
            // SAFETY: as for aclrtMemcpy: a checked, mapped device range or host memory
            // writable for `count` bytes by the contract. Like C memset, the value is
            // converted to a byte.
            unsafe { ptr::write_bytes(devPtr.cast::<u8>(), value as u8, count) };
        }
        Ok(())
    })
}

// ---- streams ---------------------------------------------------------------------------------

/// `aclrtCreateStream`: a stream on the current device.
///
/// # Safety
///
/// A non-NULL `stream` is writable.
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    run("aclrtCreateStream", || {
        let out = non_null(stream, "stream")?;
        let handle = stream::create()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(handle)) };
        Ok(())
    })
}

/// `aclrtDestroyStream`: waits for the stream's tasks, then destroys it.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    run("aclrtDestroyStream", || {
        non_null(stream, "stream")?;
        stream::destroy(stream.addr())
    })
}

/// `aclrtSynchronizeStream`: waits for the stream's tasks; returns the first failure among
/// them (e.g. 107019 of a notify wait that expired).
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    run("aclrtSynchronizeStream", || {
        stream::synchronize(stream.addr())
    })
}

// ---- VMM -------------------------------------------------------------------------------------

/// `aclrtMallocPhysical`: physical memory of `size` bytes as described by `prop`.
///
/// # Safety
///
/// A non-NULL `handle` is writable; a non-NULL `prop` is readable.
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut aclrtDrvMemHandle,
    size: usize,
    prop: *const aclrtPhysicalMemProp,
    flags: u64,
) -> aclError {
    run("aclrtMallocPhysical", || {
        let out = non_null(handle, "handle")?;
        not_null(prop, "prop")?;
        // SAFETY: non-NULL and readable by the contract.
        let prop = unsafe { prop.read() };
        let h = vmm::malloc_physical(size, &prop, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(h)) };
        Ok(())
    })
}

/// `aclrtFreePhysical`.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError {
    run("aclrtFreePhysical", || {
        non_null(handle, "handle")?;
        vmm::free_physical(handle.addr())
    })
}

/// `aclrtReserveMemAddress`: reserves a virtual address range.
///
/// # Safety
///
/// A non-NULL `virPtr` is writable; `expectPtr` is only compared with NULL.
pub unsafe extern "C" fn aclrtReserveMemAddress(
    virPtr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expectPtr: *mut c_void,
    flags: u64,
) -> aclError {
    run("aclrtReserveMemAddress", || {
        let out = non_null(virPtr, "virPtr")?;
        let base = vmm::reserve(size, alignment, expectPtr.addr(), flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(base)) };
        Ok(())
    })
}

/// `aclrtReleaseMemAddress`.
///
/// # Safety
///
/// None: the address is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError {
    run("aclrtReleaseMemAddress", || {
        non_null(virPtr, "virPtr")?;
        vmm::release(virPtr.addr())
    })
}

/// `aclrtMapMem`: maps a physical handle at a reserved address.
///
/// # Safety
///
/// None: the address and handle are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtMapMem(
    virPtr: *mut c_void,
    size: usize,
    offset: usize,
    handle: aclrtDrvMemHandle,
    flags: u64,
) -> aclError {
    run("aclrtMapMem", || {
        non_null(virPtr, "virPtr")?;
        non_null(handle, "handle")?;
        vmm::map(virPtr.addr(), size, offset, handle.addr(), flags)
    })
}

/// `aclrtUnmapMem`.
///
/// # Safety
///
/// None: the address is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError {
    run("aclrtUnmapMem", || {
        non_null(virPtr, "virPtr")?;
        vmm::unmap(virPtr.addr())
    })
}

// ---- peers -----------------------------------------------------------------------------------

/// `aclrtDeviceCanAccessPeer`: 1 for two distinct valid devices, 0 for a device and
/// itself.
///
/// # Safety
///
/// A non-NULL `canAccessPeer` is writable.
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    canAccessPeer: *mut i32,
    deviceId: i32,
    peerDeviceId: i32,
) -> aclError {
    run("aclrtDeviceCanAccessPeer", || {
        let out = non_null(canAccessPeer, "canAccessPeer")?;
        let can = device::can_access_peer(deviceId, peerDeviceId)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(can) };
        Ok(())
    })
}

/// `aclrtDeviceEnablePeerAccess`: current device -> `peerDeviceId`, for this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) -> aclError {
    run("aclrtDeviceEnablePeerAccess", || {
        device::enable_peer_access(peerDeviceId, flags)
    })
}

// ---- optional: asynchronous copy ------------------------------------------------------------

/// `aclrtMemcpyAsync`: copy of `count` bytes on `stream` (NULL: the default stream).
/// Checked like `aclrtMemcpy` when called, except that on memory imported by key and used
/// from another device the device-to-device kinds are allowed; the copy is a stream task
/// (done before the call returns on an idle stream). When it runs, its device operands are
/// checked again: memory that went away in the meantime fails the copy, and the next
/// `aclrtSynchronizeStream` reports it.
///
/// # Safety
///
/// Host operands (per `kind`) are valid for `count` bytes until the stream has run the copy
/// (`aclrtSynchronizeStream`), as the vendor requires; device operands and the stream are
/// checked.
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: aclrtMemcpyKind,
    stream: aclrtStream,
) -> aclError {
    run("aclrtMemcpyAsync", || {
        non_null(dst, "dst")?;
        not_null(src, "src")?;
        stream::check(stream.addr())?;
        drop(memory::check_copy(
            dst.addr(),
            destMax,
            src.addr(),
            count,
            kind,
            true,
        )?);
        // The task re-derives the pointers from their exposed addresses on the thread
        // that runs it.
        let (dst, src) = (dst.expose_provenance(), src.expose_provenance());
        let copy = move || -> AclResult<()> {
            let _mapped = memory::check_copy(dst, destMax, src, count, kind, true)?;
            if count > 0 {
                // SAFETY: as for aclrtMemcpy: device operands lie inside live mappings of
                // this process (checked again and kept mapped by `_mapped`), host operands
                // are valid for `count` bytes until the stream ran the copy by the
                // contract, and `copy` allows overlap.
                unsafe {
                    ptr::copy(
                        ptr::with_exposed_provenance::<u8>(src),
                        ptr::with_exposed_provenance_mut::<u8>(dst),
                        count,
                    )
                };
            }
            Ok(())
        };
        stream::submit(stream.addr(), crate::stream_queue::quick(copy))
    })
}

// ---- optional: address range, granularity, access -------------------------------------------

/// `aclrtMemGetAddressRange`: base and size of the allocation containing `ptr`.
///
/// # Safety
///
/// Non-NULL `pbase` and `psize` are writable; `ptr` is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtMemGetAddressRange(
    ptr: *mut c_void,
    pbase: *mut *mut c_void,
    psize: *mut usize,
) -> aclError {
    run("aclrtMemGetAddressRange", || {
        non_null(ptr, "ptr")?;
        let base_out = non_null(pbase, "pbase")?;
        let size_out = non_null(psize, "psize")?;
        let (base, size) = memory::address_range(ptr.addr())?;
        // SAFETY: both non-NULL and writable by the contract.
        unsafe {
            base_out.write(address_out(base));
            size_out.write(size);
        }
        Ok(())
    })
}

/// `aclrtMemGetAllocationGranularity`.
///
/// # Safety
///
/// A non-NULL `prop` is readable and a non-NULL `granularity` writable.
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    prop: *mut aclrtPhysicalMemProp,
    option: aclrtMemGranularityOptions,
    granularity: *mut usize,
) -> aclError {
    run("aclrtMemGetAllocationGranularity", || {
        let prop = non_null(prop, "prop")?;
        let out = non_null(granularity, "granularity")?;
        // SAFETY: non-NULL and readable by the contract.
        let prop = unsafe { prop.read() };
        let g = vmm::granularity(&prop, option)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(g) };
        Ok(())
    })
}

/// `aclrtMemSetAccess`: sets the access of a mapping.
///
/// # Safety
///
/// A non-NULL `desc` points to `count` readable descriptors.
pub unsafe extern "C" fn aclrtMemSetAccess(
    virPtr: *mut c_void,
    size: usize,
    desc: *mut aclrtMemAccessDesc,
    count: usize,
) -> aclError {
    run("aclrtMemSetAccess", || {
        non_null(virPtr, "virPtr")?;
        non_null(desc, "desc")?;
        if count > MAX_ACCESS_DESCS {
            return Err(AclFailure::rule(
                rules::PARAM_ENUM_VALUE,
                format!("count {count}: at most {MAX_ACCESS_DESCS} descriptors (one per device)"),
            ));
        }
        // SAFETY: non-NULL, `count` readable descriptors by the contract; `count` is
        // bounded, so the byte length fits an isize.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) }.to_vec();
        vmm::set_access(virPtr.addr(), size, &descs)
    })
}

/// Most descriptors one `aclrtMemSetAccess` call takes: one per possible device.
const MAX_ACCESS_DESCS: usize = crate::config::MAX_DEVICES as usize;

// ---- optional: VMM shareable handles ---------------------------------------------------------

/// `aclrtMemExportToShareableHandle`: exports a physical handle (once).
///
/// # Safety
///
/// A non-NULL `shareableHandle` is writable; `handle` is looked up.
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: aclrtDrvMemHandle,
    handleType: aclrtMemHandleType,
    flags: u64,
    shareableHandle: *mut u64,
) -> aclError {
    run("aclrtMemExportToShareableHandle", || {
        non_null(handle, "handle")?;
        let out = non_null(shareableHandle, "shareableHandle")?;
        let sh = shareable::export(handle.addr(), handleType, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(sh) };
        Ok(())
    })
}

/// `aclrtMemSetPidToShareableHandle`: adds pids to the trustlist.
///
/// # Safety
///
/// A non-NULL `pid` points to `pidNum` readable values.
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareableHandle: u64,
    pid: *mut i32,
    pidNum: usize,
) -> aclError {
    run("aclrtMemSetPidToShareableHandle", || {
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, pidNum, rules::VMM_SET_PID_ARGS) }?;
        shareable::set_pids(shareableHandle, &pids)
    })
}

/// `aclrtMemImportFromShareableHandle`: imports a shareable handle on `deviceId`.
///
/// # Safety
///
/// A non-NULL `handle` is writable.
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareableHandle: u64,
    deviceId: i32,
    handle: *mut aclrtDrvMemHandle,
) -> aclError {
    run("aclrtMemImportFromShareableHandle", || {
        let out = non_null(handle, "handle")?;
        let h = shareable::import(shareableHandle, deviceId)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(h)) };
        Ok(())
    })
}

// ---- optional: IPC keys ----------------------------------------------------------------------

/// `aclrtIpcMemGetExportKey`: exports `aclrtMalloc` memory under a new key.
///
/// # Safety
///
/// A non-NULL `key` is writable for `len` bytes; `devPtr` is looked up.
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    devPtr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    run("aclrtIpcMemGetExportKey", || {
        non_null(devPtr, "devPtr")?;
        let out = non_null(key, "key")?;
        let k = ipc_key::export(devPtr.addr(), size, len, flags)?;
        // SAFETY: writable for `len >= 65` bytes (checked by `export`) by the contract.
        unsafe { write_key(out.as_ptr(), &k) };
        Ok(())
    })
}

/// `aclrtIpcMemSetImportPid`: adds pids to a key's trustlist.
///
/// # Safety
///
/// A non-NULL `key` is a key string; a non-NULL `pid` points to `num` readable values.
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> aclError {
    run("aclrtIpcMemSetImportPid", || {
        not_null(key, "key")?;
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, num, rules::KEY_SET_PID_ARGS) }?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        ipc_key::set_pids(&key, &pids)
    })
}

/// `aclrtIpcMemImportByKey`: maps the memory of a key at a new address.
///
/// # Safety
///
/// A non-NULL `devPtr` is writable; a non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    devPtr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> aclError {
    run("aclrtIpcMemImportByKey", || {
        let out = non_null(devPtr, "devPtr")?;
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        let addr = ipc_key::import(&key, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(addr)) };
        Ok(())
    })
}

/// `aclrtIpcMemClose`: closes one import, or (in the exporter) destroys the key.
///
/// # Safety
///
/// A non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
    run("aclrtIpcMemClose", || {
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        ipc_key::close(&key)
    })
}

/// `aclrtDeviceGetBareTgid`: the process id trustlists expect (the pid).
///
/// # Safety
///
/// A non-NULL `pid` is writable.
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    run("aclrtDeviceGetBareTgid", || {
        let out = non_null(pid, "pid")?;
        let tgid = device::bare_tgid()?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(tgid) };
        Ok(())
    })
}

// ---- optional: notify ------------------------------------------------------------------------

/// `aclrtCreateNotify`: a notify on the current device.
///
/// # Safety
///
/// A non-NULL `notify` is writable.
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    run("aclrtCreateNotify", || {
        let out = non_null(notify, "notify")?;
        let n = notify::create(flag)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(n)) };
        Ok(())
    })
}

/// `aclrtDestroyNotify`: this process's use of the notify ends.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    run("aclrtDestroyNotify", || {
        non_null(notify, "notify")?;
        notify::destroy(notify.addr())
    })
}

/// `aclrtNotifyGetExportKey`: the notify's key.
///
/// # Safety
///
/// A non-NULL `key` is writable for `len` bytes; `notify` is looked up.
pub unsafe extern "C" fn aclrtNotifyGetExportKey(
    notify: aclrtNotify,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    run("aclrtNotifyGetExportKey", || {
        non_null(notify, "notify")?;
        let out = non_null(key, "key")?;
        let k = notify::export(notify.addr(), len, flags)?;
        // SAFETY: writable for `len >= 65` bytes (checked by `export`) by the contract.
        unsafe { write_key(out.as_ptr(), &k) };
        Ok(())
    })
}

/// `aclrtNotifySetImportPid`: adds pids to the notify's trustlist.
///
/// # Safety
///
/// A non-NULL `pid` points to `num` readable values; `notify` is looked up.
pub unsafe extern "C" fn aclrtNotifySetImportPid(
    notify: aclrtNotify,
    pid: *mut i32,
    num: usize,
) -> aclError {
    run("aclrtNotifySetImportPid", || {
        non_null(notify, "notify")?;
        // SAFETY: forwarded from this function's contract.
        let pids = unsafe { read_pids(pid, num, rules::NOTIFY_SET_PID_ARGS) }?;
        notify::set_pids(notify.addr(), &pids)
    })
}

/// `aclrtNotifyImportByKey`: opens a notify by key.
///
/// # Safety
///
/// A non-NULL `notify` is writable; a non-NULL `key` is a key string.
pub unsafe extern "C" fn aclrtNotifyImportByKey(
    notify: *mut aclrtNotify,
    key: *const c_char,
    flags: u64,
) -> aclError {
    run("aclrtNotifyImportByKey", || {
        let out = non_null(notify, "notify")?;
        not_null(key, "key")?;
        // SAFETY: non-NULL key string by the contract.
        let key = unsafe { read_key(key) };
        let n = notify::import(&key, flags)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(n)) };
        Ok(())
    })
}

/// `aclrtRecordNotify`: enqueues the record of the notify on the stream.
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    run("aclrtRecordNotify", || {
        non_null(notify, "notify")?;
        notify::record(notify.addr(), stream.addr())
    })
}

/// `aclrtWaitAndResetNotify`: enqueues on the stream a wait until the notify is set, which
/// then resets it; the call returns at once and the wait blocks only the stream. `timeout`
/// in seconds, 0 waits forever; an expired wait fails the stream (107019 from the next
/// `aclrtSynchronizeStream`).
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    run("aclrtWaitAndResetNotify", || {
        non_null(notify, "notify")?;
        notify::wait_and_reset(notify.addr(), stream.addr(), timeout)
    })
}

// ---- optional: versions ----------------------------------------------------------------------

/// `aclrtGetVersion`: the ACL API version (1.16.0, CANN 8.5.0's).
///
/// # Safety
///
/// Non-NULL arguments are writable.
pub unsafe extern "C" fn aclrtGetVersion(
    majorVersion: *mut i32,
    minorVersion: *mut i32,
    patchVersion: *mut i32,
) -> aclError {
    run("aclrtGetVersion", || {
        let major = non_null(majorVersion, "majorVersion")?;
        let minor = non_null(minorVersion, "minorVersion")?;
        let patch = non_null(patchVersion, "patchVersion")?;
        let (a, b, c) = init::ACL_VERSION;
        // SAFETY: all three non-NULL and writable by the contract.
        unsafe {
            major.write(a);
            minor.write(b);
            patch.write(c);
        }
        Ok(())
    })
}

/// `aclsysGetVersionStr`: the version string of a package into a buffer of
/// `ACL_PKG_VERSION_MAX_SIZE` bytes.
///
/// # Safety
///
/// A non-NULL `pkgName` is a NUL-terminated string; a non-NULL `versionStr` is writable
/// for `ACL_PKG_VERSION_MAX_SIZE` bytes.
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkgName: *mut c_char,
    versionStr: *mut c_char,
) -> aclError {
    run("aclsysGetVersionStr", || {
        non_null(pkgName, "pkgName")?;
        let out = non_null(versionStr, "versionStr")?;
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let name = unsafe { CStr::from_ptr(pkgName) }
            .to_string_lossy()
            .into_owned();
        let text = init::version_str(&name)?;
        // SAFETY: the buffer holds ACL_PKG_VERSION_MAX_SIZE bytes by the contract, and
        // `text` (NUL included) is no longer (see `init::version_str`).
        unsafe { ptr::copy_nonoverlapping(text.as_ptr(), out.as_ptr().cast::<u8>(), text.len()) };
        Ok(())
    })
}

// ---- optional: device synchronisation, memory info, host memory, forced resets -----------

/// `aclrtSynchronizeDevice`: waits for the tasks of this process's streams on the current
/// device; returns the first failure among them. Needs a current device.
///
/// # Safety
///
/// None beyond the vendor's contract (no arguments).
pub unsafe extern "C" fn aclrtSynchronizeDevice() -> aclError {
    run("aclrtSynchronizeDevice", device::synchronize_device)
}

/// `aclrtSynchronizeDeviceWithTimeout`: as `aclrtSynchronizeDevice`, `timeout` in ms (-1:
/// forever; below -1 is `ACL_ERROR_RT_PARAM_INVALID`; tasks still running at the timeout:
/// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`).
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
    run("aclrtSynchronizeDeviceWithTimeout", || {
        device::synchronize_device_with_timeout(timeout)
    })
}

/// `aclrtGetMemInfo`: free and total bytes of memory kind `attr` on the current device.
///
/// # Safety
///
/// Non-NULL `free` and `total` are writable.
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: aclrtMemAttr,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    run("aclrtGetMemInfo", || {
        let free_out = non_null(free, "free")?;
        let total_out = non_null(total, "total")?;
        let (f, t) = device::mem_info(attr)?;
        // SAFETY: both non-NULL and writable by the contract.
        unsafe {
            free_out.write(f);
            total_out.write(t);
        }
        Ok(())
    })
}

/// `aclrtMallocHost`: page-aligned host memory of `size` bytes (rounded up to 32), zeroed.
///
/// # Safety
///
/// A non-NULL `hostPtr` is writable.
pub unsafe extern "C" fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> aclError {
    run("aclrtMallocHost", || {
        let out = non_null(hostPtr, "hostPtr")?;
        let len = memory::check_malloc_host(size)?;
        let layout =
            std::alloc::Layout::from_size_align(len, memory::HOST_ALIGN).map_err(|_| {
                AclFailure::code(
                    devipc_ascend_sys::codes::ACL_ERROR_RT_MEMORY_ALLOCATION,
                    format!("size {size} is too large"),
                )
            })?;
        // SAFETY: `layout` has a non-zero size (check_malloc_host refuses 0).
        let block = unsafe { std::alloc::alloc_zeroed(layout) };
        if block.is_null() {
            return Err(AclFailure::code(
                devipc_ascend_sys::codes::ACL_ERROR_RT_MEMORY_ALLOCATION,
                format!("the host has no {len} bytes left"),
            ));
        }
        // The caller reads and writes the block through the address: expose it.
        let addr = block.expose_provenance();
        if let Err(e) = memory::register_host(addr, len) {
            // SAFETY: allocated just above with this layout and not handed out.
            unsafe { std::alloc::dealloc(block, layout) };
            return Err(e);
        }
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(address_out(addr)) };
        Ok(())
    })
}

/// `aclrtFreeHost`: frees a block of `aclrtMallocHost`.
///
/// # Safety
///
/// The caller no longer uses the block (the vendor's contract); the address is looked up
/// before anything is freed.
pub unsafe extern "C" fn aclrtFreeHost(hostPtr: *mut c_void) -> aclError {
    run("aclrtFreeHost", || {
        non_null(hostPtr, "hostPtr")?;
        let addr = hostPtr.addr();
        let len = memory::unregister_host(addr)?;
        let layout = std::alloc::Layout::from_size_align(len, memory::HOST_ALIGN)
            .expect("the layout of a registered block was valid when it was allocated");
        // SAFETY: `addr` is the base of a block aclrtMallocHost allocated with this layout
        // (it was in the table, which only aclrtMallocHost fills) and whose address it
        // exposed; the table entry is gone, so it is freed once.
        unsafe { std::alloc::dealloc(ptr::with_exposed_provenance_mut(addr), layout) };
        Ok(())
    })
}

/// `aclrtDestroyStreamForce`: destroys a stream without waiting for its tasks (queued
/// tasks are dropped, a running wait is abandoned).
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    run("aclrtDestroyStreamForce", || {
        non_null(stream, "stream")?;
        stream::destroy_force(stream.addr())
    })
}

/// `aclrtResetDeviceForce`: releases every use of `deviceId` by this process.
///
/// # Safety
///
/// None beyond the vendor's contract (no pointers).
pub unsafe extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    run("aclrtResetDeviceForce", || {
        device::reset_device_force(deviceId)
    })
}

// ---- optional: events and IPC events -----------------------------------------------------

/// `aclrtCreateEventExWithFlag`: an event on the current device (`ACL_EVENT_IPC` alone for
/// an event other processes open).
///
/// # Safety
///
/// A non-NULL `event` is writable.
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    run("aclrtCreateEventExWithFlag", || {
        let out = non_null(event, "event")?;
        let e = event::create(flag)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(e)) };
        Ok(())
    })
}

/// `aclrtDestroyEvent`: this process's use of the event ends.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtDestroyEvent(event: aclrtEvent) -> aclError {
    run("aclrtDestroyEvent", || {
        non_null(event, "event")?;
        event::destroy(event.addr())
    })
}

/// `aclrtRecordEvent`: enqueues a record of the event on `stream`; it completes when the
/// stream reaches it.
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    run("aclrtRecordEvent", || {
        non_null(event, "event")?;
        event::record(event.addr(), stream.addr())
    })
}

/// `aclrtStreamWaitEvent`: `stream` waits for the event's latest record (a stream task;
/// the call returns at once).
///
/// # Safety
///
/// None: the handles are looked up, never dereferenced.
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError {
    run("aclrtStreamWaitEvent", || {
        non_null(event, "event")?;
        event::stream_wait(stream.addr(), event.addr())
    })
}

/// `aclrtSynchronizeEvent`: the host waits for the event's latest record.
///
/// # Safety
///
/// None: the handle is looked up, never dereferenced.
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError {
    run("aclrtSynchronizeEvent", || {
        non_null(event, "event")?;
        event::synchronize(event.addr())
    })
}

/// `aclrtQueryEventStatus`: whether the event's latest record completed.
///
/// # Safety
///
/// A non-NULL `status` is writable; `event` is looked up.
pub unsafe extern "C" fn aclrtQueryEventStatus(
    event: aclrtEvent,
    status: *mut aclrtEventRecordedStatus,
) -> aclError {
    run("aclrtQueryEventStatus", || {
        non_null(event, "event")?;
        let out = non_null(status, "status")?;
        let s = event::query(event.addr())?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(s) };
        Ok(())
    })
}

/// `aclrtIpcGetEventHandle`: the 64-byte handle of an `ACL_EVENT_IPC` event.
///
/// # Safety
///
/// A non-NULL `handle` is writable; `event` is looked up.
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: aclrtEvent,
    handle: *mut aclrtIpcEventHandle,
) -> aclError {
    run("aclrtIpcGetEventHandle", || {
        non_null(event, "event")?;
        let out = non_null(handle, "handle")?;
        let bytes = event::get_handle(event.addr())?;
        let mut h = aclrtIpcEventHandle::default();
        for (slot, b) in h.reserved.iter_mut().zip(bytes) {
            *slot = b as c_char;
        }
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(h) };
        Ok(())
    })
}

/// `aclrtIpcOpenEventHandle`: opens another process's event from its handle.
///
/// # Safety
///
/// A non-NULL `event` is writable; `handle` is a value, checked before use.
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: aclrtIpcEventHandle,
    event: *mut aclrtEvent,
) -> aclError {
    run("aclrtIpcOpenEventHandle", || {
        let out = non_null(event, "event")?;
        let mut bytes = [0u8; crate::handle::HANDLE64_LEN];
        for (b, c) in bytes.iter_mut().zip(handle.reserved) {
            *b = c as u8;
        }
        let e = event::open(&bytes)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { out.write(handle_out(e)) };
        Ok(())
    })
}
