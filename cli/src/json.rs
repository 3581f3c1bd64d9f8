//! `devipc doctor --json`: the report as serde views of what the doctor found.
//!
//! The shape is the schema documented in `main.rs` (`devipc-doctor/1`). The probe's
//! records ([`ProbeReport`], its steps and round trips), [`ErrorReport`] and [`PeerCell`]
//! serialise as they are; this module adds the views that reshape the rest: a discovery
//! candidate's [`Outcome`] becomes `result`, `error` and `resolved`, a started backend's
//! details are spread over the backend object (each `null` when it did not start), and
//! capabilities become an object of booleans, in the order the text report lists them.
//! Every `Option` is written, as `null` when empty: fields are never left out.

use devipc::Capabilities;
use devipc::raw::Backend;
use serde::{Serialize, Serializer};

use crate::inspect::{CandidateReport, DeviceReport, ErrorReport, Outcome, PeerCell, visibility};
use crate::peer_check::ProbeReport;
use crate::{Entry, SCHEMA, capability_list};

/// The whole report.
#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    devipc_version: &'static str,
    compiled_backends: Vec<&'static str>,
    emulator_compiled: bool,
    ok: bool,
    backends: Vec<BackendJson<'a>>,
}

/// One backend: its inspection, and its probe when one ran.
#[derive(Serialize)]
struct BackendJson<'a> {
    name: &'a str,
    kind: &'static str,
    emulated: bool,
    discovery: Option<Vec<CandidateJson<'a>>>,
    library: Option<&'a str>,
    runtime_version: Option<&'a str>,
    driver_version: Option<&'a str>,
    available: bool,
    error: Option<&'a ErrorReport>,
    process_id: Option<u32>,
    device_count: Option<u32>,
    devices: Option<&'a [DeviceReport]>,
    /// Every visibility variable of the vendor, its value or null when unset.
    visibility: VisibilityJson,
    peer_matrix: Option<&'a [Vec<PeerCell>]>,
    capabilities: Option<CapabilitiesJson<'a>>,
    probe: Option<&'a ProbeReport>,
}

/// One discovery candidate.
#[derive(Serialize)]
struct CandidateJson<'a> {
    /// As handed to the loader (`display`: a non-UTF-8 path is shown, not refused).
    path: String,
    origin: &'a str,
    /// `loaded`, `load_failed`, `rejected` or `not_tried`.
    result: &'static str,
    /// The loader's message (`load_failed`, `rejected`).
    error: Option<&'a str>,
    /// The file mapped for a loaded candidate.
    resolved: Option<String>,
}

impl<'a> CandidateJson<'a> {
    fn of(c: &'a CandidateReport) -> CandidateJson<'a> {
        let (result, error, resolved) = match &c.outcome {
            Outcome::Loaded { resolved } => ("loaded", None, resolved.as_ref()),
            Outcome::LoadFailed(e) => ("load_failed", Some(e.as_str()), None),
            Outcome::Rejected(e) => ("rejected", Some(e.as_str()), None),
            Outcome::NotTried => ("not_tried", None, None),
        };
        CandidateJson {
            path: c.path.display().to_string(),
            origin: &c.origin,
            result,
            error,
            resolved: resolved.map(|p| p.display().to_string()),
        }
    }
}

/// The visibility variables as `{ "HIP_VISIBLE_DEVICES": "2,3", ... }`, in the order the
/// runtime applies them.
struct VisibilityJson(Vec<(&'static str, Option<String>)>);

impl Serialize for VisibilityJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// Capabilities as `{ "access_control": true, ... }`, named and ordered by
/// [`capability_list`], which the text report uses too.
struct CapabilitiesJson<'a>(&'a Capabilities);

impl Serialize for CapabilitiesJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(capability_list(self.0))
    }
}

impl<'a> BackendJson<'a> {
    fn of(entry: &'a Entry) -> BackendJson<'a> {
        let r = &entry.report;
        let started = r.start.as_ref().ok().map(|(_, info)| info);
        BackendJson {
            name: &r.name,
            kind: r.kind.name(),
            emulated: r.emulated,
            discovery: r
                .discovery
                .as_ref()
                .map(|rows| rows.iter().map(CandidateJson::of).collect()),
            library: started.map(|i| i.library.as_str()),
            runtime_version: r.runtime_version.as_deref(),
            driver_version: r.driver_version.as_deref(),
            available: started.is_some(),
            error: r.start.as_ref().err(),
            process_id: started.map(|i| i.process_id),
            device_count: started.map(|i| i.device_count),
            devices: started.map(|i| i.devices.as_slice()),
            visibility: VisibilityJson(visibility(r.kind)),
            peer_matrix: started.map(|i| i.peer_matrix.as_slice()),
            capabilities: started.map(|i| CapabilitiesJson(&i.capabilities)),
            probe: entry.probe.as_ref(),
        }
    }
}

/// The report pretty-printed (two-space indentation), with a final newline.
pub fn pretty(entries: &[Entry], ok: bool) -> String {
    let report = Report {
        schema: SCHEMA,
        devipc_version: env!("CARGO_PKG_VERSION"),
        compiled_backends: Backend::COMPILED.iter().map(|k| k.name()).collect(),
        emulator_compiled: cfg!(feature = "emulator"),
        ok,
        backends: entries.iter().map(BackendJson::of).collect(),
    };
    // Cannot fail: every map key is a string and no Serialize impl here returns an error.
    let mut out = serde_json::to_string_pretty(&report).expect("the report serialises");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_cells_are_null_bool_or_message() {
        let row = vec![
            PeerCell::SameDevice,
            PeerCell::Access(true),
            PeerCell::Access(false),
            PeerCell::Failed("no \"peer\"\n".to_owned()),
        ];
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"[null,true,false,"no \"peer\"\n"]"#
        );
    }

    #[test]
    fn candidates_spell_out_their_outcome() {
        let c = |outcome| CandidateReport {
            path: "libx.so".into(),
            origin: "here".to_owned(),
            outcome,
        };
        let json = |c: &CandidateReport| serde_json::to_value(CandidateJson::of(c)).unwrap();
        assert_eq!(
            json(&c(Outcome::Loaded {
                resolved: Some("/lib/libx.so.1".into())
            })),
            serde_json::json!({"path": "libx.so", "origin": "here", "result": "loaded",
                               "error": null, "resolved": "/lib/libx.so.1"})
        );
        assert_eq!(
            json(&c(Outcome::LoadFailed("gone".to_owned())))["result"],
            "load_failed"
        );
        assert_eq!(
            json(&c(Outcome::Rejected("bad".to_owned())))["error"],
            "bad"
        );
        assert_eq!(
            json(&c(Outcome::NotTried)),
            serde_json::json!({"path": "libx.so", "origin": "here", "result": "not_tried",
                               "error": null, "resolved": null})
        );
    }

    #[test]
    fn capabilities_keep_the_text_report_order() {
        let mut caps = Capabilities::default();
        caps.access_control = true;
        let text = serde_json::to_string(&CapabilitiesJson(&caps)).unwrap();
        assert_eq!(
            text,
            "{\"access_control\":true,\"export_allocation\":false,\"export_external\":false,\
             \"signals\":false,\"cross_device_import\":false,\"disable_pid_validation\":false,\
             \"vmm_fd\":false,\"vmm_fabric\":false}"
        );
    }
}
