//! HIP shell commands for runtime queries (version, error names, `hipInit`), devices
//! (`hipDeviceGet`, `hipDeviceGetAttribute`), PCI bus ids, UUIDs and peer access, with
//! their [`Hip`] client calls.

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::sync::Arc;

use devipc_hip_sys::{hipError_t, hipUUID};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell};
use crate::shell::{Exec, Failure, Reply, done, value};

/// A device or runtime-query command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceCommand {
    /// `hipRuntimeGetVersion`: the `HIP_VERSION` encoding.
    Version,
    /// `hipRuntimeGetVersion(NULL)`.
    VersionNull,
    /// `hipGetErrorName(code)`.
    ErrorName {
        /// The status code.
        code: hipError_t,
    },
    /// `hipInit(flags)`.
    Init {
        /// The flags.
        flags: c_uint,
    },
    /// `hipGetDeviceCount`.
    DeviceCount,
    /// `hipSetDevice`.
    SetDevice {
        /// The device.
        dev: c_int,
    },
    /// `hipDeviceGetPCIBusId` into a `len`-byte buffer (at most 64): the text.
    PciBusId {
        /// The device.
        dev: c_int,
        /// The buffer length passed.
        len: c_int,
    },
    /// `hipDeviceGetByPCIBusId`: the device.
    ByPciBusId {
        /// The bus id text.
        bus_id: String,
    },
    /// `hipDeviceGetUuid`: the 16 bytes as hex.
    Uuid {
        /// The device.
        dev: c_int,
    },
    /// `hipDeviceCanAccessPeer`: 0 or 1.
    CanAccessPeer {
        /// The device.
        dev: c_int,
        /// The peer.
        peer: c_int,
    },
    /// `hipDeviceEnablePeerAccess` from the current device.
    EnablePeer {
        /// The peer.
        peer: c_int,
        /// The flags.
        flags: c_uint,
    },
    /// `hipDeviceGet`: the device handle of an ordinal.
    Get {
        /// The ordinal.
        ordinal: c_int,
    },
    /// `hipDeviceGetAttribute`: the attribute's value.
    Attribute {
        /// The attribute (`hipDeviceAttribute_t`).
        attr: c_int,
        /// The device.
        dev: c_int,
    },
}

impl From<DeviceCommand> for HipCommand {
    fn from(c: DeviceCommand) -> Self {
        HipCommand::Device(c)
    }
}

impl HipShell {
    /// Runs a [`DeviceCommand`].
    pub(super) fn device(&mut self, command: DeviceCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals and host
        // buffers are live Vecs of the stated length; device ids are plain integers the
        // runtime validates.
        unsafe {
            match command {
                DeviceCommand::Version => {
                    let mut v: c_int = 0;
                    self.check("hipRuntimeGetVersion", (api.hipRuntimeGetVersion)(&mut v))?;
                    value(v)
                }
                DeviceCommand::VersionNull => self
                    .check(
                        "hipRuntimeGetVersion",
                        (api.hipRuntimeGetVersion)(std::ptr::null_mut()),
                    )
                    .and_then(|()| done()),
                DeviceCommand::ErrorName { code } => {
                    let s = (api.hipGetErrorName)(code);
                    if s.is_null() {
                        return Err(Failure::harness(format!("hipGetErrorName({code}) is NULL")));
                    }
                    value(CStr::from_ptr(s).to_string_lossy())
                }
                DeviceCommand::Init { flags } => self
                    .check("hipInit", (api.hipInit)(flags))
                    .and_then(|()| done()),
                DeviceCommand::DeviceCount => {
                    let mut n: c_int = 0;
                    self.check("hipGetDeviceCount", (api.hipGetDeviceCount)(&mut n))?;
                    value(n)
                }
                DeviceCommand::SetDevice { dev } => self
                    .check("hipSetDevice", (api.hipSetDevice)(dev))
                    .and_then(|()| done()),
                DeviceCommand::PciBusId { dev, len } => {
                    let mut buf = vec![0 as c_char; 64];
                    let len = len.clamp(0, 64);
                    self.check(
                        "hipDeviceGetPCIBusId",
                        (api.hipDeviceGetPCIBusId)(buf.as_mut_ptr(), len, dev),
                    )?;
                    value(CStr::from_ptr(buf.as_ptr()).to_string_lossy())
                }
                DeviceCommand::ByPciBusId { bus_id } => {
                    let text = std::ffi::CString::new(bus_id)
                        .map_err(|_| Failure::harness("a bus id with a NUL"))?;
                    let mut d: c_int = -1;
                    self.check(
                        "hipDeviceGetByPCIBusId",
                        (api.hipDeviceGetByPCIBusId)(&mut d, text.as_ptr()),
                    )?;
                    value(d)
                }
                DeviceCommand::Uuid { dev } => {
                    let f = api.hipDeviceGetUuid.ok_or_else(|| {
                        Failure::harness(
                            "this runtime lacks hipDeviceGetUuid (too old for the rule)",
                        )
                    })?;
                    let mut u = hipUUID::default();
                    self.check("hipDeviceGetUuid", f(&mut u, dev))?;
                    value(
                        u.bytes
                            .iter()
                            .map(|b| format!("{:02x}", *b as u8))
                            .collect::<String>(),
                    )
                }
                DeviceCommand::CanAccessPeer { dev, peer } => {
                    let mut v: c_int = 0;
                    self.check(
                        "hipDeviceCanAccessPeer",
                        (api.hipDeviceCanAccessPeer)(&mut v, dev, peer),
                    )?;
                    value(v)
                }
                DeviceCommand::EnablePeer { peer, flags } => self
                    .check(
                        "hipDeviceEnablePeerAccess",
                        (api.hipDeviceEnablePeerAccess)(peer, flags),
                    )
                    .and_then(|()| done()),
                DeviceCommand::Get { ordinal } => {
                    let f = api
                        .hipDeviceGet
                        .ok_or_else(|| Failure::harness("the HIP table lacks hipDeviceGet"))?;
                    let mut d: c_int = -1;
                    self.check("hipDeviceGet", f(&mut d, ordinal))?;
                    value(d)
                }
                DeviceCommand::Attribute { attr, dev } => {
                    let f = api.hipDeviceGetAttribute.ok_or_else(|| {
                        Failure::harness("the HIP table lacks hipDeviceGetAttribute")
                    })?;
                    let mut v: c_int = -1;
                    self.check("hipDeviceGetAttribute", f(&mut v, attr, dev))?;
                    value(v)
                }
            }
        }
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// `hipRuntimeGetVersion`: the `HIP_VERSION` encoding.
    pub fn version(&mut self) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::Version)
    }

    /// `hipRuntimeGetVersion(NULL)`.
    pub fn version_null(&mut self) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::VersionNull)
    }

    /// `hipGetErrorName(code)`.
    pub fn error_name(&mut self, code: i32) -> Result<String, Failure> {
        self.0.ask(DeviceCommand::ErrorName { code })
    }

    /// `hipInit(flags)`.
    pub fn init(&mut self, flags: u32) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::Init { flags })
    }

    /// `hipSetDevice`.
    pub fn set_device(&mut self, dev: u32) -> Result<(), Failure> {
        let dev = c_int::try_from(dev).map_err(|_| Failure::harness("device id out of range"))?;
        self.0.ask(DeviceCommand::SetDevice { dev })
    }

    /// `hipGetDeviceCount`.
    pub fn device_count(&mut self) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::DeviceCount)
    }

    /// `hipDeviceGetPCIBusId` into a buffer of `len` bytes (at most 64): the text.
    pub fn pci_bus_id(&mut self, dev: i32, len: i32) -> Result<String, Failure> {
        self.0.ask(DeviceCommand::PciBusId { dev, len })
    }

    /// `hipDeviceGetByPCIBusId`: this process's ordinal of the device at `bus_id`.
    pub fn device_by_pci_bus_id(&mut self, bus_id: &str) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::ByPciBusId {
            bus_id: bus_id.to_owned(),
        })
    }

    /// `hipDeviceGetUuid`: the 16 bytes as hex.
    pub fn device_uuid(&mut self, dev: i32) -> Result<String, Failure> {
        self.0.ask(DeviceCommand::Uuid { dev })
    }

    /// `hipDeviceCanAccessPeer`.
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Result<bool, Failure> {
        Ok(self
            .0
            .ask::<i32>(DeviceCommand::CanAccessPeer { dev, peer })?
            != 0)
    }

    /// `hipDeviceEnablePeerAccess` from the current device.
    pub fn enable_peer(&mut self, peer: i32, flags: u32) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::EnablePeer { peer, flags })
    }

    /// `hipDeviceGet`: the device handle of `ordinal`.
    pub fn device_get(&mut self, ordinal: i32) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::Get { ordinal })
    }

    /// `hipDeviceGetAttribute(attr, dev)`.
    pub fn device_attribute(&mut self, attr: i32, dev: i32) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::Attribute { attr, dev })
    }
}
