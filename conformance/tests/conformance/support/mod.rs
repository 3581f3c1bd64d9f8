//! Shared by the runner's integration tests (the topics of this binary): run the
//! `devipc-conformance` binary with a controlled environment and parse its `--json`
//! report.

use std::process::{Command, Output};

use serde_json::Value;

/// Variables of the user's environment that would change what a run does.
const CLEARED: &[&str] = &[
    "DEVIPC_EMU_BREAK_RULE",
    "DEVIPC_EMU_DEVICES",
    "DEVIPC_EMU_HIP_VERSION",
    "DEVIPC_EMU_MEM_LIMIT",
    "DEVIPC_EMU_DIR",
    "DEVIPC_RUNTIME_DIR",
    "DEVIPC_CONFORMANCE_SELFTEST",
    "DEVIPC_BACKEND",
    "DEVIPC_BREAK_PROTECTION",
];

/// Runs the runner with `args` and `env` on top of a cleaned environment.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_devipc-conformance"));
    cmd.args(args);
    for k in CLEARED {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run devipc-conformance")
}

/// Runs with `--json` and parses stdout.
pub fn run_json(args: &[&str], env: &[(&str, &str)]) -> (Value, Output) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run(&all, env);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "--json output is not JSON ({e}):\n{text}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

/// The results of `backend` in a report.
pub fn results<'a>(report: &'a Value, backend: &str) -> &'a Vec<Value> {
    report["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .find(|b| b["backend"] == backend)
        .unwrap_or_else(|| panic!("no backend {backend} in the report"))["results"]
        .as_array()
        .expect("results")
}

/// The result object of `rule` on `backend`.
pub fn result<'a>(report: &'a Value, backend: &str, rule: &str) -> &'a Value {
    results(report, backend)
        .iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("no result for {rule} on {backend}"))
}

/// Every result that is not a pass, as `rule: result: detail` lines.
pub fn not_passed(report: &Value) -> Vec<String> {
    report["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .flat_map(|b| {
            b["results"]
                .as_array()
                .expect("results")
                .iter()
                .filter(|r| r["result"] != "pass")
                .map(move |r| {
                    format!(
                        "{} {}: {}: {}",
                        b["backend"], r["rule"], r["result"], r["detail"]
                    )
                })
        })
        .collect()
}
