//! The baselines' raw vendor calls: the same C functions the backends call, made directly
//! on the backend's own function table (`HipBackend::api`, `AscendBackend::api`), so the
//! facade and its baseline run on the very same library (here: the devipc emulator).
//!
//! Each operation is what a hand-written vendor program does, with nothing devipc adds
//! (no tokens, no handle tables, no device scoping, no import cache): the thread's device
//! is bound once up front.

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
use devipc_hip::sys::{
    HIP_IPC_HANDLE_SIZE, HipApi, hipIpcMemHandle_t, hipMemAccessDesc,
    hipMemAccessFlagsProtReadWrite, hipMemAllocationGranularityMinimum, hipMemAllocationProp,
    hipMemAllocationTypePinned, hipMemGenericAllocationHandle_t,
    hipMemHandleTypePosixFileDescriptor, hipMemLocation, hipMemLocationTypeDevice,
    hipMemcpyDeviceToHost,
};
use devipc_shm::os::{pidfd_getfd, pidfd_open};

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

/// The raw HIP VMM calls of the `hip-vmm-fd` baselines: what a hand-written program
/// sharing `hipMemCreate` memory as a POSIX fd does (api-facts C.1), on the same table as
/// [`RawApi::Hip`]. The device (0) is bound by [`RawApi::of`].
pub struct RawVmm {
    api: Arc<HipApi>,
    /// `hipMemImportFromShareableHandle` takes the fd by value (ROCm 7.1+), not by pointer.
    by_value: bool,
    /// `hipMemGetAllocationGranularity` (minimum) of device 0, asked once.
    granularity: usize,
}

/// Raw VMM memory of device 0: a physical allocation mapped whole into a reservation of
/// its own, read-write for device 0.
pub struct RawVmmAlloc {
    handle: hipMemGenericAllocationHandle_t,
    va: *mut c_void,
    size: usize,
}

/// What the raw VMM exporter sends: its pid, the exported fd's number there, the size.
pub struct RawVmmHandle {
    pid: i32,
    fd: i32,
    size: usize,
}

fn vmm_fn<T>(f: Option<T>, name: &str) -> BenchResult<T> {
    f.ok_or_else(|| format!("this HIP runtime has no {name}").into())
}

fn vmm_prop() -> hipMemAllocationProp {
    hipMemAllocationProp {
        r#type: hipMemAllocationTypePinned,
        requestedHandleType: hipMemHandleTypePosixFileDescriptor,
        location: hipMemLocation {
            r#type: hipMemLocationTypeDevice,
            id: 0,
        },
        ..hipMemAllocationProp::zeroed()
    }
}

const VMM_ACCESS: hipMemAccessDesc = hipMemAccessDesc {
    location: hipMemLocation {
        r#type: hipMemLocationTypeDevice,
        id: 0,
    },
    flags: hipMemAccessFlagsProtReadWrite,
};

impl RawVmm {
    /// The VMM calls of `raw` (HIP only; ROCm 6.2+ layout of the property block).
    pub fn of(raw: &RawApi) -> BenchResult<RawVmm> {
        let RawApi::Hip(api, _) = raw else {
            return Err("hip-vmm-fd is a HIP mechanism".into());
        };
        let mut version = 0;
        // SAFETY: a valid out-pointer.
        check("hipRuntimeGetVersion", unsafe {
            (api.hipRuntimeGetVersion)(&mut version)
        })?;
        if version < 60_200_000 {
            return Err(format!("HIP {version} cannot export VMM memory (ROCm 6.2+)").into());
        }
        let get = vmm_fn(
            api.hipMemGetAllocationGranularity,
            "hipMemGetAllocationGranularity",
        )?;
        let mut granularity = 0usize;
        let prop = vmm_prop();
        // SAFETY: a valid out-pointer and property block (ROCm 5.3+ layout).
        check("hipMemGetAllocationGranularity", unsafe {
            get(&mut granularity, &prop, hipMemAllocationGranularityMinimum)
        })?;
        Ok(RawVmm {
            api: api.clone(),
            by_value: devipc_hip::sys::import_takes_fd_by_value(version),
            granularity,
        })
    }

    /// `size` rounded up to the granularity.
    pub fn rounded(&self, size: usize) -> usize {
        size.next_multiple_of(self.granularity)
    }

    /// Reserves `size` bytes, maps the whole of `handle` there, gives device 0 access.
    /// On an error the reservation is freed (the handle stays the caller's).
    fn map(
        &self,
        handle: hipMemGenericAllocationHandle_t,
        size: usize,
    ) -> BenchResult<*mut c_void> {
        let api = &self.api;
        let reserve = vmm_fn(api.hipMemAddressReserve, "hipMemAddressReserve")?;
        let map = vmm_fn(api.hipMemMap, "hipMemMap")?;
        let set_access = vmm_fn(api.hipMemSetAccess, "hipMemSetAccess")?;
        let mut va = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; no hint, flags 0; size and alignment granular.
        check("hipMemAddressReserve", unsafe {
            reserve(&mut va, size, self.granularity, std::ptr::null_mut(), 0)
        })?;
        let mapped = (|| {
            // SAFETY: the whole live `handle` (`size` bytes) into the fresh reservation.
            check("hipMemMap", unsafe { map(va, size, 0, handle, 0) })?;
            // SAFETY: exactly the mapping just made, one valid descriptor.
            check("hipMemSetAccess", unsafe {
                set_access(va, size, &VMM_ACCESS, 1)
            })
        })();
        if let Err(e) = mapped {
            // SAFETY: undoes what was made above, once (an unmap of nothing mapped fails
            // harmlessly).
            unsafe {
                let _ = vmm_fn(api.hipMemUnmap, "hipMemUnmap").map(|f| f(va, size));
                let _ = vmm_fn(api.hipMemAddressFree, "hipMemAddressFree").map(|f| f(va, size));
            }
            return Err(e);
        }
        Ok(va)
    }

    /// Releases a handle whose mapping failed (the error path of create and import).
    fn release_after_error(&self, handle: hipMemGenericAllocationHandle_t) {
        if let Some(release) = self.api.hipMemRelease {
            // SAFETY: a handle just created or imported, with nothing mapped, released
            // once, here.
            let _ = unsafe { release(handle) };
        }
    }

    /// Unmaps `va`, frees its reservation and releases `handle`, in that order.
    fn unmap_release(
        &self,
        va: *mut c_void,
        size: usize,
        handle: hipMemGenericAllocationHandle_t,
    ) -> BenchResult<()> {
        let api = &self.api;
        let unmap = vmm_fn(api.hipMemUnmap, "hipMemUnmap")?;
        let free = vmm_fn(api.hipMemAddressFree, "hipMemAddressFree")?;
        let release = vmm_fn(api.hipMemRelease, "hipMemRelease")?;
        // SAFETY: each releases what `map` and the create/import made, once, in order.
        unsafe {
            check("hipMemUnmap", unmap(va, size))?;
            check("hipMemAddressFree", free(va, size))?;
            check("hipMemRelease", release(handle))
        }
    }

    /// Exportable VMM memory: `hipMemCreate` (POSIX fd handle type) of `size` rounded up to
    /// the granularity, reserve, map, set access.
    pub fn alloc(&self, size: usize) -> BenchResult<RawVmmAlloc> {
        let create = vmm_fn(self.api.hipMemCreate, "hipMemCreate")?;
        let size = self.rounded(size);
        let prop = vmm_prop();
        let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and property block; a granular size; flags 0.
        check("hipMemCreate", unsafe {
            create(&mut handle, size, &prop, 0)
        })?;
        match self.map(handle, size) {
            Ok(va) => Ok(RawVmmAlloc { handle, va, size }),
            Err(e) => {
                self.release_after_error(handle);
                Err(e)
            }
        }
    }

    /// Frees an allocation of [`RawVmm::alloc`]: unmap, free the reservation, release.
    pub fn free(&self, alloc: RawVmmAlloc) -> BenchResult<()> {
        self.unmap_release(alloc.va, alloc.size, alloc.handle)
    }

    /// `hipMemExportToShareableHandle` as a POSIX fd, which the caller keeps open for as
    /// long as importers may fetch it.
    pub fn export(&self, alloc: &RawVmmAlloc) -> BenchResult<OwnedFd> {
        let export = vmm_fn(
            self.api.hipMemExportToShareableHandle,
            "hipMemExportToShareableHandle",
        )?;
        let mut fd: c_int = -1;
        // SAFETY: the runtime writes one `int` through the pointer; a live handle; flags 0.
        check("hipMemExportToShareableHandle", unsafe {
            export(
                (&mut fd as *mut c_int).cast(),
                alloc.handle,
                hipMemHandleTypePosixFileDescriptor,
                0,
            )
        })?;
        if fd < 0 {
            return Err(format!("hipMemExportToShareableHandle wrote fd {fd}").into());
        }
        // SAFETY: a new descriptor of this process that nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The text [`RawVmm::parse`] reads: this process's pid, the fd's number, the size.
    pub fn describe(alloc: &RawVmmAlloc, fd: &OwnedFd) -> String {
        format!("{} {} {}", std::process::id(), fd.as_raw_fd(), alloc.size)
    }

    /// Parses what [`RawVmm::describe`] wrote.
    pub fn parse(text: &str) -> BenchResult<RawVmmHandle> {
        let mut words = text.split_whitespace();
        let mut next = || words.next().ok_or("a raw VMM handle is `pid fd size`");
        Ok(RawVmmHandle {
            pid: next()?.parse()?,
            fd: next()?.parse()?,
            size: next()?.parse()?,
        })
    }

    /// Fetches the exporter's fd (`pidfd_open` + `pidfd_getfd`), imports it
    /// (`hipMemImportFromShareableHandle`, the fd by pointer or by value as the version
    /// says), reserves, maps, sets access, closes the fd (only after the access: the
    /// import may be deferred until then), then unmaps, frees the reservation, releases.
    pub fn import_close(&self, h: &RawVmmHandle) -> BenchResult<()> {
        let import = vmm_fn(
            self.api.hipMemImportFromShareableHandle,
            "hipMemImportFromShareableHandle",
        )?;
        let fd = {
            let pidfd = pidfd_open(h.pid)?;
            pidfd_getfd(&pidfd, h.fd)?
        };
        let mut value: c_int = fd.as_raw_fd();
        let os_handle: *mut c_void = if self.by_value {
            value as isize as *mut c_void
        } else {
            (&mut value as *mut c_int).cast()
        };
        let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; `os_handle` is the open fd's value or a pointer to a
        // live `int` holding it, as this runtime reads it.
        check("hipMemImportFromShareableHandle", unsafe {
            import(&mut handle, os_handle, hipMemHandleTypePosixFileDescriptor)
        })?;
        let va = match self.map(handle, h.size) {
            Ok(va) => va,
            Err(e) => {
                self.release_after_error(handle);
                return Err(e);
            }
        };
        drop(fd);
        self.unmap_release(va, h.size, handle)
    }
}
