//! ACL shell commands for devices, peers, the process id, `aclInit`/`aclFinalize`
//! counting, and the device ids and identity of issue 16, with their [`Acl`] client
//! calls.

use std::sync::Arc;

use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell};
use crate::shell::{Exec, Failure, Reply, done, value};

/// A device command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceCommand {
    /// `aclrtSetDevice`.
    SetDevice {
        /// The device.
        dev: i32,
    },
    /// `aclrtGetDeviceCount`.
    DeviceCount,
    /// `aclrtDeviceGetBareTgid`.
    Pid,
    /// `aclrtDeviceGetBareTgid(NULL)`.
    PidNull,
    /// `aclInit(NULL)` once more (the shell balances it with `aclFinalize` on exit).
    Init,
    /// `aclFinalize`.
    Finalize,
    /// `aclrtDeviceCanAccessPeer`: 0 or 1.
    CanAccessPeer {
        /// The device.
        dev: i32,
        /// The peer.
        peer: i32,
    },
    /// `aclrtDeviceEnablePeerAccess` from the current device.
    EnablePeer {
        /// The peer.
        peer: i32,
        /// The (reserved) flags.
        flags: u32,
    },
    /// One of the device id translations of issue 16.
    TranslateId {
        /// Which one.
        what: IdTranslation,
        /// The id translated.
        id: i32,
    },
    /// `aclrtDeviceGetUuid`: the 16 bytes as hex.
    Uuid {
        /// The device.
        dev: i32,
    },
    /// `aclrtSynchronizeDeviceWithTimeout` (milliseconds; -1 waits forever).
    SyncDeviceTimeout {
        /// The timeout.
        timeout: i32,
    },
}

/// A device id translation (issue 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IdTranslation {
    /// `aclrtGetLogicDevIdByUserDevId`.
    LogicByUser,
    /// `aclrtGetUserDevIdByLogicDevId`.
    UserByLogic,
    /// `aclrtGetLogicDevIdByPhyDevId`.
    LogicByPhy,
    /// `aclrtGetPhyDevIdByLogicDevId`.
    PhyByLogic,
}

impl From<DeviceCommand> for AclCommand {
    fn from(c: DeviceCommand) -> Self {
        AclCommand::Device(c)
    }
}

impl AclShell {
    /// Runs a [`DeviceCommand`].
    pub(super) fn device(&mut self, command: DeviceCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: for every call below, out-pointers point at live locals; device ids and
        // flags are plain integers the runtime validates (deliberately invalid ones are the
        // rule under test).
        unsafe {
            match command {
                DeviceCommand::SetDevice { dev } => self
                    .check("aclrtSetDevice", (api.aclrtSetDevice)(dev))
                    .and_then(|()| done()),
                DeviceCommand::DeviceCount => {
                    let mut n = 0u32;
                    self.check("aclrtGetDeviceCount", (api.aclrtGetDeviceCount)(&mut n))?;
                    value(n)
                }
                DeviceCommand::Pid => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    let mut pid = 0i32;
                    self.check("aclrtDeviceGetBareTgid", f(&mut pid))?;
                    value(pid)
                }
                DeviceCommand::CanAccessPeer { dev, peer } => {
                    let mut v = 0i32;
                    self.check(
                        "aclrtDeviceCanAccessPeer",
                        (api.aclrtDeviceCanAccessPeer)(&mut v, dev, peer),
                    )?;
                    value(v)
                }
                DeviceCommand::EnablePeer { peer, flags } => self
                    .check(
                        "aclrtDeviceEnablePeerAccess",
                        (api.aclrtDeviceEnablePeerAccess)(peer, flags),
                    )
                    .and_then(|()| done()),
                DeviceCommand::PidNull => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    self.check("aclrtDeviceGetBareTgid", f(std::ptr::null_mut()))
                        .and_then(|()| done())
                }
                DeviceCommand::Init => {
                    // aclInit is counted (api-facts A.3): a repeated call returns
                    // ACL_ERROR_REPEAT_INITIALIZE and still needs its aclFinalize.
                    let code = (api.aclInit)(std::ptr::null());
                    if code == ACL_SUCCESS || code == ACL_ERROR_REPEAT_INITIALIZE {
                        self.inits += 1;
                    }
                    self.check("aclInit", code).and_then(|()| done())
                }
                DeviceCommand::Finalize => {
                    let code = (api.aclFinalize)();
                    if code == ACL_SUCCESS {
                        self.inits = self.inits.saturating_sub(1);
                    }
                    self.check("aclFinalize", code).and_then(|()| done())
                }
                DeviceCommand::TranslateId { what, id } => {
                    let (f, name) = match what {
                        IdTranslation::LogicByUser => (
                            opt!(api, aclrtGetLogicDevIdByUserDevId),
                            "aclrtGetLogicDevIdByUserDevId",
                        ),
                        IdTranslation::UserByLogic => (
                            opt!(api, aclrtGetUserDevIdByLogicDevId),
                            "aclrtGetUserDevIdByLogicDevId",
                        ),
                        IdTranslation::LogicByPhy => (
                            opt!(api, aclrtGetLogicDevIdByPhyDevId),
                            "aclrtGetLogicDevIdByPhyDevId",
                        ),
                        IdTranslation::PhyByLogic => (
                            opt!(api, aclrtGetPhyDevIdByLogicDevId),
                            "aclrtGetPhyDevIdByLogicDevId",
                        ),
                    };
                    let mut out = -1i32;
                    self.check(name, f(id, &mut out))?;
                    value(out)
                }
                DeviceCommand::Uuid { dev } => {
                    let f = opt!(api, aclrtDeviceGetUuid);
                    let mut u = devipc_ascend_sys::types::aclrtUuid::default();
                    self.check("aclrtDeviceGetUuid", f(dev, &mut u))?;
                    value(
                        u.bytes
                            .iter()
                            .map(|b| format!("{:02x}", *b as u8))
                            .collect::<String>(),
                    )
                }
                DeviceCommand::SyncDeviceTimeout { timeout } => {
                    let f = opt!(api, aclrtSynchronizeDeviceWithTimeout);
                    self.check("aclrtSynchronizeDeviceWithTimeout", f(timeout))
                        .and_then(|()| done())
                }
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtSetDevice`.
    pub fn set_device(&mut self, dev: u32) -> Result<(), Failure> {
        let dev = i32::try_from(dev).map_err(|_| Failure::harness("device id out of range"))?;
        self.0.ask(DeviceCommand::SetDevice { dev })
    }

    /// `aclrtGetDeviceCount`.
    pub fn device_count(&mut self) -> Result<u32, Failure> {
        self.0.ask(DeviceCommand::DeviceCount)
    }

    /// Issue 16: one of the id translations.
    pub fn translate_id(&mut self, what: IdTranslation, id: i32) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::TranslateId { what, id })
    }

    /// `aclrtDeviceGetUuid`: the 16 bytes as hex.
    pub fn device_uuid(&mut self, dev: i32) -> Result<String, Failure> {
        self.0.ask(DeviceCommand::Uuid { dev })
    }

    /// `aclrtDeviceGetBareTgid`.
    pub fn pid(&mut self) -> Result<i32, Failure> {
        self.0.ask(DeviceCommand::Pid)
    }

    /// `aclrtDeviceCanAccessPeer`.
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Result<bool, Failure> {
        Ok(self
            .0
            .ask::<i32>(DeviceCommand::CanAccessPeer { dev, peer })?
            != 0)
    }

    /// `aclrtDeviceEnablePeerAccess` from the current device.
    pub fn enable_peer(&mut self, peer: i32) -> Result<(), Failure> {
        self.enable_peer_flags(peer, 0)
    }

    /// `aclrtDeviceEnablePeerAccess` with explicit (reserved) `flags`.
    pub fn enable_peer_flags(&mut self, peer: i32, flags: u32) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::EnablePeer { peer, flags })
    }

    /// `aclrtDeviceGetBareTgid(NULL)`.
    pub fn pid_null(&mut self) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::PidNull)
    }

    /// `aclInit(NULL)` once more (the shell balances it with `aclFinalize` on exit).
    pub fn init(&mut self) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::Init)
    }

    /// `aclFinalize`.
    pub fn finalize(&mut self) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::Finalize)
    }

    /// `aclrtSynchronizeDeviceWithTimeout(timeout)` (milliseconds; -1 waits forever).
    pub fn sync_device_timeout(&mut self, timeout: i32) -> Result<(), Failure> {
        self.0.ask(DeviceCommand::SyncDeviceTimeout { timeout })
    }
}
