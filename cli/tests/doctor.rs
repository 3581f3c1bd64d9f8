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

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

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

/// `devipc doctor --json --no-probe` on a 4-device emulated machine with `masks` set (and
/// every other visibility variable removed).
fn doctor_masked(root: &TestRoot, masks: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_devipc"));
    cmd.args(["doctor", "--json", "--no-probe"])
        .envs(root.env())
        .env("DEVIPC_EMU_DEVICES", "4");
    for (name, value) in root.discovery_env() {
        match value {
            None => cmd.env_remove(name),
            Some(v) => cmd.env(name, v),
        };
    }
    for name in devipc_testkit::VISIBILITY_ENV_VARS {
        cmd.env_remove(name);
    }
    cmd.envs(masks.iter().copied());
    let out = cmd.output().expect("run devipc");
    assert!(out.status.success(), "{masks:?}: {}", out.status);
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// The identity fields of each device of a backend, by index.
fn identities(report: &Value, name: &str) -> Vec<Value> {
    backend(report, name)["devices"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no devices: {report:#}"))
        .iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(d["index"], i, "{name}: {d}");
            assert!(d["error"].is_null(), "{name}: {d}");
            serde_json::json!([d["pci_bus_id"], d["uuid"], d["physical_id"]])
        })
        .collect()
}

#[test]
fn devices_are_listed_with_their_physical_identity_under_the_masks_in_force() {
    let root = TestRoot::new("doctor-masks");
    let all = doctor_masked(&root, &[]);
    let hip = identities(&all, "emulated-hip");
    let ascend = identities(&all, "emulated-ascend");
    assert_eq!((hip.len(), ascend.len()), (4, 4));
    for (name, ids) in [("emulated-hip", &hip), ("emulated-ascend", &ascend)] {
        for (i, a) in ids.iter().enumerate() {
            assert!(
                ids[i + 1..].iter().all(|b| b != a),
                "{name}: two devices share {a}"
            );
        }
    }
    // HIP devices have a PCI bus id, Ascend devices a physical chip id.
    assert!(hip.iter().all(|d| d[0].is_string()), "{hip:?}");
    assert!(ascend.iter().all(|d| d[2].is_u64()), "{ascend:?}");
    assert_eq!(
        backend(&all, "emulated-hip")["visibility"],
        serde_json::json!({
            "ROCR_VISIBLE_DEVICES": null, "HIP_VISIBLE_DEVICES": null, "CUDA_VISIBLE_DEVICES": null
        })
    );

    let masked = doctor_masked(
        &root,
        &[
            ("HIP_VISIBLE_DEVICES", "3,1"),
            ("ASCEND_RT_VISIBLE_DEVICES", "2"),
        ],
    );
    assert_eq!(
        identities(&masked, "emulated-hip"),
        [hip[3].clone(), hip[1].clone()],
        "HIP_VISIBLE_DEVICES=3,1 shows physical devices 3 and 1 as 0 and 1"
    );
    assert_eq!(
        identities(&masked, "emulated-ascend"),
        [ascend[2].clone()],
        "ASCEND_RT_VISIBLE_DEVICES=2 shows physical device 2 as 0"
    );
    assert_eq!(
        backend(&masked, "emulated-hip")["visibility"]["HIP_VISIBLE_DEVICES"],
        "3,1"
    );
    assert_eq!(
        backend(&masked, "emulated-ascend")["visibility"],
        serde_json::json!({ "ASCEND_RT_VISIBLE_DEVICES": "2" })
    );
    // The text report prints the masks and each device's identity.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_devipc"));
    cmd.args(["doctor", "--no-probe"])
        .envs(root.env())
        .env("DEVIPC_EMU_DEVICES", "4")
        .env("HIP_VISIBLE_DEVICES", "3,1");
    for name in ["ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"] {
        cmd.env_remove(name);
    }
    let out = cmd.output().expect("run devipc");
    let text = String::from_utf8_lossy(&out.stdout);
    let pci = hip[3][0].as_str().unwrap();
    assert!(
        text.contains("HIP_VISIBLE_DEVICES=\"3,1\"") && text.contains(&format!("0: pci {pci}")),
        "{text}"
    );
    root.assert_emulator_clean();
}
