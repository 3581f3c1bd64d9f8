//! `devipc doctor` end to end: runs the built binary and checks its report.
//!
//! On this machine (and CI) there is no accelerator and no ACL runtime. Both emulated
//! backends must start and pass their two-process probes, the real Ascend runtime must be
//! reported as not found with every path tried, and the doctor exits 0, because
//! unavailable backends are not failures. The real HIP runtime is reported as found
//! (library path, version) but failing with `hipErrorNoDevice` where Debian's
//! `libamdhip64` is installed (CI installs it); where it is not, as not found with every
//! path tried, and the installed-library checks are skipped loudly (a failure under
//! `DEVIPC_NO_SKIP=1`).
#![cfg(all(feature = "ascend", feature = "hip", feature = "emulator"))]

use std::process::{Command, Output};

use devipc_testkit::TestRoot;
use serde_json::Value;

/// Runs `devipc <args>` with the test's private emulator and runtime directories, and a
/// discovery environment this test controls.
fn doctor(root: &TestRoot, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_devipc"));
    cmd.args(args).envs(root.env());
    for (name, value) in root.discovery_env() {
        match value {
            None => cmd.env_remove(name),
            Some(v) => cmd.env(name, v),
        };
    }
    cmd.output().expect("run devipc")
}

fn backend<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["backends"]
        .as_array()
        .expect("backends is an array")
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no backend {name} in the report"))
}

#[test]
fn json_report_covers_real_and_emulated_backends() {
    let root = TestRoot::new("doctor-json");
    let out = doctor(&root, &["doctor", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    let report: Value = serde_json::from_str(&stdout).expect("valid JSON");
    assert_eq!(report["schema"], "devipc-doctor/1");
    assert_eq!(report["ok"], true);
    assert_eq!(
        report["compiled_backends"],
        serde_json::json!(["ascend", "hip"])
    );
    let names: Vec<&str> = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ascend", "hip", "emulated-ascend", "emulated-hip"]);

    // Both emulated backends start and pass the two-process probe.
    for name in ["emulated-ascend", "emulated-hip"] {
        let b = backend(&report, name);
        assert_eq!(b["emulated"], true, "{name}");
        assert_eq!(b["available"], true, "{name}: {b:#}");
        assert_eq!(b["library"], "emulated", "{name}");
        assert!(b["discovery"].is_null(), "{name}");
        assert!(b["error"].is_null(), "{name}");
        assert_eq!(b["device_count"], 2, "{name}");
        assert_eq!(
            b["peer_matrix"],
            serde_json::json!([[null, true], [true, null]]),
            "{name}"
        );
        assert_eq!(b["capabilities"]["signals"], true, "{name}");
        assert_eq!(
            b["capabilities"]["access_control"],
            name == "emulated-ascend",
            "{name}"
        );
        let probe = &b["probe"];
        assert_eq!(probe["passed"], true, "{name}: {probe:#}");
        let steps: Vec<&str> = probe["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(s["passed"], true, "{name}: {s}");
                assert!(s["ms"].as_f64().unwrap() >= 0.0);
                s["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(
            steps,
            [
                "spawn",
                "export",
                "import",
                "bytes-to-child",
                "bytes-to-parent",
                "signal-round-trips",
                "child-exit"
            ],
            "{name}"
        );
        let rt = &probe["signal_round_trip_us"];
        assert_eq!(rt["rounds"], 200, "{name}");
        let (min, median, max) = (
            rt["min"].as_f64().unwrap(),
            rt["median"].as_f64().unwrap(),
            rt["max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= median && median <= max, "{name}: {rt}");
    }

    let hip = backend(&report, "hip");
    assert_eq!(hip["emulated"], false);
    assert_eq!(hip["available"], false);
    assert!(hip["probe"].is_null());
    if hip["error"]["kind"] == "library_not_found" {
        assert_not_found(hip, "/opt/rocm/lib/libamdhip64.so");
        devipc_testkit::skip("doctor: the real HIP runtime without a GPU", HIP_MISSING);
    } else {
        assert_hip_loaded_without_device(hip);
    }

    // The real Ascend runtime is not installed: every candidate is listed with the
    // loader's error, including the one from ASCEND_HOME_PATH, and the error repeats them.
    let ascend = backend(&report, "ascend");
    assert_eq!(ascend["available"], false);
    assert!(ascend["probe"].is_null());
    let paths = assert_not_found(
        ascend,
        &root
            .path()
            .join("no-cann/lib64/libascendcl.so")
            .display()
            .to_string(),
    );
    let home = root.path().join("no-cann").join("lib64");
    let expected_first = [
        home.join("libascendcl.so").display().to_string(),
        home.join("libacl_rt.so").display().to_string(),
    ];
    assert_eq!(paths[..2], expected_first, "{paths:?}");
    assert_eq!(ascend["discovery"][0]["origin"], "$ASCEND_HOME_PATH/lib64");
    for p in [
        "/usr/local/Ascend/cann/lib64/libascendcl.so",
        "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so",
        "libascendcl.so",
        "libacl_rt.so",
    ] {
        assert!(paths.contains(&p.to_owned()), "{p} missing from {paths:?}");
    }

    // The probes released everything they shared.
    root.assert_emulator_clean();
}

/// Why the installed-HIP checks skip.
const HIP_MISSING: &str =
    "Debian's libamdhip64 is not installed here (apt-get install libamdhip64-dev)";

/// A backend whose library was not found: `library_not_found`, every candidate failed to
/// load with the loader's error, the first is `first`, and the error message names each.
/// Returns the candidate paths.
fn assert_not_found(b: &Value, first: &str) -> Vec<String> {
    assert_eq!(b["error"]["kind"], "library_not_found", "{b:#}");
    let discovery = b["discovery"].as_array().unwrap();
    let paths: Vec<String> = discovery
        .iter()
        .map(|c| {
            assert_eq!(c["result"], "load_failed", "{c}");
            assert!(c["error"].as_str().is_some_and(|e| !e.is_empty()), "{c}");
            c["path"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(paths.first().map(String::as_str), Some(first), "{paths:?}");
    let message = b["error"]["message"].as_str().unwrap();
    for p in &paths {
        assert!(
            message.contains(p.as_str()),
            "{p} missing from the error: {message}"
        );
    }
    paths
}

/// Debian's libamdhip64 loads, and without a GPU the backend reports the vendor's
/// no-device error, with the hint of what to check.
fn assert_hip_loaded_without_device(hip: &Value) {
    let discovery = hip["discovery"].as_array().unwrap();
    let loaded: Vec<&Value> = discovery
        .iter()
        .filter(|c| c["result"] == "loaded")
        .collect();
    assert_eq!(
        loaded.len(),
        1,
        "exactly one candidate loads: {discovery:#?}"
    );
    let resolved = loaded[0]["resolved"]
        .as_str()
        .expect("the mapped file is found");
    assert!(resolved.contains("libamdhip64.so"), "{resolved}");
    assert!(std::path::Path::new(resolved).exists(), "{resolved}");
    // Everything before it failed to load, everything after it was not tried.
    let at = discovery
        .iter()
        .position(|c| c["result"] == "loaded")
        .unwrap();
    assert!(discovery[..at].iter().all(
        |c| c["result"] == "load_failed" && c["error"].as_str().is_some_and(|e| !e.is_empty())
    ));
    assert!(
        discovery[at + 1..]
            .iter()
            .all(|c| c["result"] == "not_tried")
    );
    assert_eq!(discovery[0]["path"], "/opt/rocm/lib/libamdhip64.so");
    let version = hip["runtime_version"].as_str().expect("a runtime version");
    assert!(
        version.split('.').next().unwrap().parse::<u32>().unwrap() >= 5,
        "{version}"
    );
    assert_eq!(hip["error"]["kind"], "vendor");
    assert_eq!(hip["error"]["api"], "hipGetDeviceCount");
    assert_eq!(hip["error"]["code"], 100);
    assert_eq!(hip["error"]["name"], "hipErrorNoDevice");
    let message = hip["error"]["message"].as_str().unwrap();
    assert!(message.contains("/dev/kfd"), "no hint: {message}");
}
#[test]
fn text_report_and_exit_codes() {
    let root = TestRoot::new("doctor-text");
    // Without probes nothing is spawned, and the emulated backends are still inspected.
    let out = doctor(&root, &["doctor", "--json", "--no-probe"]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["backends"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["probe"].is_null())
    );
    assert_eq!(backend(&report, "emulated-hip")["available"], true);
    let hip_installed = backend(&report, "hip")["error"]["kind"] != "library_not_found";

    let out = doctor(&root, &["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", out.status);
    for needle in [
        "== ascend (vendor runtime) ==",
        "== hip (vendor runtime) ==",
        "== emulated-ascend (devipc emulator, no device) ==",
        "== emulated-hip (devipc emulator, no device) ==",
        "[failed]",
        "probe: PASS",
        "result: OK",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    if hip_installed {
        for needle in ["hipErrorNoDevice", "[loaded]", "/dev/kfd"] {
            assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
        }
    } else {
        devipc_testkit::skip(
            "doctor text: the real HIP runtime without a GPU",
            HIP_MISSING,
        );
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");

    for bad in [&["doctor", "--frobnicate"][..], &["frobnicate"], &[]] {
        let out = doctor(&root, bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: devipc doctor"));
    }
    root.assert_emulator_clean();
}
