//! ACL shell commands for virtual memory management (physical handles, reservations,
//! mappings, access, shareable handles), with [`Vmm`] and their [`Acl`] client calls.
//!
//! `granularity`, `granularity.of`, `phys.*`, `va.*`, `vmm.*`, `mem.map`, `mem.unmap`,
//! `mem.set-access` (dispatched from [`super::AclShell`]'s handler).

use std::ffi::c_void;
use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::types::{
    ACL_HBM_MEM_HUGE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, aclrtDrvMemHandle, aclrtMemAccessDesc,
    aclrtMemAccessFlags, aclrtMemAttr, aclrtMemGranularityOptions, aclrtMemHandleType,
    aclrtMemLocation, aclrtPhysicalMemProp,
};

use super::{Acl, AclShell, pid_args, ptr, unknown};
use crate::shell::{Exec, Failure, Pids, Reply, VendorClient, arg, word};

/// VMM granularity assumed when the runtime lacks `aclrtMemGetAllocationGranularity`.
const FALLBACK_GRANULARITY: usize = 2 << 20;

/// A VMM allocation made through the shell: physical handle, mapped address, size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vmm {
    /// The `aclrtDrvMemHandle`, as a number.
    pub phys: u64,
    /// Where it is mapped.
    pub va: u64,
    /// Its size (a multiple of the granularity).
    pub size: usize,
}

impl AclShell {
    fn prop(device: u32) -> aclrtPhysicalMemProp {
        Self::prop_with(device, ACL_HBM_MEM_HUGE)
    }

    fn prop_with(device: u32, mem_attr: aclrtMemAttr) -> aclrtPhysicalMemProp {
        aclrtPhysicalMemProp {
            handleType: ACL_MEM_HANDLE_TYPE_NONE,
            allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
            memAttr: mem_attr,
            location: aclrtMemLocation {
                id: device,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            reserve: 0,
        }
    }

    fn granularity(&self, device: u32) -> Result<usize, Failure> {
        if self.api.aclrtMemGetAllocationGranularity.is_none() {
            return Ok(FALLBACK_GRANULARITY);
        }
        self.granularity_of(
            device,
            ACL_HBM_MEM_HUGE,
            ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    }

    /// `aclrtMemGetAllocationGranularity` for a device allocation of `mem_attr`.
    fn granularity_of(
        &self,
        device: u32,
        mem_attr: aclrtMemAttr,
        option: aclrtMemGranularityOptions,
    ) -> Result<usize, Failure> {
        let f = opt!(self.api, aclrtMemGetAllocationGranularity);
        let mut prop = Self::prop_with(device, mem_attr);
        let mut g = 0usize;
        // SAFETY: valid pointers for the call; `option` and `mem_attr` are plain integers
        // the runtime validates.
        let code = unsafe { f(&mut prop, option, &mut g) };
        self.check("aclrtMemGetAllocationGranularity", code)?;
        Ok(g)
    }
}

impl AclShell {
    /// Runs one of this module's commands.
    pub(super) fn vmm_command(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "granularity" => one(self.granularity(arg(a, 0)?)? as u64),
                "phys.alloc" => {
                    // Optional third argument: the reserved flags (0 unless a rule
                    // provokes the check).
                    let (dev, size): (u32, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let flags: u64 = if a.len() > 2 { arg(a, 2)? } else { 0 };
                    let prop = Self::prop(dev);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check(
                        "aclrtMallocPhysical",
                        (api.aclrtMallocPhysical)(&mut h, size, &prop, flags),
                    )?;
                    one(h as usize as u64)
                }
                "phys.free" => self
                    .check(
                        "aclrtFreePhysical",
                        (api.aclrtFreePhysical)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "va.map" => {
                    let (h, size, dev): (u64, usize, u32) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut va: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtReserveMemAddress",
                        (api.aclrtReserveMemAddress)(&mut va, size, 0, std::ptr::null_mut(), 0),
                    )?;
                    let code = (api.aclrtMapMem)(va, size, 0, ptr(h), 0);
                    if code != ACL_SUCCESS {
                        let f = self.failure("aclrtMapMem", code);
                        (api.aclrtReleaseMemAddress)(va);
                        return Err(f);
                    }
                    if let Some(set_access) = api.aclrtMemSetAccess {
                        let mut desc = aclrtMemAccessDesc {
                            flags: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
                            location: aclrtMemLocation {
                                id: dev,
                                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                            },
                            rsv: [0; 12],
                        };
                        let code = set_access(va, size, &mut desc, 1);
                        if code != ACL_SUCCESS {
                            let f = self.failure("aclrtMemSetAccess", code);
                            (api.aclrtUnmapMem)(va);
                            (api.aclrtReleaseMemAddress)(va);
                            return Err(f);
                        }
                    }
                    one(va as usize as u64)
                }
                "va.unmap" => {
                    let va = ptr(arg(a, 0)?);
                    self.check("aclrtUnmapMem", (api.aclrtUnmapMem)(va))?;
                    self.check("aclrtReleaseMemAddress", (api.aclrtReleaseMemAddress)(va))?;
                    none()
                }
                "vmm.export" => {
                    // Optional third argument: the handle type (NONE unless a rule
                    // provokes the check).
                    let f = opt!(api, aclrtMemExportToShareableHandle);
                    let (h, flags): (u64, u64) = (arg(a, 0)?, arg(a, 1)?);
                    let kind: aclrtMemHandleType = if a.len() > 2 {
                        arg(a, 2)?
                    } else {
                        ACL_MEM_HANDLE_TYPE_NONE
                    };
                    let mut sh = 0u64;
                    self.check(
                        "aclrtMemExportToShareableHandle",
                        f(ptr(h), kind, flags, &mut sh),
                    )?;
                    one(sh)
                }
                "vmm.set-pid" => {
                    let f = opt!(api, aclrtMemSetPidToShareableHandle);
                    let sh: u64 = arg(a, 0)?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtMemSetPidToShareableHandle", f(sh, p, n))
                        .and_then(|()| none())
                }
                "vmm.import" => {
                    let f = opt!(api, aclrtMemImportFromShareableHandle);
                    let (sh, dev): (u64, i32) = (arg(a, 0)?, arg(a, 1)?);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check("aclrtMemImportFromShareableHandle", f(sh, dev, &mut h))?;
                    one(h as usize as u64)
                }
                "granularity.of" => {
                    let (dev, attr, option): (u32, aclrtMemAttr, aclrtMemGranularityOptions) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    one(self.granularity_of(dev, attr, option)? as u64)
                }
                "va.reserve" => {
                    let (size, alignment, flags): (usize, usize, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut va: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtReserveMemAddress",
                        (api.aclrtReserveMemAddress)(
                            &mut va,
                            size,
                            alignment,
                            std::ptr::null_mut(),
                            flags,
                        ),
                    )?;
                    one(va as usize as u64)
                }
                "va.release" => self
                    .check(
                        "aclrtReleaseMemAddress",
                        (api.aclrtReleaseMemAddress)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "mem.map" => {
                    let (va, size, offset, h, flags): (u64, usize, usize, u64, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?, arg(a, 4)?);
                    self.check(
                        "aclrtMapMem",
                        (api.aclrtMapMem)(ptr(va), size, offset, ptr(h), flags),
                    )
                    .and_then(|()| none())
                }
                "mem.unmap" => self
                    .check("aclrtUnmapMem", (api.aclrtUnmapMem)(ptr(arg(a, 0)?)))
                    .and_then(|()| none()),
                "mem.set-access" => {
                    let f = opt!(api, aclrtMemSetAccess);
                    let (va, size, dev, flags): (u64, usize, u32, aclrtMemAccessFlags) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?);
                    let mut desc = aclrtMemAccessDesc {
                        flags,
                        location: aclrtMemLocation {
                            id: dev,
                            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                        },
                        rsv: [0; 12],
                    };
                    self.check("aclrtMemSetAccess", f(ptr(va), size, &mut desc, 1))
                        .and_then(|()| none())
                }
                other => Err(unknown(other)),
            }
        }
    }
}

impl<E: Exec> Acl<E> {
    /// The VMM allocation granularity on `dev`.
    pub fn granularity(&mut self, dev: u32) -> Result<usize, Failure> {
        word(&self.run(format!("granularity {dev}"))?, 0)
    }

    /// `aclrtMallocPhysical` of `size` bytes on `dev`.
    pub fn phys_alloc(&mut self, dev: u32, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("phys.alloc {dev} {size}"))?, 0)
    }

    /// `aclrtFreePhysical`.
    pub fn phys_free(&mut self, phys: u64) -> Result<(), Failure> {
        self.run(format!("phys.free {phys}")).map(drop)
    }

    /// Reserve, map and grant `dev` read-write access: the address.
    pub fn map(&mut self, phys: u64, size: usize, dev: u32) -> Result<u64, Failure> {
        word(&self.run(format!("va.map {phys} {size} {dev}"))?, 0)
    }

    /// Unmap and release an address from [`Acl::map`].
    pub fn unmap(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("va.unmap {va}")).map(drop)
    }

    /// `aclrtMapMem` of `phys` (`size` bytes) at `va` inside a reservation, then read-write
    /// access for `dev` where the runtime has `aclrtMemSetAccess`.
    pub fn map_rw_at(&mut self, va: u64, phys: u64, size: usize, dev: u32) -> Result<(), Failure> {
        self.map_at(va, size, 0, phys, 0)?;
        match self.set_access(va, size, dev, ACL_RT_MEM_ACCESS_FLAGS_READWRITE) {
            // A runtime without aclrtMemSetAccess maps read-write.
            Ok(()) | Err(Failure::Harness(_)) => Ok(()),
            Err(e) => {
                let _ = self.unmap_only(va);
                Err(e)
            }
        }
    }

    /// One granule of physical memory on `dev`, mapped.
    pub fn vmm_alloc(&mut self, dev: u32) -> Result<Vmm, Failure> {
        let size = self.granularity(dev)?;
        let phys = self.phys_alloc(dev, size)?;
        match self.map(phys, size, dev) {
            Ok(va) => Ok(Vmm { phys, va, size }),
            Err(e) => {
                let _ = self.phys_free(phys);
                Err(e)
            }
        }
    }

    /// Unmaps and frees a [`Vmm`].
    pub fn vmm_free(&mut self, vmm: Vmm) -> Result<(), Failure> {
        self.unmap(vmm.va)?;
        self.phys_free(vmm.phys)
    }

    /// `aclrtMemExportToShareableHandle` with `flags`.
    pub fn vmm_export(&mut self, phys: u64, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.export {phys} {flags}"))?, 0)
    }

    /// `aclrtMemSetPidToShareableHandle`.
    pub fn vmm_set_pid(&mut self, shareable: u64, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("vmm.set-pid {shareable} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtMemImportFromShareableHandle` on `dev`: the physical handle.
    pub fn vmm_import(&mut self, shareable: u64, dev: i32) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.import {shareable} {dev}"))?, 0)
    }

    /// `aclrtMemGetAllocationGranularity` for a device allocation with `mem_attr`.
    pub fn granularity_of(
        &mut self,
        dev: u32,
        mem_attr: aclrtMemAttr,
        option: aclrtMemGranularityOptions,
    ) -> Result<usize, Failure> {
        word(
            &self.run(format!("granularity.of {dev} {mem_attr} {option}"))?,
            0,
        )
    }

    /// `aclrtMallocPhysical` with explicit (reserved) `flags`.
    pub fn phys_alloc_flags(&mut self, dev: u32, size: usize, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("phys.alloc {dev} {size} {flags}"))?, 0)
    }

    /// `aclrtMemExportToShareableHandle` with an explicit handle type.
    pub fn vmm_export_type(
        &mut self,
        phys: u64,
        flags: u64,
        handle_type: aclrtMemHandleType,
    ) -> Result<u64, Failure> {
        word(
            &self.run(format!("vmm.export {phys} {flags} {handle_type}"))?,
            0,
        )
    }

    /// `aclrtReserveMemAddress(size, alignment, NULL, flags)`.
    pub fn reserve(&mut self, size: usize, alignment: usize, flags: u64) -> Result<u64, Failure> {
        word(
            &self.run(format!("va.reserve {size} {alignment} {flags}"))?,
            0,
        )
    }

    /// `aclrtReleaseMemAddress`.
    pub fn release(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("va.release {va}")).map(drop)
    }

    /// `aclrtMapMem(va, size, offset, phys, flags)`, nothing else.
    pub fn map_at(
        &mut self,
        va: u64,
        size: usize,
        offset: usize,
        phys: u64,
        flags: u64,
    ) -> Result<(), Failure> {
        self.run(format!("mem.map {va} {size} {offset} {phys} {flags}"))
            .map(drop)
    }

    /// `aclrtUnmapMem`, nothing else.
    pub fn unmap_only(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("mem.unmap {va}")).map(drop)
    }

    /// `aclrtMemSetAccess` of `size` bytes at `va` with one descriptor for `dev`.
    pub fn set_access(
        &mut self,
        va: u64,
        size: usize,
        dev: u32,
        flags: aclrtMemAccessFlags,
    ) -> Result<(), Failure> {
        self.run(format!("mem.set-access {va} {size} {dev} {flags}"))
            .map(drop)
    }
}
