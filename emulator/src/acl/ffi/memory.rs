//! Entry points of device and host memory blocks and their copies (safe layer:
//! `memory`): `aclrtMalloc` / `aclrtFree`, synchronous and asynchronous copies, fills,
//! address ranges, `aclrtMallocHost` / `aclrtFreeHost`.

use std::ptr;

#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::errors::{AclFailure, AclResult};
use crate::acl::{memory, stream};

use super::{address_out, non_null, not_null, run};

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

// ---- optional: address range ------------------------------------------------------------

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

// ---- optional: host memory --------------------------------------------------------------

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
