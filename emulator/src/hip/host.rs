//! Page-locked host memory: `hipHostMalloc` and `hipHostFree`.
//!
//! Emulated devices address host memory directly, so "pinned" host memory is ordinary
//! memory of this process (a shared anonymous mapping), page aligned and zeroed, recorded in [`HOST`] so that
//! `hipPointerGetAttributes` reports it as host memory, `hipMemGetAddressRange` finds its
//! base, and copies accept it as an operand the device can reach (as CLR does for
//! `hipHostMalloc` memory whatever the copy kind says). It is process-local: host memory
//! is not exportable with `hipIpcGetMemHandle` (the call refuses it like any pointer that
//! is not `hipMalloc` memory; api-facts D.8 leaves the real answer UNVERIFIED).
//!
//! Flags (HIP52 header, unchanged in 6.x): `hipHostMallocDefault`, `Portable`, `Mapped`,
//! `WriteCombined`, `NumaUser`, `Coherent`, `NonCoherent`; anything else, or `Coherent`
//! together with `NonCoherent`, is `hipErrorInvalidValue` (CLR `hipHostMalloc`). A size of
//! 0 writes NULL and succeeds, as `hipMalloc` does. `hipHostFree(NULL)` succeeds; a pointer
//! that is not the base of a `hipHostMalloc` allocation is `hipErrorInvalidValue` (CLR
//! would free `hipMalloc` memory there too, and `hipFree` would free host memory: the
//! emulator refuses both, so misuse shows).

use std::fs::OpenOptions;
use std::sync::Arc;

use devipc_hip_sys::{
    hipHostMallocCoherent, hipHostMallocMapped, hipHostMallocNonCoherent, hipHostMallocNumaUser,
    hipHostMallocPortable, hipHostMallocWriteCombined,
};
use devipc_shm::os::{self, MappedRegion};

use super::errors::{Failure, HipResult};
use super::runtime::{current_device, state};
use crate::local::RangeMap;

/// One `hipHostMalloc` allocation: a shared anonymous mapping (of `/dev/zero`), so its
/// bytes belong to no Rust object and the caller may write them through the raw pointer
/// it received. Unmapped when the last `Arc` goes: an in-flight copy keeps its clone, so
/// `hipHostFree` never pulls memory from under it.
#[derive(Debug)]
pub(crate) struct HostAlloc {
    _region: MappedRegion,
    /// The `flags` given to `hipHostMalloc` (reported as `allocationFlags`).
    pub flags: u32,
    /// The calling thread's device at allocation (reported as `device`).
    pub device: u32,
}

/// Every `hipHostMalloc` allocation of this process.
pub(crate) static HOST: RangeMap<Arc<HostAlloc>> = RangeMap::new();

/// Every flag `hipHostMalloc` knows.
const KNOWN_FLAGS: u32 = hipHostMallocPortable
    | hipHostMallocMapped
    | hipHostMallocWriteCombined
    | hipHostMallocNumaUser
    | hipHostMallocCoherent
    | hipHostMallocNonCoherent;

/// `hipHostMalloc(size, flags)`: the new base, or 0 for `size == 0`.
pub(crate) fn malloc(size: usize, flags: u32) -> HipResult<usize> {
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Failure::invalid_value(format!(
            "flags {flags:#x}: bits {:#x} are not hipHostMalloc flags",
            flags & !KNOWN_FLAGS
        )));
    }
    let both = hipHostMallocCoherent | hipHostMallocNonCoherent;
    if flags & both == both {
        return Err(Failure::invalid_value(
            "hipHostMallocCoherent and hipHostMallocNonCoherent exclude each other",
        ));
    }
    let device = current_device(state()?)?;
    if size == 0 {
        return Ok(0);
    }
    let out_of_memory = |why: String| {
        Failure::new(
            devipc_hip_sys::hipErrorOutOfMemory,
            format!("cannot allocate {size} bytes of host memory: {why}"),
        )
    };
    let len = os::page_round_up(size).ok_or_else(|| out_of_memory("size overflows".into()))?;
    let zero = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/zero")
        .map_err(|e| out_of_memory(e.to_string()))?;
    let region = MappedRegion::map_file(&zero, len).map_err(|e| out_of_memory(e.to_string()))?;
    let base = region.addr();
    HOST.insert(
        base,
        size,
        Arc::new(HostAlloc {
            _region: region,
            flags,
            device,
        }),
    )?;
    Ok(base)
}

/// `hipHostFree(ptr)`.
pub(crate) fn free(ptr: usize) -> HipResult<()> {
    if ptr == 0 {
        return Ok(());
    }
    match HOST.resolve(ptr) {
        Some(hit) if hit.base == ptr => {
            drop(hit);
            HOST.remove(ptr)
                .map(drop)
                .ok_or_else(|| Failure::invalid_value(format!("{ptr:#x} was freed concurrently")))
        }
        Some(hit) => Err(Failure::invalid_value(format!(
            "{ptr:#x} is {:#x} bytes into the host allocation at {:#x}; hipHostFree takes the base",
            ptr - hit.base,
            hit.base
        ))),
        None => Err(Failure::invalid_value(format!(
            "{ptr:#x} is not memory allocated with hipHostMalloc in this process"
        ))),
    }
}
