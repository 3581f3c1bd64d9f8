//! The baselines' raw vendor calls: the same C functions the backends call, made directly
//! on the backend's own function table (`HipBackend::api`, `AscendBackend::api`), so the
//! facade and its baseline run on the very same library (here: the devipc emulator).
//!
//! Each operation is what a hand-written vendor program does, with nothing devipc adds
//! (no tokens, no handle tables, no device scoping, no import cache): the thread's device
//! is bound once up front.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use devipc::Runtime;
use devipc::raw::Backend;
use devipc_ascend::sys::AclApi;
use devipc_ascend::sys::consts::ACL_RT_VMM_EXPORT_FLAG_DEFAULT;
use devipc_ascend::sys::types::ACL_MEMCPY_DEVICE_TO_HOST;
use devipc_ascend::sys::types::{
    ACL_HBM_MEM_HUGE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    aclrtDrvMemHandle, aclrtMemAccessDesc, aclrtMemLocation, aclrtPhysicalMemProp,
};
use devipc_hip::sys::{HIP_IPC_HANDLE_SIZE, HipApi, hipIpcMemHandle_t, hipMemcpyDeviceToHost};

use crate::BenchResult;

/// Size of one Ascend VMM allocation: the emulator's (and the hardware's) 2 MiB
/// granularity, which the facade rounds every allocation up to as well.
pub const ACL_GRANULE: usize = 2 << 20;

/// The raw function table of a started runtime.
pub enum RawApi {
    /// HIP, with the `hipIpcOpenMemHandle` flag this runtime accepts.
    Hip(Arc<HipApi>, c_uint),
    /// ACL.
    Acl(Arc<AclApi>),
}

/// A raw allocation made for a raw export.
pub enum RawAlloc {
    /// `hipMalloc`.
    Hip(*mut c_void),
    /// `aclrtMallocPhysical` of [`ACL_GRANULE`] bytes.
    Acl(aclrtDrvMemHandle),
}

/// A raw handle received from the exporter.
pub enum RawHandle {
    /// A 64-byte `hipIpcMemHandle_t`.
    Hip([u8; HIP_IPC_HANDLE_SIZE]),
    /// An ACL VMM shareable handle of [`ACL_GRANULE`] bytes.
    Acl(u64),
}

fn check(what: &str, code: i32) -> BenchResult<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with code {code}").into())
    }
}

fn acl_prop() -> aclrtPhysicalMemProp {
    aclrtPhysicalMemProp {
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: ACL_HBM_MEM_HUGE,
        location: aclrtMemLocation {
            id: 0,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        },
        reserve: 0,
    }
}

impl RawApi {
    /// The table behind `rt`; binds device 0 on this thread.
    pub fn of(rt: &Runtime) -> BenchResult<RawApi> {
        let raw = match rt.backend() {
            Backend::Hip(b) => RawApi::Hip(b.api().clone(), b.lazy_peer_flag()),
            Backend::Ascend(b) => RawApi::Acl(b.api().clone()),
            _ => return Err("a backend without a raw table".into()),
        };
        match &raw {
            // SAFETY: plain value argument; device 0 exists (2 emulated devices).
            RawApi::Hip(api, _) => check("hipSetDevice", unsafe { (api.hipSetDevice)(0) })?,
            // SAFETY: as above; ACL was initialised when the runtime started.
            RawApi::Acl(api) => check("aclrtSetDevice", unsafe { (api.aclrtSetDevice)(0) })?,
        }
        Ok(raw)
    }

    /// Allocates exportable memory: `hipMalloc(size)` or one 2 MiB ACL physical block.
    pub fn alloc(&self, size: usize) -> BenchResult<RawAlloc> {
        match self {
            RawApi::Hip(api, _) => {
                let mut p = std::ptr::null_mut();
                // SAFETY: a valid out-pointer and a non-zero size.
                check("hipMalloc", unsafe { (api.hipMalloc)(&mut p, size) })?;
                Ok(RawAlloc::Hip(p))
            }
            RawApi::Acl(api) => {
                let mut phys: aclrtDrvMemHandle = std::ptr::null_mut();
                let prop = acl_prop();
                // SAFETY: valid out-pointer and property block; the size is the granularity.
                let code = unsafe { (api.aclrtMallocPhysical)(&mut phys, ACL_GRANULE, &prop, 0) };
                check("aclrtMallocPhysical", code)?;
                Ok(RawAlloc::Acl(phys))
            }
        }
    }

    /// Frees a raw allocation.
    pub fn free(&self, alloc: RawAlloc) -> BenchResult<()> {
        match (self, alloc) {
            (RawApi::Hip(api, _), RawAlloc::Hip(p)) => {
                // SAFETY: the pointer came from hipMalloc and is freed once.
                check("hipFree", unsafe { (api.hipFree)(p) })
            }
            (RawApi::Acl(api), RawAlloc::Acl(h)) => {
                // SAFETY: the handle came from aclrtMallocPhysical and is freed once.
                check("aclrtFreePhysical", unsafe { (api.aclrtFreePhysical)(h) })
            }
            _ => Err("allocation of another backend".into()),
        }
    }

    /// Exports `alloc` and allows process `peer` to import it (ACL: export with PID
    /// validation, then set the pid; HIP has no access control). Returns the handle as
    /// text for the pipe.
    pub fn export(&self, alloc: &RawAlloc, peer: i32) -> BenchResult<String> {
        match (self, alloc) {
            (RawApi::Hip(api, _), RawAlloc::Hip(p)) => {
                let mut h = hipIpcMemHandle_t::zeroed();
                // SAFETY: a valid out-pointer; `p` is live hipMalloc memory.
                check("hipIpcGetMemHandle", unsafe {
                    (api.hipIpcGetMemHandle)(&mut h, *p)
                })?;
                Ok(hex(&h.to_bytes()))
            }
            (RawApi::Acl(api), RawAlloc::Acl(phys)) => {
                let export = api
                    .aclrtMemExportToShareableHandle
                    .ok_or("no aclrtMemExportToShareableHandle")?;
                let set_pid = api
                    .aclrtMemSetPidToShareableHandle
                    .ok_or("no aclrtMemSetPidToShareableHandle")?;
                let mut handle = 0u64;
                // SAFETY: a live physical handle and a valid out-pointer.
                let code = unsafe {
                    export(
                        *phys,
                        ACL_MEM_HANDLE_TYPE_NONE,
                        ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
                        &mut handle,
                    )
                };
                check("aclrtMemExportToShareableHandle", code)?;
                let mut pids = [peer];
                // SAFETY: a live buffer of one pid.
                let code = unsafe { set_pid(handle, pids.as_mut_ptr(), 1) };
                check("aclrtMemSetPidToShareableHandle", code)?;
                Ok(handle.to_string())
            }
            _ => Err("allocation of another backend".into()),
        }
    }

    /// Parses a handle [`RawApi::export`] produced.
    pub fn parse(&self, text: &str) -> BenchResult<RawHandle> {
        match self {
            RawApi::Hip(..) => Ok(RawHandle::Hip(
                unhex(text)?
                    .try_into()
                    .map_err(|_| "a HIP handle is 64 bytes")?,
            )),
            RawApi::Acl(_) => Ok(RawHandle::Acl(text.parse()?)),
        }
    }

    /// Imports `handle` on device 0 and closes it again: HIP `hipIpcOpenMemHandle` +
    /// `hipIpcCloseMemHandle`; ACL import, reserve, map, set access, then unmap, release,
    /// free (the same calls the Ascend backend makes for a VMM token).
    pub fn import_close(&self, handle: &RawHandle) -> BenchResult<()> {
        match (self, handle) {
            (RawApi::Hip(api, flag), RawHandle::Hip(bytes)) => {
                let mut p = std::ptr::null_mut();
                // SAFETY: a valid out-pointer; the handle is passed by value.
                check("hipIpcOpenMemHandle", unsafe {
                    (api.hipIpcOpenMemHandle)(&mut p, hipIpcMemHandle_t::from_bytes(*bytes), *flag)
                })?;
                // SAFETY: `p` was just opened and is closed once.
                check("hipIpcCloseMemHandle", unsafe {
                    (api.hipIpcCloseMemHandle)(p)
                })
            }
            (RawApi::Acl(api), RawHandle::Acl(h)) => {
                let import = api
                    .aclrtMemImportFromShareableHandle
                    .ok_or("no aclrtMemImportFromShareableHandle")?;
                let set_access = api.aclrtMemSetAccess.ok_or("no aclrtMemSetAccess")?;
                let mut phys: aclrtDrvMemHandle = std::ptr::null_mut();
                // SAFETY: a valid out-pointer; plain values.
                check("aclrtMemImportFromShareableHandle", unsafe {
                    import(*h, 0, &mut phys)
                })?;
                let mut va: *mut c_void = std::ptr::null_mut();
                // SAFETY: a valid out-pointer; default alignment, hint and flags.
                check("aclrtReserveMemAddress", unsafe {
                    (api.aclrtReserveMemAddress)(&mut va, ACL_GRANULE, 0, std::ptr::null_mut(), 0)
                })?;
                // SAFETY: `va` reserves ACL_GRANULE bytes; `phys` holds as many.
                check("aclrtMapMem", unsafe {
                    (api.aclrtMapMem)(va, ACL_GRANULE, 0, phys, 0)
                })?;
                let mut desc = aclrtMemAccessDesc {
                    flags: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
                    location: aclrtMemLocation {
                        id: 0,
                        r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                    },
                    rsv: [0; 12],
                };
                // SAFETY: the range just mapped and one valid descriptor.
                check("aclrtMemSetAccess", unsafe {
                    set_access(va, ACL_GRANULE, &mut desc, 1)
                })?;
                // SAFETY: each releases what was acquired above, once, in reverse order.
                unsafe {
                    check("aclrtUnmapMem", (api.aclrtUnmapMem)(va))?;
                    check("aclrtReleaseMemAddress", (api.aclrtReleaseMemAddress)(va))?;
                    check("aclrtFreePhysical", (api.aclrtFreePhysical)(phys))
                }
            }
            _ => Err("handle of another backend".into()),
        }
    }

    /// Copies device memory at `src` to `dst`: `hipMemcpy` / `aclrtMemcpy`, device to host.
    pub fn read(&self, src: u64, dst: &mut [u8]) -> BenchResult<()> {
        let src = src as usize as *const c_void;
        match self {
            // SAFETY: `dst` is a live host buffer of `dst.len()` bytes; `src` is mapped.
            RawApi::Hip(api, _) => check("hipMemcpy", unsafe {
                (api.hipMemcpy)(
                    dst.as_mut_ptr().cast(),
                    src,
                    dst.len(),
                    hipMemcpyDeviceToHost,
                )
            }),
            // SAFETY: as above.
            RawApi::Acl(api) => check("aclrtMemcpy", unsafe {
                (api.aclrtMemcpy)(
                    dst.as_mut_ptr().cast(),
                    dst.len(),
                    src,
                    dst.len(),
                    ACL_MEMCPY_DEVICE_TO_HOST,
                )
            }),
        }
    }

    /// Framework-style device memory for `export_external`: `hipMalloc` / `aclrtMalloc`.
    pub fn malloc(&self, size: usize) -> BenchResult<u64> {
        let mut p = std::ptr::null_mut();
        match self {
            // SAFETY: a valid out-pointer and a non-zero size.
            RawApi::Hip(api, _) => check("hipMalloc", unsafe { (api.hipMalloc)(&mut p, size) })?,
            // SAFETY: as above; a documented policy.
            RawApi::Acl(api) => check("aclrtMalloc", unsafe {
                (api.aclrtMalloc)(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST)
            })?,
        }
        Ok(p as usize as u64)
    }

    /// Frees memory from [`RawApi::malloc`].
    pub fn free_malloc(&self, ptr: u64) -> BenchResult<()> {
        let p = ptr as usize as *mut c_void;
        match self {
            // SAFETY: the pointer came from hipMalloc and is freed once.
            RawApi::Hip(api, _) => check("hipFree", unsafe { (api.hipFree)(p) }),
            // SAFETY: the pointer came from aclrtMalloc and is freed once.
            RawApi::Acl(api) => check("aclrtFree", unsafe { (api.aclrtFree)(p) }),
        }
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Inverse of [`hex`].
pub fn unhex(text: &str) -> BenchResult<Vec<u8>> {
    if text.len() % 2 != 0 {
        return Err("odd hex length".into());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| Ok(u8::from_str_radix(&text[i..i + 2], 16)?))
        .collect()
}
