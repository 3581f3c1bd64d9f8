//! HIP shell commands for `hipMalloc` memory, copies (also the driver-style
//! `hipMemcpyHtoD` / `hipMemcpyDtoH`) and the device a pointer is on, with their [`Hip`]
//! client calls (`malloc`, `free`, `write`, `read` and `address_range` through
//! [`VendorClient`](crate::shell::VendorClient), which the ACL client shares).

use std::ffi::c_void;
use std::sync::Arc;

use devipc_hip_sys::{hipMemcpyDeviceToHost, hipMemcpyHostToDevice, hipPointerAttribute_t};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell, ptr};
use crate::shell::{Exec, Failure, Memory, Reply, done, hex, value};

/// A memory command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryCommand {
    /// A call both vendor shells answer.
    Shared(Memory),
    /// `hipPointerGetAttributes(ptr).device`: the device the memory is on.
    PointerDevice {
        /// The address.
        ptr: u64,
    },
    /// `hipMemcpyHtoD(dst, bytes, len)`.
    HtoD {
        /// The device address.
        dst: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// `hipMemcpyDtoH(buf, src, len)`: the bytes as hex.
    DtoH {
        /// The device address.
        src: u64,
        /// Bytes.
        len: usize,
    },
}

impl From<MemoryCommand> for HipCommand {
    fn from(c: MemoryCommand) -> Self {
        HipCommand::Memory(c)
    }
}

impl From<Memory> for HipCommand {
    fn from(m: Memory) -> Self {
        HipCommand::Memory(MemoryCommand::Shared(m))
    }
}

impl HipShell {
    /// Runs a [`MemoryCommand`].
    pub(super) fn memory(&mut self, command: MemoryCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; pointer
        // arguments are values this shell or its peer got from the runtime, or deliberately
        // invalid values whose rejection is the rule under test; host buffers are live Vecs
        // of the stated length.
        unsafe {
            match command {
                MemoryCommand::Shared(Memory::Malloc { size }) => {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check("hipMalloc", (api.hipMalloc)(&mut p, size))?;
                    value(p as usize as u64)
                }
                MemoryCommand::Shared(Memory::Free { ptr: p }) => self
                    .check("hipFree", (api.hipFree)(ptr(p)))
                    .and_then(|()| done()),
                MemoryCommand::Shared(Memory::Write { dst, bytes }) => self
                    .check(
                        "hipMemcpy",
                        (api.hipMemcpy)(
                            ptr(dst),
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            hipMemcpyHostToDevice,
                        ),
                    )
                    .and_then(|()| done()),
                MemoryCommand::Shared(Memory::Read { src, len }) => {
                    let mut buf = vec![0u8; len];
                    self.check(
                        "hipMemcpy",
                        (api.hipMemcpy)(
                            buf.as_mut_ptr().cast(),
                            ptr(src),
                            len,
                            hipMemcpyDeviceToHost,
                        ),
                    )?;
                    value(hex(&buf))
                }
                MemoryCommand::Shared(Memory::AddressRange { ptr: p }) => {
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    self.check(
                        "hipMemGetAddressRange",
                        (api.hipMemGetAddressRange)(&mut base, &mut size, ptr(p)),
                    )?;
                    value((base as usize as u64, size))
                }
                MemoryCommand::PointerDevice { ptr: p } => {
                    let mut attrs = hipPointerAttribute_t::zeroed();
                    self.check(
                        "hipPointerGetAttributes",
                        (api.hipPointerGetAttributes)(&mut attrs, ptr(p)),
                    )?;
                    value(attrs.device)
                }
                MemoryCommand::HtoD { dst, mut bytes } => {
                    let f = api
                        .hipMemcpyHtoD
                        .ok_or_else(|| Failure::harness("the HIP table lacks hipMemcpyHtoD"))?;
                    self.check(
                        "hipMemcpyHtoD",
                        f(ptr(dst), bytes.as_mut_ptr().cast(), bytes.len()),
                    )
                    .and_then(|()| done())
                }
                MemoryCommand::DtoH { src, len } => {
                    let f = api
                        .hipMemcpyDtoH
                        .ok_or_else(|| Failure::harness("the HIP table lacks hipMemcpyDtoH"))?;
                    let mut buf = vec![0u8; len];
                    self.check("hipMemcpyDtoH", f(buf.as_mut_ptr().cast(), ptr(src), len))?;
                    value(hex(&buf))
                }
            }
        }
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// `hipPointerGetAttributes(ptr).device`: the device the memory is on.
    pub fn pointer_device(&mut self, ptr: u64) -> Result<i32, Failure> {
        self.0.ask(MemoryCommand::PointerDevice { ptr })
    }

    /// `hipMemcpyHtoD(dst, bytes, bytes.len())`.
    pub fn memcpy_htod(&mut self, dst: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.0.ask(MemoryCommand::HtoD {
            dst,
            bytes: bytes.to_vec(),
        })
    }

    /// `hipMemcpyDtoH(buf, src, len)`: the bytes.
    pub fn memcpy_dtoh(&mut self, src: u64, len: usize) -> Result<Vec<u8>, Failure> {
        crate::shell::unhex(&self.0.ask::<String>(MemoryCommand::DtoH { src, len })?)
    }
}
