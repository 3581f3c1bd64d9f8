//! Capability discovery: [`Probe`], what a backend offers on this machine, found once
//! per run in a child.
//!
//! Before any rule runs, the runner starts a `probe` child for the target. It loads the
//! vendor table (or the emulator's), starts the backend, and reports: whether the library
//! loaded, whether the backend started (and if not, the error: no device, ...), the
//! device count, the runtime version, the capabilities and whether devices 0 and 1 can
//! access each other. The runner decides from this which rules' [`Need`](crate::rule::Need)s
//! are met; rule children receive it in [`PROBE_ENV`]. Probing in a child keeps the
//! vendor runtime out of the runner, and a library that crashes or hangs while loading
//! shows up as a failure instead of taking the runner down.

use std::sync::Arc;

use devipc::raw::Backend;
use devipc_ascend::AscendBackend;
use devipc_ascend_sys::AclApi;
use devipc_core::{BackendKind, DeviceIpc, RuntimeVersion};
use devipc_hip::HipBackend;
use devipc_hip_sys::HipApi;
use serde_json::{Value, json};

use crate::target::Target;

/// Environment variable carrying the probe (JSON) to rule children.
pub const PROBE_ENV: &str = "DEVIPC_CONFORMANCE_PROBE";

/// What a target offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The target probed.
    pub target: Target,
    /// `Err(why)` when the vendor library could not be loaded.
    pub library: Result<(), String>,
    /// `Err(why)` when the backend could not start (e.g. no device).
    pub started: Result<(), String>,
    /// `BackendInfo::describe`, or the library path when only the library loaded.
    pub describe: String,
    /// Visible devices (0 when the backend did not start).
    pub devices: u32,
    /// The runtime version, when known.
    pub version: Option<RuntimeVersion>,
    /// `Capabilities::access_control`.
    pub access_control: bool,
    /// Whether device 0 can access device 1 (vendor `...CanAccessPeer`).
    pub peer_access: bool,
    /// `Capabilities::vmm_fd`: HIP virtual memory shared as a file descriptor works (the
    /// allocation variants `hip-vmm`, `emulated-hip-vmm` need it).
    pub vmm_fd: bool,
}

impl Probe {
    /// A probe that found nothing usable, with `why`.
    pub fn unusable(target: Target, why: String) -> Probe {
        Probe {
            target,
            library: Err(why.clone()),
            started: Err(why),
            describe: String::new(),
            devices: 0,
            version: None,
            access_control: false,
            peer_access: false,
            vmm_fd: false,
        }
    }

    /// The JSON form (for [`PROBE_ENV`] and the report).
    pub fn to_json(&self) -> Value {
        json!({
            "target": self.target.name(),
            "library": self.library.as_ref().err(),
            "started": self.started.is_ok(),
            "start_error": self.started.as_ref().err(),
            "describe": self.describe,
            "devices": self.devices,
            "version": self.version.map(|v| v.to_string()),
            "access_control": self.access_control,
            "peer_access": self.peer_access,
            "vmm_fd": self.vmm_fd,
        })
    }

    /// Inverse of [`Probe::to_json`].
    pub fn from_json(v: &Value) -> Result<Probe, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let target: Target = s("target").ok_or("probe lacks target")?.parse()?;
        let started = if b("started") {
            Ok(())
        } else {
            Err(s("start_error").unwrap_or_else(|| "did not start".into()))
        };
        Ok(Probe {
            target,
            library: s("library").map_or(Ok(()), Err),
            started,
            describe: s("describe").unwrap_or_default(),
            devices: v.get("devices").and_then(Value::as_u64).unwrap_or(0) as u32,
            version: s("version").and_then(|t| RuntimeVersion::parse_dotted(&t)),
            access_control: b("access_control"),
            peer_access: b("peer_access"),
            vmm_fd: b("vmm_fd"),
        })
    }

    /// Runs the probe in this process (the `probe` child role).
    pub fn run(target: Target) -> Probe {
        let mut probe = Probe::unusable(target, String::new());
        probe.library = Ok(());
        let started = match (target.kind(), target.emulated()) {
            (BackendKind::Ascend, true) => {
                ascend_backend(Arc::new(devipc_emulator::acl::acl_api()))
            }
            (BackendKind::Ascend, false) => match AclApi::discover() {
                Ok(api) => {
                    probe.describe = api.source().to_string();
                    ascend_backend(Arc::new(api))
                }
                Err(e) => {
                    probe.library = Err(e.to_string());
                    Err(e.to_string())
                }
            },
            (_, true) => hip_backend(Arc::new(devipc_emulator::hip::hip_api()), &mut probe),
            (_, false) => match HipApi::discover() {
                Ok(api) => {
                    probe.describe = api.source().to_string();
                    hip_backend(Arc::new(api), &mut probe)
                }
                Err(e) => {
                    probe.library = Err(e.to_string());
                    Err(e.to_string())
                }
            },
        };
        match started {
            Ok(backend) => {
                probe.started = Ok(());
                let info = backend.info();
                probe.describe = info.describe();
                probe.version = info.runtime_version.or(probe.version);
                probe.access_control = info.capabilities.access_control;
                probe.vmm_fd = info.capabilities.vmm_fd;
                probe.devices = backend.device_count().unwrap_or(0);
                probe.peer_access = probe.devices >= 2 && can_access_peer(&backend);
            }
            Err(e) => probe.started = Err(e),
        }
        probe
    }
}

fn ascend_backend(api: Arc<AclApi>) -> Result<Backend, String> {
    AscendBackend::from_api(api)
        .map(Backend::from)
        .map_err(|e| e.to_string())
}

fn hip_backend(api: Arc<HipApi>, probe: &mut Probe) -> Result<Backend, String> {
    let mut v = 0;
    // SAFETY: a valid out-pointer; works without a device.
    if unsafe { (api.hipRuntimeGetVersion)(&mut v) } == 0 {
        probe.version = RuntimeVersion::from_hip_encoded(v);
    }
    HipBackend::from_api(api)
        .map(Backend::from)
        .map_err(|e| e.to_string())
}

/// Whether device 0 can access device 1 and back, per the vendor.
fn can_access_peer(backend: &Backend) -> bool {
    let mut ab = 0;
    let mut ba = 0;
    let ok = match backend {
        Backend::Ascend(b) => {
            let api = b.api();
            // SAFETY: valid out-pointers and device ids below the device count.
            unsafe {
                (api.aclrtDeviceCanAccessPeer)(&mut ab, 0, 1) == 0
                    && (api.aclrtDeviceCanAccessPeer)(&mut ba, 1, 0) == 0
            }
        }
        Backend::Hip(b) => {
            let api = b.api();
            // SAFETY: as above.
            unsafe {
                (api.hipDeviceCanAccessPeer)(&mut ab, 0, 1) == 0
                    && (api.hipDeviceCanAccessPeer)(&mut ba, 1, 0) == 0
            }
        }
        _ => false,
    };
    ok && ab != 0 && ba != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips() {
        let p = Probe {
            target: Target::Hip,
            library: Ok(()),
            started: Err("hipErrorNoDevice".into()),
            describe: "/usr/lib/libamdhip64.so".into(),
            devices: 0,
            version: Some(RuntimeVersion::new(5, 2, 21153)),
            access_control: false,
            peer_access: false,
            vmm_fd: false,
        };
        assert_eq!(Probe::from_json(&p.to_json()).unwrap(), p);
        let v = Probe {
            target: Target::EmulatedHipVmm,
            started: Ok(()),
            devices: 3,
            vmm_fd: true,
            ..p
        };
        assert_eq!(Probe::from_json(&v.to_json()).unwrap(), v);
        let u = Probe::unusable(Target::Ascend, "no library".into());
        assert_eq!(Probe::from_json(&u.to_json()).unwrap(), u);
    }
}
