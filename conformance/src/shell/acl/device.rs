//! ACL shell commands for devices, peers, the process id and `aclInit`/`aclFinalize`
//! counting, with their [`Acl`] client calls.
//!
//! `set-device`, `device-count`, `pid`, `pid-null`, `init`, `finalize`, `peer.can`,
//! `peer.enable`, `sync-device-timeout`, and the device ids and identity of issue 16
//! (`dev.logic-by-user`, `dev.user-by-logic`, `dev.logic-by-phy`, `dev.phy-by-logic`,
//! `dev.uuid`) (dispatched from [`super::AclShell`]'s handler).

use std::sync::Arc;

use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};

use super::{Acl, AclShell, unknown};
use crate::shell::{Exec, Failure, Reply, VendorClient, arg, word};

impl AclShell {
    /// Runs one of this module's commands.
    pub(super) fn device_command(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "set-device" => self
                    .check("aclrtSetDevice", (api.aclrtSetDevice)(arg(a, 0)?))
                    .and_then(|()| none()),
                "device-count" => {
                    let mut n = 0u32;
                    self.check("aclrtGetDeviceCount", (api.aclrtGetDeviceCount)(&mut n))?;
                    one(u64::from(n))
                }
                "pid" => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    let mut pid = 0i32;
                    self.check("aclrtDeviceGetBareTgid", f(&mut pid))?;
                    Ok(vec![pid.to_string()])
                }
                "peer.can" => {
                    let (d, p): (i32, i32) = (arg(a, 0)?, arg(a, 1)?);
                    let mut v = 0i32;
                    self.check(
                        "aclrtDeviceCanAccessPeer",
                        (api.aclrtDeviceCanAccessPeer)(&mut v, d, p),
                    )?;
                    Ok(vec![v.to_string()])
                }
                "peer.enable" => {
                    let (p, flags): (i32, u32) = (arg(a, 0)?, arg(a, 1)?);
                    self.check(
                        "aclrtDeviceEnablePeerAccess",
                        (api.aclrtDeviceEnablePeerAccess)(p, flags),
                    )
                    .and_then(|()| none())
                }
                "pid-null" => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    self.check("aclrtDeviceGetBareTgid", f(std::ptr::null_mut()))
                        .and_then(|()| none())
                }
                "init" => {
                    // aclInit is counted (api-facts A.3): a repeated call returns
                    // ACL_ERROR_REPEAT_INITIALIZE and still needs its aclFinalize.
                    let code = (api.aclInit)(std::ptr::null());
                    if code == ACL_SUCCESS || code == ACL_ERROR_REPEAT_INITIALIZE {
                        self.inits += 1;
                    }
                    self.check("aclInit", code).and_then(|()| none())
                }
                "finalize" => {
                    let code = (api.aclFinalize)();
                    if code == ACL_SUCCESS {
                        self.inits = self.inits.saturating_sub(1);
                    }
                    self.check("aclFinalize", code).and_then(|()| none())
                }
                "dev.logic-by-user" | "dev.user-by-logic" | "dev.logic-by-phy"
                | "dev.phy-by-logic" => {
                    let (f, what) = match name {
                        "dev.logic-by-user" => (
                            opt!(api, aclrtGetLogicDevIdByUserDevId),
                            "aclrtGetLogicDevIdByUserDevId",
                        ),
                        "dev.user-by-logic" => (
                            opt!(api, aclrtGetUserDevIdByLogicDevId),
                            "aclrtGetUserDevIdByLogicDevId",
                        ),
                        "dev.logic-by-phy" => (
                            opt!(api, aclrtGetLogicDevIdByPhyDevId),
                            "aclrtGetLogicDevIdByPhyDevId",
                        ),
                        _ => (
                            opt!(api, aclrtGetPhyDevIdByLogicDevId),
                            "aclrtGetPhyDevIdByLogicDevId",
                        ),
                    };
                    let mut out = -1i32;
                    self.check(what, f(arg(a, 0)?, &mut out))?;
                    Ok(vec![out.to_string()])
                }
                "dev.uuid" => {
                    let f = opt!(api, aclrtDeviceGetUuid);
                    let mut u = devipc_ascend_sys::types::aclrtUuid::default();
                    self.check("aclrtDeviceGetUuid", f(arg(a, 0)?, &mut u))?;
                    Ok(vec![
                        u.bytes
                            .iter()
                            .map(|b| format!("{:02x}", *b as u8))
                            .collect(),
                    ])
                }
                "sync-device-timeout" => {
                    let f = opt!(api, aclrtSynchronizeDeviceWithTimeout);
                    self.check("aclrtSynchronizeDeviceWithTimeout", f(arg(a, 0)?))
                        .and_then(|()| none())
                }
                other => Err(unknown(other)),
            }
        }
    }
}

impl<E: Exec> Acl<E> {
    /// `aclrtSetDevice`.
    pub fn set_device(&mut self, dev: u32) -> Result<(), Failure> {
        self.run(format!("set-device {dev}")).map(drop)
    }

    /// `aclrtGetDeviceCount`.
    pub fn device_count(&mut self) -> Result<u32, Failure> {
        word(&self.run("device-count".into())?, 0)
    }

    /// Issue 16: one of the id translations, `what` being `logic-by-user`,
    /// `user-by-logic`, `logic-by-phy` or `phy-by-logic`.
    pub fn translate_id(&mut self, what: &str, id: i32) -> Result<i32, Failure> {
        word(&self.run(format!("dev.{what} {id}"))?, 0)
    }

    /// `aclrtDeviceGetUuid`: the 16 bytes as hex.
    pub fn device_uuid(&mut self, dev: i32) -> Result<String, Failure> {
        word(&self.run(format!("dev.uuid {dev}"))?, 0)
    }

    /// `aclrtDeviceGetBareTgid`.
    pub fn pid(&mut self) -> Result<i32, Failure> {
        word(&self.run("pid".into())?, 0)
    }

    /// `aclrtDeviceCanAccessPeer`.
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Result<bool, Failure> {
        Ok(word::<i32>(&self.run(format!("peer.can {dev} {peer}"))?, 0)? != 0)
    }

    /// `aclrtDeviceEnablePeerAccess` from the current device.
    pub fn enable_peer(&mut self, peer: i32) -> Result<(), Failure> {
        self.run(format!("peer.enable {peer} 0")).map(drop)
    }

    /// `aclrtDeviceEnablePeerAccess` with explicit (reserved) `flags`.
    pub fn enable_peer_flags(&mut self, peer: i32, flags: u32) -> Result<(), Failure> {
        self.run(format!("peer.enable {peer} {flags}")).map(drop)
    }

    /// `aclrtDeviceGetBareTgid(NULL)`.
    pub fn pid_null(&mut self) -> Result<(), Failure> {
        self.run("pid-null".into()).map(drop)
    }

    /// `aclInit(NULL)` once more (the shell balances it with `aclFinalize` on exit).
    pub fn init(&mut self) -> Result<(), Failure> {
        self.run("init".into()).map(drop)
    }

    /// `aclFinalize`.
    pub fn finalize(&mut self) -> Result<(), Failure> {
        self.run("finalize".into()).map(drop)
    }

    /// `aclrtSynchronizeDeviceWithTimeout(timeout)` (milliseconds; -1 waits forever).
    pub fn sync_device_timeout(&mut self, timeout: i32) -> Result<(), Failure> {
        self.run(format!("sync-device-timeout {timeout}")).map(drop)
    }
}
