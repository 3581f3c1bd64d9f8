//! The HIP shell's VMM commands (api-facts B.4, C.3) and the descriptor passing they need,
//! with their typed client calls on [`Hip`].
//!
//! Allocation handles, reserved addresses and file descriptors travel as numbers, valid
//! only in the shell that made them; a descriptor moves to another shell with
//! [`VmmCommand::FdListen`] / [`VmmCommand::FdSend`] / [`VmmCommand::FdRecv`]
//! ([`crate::shell::fd_pass`], `SCM_RIGHTS`). The shell passes `hipMemAllocationProp` in
//! the layout of the running version (ROCm 5.2's differs from 5.3+;
//! [`mem_allocation_prop_is_r0502`]) and the import's `osHandle` in the convention the
//! caller names ([`OsHandle`]: a pointer to the fd, or the fd value;
//! [`import_takes_fd_by_value`](devipc_hip_sys::import_takes_fd_by_value) says which one
//! the runtime reads).

use std::ffi::{c_int, c_ulonglong, c_void};
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::time::Duration;

use devipc_hip_sys::{
    hipMemAccessDesc, hipMemAccessFlags, hipMemAllocationGranularity_flags,
    hipMemAllocationHandleType, hipMemAllocationProp, hipMemAllocationProp_R0502,
    hipMemAllocationType, hipMemAllocationTypePinned, hipMemGenericAllocationHandle_t,
    hipMemHandleTypePosixFileDescriptor, hipMemLocation, hipMemLocationTypeDevice,
    hipPointer_attribute, mem_allocation_prop_is_r0502,
};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell, ptr};
use crate::shell::{Exec, Failure, Reply, done, fd_pass, value};

/// How long [`VmmCommand::FdRecv`] waits for the sender's datagram (it was sent before
/// the command).
const RECV_TIMEOUT: Duration = Duration::from_secs(10);

/// How `hipMemImportFromShareableHandle`'s `osHandle` carries the fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OsHandle {
    /// `(void*)(intptr_t)fd`: ROCm 7.1.0 and later (CUDA's convention).
    Value,
    /// `&fd`: ROCm 6.2 .. 7.0.x.
    Pointer,
}

impl OsHandle {
    /// The convention the runtime with `HIP_VERSION` encoding `version` reads.
    pub fn for_version(version: i32) -> OsHandle {
        if devipc_hip_sys::import_takes_fd_by_value(version) {
            OsHandle::Value
        } else {
            OsHandle::Pointer
        }
    }

    /// The other convention.
    pub fn other(self) -> OsHandle {
        match self {
            OsHandle::Value => OsHandle::Pointer,
            OsHandle::Pointer => OsHandle::Value,
        }
    }

    /// The report form: `value` or `pointer`.
    pub fn name(self) -> &'static str {
        match self {
            OsHandle::Value => "value",
            OsHandle::Pointer => "pointer",
        }
    }
}

/// A VMM or descriptor-passing command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmmCommand {
    /// The VMM functions (and `hipPointerGetAttribute`) the table lacks.
    Missing,
    /// `hipMemGetAllocationGranularity` for an allocation on `device`.
    Granularity {
        /// The device.
        device: c_int,
        /// The granularity option.
        option: hipMemAllocationGranularity_flags,
        /// The allocation type (pinned when `None`).
        alloc_type: Option<hipMemAllocationType>,
    },
    /// `hipMemCreate(size, {alloc_type, handle_type, device}, flags)`: the handle.
    Create {
        /// Bytes.
        size: usize,
        /// The requested shareable handle type.
        handle_type: hipMemAllocationHandleType,
        /// The device.
        device: c_int,
        /// The allocation type.
        alloc_type: hipMemAllocationType,
        /// The flags.
        flags: c_ulonglong,
    },
    /// `hipMemRelease`.
    Release {
        /// The allocation handle.
        handle: u64,
    },
    /// `hipMemGetAllocationPropertiesFromHandle`: (type, requested handle type, location
    /// type, location id).
    Prop {
        /// The allocation handle.
        handle: u64,
    },
    /// `hipMemAddressReserve(size, alignment, NULL, 0)`: the base.
    Reserve {
        /// Bytes.
        size: usize,
        /// The alignment (0: the default).
        alignment: usize,
    },
    /// `hipMemAddressFree`.
    AddressFree {
        /// The base.
        va: u64,
        /// Bytes.
        size: usize,
    },
    /// `hipMemMap`.
    Map {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
        /// The allocation handle.
        handle: u64,
        /// The offset into the allocation.
        offset: usize,
        /// The flags.
        flags: c_ulonglong,
    },
    /// `hipMemUnmap`.
    Unmap {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
    },
    /// `hipMemSetAccess` with one descriptor.
    SetAccess {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
        /// The device granted.
        device: c_int,
        /// The access flags.
        flags: hipMemAccessFlags,
    },
    /// `hipMemSetAccess` with one descriptor of any location type (issue 25: the host).
    SetAccessAt {
        /// Where.
        va: u64,
        /// Bytes.
        size: usize,
        /// The location type (`hipMemLocationType*`).
        location_type: c_int,
        /// The location id.
        id: c_int,
        /// The access flags.
        flags: hipMemAccessFlags,
    },
    /// `hipMemGetAccess`: the flags `device` has at `va`.
    GetAccess {
        /// Where.
        va: u64,
        /// The device.
        device: c_int,
    },
    /// `hipMemExportToShareableHandle`: the new fd.
    Export {
        /// The allocation handle.
        handle: u64,
        /// The shareable handle type.
        handle_type: hipMemAllocationHandleType,
        /// The flags.
        flags: c_ulonglong,
    },
    /// `hipMemImportFromShareableHandle` of a POSIX fd: the allocation handle.
    Import {
        /// The fd (of this shell).
        fd: c_int,
        /// How `osHandle` carries it.
        how: OsHandle,
    },
    /// `hipMemRetainAllocationHandle`: the allocation handle.
    Retain {
        /// An address inside a mapping.
        addr: u64,
    },
    /// `hipPointerGetAttribute` into a zeroed 8-byte buffer.
    PointerAttribute {
        /// The attribute.
        attribute: hipPointer_attribute,
        /// The address.
        ptr: u64,
    },
    /// Binds this shell's descriptor inbox: its name.
    FdListen,
    /// Sends a duplicate of this shell's `fd` to the inbox `name` (`SCM_RIGHTS`).
    FdSend {
        /// The receiving shell's inbox.
        name: String,
        /// The descriptor.
        fd: c_int,
    },
    /// The descriptor that arrived in this shell's inbox (its number here).
    FdRecv,
    /// Opens `/dev/null`: a descriptor that is no VMM export.
    FdNull,
    /// Closes a descriptor of this shell.
    FdClose {
        /// The descriptor.
        fd: c_int,
    },
}

impl From<VmmCommand> for HipCommand {
    fn from(c: VmmCommand) -> Self {
        HipCommand::Vmm(c)
    }
}

fn handle(v: u64) -> hipMemGenericAllocationHandle_t {
    v as usize as hipMemGenericAllocationHandle_t
}

impl HipShell {
    fn version_now(&self) -> Result<i32, Failure> {
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer.
        self.check("hipRuntimeGetVersion", unsafe {
            (self.api.hipRuntimeGetVersion)(&mut v)
        })?;
        Ok(v)
    }

    /// Runs a [`VmmCommand`].
    pub(super) fn vmm(&mut self, command: VmmCommand) -> Reply {
        let api = std::sync::Arc::clone(&self.api);
        macro_rules! f {
            ($name:ident) => {
                api.$name.ok_or_else(|| {
                    Failure::harness(concat!("the HIP table lacks ", stringify!($name)))
                })?
            };
        }
        match command {
            VmmCommand::Missing => {
                let missing: Vec<&str> = api
                    .missing_optional()
                    .into_iter()
                    .filter(|f| {
                        devipc_hip_sys::VMM_FUNCTIONS.contains(f) || *f == "hipPointerGetAttribute"
                    })
                    .collect();
                value(missing)
            }
            VmmCommand::Granularity {
                device,
                option,
                alloc_type,
            } => {
                let prop = hipMemAllocationProp {
                    r#type: alloc_type.unwrap_or(hipMemAllocationTypePinned),
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: device,
                    },
                    ..hipMemAllocationProp::zeroed()
                };
                let old = hipMemAllocationProp_R0502::from_current(&prop);
                let p = if mem_allocation_prop_is_r0502(self.version_now()?) {
                    (&old as *const hipMemAllocationProp_R0502).cast()
                } else {
                    &prop as *const hipMemAllocationProp
                };
                let mut g = 0usize;
                // SAFETY: a valid out pointer; `p` points at a live prop in the layout of
                // the running version.
                let code = unsafe { f!(hipMemGetAllocationGranularity)(&mut g, p, option) };
                self.check("hipMemGetAllocationGranularity", code)?;
                value(g)
            }
            VmmCommand::Create {
                size,
                handle_type,
                device,
                alloc_type,
                flags,
            } => {
                let prop = hipMemAllocationProp {
                    r#type: alloc_type,
                    requestedHandleType: handle_type,
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: device,
                    },
                    ..hipMemAllocationProp::zeroed()
                };
                let old = hipMemAllocationProp_R0502::from_current(&prop);
                let p = if mem_allocation_prop_is_r0502(self.version_now()?) {
                    (&old as *const hipMemAllocationProp_R0502).cast()
                } else {
                    &prop as *const hipMemAllocationProp
                };
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: as for the granularity.
                let code = unsafe { f!(hipMemCreate)(&mut h, size, p, flags) };
                self.check("hipMemCreate", code)?;
                value(h as usize as u64)
            }
            VmmCommand::Release { handle: h } => {
                // SAFETY: a handle the scenario got from this shell (or a released one,
                // whose refusal is the rule under test on the emulator).
                let code = unsafe { f!(hipMemRelease)(handle(h)) };
                self.check("hipMemRelease", code).and_then(|()| done())
            }
            VmmCommand::Prop { handle: h } => {
                let mut buf = hipMemAllocationProp::zeroed();
                // SAFETY: a 32-byte out buffer, the size of both layouts.
                let code =
                    unsafe { f!(hipMemGetAllocationPropertiesFromHandle)(&mut buf, handle(h)) };
                self.check("hipMemGetAllocationPropertiesFromHandle", code)?;
                let prop = if mem_allocation_prop_is_r0502(self.version_now()?) {
                    // SAFETY: both layouts are 32 bytes of plain integers and a pointer.
                    unsafe {
                        std::mem::transmute::<hipMemAllocationProp, hipMemAllocationProp_R0502>(buf)
                    }
                    .to_current()
                } else {
                    buf
                };
                value([
                    prop.r#type,
                    prop.requestedHandleType,
                    prop.location.r#type,
                    prop.location.id,
                ])
            }
            VmmCommand::Reserve { size, alignment } => {
                let mut va: *mut c_void = std::ptr::null_mut();
                // SAFETY: a valid out pointer; no address hint.
                let code = unsafe {
                    f!(hipMemAddressReserve)(&mut va, size, alignment, std::ptr::null_mut(), 0)
                };
                self.check("hipMemAddressReserve", code)?;
                value(va as usize as u64)
            }
            VmmCommand::AddressFree { va, size } => {
                // SAFETY: an address this shell reserved (or a deliberately wrong one).
                let code = unsafe { f!(hipMemAddressFree)(ptr(va), size) };
                self.check("hipMemAddressFree", code).and_then(|()| done())
            }
            VmmCommand::Map {
                va,
                size,
                handle: h,
                offset,
                flags,
            } => {
                // SAFETY: a reserved address and a handle of this shell.
                let code = unsafe { f!(hipMemMap)(ptr(va), size, offset, handle(h), flags) };
                self.check("hipMemMap", code).and_then(|()| done())
            }
            VmmCommand::Unmap { va, size } => {
                // SAFETY: a mapped range of this shell (or a partial one, refused).
                let code = unsafe { f!(hipMemUnmap)(ptr(va), size) };
                self.check("hipMemUnmap", code).and_then(|()| done())
            }
            VmmCommand::SetAccess {
                va,
                size,
                device,
                flags,
            } => {
                let desc = hipMemAccessDesc {
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: device,
                    },
                    flags,
                };
                // SAFETY: one live descriptor.
                let code = unsafe { f!(hipMemSetAccess)(ptr(va), size, &desc, 1) };
                self.check("hipMemSetAccess", code).and_then(|()| done())
            }
            VmmCommand::SetAccessAt {
                va,
                size,
                location_type,
                id,
                flags,
            } => {
                let desc = hipMemAccessDesc {
                    location: hipMemLocation {
                        r#type: location_type,
                        id,
                    },
                    flags,
                };
                // SAFETY: one live descriptor.
                let code = unsafe { f!(hipMemSetAccess)(ptr(va), size, &desc, 1) };
                self.check("hipMemSetAccess", code).and_then(|()| done())
            }
            VmmCommand::GetAccess { va, device } => {
                let loc = hipMemLocation {
                    r#type: hipMemLocationTypeDevice,
                    id: device,
                };
                let mut flags: c_ulonglong = 0;
                // SAFETY: valid out and in pointers.
                let code = unsafe { f!(hipMemGetAccess)(&mut flags, &loc, ptr(va)) };
                self.check("hipMemGetAccess", code)?;
                value(flags)
            }
            VmmCommand::Export {
                handle: h,
                handle_type,
                flags,
            } => {
                let mut fd: c_int = -1;
                // SAFETY: the shareable handle of a POSIX fd export is an `int`.
                let code = unsafe {
                    f!(hipMemExportToShareableHandle)(
                        (&mut fd as *mut c_int).cast(),
                        handle(h),
                        handle_type,
                        flags,
                    )
                };
                self.check("hipMemExportToShareableHandle", code)?;
                value(fd)
            }
            VmmCommand::Import { mut fd, how } => {
                let os: *mut c_void = match how {
                    OsHandle::Value => fd as isize as *mut c_void,
                    OsHandle::Pointer => (&mut fd as *mut c_int).cast(),
                };
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: `os` is the fd value or a pointer to the live local `fd`, as the
                // scenario chose (the wrong one is refused by the emulator; rules that pass
                // it are emulator-only).
                let code = unsafe {
                    f!(hipMemImportFromShareableHandle)(
                        &mut h,
                        os,
                        hipMemHandleTypePosixFileDescriptor,
                    )
                };
                self.check("hipMemImportFromShareableHandle", code)?;
                value(h as usize as u64)
            }
            VmmCommand::Retain { addr } => {
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: a valid out pointer; the address is only looked up.
                let code = unsafe { f!(hipMemRetainAllocationHandle)(&mut h, ptr(addr)) };
                self.check("hipMemRetainAllocationHandle", code)?;
                value(h as usize as u64)
            }
            VmmCommand::PointerAttribute { attribute, ptr: p } => {
                let mut v: u64 = 0;
                // SAFETY: an 8-byte buffer holds every attribute the suite asks for (int,
                // size_t, pointer).
                let code = unsafe {
                    f!(hipPointerGetAttribute)((&mut v as *mut u64).cast(), attribute, ptr(p))
                };
                self.check("hipPointerGetAttribute", code)?;
                value(v)
            }
            VmmCommand::FdListen => {
                let inbox = fd_pass::Inbox::bind()
                    .map_err(|e| Failure::harness(format!("fd.listen: unix socket: {e}")))?;
                let name = inbox.name().to_owned();
                self.inbox = Some(inbox);
                value(name)
            }
            VmmCommand::FdSend { name, fd } => {
                // SAFETY: the scenario names a descriptor of this shell that stays open
                // during the call.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                fd_pass::send(&name, fd)
                    .map_err(|e| Failure::harness(format!("fd.send: sendmsg: {e}")))?;
                done()
            }
            VmmCommand::FdRecv => {
                let inbox = self
                    .inbox
                    .take()
                    .ok_or_else(|| Failure::harness("fd.recv before fd.listen"))?;
                let fd = inbox
                    .recv(RECV_TIMEOUT)
                    .map_err(|e| Failure::harness(format!("fd.recv: recvmsg: {e}")))?;
                value(fd.into_raw_fd())
            }
            VmmCommand::FdNull => {
                let f = std::fs::File::open("/dev/null")
                    .map_err(|e| Failure::harness(format!("fd.null: {e}")))?;
                value(f.into_raw_fd())
            }
            VmmCommand::FdClose { fd } => {
                // SAFETY: closes a descriptor the scenario got from this shell.
                if unsafe { libc::close(fd) } != 0 {
                    return Err(Failure::harness(format!(
                        "close({fd}): {}",
                        std::io::Error::last_os_error()
                    )));
                }
                done()
            }
        }
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// The VMM functions the table lacks (empty when it has them all).
    pub fn vmm_missing(&mut self) -> Result<Vec<String>, Failure> {
        self.0.ask(VmmCommand::Missing)
    }

    /// `hipMemGetAllocationGranularity` for a pinned allocation on `device` (`alloc_type`
    /// overrides the type).
    pub fn vmm_granularity(
        &mut self,
        device: i32,
        option: i32,
        alloc_type: Option<i32>,
    ) -> Result<usize, Failure> {
        self.0.ask(VmmCommand::Granularity {
            device,
            option,
            alloc_type,
        })
    }

    /// `hipMemCreate(size, {alloc_type, handle_type, device}, flags)`: the handle.
    pub fn vmm_create(
        &mut self,
        size: usize,
        handle_type: i32,
        device: i32,
        alloc_type: i32,
        flags: u64,
    ) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Create {
            size,
            handle_type,
            device,
            alloc_type,
            flags,
        })
    }

    /// `hipMemRelease`.
    pub fn vmm_release(&mut self, h: u64) -> Result<(), Failure> {
        self.0.ask(VmmCommand::Release { handle: h })
    }

    /// `hipMemGetAllocationPropertiesFromHandle`: (type, requestedHandleType, location type,
    /// location id).
    pub fn vmm_prop(&mut self, h: u64) -> Result<[i32; 4], Failure> {
        self.0.ask(VmmCommand::Prop { handle: h })
    }

    /// `hipMemAddressReserve(size, alignment)`: the base.
    pub fn vmm_reserve(&mut self, size: usize, alignment: usize) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Reserve { size, alignment })
    }

    /// `hipMemAddressFree`.
    pub fn vmm_address_free(&mut self, va: u64, size: usize) -> Result<(), Failure> {
        self.0.ask(VmmCommand::AddressFree { va, size })
    }

    /// `hipMemMap(va, size, offset, h, flags)`.
    pub fn vmm_map(
        &mut self,
        va: u64,
        size: usize,
        h: u64,
        offset: usize,
        flags: u64,
    ) -> Result<(), Failure> {
        self.0.ask(VmmCommand::Map {
            va,
            size,
            handle: h,
            offset,
            flags,
        })
    }

    /// `hipMemUnmap`.
    pub fn vmm_unmap(&mut self, va: u64, size: usize) -> Result<(), Failure> {
        self.0.ask(VmmCommand::Unmap { va, size })
    }

    /// `hipMemSetAccess` for one device.
    pub fn vmm_set_access(
        &mut self,
        va: u64,
        size: usize,
        device: i32,
        flags: i32,
    ) -> Result<(), Failure> {
        self.0.ask(VmmCommand::SetAccess {
            va,
            size,
            device,
            flags,
        })
    }

    /// `hipMemSetAccess` with one descriptor at `(location_type, id)`.
    pub fn vmm_set_access_at(
        &mut self,
        va: u64,
        size: usize,
        location_type: i32,
        id: i32,
        flags: i32,
    ) -> Result<(), Failure> {
        self.0.ask(VmmCommand::SetAccessAt {
            va,
            size,
            location_type,
            id,
            flags,
        })
    }

    /// `hipMemGetAccess`: the flags `device` has at `va`.
    pub fn vmm_get_access(&mut self, va: u64, device: i32) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::GetAccess { va, device })
    }

    /// `hipMemExportToShareableHandle(h, handle_type, flags)`: the new fd.
    pub fn vmm_export(&mut self, h: u64, handle_type: i32, flags: u64) -> Result<i32, Failure> {
        self.0.ask(VmmCommand::Export {
            handle: h,
            handle_type,
            flags,
        })
    }

    /// `hipMemImportFromShareableHandle` of `fd` passed as `how`, as a POSIX fd.
    pub fn vmm_import(&mut self, fd: i32, how: OsHandle) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Import { fd, how })
    }

    /// `hipMemRetainAllocationHandle(addr)`.
    pub fn vmm_retain(&mut self, addr: u64) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::Retain { addr })
    }

    /// `hipPointerGetAttribute(attribute, ptr)`, read as up to 8 bytes.
    pub fn pointer_attribute(&mut self, attribute: i32, ptr: u64) -> Result<u64, Failure> {
        self.0.ask(VmmCommand::PointerAttribute { attribute, ptr })
    }

    /// Binds this shell's descriptor inbox: its name, for [`Hip::fd_send`].
    pub fn fd_listen(&mut self) -> Result<String, Failure> {
        self.0.ask(VmmCommand::FdListen)
    }

    /// Sends a duplicate of this shell's `fd` to the inbox `name` (`SCM_RIGHTS`).
    pub fn fd_send(&mut self, name: &str, fd: i32) -> Result<(), Failure> {
        self.0.ask(VmmCommand::FdSend {
            name: name.to_owned(),
            fd,
        })
    }

    /// The descriptor that arrived in this shell's inbox (its number here).
    pub fn fd_recv(&mut self) -> Result<i32, Failure> {
        self.0.ask(VmmCommand::FdRecv)
    }

    /// Opens `/dev/null`: a descriptor that is no VMM export.
    pub fn fd_null(&mut self) -> Result<i32, Failure> {
        self.0.ask(VmmCommand::FdNull)
    }

    /// Closes a descriptor of this shell.
    pub fn fd_close(&mut self, fd: i32) -> Result<(), Failure> {
        self.0.ask(VmmCommand::FdClose { fd })
    }
}
