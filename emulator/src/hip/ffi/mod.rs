//! The HIP C ABI: one `pub unsafe extern "C" fn` per function of
//! [`devipc_hip_sys::for_each_hip_fn!`], with exactly the list's signature, and
//! [`hip_api`], the [`HipApi`] table made of them.
//!
//! This module is the only `unsafe` of the HIP surface: each function checks its pointer
//! arguments for NULL (`hipErrorInvalidValue`), calls the safe logic of the other
//! modules through [`call`](crate::hip::errors::call) (which records the last error and
//! never lets a panic unwind into C), and only then reads or writes through the caller's pointers. The
//! functions are plain Rust items, not `#[no_mangle]`: the vendor names stay out of the
//! process's dynamic symbol table. The `cdylib` re-exports them under the vendor names
//! with [`devipc_hip_sys::hip_export_c_abi!`].
//!
//! The entry points sit in one file per topic, named after the safe module they call
//! (`runtime`: initialisation, versions, devices, contexts, `hipGetProcAddress`; `errors`:
//! the error texts; `identity`: PCI bus ids and UUIDs; `memory`, `host`, `stream`,
//! `ipc_mem`, `event`, `peer`, `vmm`), and
//! are re-exported here, where `crate::hip` re-exports them in turn; this file holds the
//! pointer helper they share and the two tables of them all: [`hip_api`] and the
//! name-to-address table of `hipGetProcAddress`.
#![allow(unsafe_code, non_snake_case)]

use std::sync::OnceLock;

use devipc_hip_sys::HipApi;
use devipc_hip_sys::types::*;

mod batch;
mod errors;
mod event;
mod host;
mod identity;
mod ipc_mem;
mod memory;
mod peer;
mod runtime;
mod stream;
mod vmm;

pub use batch::*;
pub use errors::*;
pub use event::*;
pub use host::*;
pub use identity::*;
pub use ipc_mem::*;
pub use memory::*;
pub use peer::*;
pub use runtime::*;
pub use stream::*;
pub use vmm::*;

use crate::config::HipVersion;
use crate::hip::errors::{Failure, HipResult};
use crate::hip::versions;

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
    crate::hip::runtime::config().map_or(HipVersion::DEFAULT, |c| c.hip_version)
}

/// Builds the [`HipApi`] of the emulator: every field is the function of the same name in
/// [`crate::hip`], `LibrarySource::Emulated` (devipc-core) as its source. No library is loaded and no symbol is exported.
///
/// The optional functions follow the emulated version: `hipGetProcAddress` is `None`
/// below ROCm 6.2, as it is for a real 5.2 library (the exported C symbol of the cdylib
/// exists regardless and answers `hipErrorNotSupported` there); the VMM family,
/// `hipPointerGetAttribute` and `hipDeviceGetUuid` are `None` below ROCm 5.1,
/// `hipMemcpyBatchAsync` below HIP 7.1.
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
    if !crate::hip::batch::exists_in(version) {
        // HIP 7.1 (issue 25).
        api.hipMemcpyBatchAsync = None;
    }
    if !versions::has_device_uuid(version) {
        // `@@hip_5.1`, like the VMM family.
        api.hipDeviceGetUuid = None;
    }
    api
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
