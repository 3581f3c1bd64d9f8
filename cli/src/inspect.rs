//! What `devipc doctor` finds out about each backend, before any probe runs.
//!
//! For a real runtime it repeats discovery (DESIGN section 8) one candidate at a time with
//! the sys crate's own candidate list and loader (`discovery::candidates_from_process_env`,
//! `HipApi::load` / `AclApi::load`), so it can report every candidate with its loader
//! result: exactly the steps `Runtime::open` takes, stopping at the first library that
//! loads; later candidates are listed as not tried. It then starts the backend on the
//! loaded table (`HipBackend::from_api` / `AscendBackend::from_api`, as `open` does) and,
//! if it starts, reads its version, device count, peer matrix and capabilities. The
//! emulated backends are started with `Runtime::emulated`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use devipc::info::{LoadAttempt, PhysicalDevice};
use devipc::raw::{Backend, DeviceIpc};
use devipc::{BackendKind, Capabilities, DeviceId, Error, Runtime};
use serde::Serialize;

/// The result of trying one discovery candidate.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The dynamic loader opened it and every required symbol resolved. `resolved` is the
    /// file the loader mapped, when it could be found in `/proc/self/maps`.
    Loaded {
        /// The file behind a bare name or symlink.
        resolved: Option<PathBuf>,
    },
    /// The dynamic loader could not open it (its `dlerror` message).
    LoadFailed(String),
    /// It opened but is unusable (e.g. a missing required symbol); discovery stops here.
    Rejected(String),
    /// Not tried: an earlier candidate decided the outcome.
    NotTried,
}

/// One discovery candidate and what happened to it.
#[derive(Debug, Clone)]
pub struct CandidateReport {
    /// The path or bare library name handed to the loader.
    pub path: PathBuf,
    /// Why it is on the list (`DEVIPC_HIP_LIB`, `$ROCM_PATH/lib`, ...).
    pub origin: String,
    /// What the loader said.
    pub outcome: Outcome,
}

/// One cell of the peer matrix: can `row` access `column`'s memory? In the JSON report
/// `null`, a boolean or the error message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PeerCell {
    /// The diagonal: a device is not its own peer.
    SameDevice,
    /// The runtime's answer.
    Access(bool),
    /// The query failed.
    Failed(String),
}

/// What a started backend reports about itself.
#[derive(Debug, Clone)]
pub struct StartedInfo {
    /// `BackendInfo::describe()`.
    pub description: String,
    /// Where its functions come from (a path, or `emulated`).
    pub library: String,
    /// The id peers must grant.
    pub process_id: u32,
    /// Number of devices.
    pub device_count: u32,
    /// Each device's physical identity, by this process's index.
    pub devices: Vec<DeviceReport>,
    /// `device_count` x `device_count`.
    pub peer_matrix: Vec<Vec<PeerCell>>,
    /// The capabilities the backend derived.
    pub capabilities: Capabilities,
}

/// One device as this process sees it: its index here and its physical identity.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// This process's index (after the visibility variables).
    pub index: u32,
    /// PCI bus id (HIP), `domain:bus:device.function`.
    pub pci_bus_id: Option<String>,
    /// UUID, `8-4-4-4-12` hex.
    pub uuid: Option<String>,
    /// Physical chip id (Ascend).
    pub physical_id: Option<u32>,
    /// Why the runtime could not tell.
    pub error: Option<String>,
}

impl DeviceReport {
    /// What the text report prints after the index.
    pub fn describe(&self) -> String {
        if let Some(e) = &self.error {
            return format!("identity unknown: {e}");
        }
        let physical = PhysicalDevice {
            pci_bus_id: self.pci_bus_id.as_deref().and_then(|t| t.parse().ok()),
            uuid: None,
            physical_id: self.physical_id,
        };
        let mut text = physical.to_string();
        if let Some(uuid) = &self.uuid {
            text = if physical.is_known() {
                format!("{text}, uuid {uuid}")
            } else {
                format!("uuid {uuid}")
            };
        }
        text
    }
}

/// The visibility variables of `kind` (all of them, set or not), as `(name, value)`.
pub fn visibility(kind: BackendKind) -> Vec<(&'static str, Option<String>)> {
    devipc::raw::visibility_env_vars(kind)
        .iter()
        .map(|name| {
            let value = std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
            (*name, value)
        })
        .collect()
}

/// Why a backend did not start, as data (the JSON report's `error`, as is).
#[derive(Debug, Clone, Serialize)]
pub struct ErrorReport {
    /// Stable variant name ([`Error::kind`]): `library_not_found`, `missing_symbol`,
    /// `vendor`, `config`, `unsupported`, `invalid_argument`, `io`, ...
    pub kind: &'static str,
    /// The full message (`Display` of the error).
    pub message: String,
    /// For `vendor`: the failing function.
    pub api: Option<String>,
    /// For `vendor`: the raw status code.
    pub code: Option<i32>,
    /// For `vendor`: the code's symbolic name.
    pub name: Option<String>,
}

impl ErrorReport {
    /// The report for `e`.
    pub fn of(e: &Error) -> ErrorReport {
        let mut report = ErrorReport {
            kind: e.kind(),
            message: e.to_string(),
            api: None,
            code: None,
            name: None,
        };
        if let Error::Vendor {
            api, code, name, ..
        } = e
        {
            report.api = Some((*api).to_owned());
            report.code = Some(*code);
            report.name = Some(name.clone());
        }
        report
    }
}

/// Everything the doctor found out about one backend.
#[derive(Debug)]
pub struct BackendReport {
    /// `hip`, `ascend`, `emulated-hip`, `emulated-ascend` (a `DEVIPC_BACKEND` value).
    pub name: String,
    /// The vendor.
    pub kind: BackendKind,
    /// The devipc emulator rather than a vendor runtime.
    pub emulated: bool,
    /// Real runtimes: every discovery candidate with its outcome.
    pub discovery: Option<Vec<CandidateReport>>,
    /// Runtime version, when known: from the started backend, or (HIP) read from a
    /// loaded library whose backend did not start.
    pub runtime_version: Option<String>,
    /// HIP's `hipDriverGetVersion`, when the library loaded and answered.
    pub driver_version: Option<String>,
    /// The started runtime, or why it did not start.
    pub start: Result<(Runtime, StartedInfo), ErrorReport>,
}

/// Inspects the real runtime of `kind`.
pub fn real(kind: BackendKind) -> BackendReport {
    let mut report = BackendReport {
        name: kind.name().to_owned(),
        kind,
        emulated: false,
        discovery: None,
        runtime_version: None,
        driver_version: None,
        start: Err(ErrorReport::of(&Error::unsupported(
            kind,
            "this build: devipc was compiled without this backend",
        ))),
    };
    match kind {
        #[cfg(feature = "hip")]
        BackendKind::Hip => {
            use devipc_hip::HipBackend;
            use devipc_hip::sys::{Candidate, HipApi, discovery};

            let candidates = discovery::candidates_from_process_env()
                .into_iter()
                .map(|c| (c.path, c.origin))
                .collect();
            real_vendor(
                &mut report,
                candidates,
                // SAFETY: the same trust as `HipApi::discover`, whose candidate list this
                // is: the vendor's install directories and sonames, or the file the user
                // named in DEVIPC_HIP_LIB, all trusted to be HIP runtimes.
                |path, origin| unsafe { HipApi::load_first(&[Candidate::new(path, origin)]) },
                hip_versions,
                |api| HipBackend::from_api(api).map(Backend::from),
            );
        }
        #[cfg(feature = "ascend")]
        BackendKind::Ascend => {
            use devipc_ascend::AscendBackend;
            use devipc_ascend::sys::{AclApi, Candidate, discovery};

            let candidates = discovery::candidates_from_process_env()
                .into_iter()
                .map(|c| (c.path, c.origin))
                .collect();
            real_vendor(
                &mut report,
                candidates,
                // SAFETY: the same trust as `AclApi::discover`, whose candidate list this
                // is: the vendor's library names in the vendor's install locations, or the
                // file the user named in DEVIPC_ASCEND_LIB.
                |path, origin| unsafe { AclApi::load_first(&[Candidate::new(path, origin)]) },
                // ACL's version is read from the started backend.
                |_| (None, None),
                |api| AscendBackend::from_api(api).map(Backend::from),
            );
        }
        _ => {}
    }
    report
}

/// [`real`] for one vendor, the same steps for both: discovery one candidate at a time,
/// each through `load` (the vendor table's `load_first` on that candidate alone, so the
/// user's override gets the same checks as in `discover`: a FIFO or directory is never
/// opened, a file that exists but does not load is a configuration error), then the
/// versions `table_versions` reads from the loaded table `(runtime, driver)` (HIP: both,
/// even when the backend then fails to start), then the backend `start`ed on the table as
/// `open` does (`from_api`). A runtime version the table did not give is the started
/// backend's.
fn real_vendor<Api>(
    report: &mut BackendReport,
    candidates: Vec<(PathBuf, String)>,
    load: impl FnMut(&Path, &str) -> Result<Api, Error>,
    table_versions: impl FnOnce(&Api) -> (Option<String>, Option<String>),
    start: impl FnOnce(Arc<Api>) -> Result<Backend, Error>,
) {
    let (rows, loaded) = discover(report.kind, candidates, load);
    report.discovery = Some(rows);
    let api = match loaded {
        Ok(api) => api,
        Err(e) => {
            report.start = Err(ErrorReport::of(&e));
            return;
        }
    };
    (report.runtime_version, report.driver_version) = table_versions(&api);
    report.start = match start(Arc::new(api)) {
        Ok(backend) => {
            let rt = Runtime::from_backend(backend);
            if report.runtime_version.is_none() {
                report.runtime_version = rt.info().runtime_version.map(|v| v.to_string());
            }
            let info = started_info(&rt);
            Ok((rt, info))
        }
        Err(e) => Err(ErrorReport::of(&e)),
    };
}

/// Inspects the emulated backend of `kind`.
pub fn emulated(kind: BackendKind) -> BackendReport {
    let start = Runtime::emulated(kind).map_err(|e| ErrorReport::of(&e));
    let start = start.map(|rt| {
        let info = started_info(&rt);
        (rt, info)
    });
    BackendReport {
        name: format!("emulated-{kind}"),
        kind,
        emulated: true,
        discovery: None,
        runtime_version: start
            .as_ref()
            .ok()
            .and_then(|(rt, _)| rt.info().runtime_version)
            .map(|v| v.to_string()),
        driver_version: start
            .as_ref()
            .ok()
            .and_then(|(rt, _)| hip_driver_version_of(rt)),
        start,
    }
}

/// Runs discovery candidate by candidate with `load` (one candidate's table, or its
/// error: [`Error::LibraryNotFound`] when the loader cannot open it, anything else when
/// it opened but is unusable), stopping as `HipApi::load_first` / `AclApi::load_first` do
/// at the first candidate that opens. Without one, the result is
/// [`Error::LibraryNotFound`] listing every attempt, as discovery itself reports it.
fn discover<T>(
    kind: BackendKind,
    candidates: Vec<(PathBuf, String)>,
    mut load: impl FnMut(&Path, &str) -> Result<T, Error>,
) -> (Vec<CandidateReport>, Result<T, Error>) {
    let mut rows = Vec::with_capacity(candidates.len());
    let mut tried = Vec::new();
    let mut chosen: Option<Result<T, Error>> = None;
    for (path, origin) in candidates {
        if chosen.is_some() {
            rows.push(CandidateReport {
                path,
                origin,
                outcome: Outcome::NotTried,
            });
            continue;
        }
        let outcome = match load(&path, &origin) {
            Ok(table) => {
                chosen = Some(Ok(table));
                Outcome::Loaded {
                    resolved: resolve_loaded(&path),
                }
            }
            Err(Error::LibraryNotFound {
                tried: attempts, ..
            }) => {
                let error = attempts
                    .into_iter()
                    .map(|a| a.error)
                    .next()
                    .unwrap_or_else(|| "the loader could not open it".to_owned());
                tried.push(LoadAttempt {
                    path: path.clone(),
                    origin: origin.clone(),
                    error: error.clone(),
                });
                Outcome::LoadFailed(error)
            }
            Err(e) => {
                let message = e.to_string();
                chosen = Some(Err(e));
                Outcome::Rejected(message)
            }
        };
        rows.push(CandidateReport {
            path,
            origin,
            outcome,
        });
    }
    let result = chosen.unwrap_or(Err(Error::LibraryNotFound {
        backend: kind,
        tried,
    }));
    (rows, result)
}

/// The file the dynamic loader mapped for `requested` (a bare soname or a symlink),
/// found in `/proc/self/maps` by its file name prefix.
fn resolve_loaded(requested: &Path) -> Option<PathBuf> {
    if requested.is_absolute() {
        if let Ok(real) = std::fs::canonicalize(requested) {
            return Some(real);
        }
    }
    let wanted = requested.file_name()?.to_str()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(wanted))
        })
        .map(PathBuf::from)
}

/// `hipRuntimeGetVersion` and `hipDriverGetVersion` of a loaded table (both work
/// without a device; a failure leaves that version unknown).
#[cfg(feature = "hip")]
fn hip_versions(api: &devipc_hip::sys::HipApi) -> (Option<String>, Option<String>) {
    let mut runtime = 0;
    // SAFETY: a valid out-pointer; the call needs no device.
    let rc = unsafe { (api.hipRuntimeGetVersion)(&mut runtime) };
    let runtime = (rc == 0)
        .then(|| devipc::info::RuntimeVersion::from_hip_encoded(runtime))
        .flatten()
        .map(|v| v.to_string());
    let mut driver = 0;
    // SAFETY: as above.
    let rc = unsafe { (api.hipDriverGetVersion)(&mut driver) };
    // ROCm encodes the driver version like HIP_VERSION; show it decoded when it fits.
    let driver = (rc == 0 && driver > 0).then(|| {
        devipc::info::RuntimeVersion::from_hip_encoded(driver)
            .filter(|v| v.major > 0)
            .map_or_else(|| driver.to_string(), |v| v.to_string())
    });
    (runtime, driver)
}

/// The driver version of a started HIP runtime (`None` for other backends).
fn hip_driver_version_of(rt: &Runtime) -> Option<String> {
    match rt.backend() {
        #[cfg(feature = "hip")]
        Backend::Hip(b) => hip_versions(b.api()).1,
        _ => None,
    }
}

/// Version, devices, peer matrix and capabilities of a started runtime.
fn started_info(rt: &Runtime) -> StartedInfo {
    let info = rt.info();
    let device_count = rt.device_count().unwrap_or(0);
    StartedInfo {
        description: info.describe(),
        library: info.source.to_string(),
        process_id: rt.process_id().0,
        device_count,
        devices: (0..device_count).map(|d| device_report(rt, d)).collect(),
        peer_matrix: (0..device_count)
            .map(|d| {
                (0..device_count)
                    .map(|p| peer_cell(rt, DeviceId(d), DeviceId(p)))
                    .collect()
            })
            .collect(),
        capabilities: info.capabilities,
    }
}

/// Device `index`'s physical identity, or why the runtime could not tell.
fn device_report(rt: &Runtime, index: u32) -> DeviceReport {
    let mut report = DeviceReport {
        index,
        pci_bus_id: None,
        uuid: None,
        physical_id: None,
        error: None,
    };
    match rt.physical_device(DeviceId(index)) {
        Ok(p) => {
            report.pci_bus_id = p.pci_bus_id.map(|id| id.to_string());
            report.uuid = p.uuid.map(|u| u.to_string());
            report.physical_id = p.physical_id;
            if !p.is_known() {
                report.error = Some("this runtime has no identity calls".to_owned());
            }
        }
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}

/// Whether `device` can access `peer`: the runtime's own `CanAccessPeer` from the raw
/// table (a query, unlike `enable_peer_access`, which changes the process's state).
fn peer_cell(rt: &Runtime, device: DeviceId, peer: DeviceId) -> PeerCell {
    if device == peer {
        return PeerCell::SameDevice;
    }
    let (Ok(d), Ok(p)) = (device.as_c_int(), peer.as_c_int()) else {
        return PeerCell::Failed("device id does not fit a C int".to_owned());
    };
    let mut can = 0;
    let (code, name): (i32, fn(i32) -> Option<&'static str>) = match rt.backend() {
        #[cfg(feature = "hip")]
        // SAFETY: `can` is a valid out-pointer; both ids are below the device count.
        Backend::Hip(b) => (
            unsafe { (b.api().hipDeviceCanAccessPeer)(&mut can, d, p) },
            devipc_hip::sys::error_name,
        ),
        #[cfg(feature = "ascend")]
        // SAFETY: as above; ACL was initialised when the backend started.
        Backend::Ascend(b) => (
            unsafe { (b.api().aclrtDeviceCanAccessPeer)(&mut can, d, p) },
            devipc_ascend::sys::error_name,
        ),
        _ => {
            return match rt.backend().enable_peer_access(device, peer) {
                Ok(()) => PeerCell::Access(true),
                Err(e) => PeerCell::Failed(e.to_string()),
            };
        }
    };
    if code == 0 {
        PeerCell::Access(can != 0)
    } else {
        PeerCell::Failed(format!(
            "{} ({code})",
            name(code).unwrap_or("unknown error code")
        ))
    }
}
