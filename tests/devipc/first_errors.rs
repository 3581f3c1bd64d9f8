//! The first errors a newcomer meets, each in a child process with an environment the
//! test controls (runtimes and the emulator's configuration are set up once per process):
//! - `Runtime::from_env()` with `DEVIPC_BACKEND` unset (`auto`) on a machine where no
//!   backend can start keeps every backend's own cause;
//! - a refused emulator state directory or runtime directory, or a malformed
//!   `DEVIPC_EMU_*` value, is devipc's own configuration error naming the setting, not a
//!   vendor driver error.

use std::os::unix::fs::PermissionsExt;

use devipc::{BackendKind, DeviceId, Error, ExportOptions, Runtime};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| match role {
        "auto" => auto(parent),
        "emulated" => emulated(parent),
        other => Err(format!("unknown role {other}")),
    });
}

/// Starts the emulated backend named on stdin, allocates and exports; reports `ok`, or the
/// error as `error <kind> <message>`.
fn emulated(parent: &Parent) -> Result<(), String> {
    let kind: BackendKind = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let result = Runtime::emulated(kind).and_then(|rt| {
        let buf = rt.allocate(DeviceId(0), 4096)?;
        buf.export(ExportOptions::any_process()).map(drop)
    });
    match result {
        Ok(()) => parent.say("ok", ""),
        Err(e) => parent.say("error", &format!("{} {e}", e.kind())),
    }
    Ok(())
}

/// Runs the `emulated` role for `kind` with `env` on top of the root's directories.
fn run_emulated(root: &TestRoot, kind: BackendKind, env: &[(&str, String)]) -> String {
    let mut child = Child::build(&child_entry(), "emulated", root)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn();
    child.send(kind.name());
    let (key, value) = child.expect_one_of(&["ok", "error"]);
    child.wait_success();
    format!("{key} {value}").trim_end().to_owned()
}

#[test]
fn a_refused_emulator_directory_is_a_configuration_error() {
    let root = TestRoot::new("config-emu-dir");
    let dir = root.path().join("open-emu");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for kind in BackendKind::ALL {
        let out = run_emulated(
            &root,
            kind,
            &[("DEVIPC_EMU_DIR", dir.display().to_string())],
        );
        let expected = format!(
            "error config devipc configuration: the emulator state directory {} \
             (DEVIPC_EMU_DIR): its mode 0755 gives group/others access; run chmod 700 on it, \
             or set DEVIPC_EMU_DIR to a directory of your own",
            dir.display()
        );
        assert_eq!(out, expected, "{kind}");
    }
    // The directory was left as it was: devipc refuses, it does not "fix" modes.
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
}

#[test]
fn a_malformed_emulator_variable_is_a_configuration_error() {
    let root = TestRoot::new("config-emu-var");
    for kind in BackendKind::ALL {
        let out = run_emulated(&root, kind, &[("DEVIPC_EMU_DEVICES", "lots".into())]);
        assert!(
            out.starts_with("error config devipc configuration: DEVIPC_EMU_DEVICES=\"lots\": "),
            "{kind}: {out}"
        );
    }
    // Nothing was created.
    assert!(!root.emu_dir().exists());
}

#[test]
fn a_refused_runtime_directory_is_a_configuration_error() {
    // HIP exports take a lease in the runtime directory.
    let root = TestRoot::new("config-run-dir");
    let dir = root.path().join("open-run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let out = run_emulated(
        &root,
        BackendKind::Hip,
        &[("DEVIPC_RUNTIME_DIR", dir.display().to_string())],
    );
    let expected = format!(
        "error config devipc configuration: the runtime directory {} (DEVIPC_RUNTIME_DIR): \
         its mode 0750 gives group/others access; run chmod 700 on it, or set \
         DEVIPC_RUNTIME_DIR to a directory of your own",
        dir.display()
    );
    assert_eq!(out, expected);
    root.assert_emulator_clean();
}

/// Starts `auto` and reports `started`, or the error: `kind`, one `attempt <backend>
/// <kind> <vendor name or ->` per backend tried, and the message (newlines as `|`).
fn auto(parent: &Parent) -> Result<(), String> {
    match Runtime::from_env() {
        Ok(rt) => parent.say("started", rt.info().kind.name()),
        Err(e) => {
            parent.say("kind", e.kind());
            if let Error::NoBackendStarted { attempts } = &e {
                for a in attempts {
                    parent.say(
                        "attempt",
                        &format!(
                            "{} {} {}",
                            a.backend,
                            a.error.kind(),
                            a.error.vendor_name().unwrap_or("-")
                        ),
                    );
                }
            }
            parent.say("message", &e.to_string().replace('\n', "|"));
        }
    }
    Ok(())
}

/// What the `auto` child reported.
struct Outcome {
    started: Option<String>,
    attempts: Vec<String>,
    message: String,
}

/// Runs the `auto` role with the discovery variables of both vendors removed and `env`
/// set.
fn run_auto(root: &TestRoot, env: &[(&str, String)]) -> Outcome {
    let mut child = Child::build(&child_entry(), "auto", root)
        .discovery_env()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .keep_other_messages()
        .spawn();
    let (key, value) = child.expect_one_of(&["started", "kind"]);
    let mut outcome = Outcome {
        started: None,
        attempts: Vec::new(),
        message: String::new(),
    };
    if key == "started" {
        outcome.started = Some(value);
    } else {
        assert_eq!(value, "no_backend_started");
        loop {
            let (key, value) = child.expect_one_of(&["attempt", "message"]);
            if key == "message" {
                outcome.message = value;
                break;
            }
            outcome.attempts.push(value);
        }
    }
    child.wait_success();
    outcome
}

#[test]
fn auto_without_any_runtime_names_both_missing_libraries() {
    let root = TestRoot::new("auto-none");
    let hip = root
        .path()
        .join("missing/libamdhip64.so")
        .display()
        .to_string();
    let acl = root
        .path()
        .join("missing/libascendcl.so")
        .display()
        .to_string();
    let out = run_auto(
        &root,
        &[
            ("DEVIPC_HIP_LIB", hip.clone()),
            ("DEVIPC_ASCEND_LIB", acl.clone()),
        ],
    );
    assert_eq!(out.started, None);
    assert_eq!(
        out.attempts,
        ["ascend library_not_found -", "hip library_not_found -"]
    );
    let m = &out.message;
    assert!(
        m.starts_with("no devipc backend started (tried ascend, then hip)"),
        "{m}"
    );
    for needle in [
        "- ascend: ascend runtime library not found",
        "- hip: hip runtime library not found",
        &acl,
        &hip,
        "DEVIPC_BACKEND",
    ] {
        assert!(m.contains(needle), "{needle:?} missing: {m}");
    }
}

/// The AMD user's first error: ROCm installed, no GPU, no Ascend runtime. Needs Debian's
/// libamdhip64 (CI installs it); skips loudly without it.
#[test]
fn auto_with_rocm_but_no_gpu_names_both_causes() {
    const TEST: &str = "auto_with_rocm_but_no_gpu_names_both_causes";
    let root = TestRoot::new("auto-rocm");
    let out = run_auto(&root, &[]);
    if let Some(kind) = out.started {
        assert_eq!(kind, BackendKind::Hip.name());
        devipc_testkit::skip(TEST, "a GPU is present: the HIP runtime started");
        return;
    }
    if out.attempts.contains(&"hip library_not_found -".to_owned()) {
        devipc_testkit::skip(
            TEST,
            "Debian's libamdhip64 is not installed here (apt-get install libamdhip64-dev)",
        );
        return;
    }
    assert_eq!(
        out.attempts,
        ["ascend library_not_found -", "hip vendor hipErrorNoDevice"]
    );
    let m = &out.message;
    for needle in [
        "- ascend: ascend runtime library not found",
        "- hip: hip: hipGetDeviceCount failed with hipErrorNoDevice (100)",
        "/dev/kfd",
        "rocminfo",
    ] {
        assert!(m.contains(needle), "{needle:?} missing: {m}");
    }
    // The HIP cause is not buried under the Ascend one's list of paths: each backend's
    // cause starts its own line.
    let hip_at = m.find("- hip: ").unwrap();
    let ascend_at = m.find("- ascend: ").unwrap();
    assert!(ascend_at < hip_at, "{m}");
}
