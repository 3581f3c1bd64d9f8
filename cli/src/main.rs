//! `devipc`: the command-line companion of the devipc library. Its one command, `devipc
//! doctor`, answers "can this machine share device memory between processes, and if not,
//! why not?".
//!
//! ```text
//! devipc doctor [--json] [--no-probe]
//! ```
//!
//! For every backend compiled in (features `ascend`, `hip`) the doctor reports the real
//! vendor runtime: every library path discovery tried with the loader's answer, the
//! runtime (and HIP driver) version, the visibility variables in force, each device's
//! index and physical identity (PCI bus id, UUID, physical chip id), the peer-access
//! matrix and the capabilities; then the same for the devipc emulator speaking that vendor's ABI
//! (feature `emulator`), labelled `emulated-*`. On every backend that starts it runs a
//! two-process probe (see [`peer_check`]): it re-executes itself as a child, shares a buffer
//! and two signals with it, checks bytes in both directions and times signal round trips.
//!
//! Exit status: 0 when every backend that started passed its probe (a backend that
//! cannot start here, e.g. no library or no device, is reported, not a failure); 1 when a
//! probe failed; 2 for a usage error.
//!
//! # `--json`
//!
//! The same report as one JSON object (schema `devipc-doctor/1`; fields are only ever
//! added within a schema version):
//!
//! ```text
//! {
//!   "schema": "devipc-doctor/1",
//!   "devipc_version": "0.1.0",
//!   "compiled_backends": ["ascend", "hip"],   // Backend::COMPILED
//!   "emulator_compiled": true,
//!   "ok": true,                               // the exit status is 0
//!   "backends": [ {                           // real runtimes first, then emulated
//!     "name": "hip",                          // a DEVIPC_BACKEND value: hip, emulated-hip, ...
//!     "kind": "hip" | "ascend",
//!     "emulated": false,
//!     "discovery": [                          // null for emulated backends
//!       { "path": "libamdhip64.so",           // as handed to the dynamic loader
//!         "origin": "loader search path",     // why it is a candidate
//!         "result": "loaded" | "load_failed" | "rejected" | "not_tried",
//!         "error": "..." | null,              // the loader's message (load_failed, rejected)
//!         "resolved": "/usr/lib/..." | null } // the file mapped for a loaded candidate
//!     ],
//!     "library": "/usr/lib/..." | "emulated" | null,  // what the backend runs on
//!     "runtime_version": "5.2.21153" | null,
//!     "driver_version": "..." | null,         // HIP only
//!     "available": false,                     // the backend started
//!     "error": null | {                       // why it did not start
//!       "kind": "library_not_found" | "missing_symbol" | "vendor" | "unsupported" | ...,
//!       "message": "...",
//!       "api": "hipGetDeviceCount", "code": 100, "name": "hipErrorNoDevice"  // vendor only, else null
//!     },
//!     "process_id": 1234 | null,
//!     "device_count": 2 | null,
//!     "devices": [ { "index": 0,              // this process's index, after the masks
//!                    "pci_bus_id": "0000:03:00.0" | null,   // HIP
//!                    "uuid": "…" | null,
//!                    "physical_id": 3 | null,               // Ascend
//!                    "error": null | "..." } ] | null,      // why the identity is unknown
//!     "visibility": { "ROCR_VISIBLE_DEVICES": null, "HIP_VISIBLE_DEVICES": "2,3",
//!                     "CUDA_VISIBLE_DEVICES": null }        // Ascend: ASCEND_RT_VISIBLE_DEVICES
//!     "peer_matrix": [[null, true], [true, null]] | null,  // row device can access column
//!                                             // device; null on the diagonal; a string
//!                                             // when the query failed
//!     "capabilities": { "access_control": true, "export_allocation": true,
//!                       "export_external": true, "signals": true,
//!                       "cross_device_import": true, "disable_pid_validation": true,
//!                       "vmm_fd": false, "vmm_fabric": false } | null,
//!     "probe": null | {                       // null when not started or --no-probe
//!       "passed": true, "total_ms": 41.3,
//!       "steps": [ { "name": "spawn" | "export" | "import" | "bytes-to-child" |
//!                            "bytes-to-parent" | "signal-round-trips" | "child-exit",
//!                    "passed": true, "ms": 3.1, "detail": "..." } ],
//!       "signal_round_trip_us": { "rounds": 200, "min": 9.8, "median": 14.2,
//!                                 "p99": 40.0, "max": 61.0 } | null,
//!       "child_stderr": null | "..."          // only when the probe failed
//!     }
//!   } ]
//! }
//! ```

mod inspect;
mod json;
mod peer_check;

use std::process::ExitCode;

use devipc::raw::Backend;
use devipc::{BackendChoice, Capabilities};

use inspect::{BackendReport, Outcome, PeerCell};
use peer_check::ProbeReport;

const USAGE: &str = "\
usage: devipc doctor [--json] [--no-probe]

Reports every devipc backend compiled into this program: the vendor runtime (library
paths tried, versions, devices, peer access, capabilities) and the devipc emulator,
and runs a two-process sharing probe on each backend that starts.

  --json      print the report as JSON (schema devipc-doctor/1)
  --no-probe  skip the two-process probes

Exit status: 0 when every probe passed (backends that cannot start are reported, not
failures), 1 when a probe failed, 2 for a usage error.";

/// Schema identifier of the JSON report.
const SCHEMA: &str = "devipc-doctor/1";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(peer_check::CHILD_COMMAND) => match args.get(1) {
            Some(choice) => peer_check::child_main(choice),
            None => usage_error("__probe-child needs a backend"),
        },
        Some("doctor") => {
            let mut json = false;
            let mut run_probes = true;
            for arg in &args[1..] {
                match arg.as_str() {
                    "--json" => json = true,
                    "--no-probe" => run_probes = false,
                    "-h" | "--help" => {
                        println!("{USAGE}");
                        return ExitCode::SUCCESS;
                    }
                    other => return usage_error(&format!("unknown option `{other}`")),
                }
            }
            doctor(json, run_probes)
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown command `{other}`")),
        None => usage_error("no command given"),
    }
}

fn usage_error(what: &str) -> ExitCode {
    eprintln!("devipc: {what}\n\n{USAGE}");
    ExitCode::from(2)
}

/// One backend's inspection plus its probe.
struct Entry {
    report: BackendReport,
    probe: Option<ProbeReport>,
}

fn doctor(json: bool, run_probes: bool) -> ExitCode {
    let mut entries = Vec::new();
    for &kind in Backend::COMPILED {
        entries.push(inspect::real(kind));
    }
    if cfg!(feature = "emulator") {
        for &kind in Backend::COMPILED {
            entries.push(inspect::emulated(kind));
        }
    }
    let entries: Vec<Entry> = entries
        .into_iter()
        .map(|report| {
            let probe = match (&report.start, run_probes) {
                (Ok((rt, _)), true) => {
                    let choice = if report.emulated {
                        BackendChoice::Emulated(report.kind)
                    } else {
                        BackendChoice::Real(report.kind)
                    };
                    Some(peer_check::run(choice, rt))
                }
                _ => None,
            };
            Entry { report, probe }
        })
        .collect();
    let ok = entries
        .iter()
        .all(|e| e.probe.as_ref().is_none_or(|p| p.passed));
    if json {
        print!("{}", json::pretty(&entries, ok));
    } else {
        print!("{}", to_text(&entries, ok));
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn capability_list(c: &Capabilities) -> [(&'static str, bool); 8] {
    [
        ("access_control", c.access_control),
        ("export_allocation", c.export_allocation),
        ("export_external", c.export_external),
        ("signals", c.signals),
        ("cross_device_import", c.cross_device_import),
        ("disable_pid_validation", c.disable_pid_validation),
        ("vmm_fd", c.vmm_fd),
        ("vmm_fabric", c.vmm_fabric),
    ]
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn to_text(entries: &[Entry], ok: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let compiled: Vec<&str> = Backend::COMPILED.iter().map(|k| k.name()).collect();
    let _ = writeln!(
        out,
        "devipc doctor {} (pid {})\ncompiled backends: {}; emulator: {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        compiled.join(", "),
        if cfg!(feature = "emulator") {
            "compiled in"
        } else {
            "not compiled in"
        }
    );
    for entry in entries {
        let r = &entry.report;
        let label = if r.emulated {
            "devipc emulator, no device"
        } else {
            "vendor runtime"
        };
        let _ = writeln!(out, "\n== {} ({label}) ==", r.name);
        let masks: Vec<String> = inspect::visibility(r.kind)
            .into_iter()
            .map(|(name, value)| match value {
                Some(v) => format!("{name}={v:?}"),
                None => format!("{name} unset"),
            })
            .collect();
        let _ = writeln!(out, "  visibility: {}", masks.join(", "));
        if let Some(rows) = &r.discovery {
            let _ = writeln!(out, "  library discovery, in order:");
            for c in rows {
                let path = c.path.display();
                let origin = &c.origin;
                let _ = match &c.outcome {
                    Outcome::Loaded { resolved } => writeln!(
                        out,
                        "    [loaded]  {path}  ({origin}){}",
                        resolved
                            .as_ref()
                            .map(|p| format!(" -> {}", p.display()))
                            .unwrap_or_default()
                    ),
                    Outcome::LoadFailed(e) => {
                        writeln!(out, "    [failed]  {path}  ({origin}): {e}")
                    }
                    Outcome::Rejected(e) => {
                        writeln!(out, "    [rejected] {path}  ({origin}): {e}")
                    }
                    Outcome::NotTried => writeln!(
                        out,
                        "    [skipped] {path}  ({origin}): an earlier candidate loaded"
                    ),
                };
            }
        }
        if let Some(v) = &r.runtime_version {
            let _ = writeln!(out, "  runtime version: {v}");
        }
        if let Some(v) = &r.driver_version {
            let _ = writeln!(out, "  driver version: {v}");
        }
        match &r.start {
            Err(e) => {
                // The attempts of a library-not-found error are the discovery list above.
                let message = if r.discovery.is_some() && e.kind == "library_not_found" {
                    let first = e.message.lines().next().unwrap_or_default();
                    format!(
                        "{} (every path tried is listed above)",
                        first
                            .trim_end_matches(" Tried:")
                            .trim_end_matches(". Tried:")
                    )
                } else {
                    e.message.replace('\n', "\n    ")
                };
                let _ = writeln!(out, "  status: UNAVAILABLE ({}): {message}", e.kind);
            }
            Ok((_, info)) => {
                let _ = writeln!(out, "  status: started: {}", info.description);
                let _ = writeln!(out, "  library: {}", info.library);
                let _ = writeln!(out, "  process id: {}", info.process_id);
                let _ = writeln!(out, "  devices: {}", info.device_count);
                for d in &info.devices {
                    let _ = writeln!(out, "    {}: {}", d.index, d.describe());
                }
                if info.device_count > 0 {
                    let _ = writeln!(out, "  peer access (row device can access column device):");
                    let header: String =
                        (0..info.device_count).map(|d| format!("{d:>5}")).collect();
                    let _ = writeln!(out, "        {header}");
                    for (d, row) in info.peer_matrix.iter().enumerate() {
                        let cells: String = row
                            .iter()
                            .map(|c| match c {
                                PeerCell::SameDevice => format!("{:>5}", "-"),
                                PeerCell::Access(b) => format!("{:>5}", yes_no(*b)),
                                PeerCell::Failed(_) => format!("{:>5}", "ERR"),
                            })
                            .collect();
                        let _ = writeln!(out, "    {d:>4}{cells}");
                    }
                    for (d, row) in info.peer_matrix.iter().enumerate() {
                        for (p, c) in row.iter().enumerate() {
                            if let PeerCell::Failed(e) = c {
                                let _ = writeln!(out, "    {d} -> {p}: {e}");
                            }
                        }
                    }
                }
                let caps: Vec<String> = capability_list(&info.capabilities)
                    .into_iter()
                    .map(|(k, v)| format!("{k}={}", yes_no(v)))
                    .collect();
                let _ = writeln!(out, "  capabilities: {}", caps.join(", "));
            }
        }
        if let Some(p) = &entry.probe {
            let _ = writeln!(
                out,
                "  probe: {} in {:.1} ms",
                if p.passed { "PASS" } else { "FAIL" },
                p.total_ms
            );
            for s in &p.steps {
                let _ = writeln!(
                    out,
                    "    [{}] {:<19} {:>8.2} ms  {}",
                    if s.passed { "ok" } else { "FAIL" },
                    s.name,
                    s.ms,
                    s.detail
                );
            }
            if let Some(stderr) = &p.child_stderr {
                if !stderr.trim().is_empty() {
                    let _ = writeln!(
                        out,
                        "    child stderr:\n      {}",
                        stderr.trim().replace('\n', "\n      ")
                    );
                }
            }
        }
    }
    let started: Vec<&Entry> = entries.iter().filter(|e| e.report.start.is_ok()).collect();
    let probed = started.iter().filter(|e| e.probe.is_some()).count();
    let passed = started
        .iter()
        .filter(|e| e.probe.as_ref().is_some_and(|p| p.passed))
        .count();
    let unavailable: Vec<&str> = entries
        .iter()
        .filter(|e| e.report.start.is_err())
        .map(|e| e.report.name.as_str())
        .collect();
    let _ = writeln!(
        out,
        "\nsummary: {} backend(s) started, {passed} of {probed} probe(s) passed; unavailable here: {}\nresult: {}",
        started.len(),
        if unavailable.is_empty() {
            "none".to_owned()
        } else {
            unavailable.join(", ")
        },
        if ok { "OK" } else { "PROBE FAILED" }
    );
    out
}
