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
//! The entry points sit in one file per topic, named after the safe module they call
//! (`device`: initialisation, errors, devices, peers, versions; `memory`, `vmm`,
//! `shareable`, `ipc_key`, `notify`, `stream`, `event`), and are re-exported here; this
//! file holds [`run`] and the pointer helpers they share.
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

mod batch;
mod device;
mod event;
mod ipc_key;
mod memory;
mod notify;
mod shareable;
mod stream;
mod vmm;

pub use batch::*;
pub use device::*;
pub use event::*;
pub use ipc_key::*;
pub use memory::*;
pub use notify::*;
pub use shareable::*;
pub use stream::*;
pub use vmm::*;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};

use devipc_ascend_sys::codes::ACL_SUCCESS;
#[allow(
    clippy::wildcard_imports,
    reason = "the signatures use the C types bare, as the function list does"
)]
use devipc_ascend_sys::types::*;

use crate::acl::errors::{self, AclFailure, AclResult};
use crate::error::EmuError;
use crate::handle::KEY_LEN;
use crate::state::meta::MAX_TRUSTLIST;

/// Runs one call's body: catches panics, records a failure as the thread's last error,
/// and returns the code.
fn run(function: &'static str, body: impl FnOnce() -> AclResult<()>) -> aclError {
    let outcome = crate::panic_boundary::catch(body, errors::internal_panic);
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

/// The ACL function table filled with this module's functions: every required and
/// optional function present, source `LibrarySource::Emulated`. The state directory and
/// configuration come from the environment (`DEVIPC_EMU_*`) on first use.
pub fn acl_api() -> devipc_ascend_sys::AclApi {
    // SAFETY: every function of `crate::acl` (the `ffi` shims) implements the ACL C function
    // of its name with the table's exact prototype (a mismatch would not compile): NULL
    // checks first, out-parameters written only on success, handles looked up, never
    // trusted, and no function unwinds.
    unsafe { devipc_ascend_sys::acl_api_from_module!(crate::acl) }
}
