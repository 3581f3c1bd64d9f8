//! The HIP shell's VMM commands (api-facts B.4, C.3) and the descriptor passing they need,
//! with their typed client calls on [`Hip`].
//!
//! Allocation handles, reserved addresses and file descriptors travel as numbers, valid
//! only in the shell that made them; a descriptor moves to another shell with
//! `fd.listen` / `fd.send` / `fd.recv` ([`crate::shell::fd_pass`], `SCM_RIGHTS`). The
//! shell passes `hipMemAllocationProp` in the layout of the running version (ROCm 5.2's
//! differs from 5.3+; [`mem_allocation_prop_is_r0502`]) and the import's `osHandle` in the
//! convention the caller names (a pointer to the fd, or the fd value:
//! [`import_takes_fd_by_value`](devipc_hip_sys::import_takes_fd_by_value) says which one
//! the runtime reads).
//!
//! | command | call |
//! |---|---|
//! | `vmm.missing` | the VMM functions the table lacks (`-` when none) |
//! | `vmm.granularity <device> <option> [type]` | `hipMemGetAllocationGranularity` |
//! | `vmm.create <size> <handleType> <device> [type] [flags]` | `hipMemCreate` |
//! | `vmm.release <h>` | `hipMemRelease` |
//! | `vmm.prop <h>` | `hipMemGetAllocationPropertiesFromHandle`: type, handle type, location type, id |
//! | `vmm.reserve <size> [alignment]` | `hipMemAddressReserve` |
//! | `vmm.address-free <va> <size>` | `hipMemAddressFree` |
//! | `vmm.map <va> <size> <h> [offset] [flags]` | `hipMemMap` |
//! | `vmm.unmap <va> <size>` | `hipMemUnmap` |
//! | `vmm.set-access <va> <size> <device> <flags>` | `hipMemSetAccess` with one descriptor |
//! | `vmm.get-access <va> <device>` | `hipMemGetAccess` |
//! | `vmm.export <h> <handleType> [flags]` | `hipMemExportToShareableHandle`: the new fd |
//! | `vmm.import <fd> <value\|pointer> [handleType]` | `hipMemImportFromShareableHandle` |
//! | `vmm.retain <addr>` | `hipMemRetainAllocationHandle` |
//! | `ptr.attr <attribute> <ptr>` | `hipPointerGetAttribute` into a zeroed 8-byte buffer |
//! | `fd.listen` / `fd.send <name> <fd>` / `fd.recv` | pass a descriptor (`SCM_RIGHTS`) |
//! | `fd.null` / `fd.close <fd>` | open `/dev/null` (a descriptor that is no export), close |

use std::ffi::{c_int, c_ulonglong, c_void};
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::time::Duration;

use devipc_hip_sys::{
    hipMemAccessDesc, hipMemAllocationProp, hipMemAllocationProp_R0502, hipMemAllocationTypePinned,
    hipMemGenericAllocationHandle_t, hipMemHandleTypePosixFileDescriptor, hipMemLocation,
    hipMemLocationTypeDevice, mem_allocation_prop_is_r0502,
};

use super::{Hip, HipShell, ptr};
use crate::shell::{Exec, Failure, Reply, VendorClient, arg, fd_pass, word};

/// How long `fd.recv` waits for the sender's datagram (it was sent before the command).
const RECV_TIMEOUT: Duration = Duration::from_secs(10);

/// How `hipMemImportFromShareableHandle`'s `osHandle` carries the fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    /// The wire (and report) form: `value` or `pointer`.
    pub fn name(self) -> &'static str {
        match self {
            OsHandle::Value => "value",
            OsHandle::Pointer => "pointer",
        }
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

    /// The VMM commands (see the module table).
    pub(super) fn vmm(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = std::sync::Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        macro_rules! f {
            ($name:ident) => {
                api.$name.ok_or_else(|| {
                    Failure::harness(concat!("the HIP table lacks ", stringify!($name)))
                })?
            };
        }
        match name {
            "vmm.missing" => {
                let missing: Vec<&str> = api
                    .missing_optional()
                    .into_iter()
                    .filter(|f| {
                        devipc_hip_sys::VMM_FUNCTIONS.contains(f) || *f == "hipPointerGetAttribute"
                    })
                    .collect();
                Ok(vec![if missing.is_empty() {
                    "-".into()
                } else {
                    missing.join(",")
                }])
            }
            "vmm.granularity" => {
                let prop = hipMemAllocationProp {
                    r#type: a
                        .get(2)
                        .map_or(Ok(hipMemAllocationTypePinned), |_| arg(a, 2))?,
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: arg(a, 0)?,
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
                let code = unsafe { f!(hipMemGetAllocationGranularity)(&mut g, p, arg(a, 1)?) };
                self.check("hipMemGetAllocationGranularity", code)?;
                one(g as u64)
            }
            "vmm.create" => {
                let prop = hipMemAllocationProp {
                    r#type: a
                        .get(3)
                        .map_or(Ok(hipMemAllocationTypePinned), |_| arg(a, 3))?,
                    requestedHandleType: arg(a, 1)?,
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: arg(a, 2)?,
                    },
                    ..hipMemAllocationProp::zeroed()
                };
                let flags: c_ulonglong = a.get(4).map_or(Ok(0), |_| arg(a, 4))?;
                let old = hipMemAllocationProp_R0502::from_current(&prop);
                let p = if mem_allocation_prop_is_r0502(self.version_now()?) {
                    (&old as *const hipMemAllocationProp_R0502).cast()
                } else {
                    &prop as *const hipMemAllocationProp
                };
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: as for the granularity.
                let code = unsafe { f!(hipMemCreate)(&mut h, arg(a, 0)?, p, flags) };
                self.check("hipMemCreate", code)?;
                one(h as usize as u64)
            }
            "vmm.release" => {
                // SAFETY: a handle the scenario got from this shell (or a released one,
                // whose refusal is the rule under test on the emulator).
                let code = unsafe { f!(hipMemRelease)(handle(arg(a, 0)?)) };
                self.check("hipMemRelease", code).and_then(|()| none())
            }
            "vmm.prop" => {
                let mut buf = hipMemAllocationProp::zeroed();
                // SAFETY: a 32-byte out buffer, the size of both layouts.
                let code = unsafe {
                    f!(hipMemGetAllocationPropertiesFromHandle)(&mut buf, handle(arg(a, 0)?))
                };
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
                Ok(vec![
                    prop.r#type.to_string(),
                    prop.requestedHandleType.to_string(),
                    prop.location.r#type.to_string(),
                    prop.location.id.to_string(),
                ])
            }
            "vmm.reserve" => {
                let mut va: *mut c_void = std::ptr::null_mut();
                let align: usize = a.get(1).map_or(Ok(0), |_| arg(a, 1))?;
                // SAFETY: a valid out pointer; no address hint.
                let code = unsafe {
                    f!(hipMemAddressReserve)(&mut va, arg(a, 0)?, align, std::ptr::null_mut(), 0)
                };
                self.check("hipMemAddressReserve", code)?;
                one(va as usize as u64)
            }
            "vmm.address-free" => {
                // SAFETY: an address this shell reserved (or a deliberately wrong one).
                let code = unsafe { f!(hipMemAddressFree)(ptr(arg(a, 0)?), arg(a, 1)?) };
                self.check("hipMemAddressFree", code).and_then(|()| none())
            }
            "vmm.map" => {
                let offset: usize = a.get(3).map_or(Ok(0), |_| arg(a, 3))?;
                let flags: c_ulonglong = a.get(4).map_or(Ok(0), |_| arg(a, 4))?;
                // SAFETY: a reserved address and a handle of this shell.
                let code = unsafe {
                    f!(hipMemMap)(
                        ptr(arg(a, 0)?),
                        arg(a, 1)?,
                        offset,
                        handle(arg(a, 2)?),
                        flags,
                    )
                };
                self.check("hipMemMap", code).and_then(|()| none())
            }
            "vmm.unmap" => {
                // SAFETY: a mapped range of this shell (or a partial one, refused).
                let code = unsafe { f!(hipMemUnmap)(ptr(arg(a, 0)?), arg(a, 1)?) };
                self.check("hipMemUnmap", code).and_then(|()| none())
            }
            "vmm.set-access" => {
                let desc = hipMemAccessDesc {
                    location: hipMemLocation {
                        r#type: hipMemLocationTypeDevice,
                        id: arg(a, 2)?,
                    },
                    flags: arg(a, 3)?,
                };
                // SAFETY: one live descriptor.
                let code = unsafe { f!(hipMemSetAccess)(ptr(arg(a, 0)?), arg(a, 1)?, &desc, 1) };
                self.check("hipMemSetAccess", code).and_then(|()| none())
            }
            "vmm.get-access" => {
                let loc = hipMemLocation {
                    r#type: hipMemLocationTypeDevice,
                    id: arg(a, 1)?,
                };
                let mut flags: c_ulonglong = 0;
                // SAFETY: valid out and in pointers.
                let code = unsafe { f!(hipMemGetAccess)(&mut flags, &loc, ptr(arg(a, 0)?)) };
                self.check("hipMemGetAccess", code)?;
                one(flags)
            }
            "vmm.export" => {
                let mut fd: c_int = -1;
                let flags: c_ulonglong = a.get(2).map_or(Ok(0), |_| arg(a, 2))?;
                // SAFETY: the shareable handle of a POSIX fd export is an `int`.
                let code = unsafe {
                    f!(hipMemExportToShareableHandle)(
                        (&mut fd as *mut c_int).cast(),
                        handle(arg(a, 0)?),
                        arg(a, 1)?,
                        flags,
                    )
                };
                self.check("hipMemExportToShareableHandle", code)?;
                Ok(vec![fd.to_string()])
            }
            "vmm.import" => {
                let mut fd: c_int = arg(a, 0)?;
                let os: *mut c_void = match a.get(1).copied() {
                    Some("value") => fd as isize as *mut c_void,
                    Some("pointer") => (&mut fd as *mut c_int).cast(),
                    other => {
                        return Err(Failure::harness(format!(
                            "vmm.import: convention `{other:?}` is not value or pointer"
                        )));
                    }
                };
                let ty = a
                    .get(2)
                    .map_or(Ok(hipMemHandleTypePosixFileDescriptor), |_| arg(a, 2))?;
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: `os` is the fd value or a pointer to the live local `fd`, as the
                // scenario chose (the wrong one is refused by the emulator; rules that pass
                // it are emulator-only).
                let code = unsafe { f!(hipMemImportFromShareableHandle)(&mut h, os, ty) };
                self.check("hipMemImportFromShareableHandle", code)?;
                one(h as usize as u64)
            }
            "vmm.retain" => {
                let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
                // SAFETY: a valid out pointer; the address is only looked up.
                let code = unsafe { f!(hipMemRetainAllocationHandle)(&mut h, ptr(arg(a, 0)?)) };
                self.check("hipMemRetainAllocationHandle", code)?;
                one(h as usize as u64)
            }
            "ptr.attr" => {
                let mut v: u64 = 0;
                // SAFETY: an 8-byte buffer holds every attribute the suite asks for (int,
                // size_t, pointer).
                let code = unsafe {
                    f!(hipPointerGetAttribute)(
                        (&mut v as *mut u64).cast(),
                        arg(a, 0)?,
                        ptr(arg(a, 1)?),
                    )
                };
                self.check("hipPointerGetAttribute", code)?;
                one(v)
            }
            "fd.listen" => {
                let inbox = fd_pass::Inbox::bind()
                    .map_err(|e| Failure::harness(format!("fd.listen: unix socket: {e}")))?;
                let name = inbox.name().to_owned();
                self.inbox = Some(inbox);
                Ok(vec![name])
            }
            "fd.send" => {
                let name = a
                    .first()
                    .ok_or_else(|| Failure::harness("fd.send: no socket name"))?;
                let fd: c_int = arg(a, 1)?;
                // SAFETY: the scenario names a descriptor of this shell that stays open
                // during the call.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                fd_pass::send(name, fd)
                    .map_err(|e| Failure::harness(format!("fd.send: sendmsg: {e}")))?;
                none()
            }
            "fd.recv" => {
                let inbox = self
                    .inbox
                    .take()
                    .ok_or_else(|| Failure::harness("fd.recv before fd.listen"))?;
                let fd = inbox
                    .recv(RECV_TIMEOUT)
                    .map_err(|e| Failure::harness(format!("fd.recv: recvmsg: {e}")))?;
                Ok(vec![fd.into_raw_fd().to_string()])
            }
            "fd.null" => {
                let f = std::fs::File::open("/dev/null")
                    .map_err(|e| Failure::harness(format!("fd.null: {e}")))?;
                Ok(vec![f.into_raw_fd().to_string()])
            }
            "fd.close" => {
                let fd: c_int = arg(a, 0)?;
                // SAFETY: closes a descriptor the scenario got from this shell.
                if unsafe { libc::close(fd) } != 0 {
                    return Err(Failure::harness(format!(
                        "close({fd}): {}",
                        std::io::Error::last_os_error()
                    )));
                }
                none()
            }
            other => Err(Failure::harness(format!(
                "unknown HIP shell command `{other}`"
            ))),
        }
    }
}

impl<E: Exec> Hip<E> {
    /// The VMM functions the table lacks (empty when it has them all).
    pub fn vmm_missing(&mut self) -> Result<Vec<String>, Failure> {
        let w: String = word(&self.run("vmm.missing".into())?, 0)?;
        Ok(if w == "-" {
            Vec::new()
        } else {
            w.split(',').map(str::to_owned).collect()
        })
    }

    /// `hipMemGetAllocationGranularity` for a pinned allocation on `device` (`alloc_type`
    /// overrides the type).
    pub fn vmm_granularity(
        &mut self,
        device: i32,
        option: i32,
        alloc_type: Option<i32>,
    ) -> Result<usize, Failure> {
        let ty = alloc_type.map_or(String::new(), |t| format!(" {t}"));
        word(
            &self.run(format!("vmm.granularity {device} {option}{ty}"))?,
            0,
        )
    }

    /// `hipMemCreate(size, {Pinned or alloc_type, handle_type, device}, flags)`: the handle.
    pub fn vmm_create(
        &mut self,
        size: usize,
        handle_type: i32,
        device: i32,
        alloc_type: i32,
        flags: u64,
    ) -> Result<u64, Failure> {
        word(
            &self.run(format!(
                "vmm.create {size} {handle_type} {device} {alloc_type} {flags}"
            ))?,
            0,
        )
    }

    /// `hipMemRelease`.
    pub fn vmm_release(&mut self, h: u64) -> Result<(), Failure> {
        self.run(format!("vmm.release {h}")).map(drop)
    }

    /// `hipMemGetAllocationPropertiesFromHandle`: (type, requestedHandleType, location type,
    /// location id).
    pub fn vmm_prop(&mut self, h: u64) -> Result<[i32; 4], Failure> {
        let r = self.run(format!("vmm.prop {h}"))?;
        Ok([word(&r, 0)?, word(&r, 1)?, word(&r, 2)?, word(&r, 3)?])
    }

    /// `hipMemAddressReserve(size, alignment)`: the base.
    pub fn vmm_reserve(&mut self, size: usize, alignment: usize) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.reserve {size} {alignment}"))?, 0)
    }

    /// `hipMemAddressFree`.
    pub fn vmm_address_free(&mut self, va: u64, size: usize) -> Result<(), Failure> {
        self.run(format!("vmm.address-free {va} {size}")).map(drop)
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
        self.run(format!("vmm.map {va} {size} {h} {offset} {flags}"))
            .map(drop)
    }

    /// `hipMemUnmap`.
    pub fn vmm_unmap(&mut self, va: u64, size: usize) -> Result<(), Failure> {
        self.run(format!("vmm.unmap {va} {size}")).map(drop)
    }

    /// `hipMemSetAccess` for one device.
    pub fn vmm_set_access(
        &mut self,
        va: u64,
        size: usize,
        device: i32,
        flags: i32,
    ) -> Result<(), Failure> {
        self.run(format!("vmm.set-access {va} {size} {device} {flags}"))
            .map(drop)
    }

    /// `hipMemGetAccess`: the flags `device` has at `va`.
    pub fn vmm_get_access(&mut self, va: u64, device: i32) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.get-access {va} {device}"))?, 0)
    }

    /// `hipMemExportToShareableHandle(h, handle_type, flags)`: the new fd.
    pub fn vmm_export(&mut self, h: u64, handle_type: i32, flags: u64) -> Result<i32, Failure> {
        word(
            &self.run(format!("vmm.export {h} {handle_type} {flags}"))?,
            0,
        )
    }

    /// `hipMemImportFromShareableHandle` of `fd` passed as `how`, as a POSIX fd.
    pub fn vmm_import(&mut self, fd: i32, how: OsHandle) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.import {fd} {}", how.name()))?, 0)
    }

    /// `hipMemRetainAllocationHandle(addr)`.
    pub fn vmm_retain(&mut self, addr: u64) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.retain {addr}"))?, 0)
    }

    /// `hipPointerGetAttribute(attribute, ptr)`, read as up to 8 bytes.
    pub fn pointer_attribute(&mut self, attribute: i32, ptr: u64) -> Result<u64, Failure> {
        word(&self.run(format!("ptr.attr {attribute} {ptr}"))?, 0)
    }

    /// Binds this shell's descriptor inbox: its name, for [`Hip::fd_send`].
    pub fn fd_listen(&mut self) -> Result<String, Failure> {
        word(&self.run("fd.listen".into())?, 0)
    }

    /// Sends a duplicate of this shell's `fd` to the inbox `name` (`SCM_RIGHTS`).
    pub fn fd_send(&mut self, name: &str, fd: i32) -> Result<(), Failure> {
        self.run(format!("fd.send {name} {fd}")).map(drop)
    }

    /// The descriptor that arrived in this shell's inbox (its number here).
    pub fn fd_recv(&mut self) -> Result<i32, Failure> {
        word(&self.run("fd.recv".into())?, 0)
    }

    /// Opens `/dev/null`: a descriptor that is no VMM export.
    pub fn fd_null(&mut self) -> Result<i32, Failure> {
        word(&self.run("fd.null".into())?, 0)
    }

    /// Closes a descriptor of this shell.
    pub fn fd_close(&mut self, fd: i32) -> Result<(), Failure> {
        self.run(format!("fd.close {fd}")).map(drop)
    }
}
