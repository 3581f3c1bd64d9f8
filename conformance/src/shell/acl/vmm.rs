//! ACL shell commands for virtual memory management (physical handles, reservations,
//! mappings, access, shareable handles), with [`Vmm`] and their [`Acl`] client calls.

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
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, pid_args, ptr};
use crate::shell::{Exec, Failure, Pids, Reply, done, value};

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

/// A VMM command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmmCommand {
    /// The VMM allocation granularity on `dev` (a fallback of 2 MiB where the runtime
    /// lacks `aclrtMemGetAllocationGranularity`).
    Granularity {
        /// The device.
        dev: u32,
    },
    /// `aclrtMemGetAllocationGranularity` for a device allocation of `mem_attr`.
    GranularityOf {
        /// The device.
        dev: u32,
        /// The memory kind.
        mem_attr: aclrtMemAttr,
        /// The granularity option.
        option: aclrtMemGranularityOptions,
    },
    /// `aclrtMallocPhysical` of `size` bytes on `dev`: the handle.
    PhysAlloc {
        /// The device.
        dev: u32,
        /// Bytes.
        size: usize,
        /// The (reserved) flags: 0 unless a rule provokes the check.
        flags: u64,
    },
    /// `aclrtFreePhysical`.
    PhysFree {
        /// The handle.
        phys: u64,
    },
    /// Reserve, map and grant `dev` read-write access (where the runtime has
    /// `aclrtMemSetAccess`): the address.
    MapReadWrite {
        /// The handle.
        phys: u64,
        /// Bytes.
        size: usize,
        /// The device granted.
        dev: u32,
    },
    /// Unmap and release an address from [`VmmCommand::MapReadWrite`].
    UnmapRelease {
        /// The address.
        va: u64,
    },
    /// `aclrtMemExportToShareableHandle`: the shareable handle.
    Export {
        /// The handle.
        phys: u64,
        /// The flags.
        flags: u64,
        /// The handle type (`ACL_MEM_HANDLE_TYPE_NONE` unless a rule provokes the check).
        handle_type: aclrtMemHandleType,
    },
    /// `aclrtMemSetPidToShareableHandle`.
    SetPid {
        /// The shareable handle.
        shareable: u64,
        /// The trustlist.
        pids: Pids,
    },
    /// `aclrtMemImportFromShareableHandle` on `dev`: the physical handle.
    Import {
        /// The shareable handle.
        shareable: u64,
        /// The device.
        dev: i32,
    },
    /// `aclrtReserveMemAddress(size, alignment, NULL, flags)`: the address.
    Reserve {
        /// Bytes.
        size: usize,
        /// The alignment.
        alignment: usize,
        /// The flags.
        flags: u64,
    },
    /// `aclrtReleaseMemAddress`.
    Release {
        /// The address.
        va: u64,
    },
    /// `aclrtMapMem(va, size, offset, phys, flags)`, nothing else.
    MapAt {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
        /// The offset into the handle.
        offset: usize,
        /// The handle.
        phys: u64,
        /// The flags.
        flags: u64,
    },
    /// `aclrtUnmapMem`, nothing else.
    Unmap {
        /// The address.
        va: u64,
    },
    /// `aclrtMemSetAccess` of `size` bytes at `va` with one descriptor for `dev`.
    SetAccess {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
        /// The device.
        dev: u32,
        /// The access flags.
        flags: aclrtMemAccessFlags,
    },
}

impl From<VmmCommand> for AclCommand {
    fn from(c: VmmCommand) -> Self {
        AclCommand::Vmm(c)
    }
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

    /// Runs a [`VmmCommand`].
    pub(super) fn vmm(&mut self, command: VmmCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match command {
                VmmCommand::Granularity { dev } => value(self.granularity(dev)?),
                VmmCommand::PhysAlloc { dev, size, flags } => {
                    let prop = Self::prop(dev);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check(
                        "aclrtMallocPhysical",
                        (api.aclrtMallocPhysical)(&mut h, size, &prop, flags),
                    )?;
                    value(h as usize as u64)
                }
                VmmCommand::PhysFree { phys } => self
                    .check("aclrtFreePhysical", (api.aclrtFreePhysical)(ptr(phys)))
                    .and_then(|()| done()),
                VmmCommand::MapReadWrite { phys, size, dev } => {
                    let mut va: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtReserveMemAddress",
                        (api.aclrtReserveMemAddress)(&mut va, size, 0, std::ptr::null_mut(), 0),
                    )?;
                    let code = (api.aclrtMapMem)(va, size, 0, ptr(phys), 0);
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
                    value(va as usize as u64)
                }
                VmmCommand::UnmapRelease { va } => {
                    let va = ptr(va);
                    self.check("aclrtUnmapMem", (api.aclrtUnmapMem)(va))?;
                    self.check("aclrtReleaseMemAddress", (api.aclrtReleaseMemAddress)(va))?;
                    done()
                }
                VmmCommand::Export {
                    phys,
                    flags,
                    handle_type,
                } => {
                    let f = opt!(api, aclrtMemExportToShareableHandle);
                    let mut sh = 0u64;
                    self.check(
                        "aclrtMemExportToShareableHandle",
                        f(ptr(phys), handle_type, flags, &mut sh),
                    )?;
                    value(sh)
                }
                VmmCommand::SetPid { shareable, pids } => {
                    let f = opt!(api, aclrtMemSetPidToShareableHandle);
                    let (mut pids, null) = pid_args(&pids);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtMemSetPidToShareableHandle", f(shareable, p, n))
                        .and_then(|()| done())
                }
                VmmCommand::Import { shareable, dev } => {
                    let f = opt!(api, aclrtMemImportFromShareableHandle);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check(
                        "aclrtMemImportFromShareableHandle",
                        f(shareable, dev, &mut h),
                    )?;
                    value(h as usize as u64)
                }
                VmmCommand::GranularityOf {
                    dev,
                    mem_attr,
                    option,
                } => value(self.granularity_of(dev, mem_attr, option)?),
                VmmCommand::Reserve {
                    size,
                    alignment,
                    flags,
                } => {
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
                    value(va as usize as u64)
                }
                VmmCommand::Release { va } => self
                    .check(
                        "aclrtReleaseMemAddress",
                        (api.aclrtReleaseMemAddress)(ptr(va)),
                    )
                    .and_then(|()| done()),
                VmmCommand::MapAt {
                    va,
                    size,
                    offset,
                    phys,
                    flags,
                } => self
                    .check(
                        "aclrtMapMem",
                        (api.aclrtMapMem)(ptr(va), size, offset, ptr(phys), flags),
                    )
                    .and_then(|()| done()),
                VmmCommand::Unmap { va } => self
                    .check("aclrtUnmapMem", (api.aclrtUnmapMem)(ptr(va)))
                    .and_then(|()| done()),
                VmmCommand::SetAccess {
                    va,
                    size,
                    dev,
                    flags,
                } => {
                    let f = opt!(api, aclrtMemSetAccess);
                    let mut desc = aclrtMemAccessDesc {
                        flags,
                        location: aclrtMemLocation {
                            id: dev,
                            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                        },
                        rsv: [0; 12],
                    };
                    self.check("aclrtMemSetAccess", f(ptr(va), size, &mut desc, 1))
                        .and_then(|()| done())
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// The VMM allocation granularity on `dev`.
    pub fn granularity(&mut self, dev: u32) -> Result<usize, Failure> {
        self.0.ask(VmmCommand::Granularity { dev })
    }

    /// `aclrtMallocPhysical` of `size` bytes on `dev`.
    pub fn phys_alloc(&mut self, dev: u32, size: usize) -> Result<u64, Failure> {
        self.phys_alloc_flags(dev, size, 0)
    }

    /// `aclrtFreePhysical`.
    pub fn phys_free(&mut self, phys: u64) -> Result<(), Failure> {
        self.0.ask(VmmCommand::PhysFree { phys })
    }

    /// Reserve, map and grant `dev` read-write access: the address.
    pub fn map(&mut self, phys: u64, size: usize, dev: u32) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::MapReadWrite { phys, size, dev })
    }

    /// Unmap and release an address from [`Acl::map`].
    pub fn unmap(&mut self, va: u64) -> Result<(), Failure> {
        self.0.ask(VmmCommand::UnmapRelease { va })
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
        self.vmm_export_type(phys, flags, ACL_MEM_HANDLE_TYPE_NONE)
    }

    /// `aclrtMemSetPidToShareableHandle`.
    pub fn vmm_set_pid(&mut self, shareable: u64, pids: &Pids) -> Result<(), Failure> {
        self.0.ask(VmmCommand::SetPid {
            shareable,
            pids: pids.clone(),
        })
    }

    /// `aclrtMemImportFromShareableHandle` on `dev`: the physical handle.
    pub fn vmm_import(&mut self, shareable: u64, dev: i32) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Import { shareable, dev })
    }

    /// `aclrtMemGetAllocationGranularity` for a device allocation with `mem_attr`.
    pub fn granularity_of(
        &mut self,
        dev: u32,
        mem_attr: aclrtMemAttr,
        option: aclrtMemGranularityOptions,
    ) -> Result<usize, Failure> {
        self.0.ask(VmmCommand::GranularityOf {
            dev,
            mem_attr,
            option,
        })
    }

    /// `aclrtMallocPhysical` with explicit (reserved) `flags`.
    pub fn phys_alloc_flags(&mut self, dev: u32, size: usize, flags: u64) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::PhysAlloc { dev, size, flags })
    }

    /// `aclrtMemExportToShareableHandle` with an explicit handle type.
    pub fn vmm_export_type(
        &mut self,
        phys: u64,
        flags: u64,
        handle_type: aclrtMemHandleType,
    ) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Export {
            phys,
            flags,
            handle_type,
        })
    }

    /// `aclrtReserveMemAddress(size, alignment, NULL, flags)`.
    pub fn reserve(&mut self, size: usize, alignment: usize, flags: u64) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Reserve {
            size,
            alignment,
            flags,
        })
    }

    /// `aclrtReleaseMemAddress`.
    pub fn release(&mut self, va: u64) -> Result<(), Failure> {
        self.0.ask(VmmCommand::Release { va })
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
        self.0.ask(VmmCommand::MapAt {
            va,
            size,
            offset,
            phys,
            flags,
        })
    }

    /// `aclrtUnmapMem`, nothing else.
    pub fn unmap_only(&mut self, va: u64) -> Result<(), Failure> {
        self.0.ask(VmmCommand::Unmap { va })
    }

    /// `aclrtMemSetAccess` of `size` bytes at `va` with one descriptor for `dev`.
    pub fn set_access(
        &mut self,
        va: u64,
        size: usize,
        dev: u32,
        flags: aclrtMemAccessFlags,
    ) -> Result<(), Failure> {
        self.0.ask(VmmCommand::SetAccess {
            va,
            size,
            dev,
            flags,
        })
    }
}
