//! ACL shell commands for `aclrtMalloc` memory and copies, with their [`Acl`] client
//! calls (`malloc`, `free`, `write`, `read` and `address-range` through
//! [`VendorClient`], which the HIP client shares).
//!
//! `malloc`, `malloc.policy`, `free`, `write`, `write.bounded`, `read`, `read.kind`,
//! `copy.async-d2d`, `address-range`, `mem-info` (dispatched from
//! [`super::AclShell`]'s handler).

use std::ffi::c_void;
use std::sync::Arc;

use devipc_ascend_sys::types::{
    ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE, aclrtMemAttr, aclrtMemMallocPolicy, aclrtMemcpyKind,
};

use super::{Acl, AclShell, ptr, unknown};
use crate::shell::{Exec, Failure, Reply, VendorClient, arg, hex, unhex, word};

impl AclShell {
    /// Runs one of this module's commands.
    pub(super) fn memory_command(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "malloc" => {
                    let size: usize = arg(a, 0)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtMalloc",
                        (api.aclrtMalloc)(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST),
                    )?;
                    one(p as usize as u64)
                }
                "free" => self
                    .check("aclrtFree", (api.aclrtFree)(ptr(arg(a, 0)?)))
                    .and_then(|()| none()),
                "write" => {
                    let dst = ptr(arg(a, 0)?);
                    let bytes = unhex(a.get(1).copied().unwrap_or(""))?;
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            dst,
                            bytes.len(),
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )?;
                    none()
                }
                "read" => {
                    let (src, len): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let mut buf = vec![0u8; len];
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            buf.as_mut_ptr().cast(),
                            len,
                            ptr(src),
                            len,
                            ACL_MEMCPY_DEVICE_TO_HOST,
                        ),
                    )?;
                    Ok(vec![hex(&buf)])
                }
                "copy.async-d2d" => {
                    // aclrtMemcpyAsync device to device on the default stream, then
                    // aclrtSynchronizeStream: the only copy the vendor allows of a key
                    // import used on another device (RT-DOC 11-07).
                    let f = opt!(api, aclrtMemcpyAsync);
                    let (dst, src, len): (u64, u64, usize) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    self.check(
                        "aclrtMemcpyAsync",
                        f(
                            ptr(dst),
                            len,
                            ptr(src),
                            len,
                            ACL_MEMCPY_DEVICE_TO_DEVICE,
                            std::ptr::null_mut(),
                        ),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )?;
                    none()
                }
                "malloc.policy" => {
                    let (size, policy): (usize, aclrtMemMallocPolicy) = (arg(a, 0)?, arg(a, 1)?);
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check("aclrtMalloc", (api.aclrtMalloc)(&mut p, size, policy))?;
                    one(p as usize as u64)
                }
                "address-range" => {
                    let f = opt!(api, aclrtMemGetAddressRange);
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    self.check(
                        "aclrtMemGetAddressRange",
                        f(ptr(arg(a, 0)?), &mut base, &mut size),
                    )?;
                    Ok(vec![(base as usize).to_string(), size.to_string()])
                }
                "mem-info" => {
                    let f = opt!(api, aclrtGetMemInfo);
                    let (mut free, mut total) = (0usize, 0usize);
                    self.check("aclrtGetMemInfo", f(arg(a, 0)?, &mut free, &mut total))?;
                    Ok(vec![free.to_string(), total.to_string()])
                }
                "write.bounded" => {
                    // aclrtMemcpy host to device of the given bytes with an explicit
                    // destMax (the destination's stated capacity).
                    let (dst, dest_max): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let bytes = unhex(a.get(2).copied().unwrap_or(""))?;
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            ptr(dst),
                            dest_max,
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )
                    .and_then(|()| none())
                }
                "read.kind" => {
                    // aclrtMemcpy from device memory into a host buffer with the given
                    // kind (ACL_MEMCPY_DEVICE_TO_HOST unless a rule provokes the check).
                    let (src, len, kind): (u64, usize, aclrtMemcpyKind) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut buf = vec![0u8; len];
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(buf.as_mut_ptr().cast(), len, ptr(src), len, kind),
                    )?;
                    Ok(vec![hex(&buf)])
                }
                other => Err(unknown(other)),
            }
        }
    }
}

impl<E: Exec> Acl<E> {
    /// `aclrtMemcpyAsync` device to device on the default stream, synchronised.
    pub fn copy_async_d2d(&mut self, dst: u64, src: u64, len: usize) -> Result<(), Failure> {
        self.run(format!("copy.async-d2d {dst} {src} {len}"))
            .map(drop)
    }

    /// `aclrtMalloc` with an explicit policy.
    pub fn malloc_policy(
        &mut self,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> Result<u64, Failure> {
        word(&self.run(format!("malloc.policy {size} {policy}"))?, 0)
    }

    /// `aclrtGetMemInfo(attr)`: (free, total) bytes.
    pub fn mem_info(&mut self, attr: aclrtMemAttr) -> Result<(usize, usize), Failure> {
        let r = self.run(format!("mem-info {attr}"))?;
        Ok((word(&r, 0)?, word(&r, 1)?))
    }

    /// `aclrtMemcpy` host to device of `bytes` with an explicit `destMax`.
    pub fn write_bounded(
        &mut self,
        dst: u64,
        dest_max: usize,
        bytes: &[u8],
    ) -> Result<(), Failure> {
        self.run(format!("write.bounded {dst} {dest_max} {}", hex(bytes)))
            .map(drop)
    }

    /// `aclrtMemcpy` of `len` bytes from `src` into a host buffer, with `kind`.
    pub fn read_kind(
        &mut self,
        src: u64,
        len: usize,
        kind: aclrtMemcpyKind,
    ) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(
            &self.run(format!("read.kind {src} {len} {kind}"))?,
            0,
        )?)
    }
}
