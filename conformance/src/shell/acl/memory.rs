//! ACL shell commands for `aclrtMalloc` memory and copies, with their [`Acl`] client
//! calls (`malloc`, `free`, `write`, `read` and `address_range` through
//! [`VendorClient`](crate::shell::VendorClient), which the HIP client shares).

use std::ffi::c_void;
use std::sync::Arc;

use devipc_ascend_sys::types::{
    ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE, aclrtMemAttr, aclrtMemMallocPolicy, aclrtMemcpyKind,
};
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, ptr};
use crate::shell::{Exec, Failure, Memory, Reply, done, hex, hex_bytes, unhex, value};

/// A memory command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryCommand {
    /// A call both vendor shells answer.
    Shared(Memory),
    /// `aclrtMalloc` with an explicit policy: the address.
    MallocPolicy {
        /// Bytes.
        size: usize,
        /// The policy.
        policy: aclrtMemMallocPolicy,
    },
    /// `aclrtGetMemInfo(attr)`: (free, total) bytes.
    MemInfo {
        /// The memory kind.
        attr: aclrtMemAttr,
    },
    /// `aclrtMemcpy` host to device of `bytes` with an explicit `destMax` (the
    /// destination's stated capacity).
    WriteBounded {
        /// The device address.
        dst: u64,
        /// `destMax`.
        dest_max: usize,
        /// The bytes.
        #[serde(with = "hex_bytes")]
        bytes: Vec<u8>,
    },
    /// `aclrtMemcpy` of `len` bytes from device memory into a host buffer with `kind`
    /// (`ACL_MEMCPY_DEVICE_TO_HOST` unless a rule provokes the check): the bytes as hex.
    ReadKind {
        /// The device address.
        src: u64,
        /// Bytes.
        len: usize,
        /// The copy kind.
        kind: aclrtMemcpyKind,
    },
    /// `aclrtMemcpyAsync` device to device on the default stream, then
    /// `aclrtSynchronizeStream`: the only copy the vendor allows of a key import used on
    /// another device (RT-DOC 11-07).
    CopyAsyncD2d {
        /// The destination.
        dst: u64,
        /// The source.
        src: u64,
        /// Bytes.
        len: usize,
    },
}

impl From<MemoryCommand> for AclCommand {
    fn from(c: MemoryCommand) -> Self {
        AclCommand::Memory(c)
    }
}

impl From<Memory> for AclCommand {
    fn from(m: Memory) -> Self {
        AclCommand::Memory(MemoryCommand::Shared(m))
    }
}

impl AclShell {
    /// Runs a [`MemoryCommand`].
    pub(super) fn memory(&mut self, command: MemoryCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match command {
                MemoryCommand::Shared(Memory::Malloc { size }) => {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtMalloc",
                        (api.aclrtMalloc)(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST),
                    )?;
                    value(p as usize as u64)
                }
                MemoryCommand::Shared(Memory::Free { ptr: p }) => self
                    .check("aclrtFree", (api.aclrtFree)(ptr(p)))
                    .and_then(|()| done()),
                MemoryCommand::Shared(Memory::Write { dst, bytes }) => {
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            ptr(dst),
                            bytes.len(),
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )?;
                    done()
                }
                MemoryCommand::Shared(Memory::Read { src, len }) => {
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
                    value(hex(&buf))
                }
                MemoryCommand::Shared(Memory::AddressRange { ptr: p }) => {
                    let f = opt!(api, aclrtMemGetAddressRange);
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    self.check("aclrtMemGetAddressRange", f(ptr(p), &mut base, &mut size))?;
                    value((base as usize as u64, size))
                }
                MemoryCommand::CopyAsyncD2d { dst, src, len } => {
                    let f = opt!(api, aclrtMemcpyAsync);
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
                    done()
                }
                MemoryCommand::MallocPolicy { size, policy } => {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check("aclrtMalloc", (api.aclrtMalloc)(&mut p, size, policy))?;
                    value(p as usize as u64)
                }
                MemoryCommand::MemInfo { attr } => {
                    let f = opt!(api, aclrtGetMemInfo);
                    let (mut free, mut total) = (0usize, 0usize);
                    self.check("aclrtGetMemInfo", f(attr, &mut free, &mut total))?;
                    value((free, total))
                }
                MemoryCommand::WriteBounded {
                    dst,
                    dest_max,
                    bytes,
                } => self
                    .check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            ptr(dst),
                            dest_max,
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )
                    .and_then(|()| done()),
                MemoryCommand::ReadKind { src, len, kind } => {
                    let mut buf = vec![0u8; len];
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(buf.as_mut_ptr().cast(), len, ptr(src), len, kind),
                    )?;
                    value(hex(&buf))
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtMemcpyAsync` device to device on the default stream, synchronised.
    pub fn copy_async_d2d(&mut self, dst: u64, src: u64, len: usize) -> Result<(), Failure> {
        self.0.ask(MemoryCommand::CopyAsyncD2d { dst, src, len })
    }

    /// `aclrtMalloc` with an explicit policy.
    pub fn malloc_policy(
        &mut self,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> Result<u64, Failure> {
        self.0.ask(MemoryCommand::MallocPolicy { size, policy })
    }

    /// `aclrtGetMemInfo(attr)`: (free, total) bytes.
    pub fn mem_info(&mut self, attr: aclrtMemAttr) -> Result<(usize, usize), Failure> {
        self.0.ask(MemoryCommand::MemInfo { attr })
    }

    /// `aclrtMemcpy` host to device of `bytes` with an explicit `destMax`.
    pub fn write_bounded(
        &mut self,
        dst: u64,
        dest_max: usize,
        bytes: &[u8],
    ) -> Result<(), Failure> {
        self.0.ask(MemoryCommand::WriteBounded {
            dst,
            dest_max,
            bytes: bytes.to_vec(),
        })
    }

    /// `aclrtMemcpy` of `len` bytes from `src` into a host buffer, with `kind`.
    pub fn read_kind(
        &mut self,
        src: u64,
        len: usize,
        kind: aclrtMemcpyKind,
    ) -> Result<Vec<u8>, Failure> {
        unhex(
            &self
                .0
                .ask::<String>(MemoryCommand::ReadKind { src, len, kind })?,
        )
    }
}
