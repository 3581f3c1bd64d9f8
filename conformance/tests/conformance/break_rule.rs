//! The suite can fail: with one emulator rule switched off (`DEVIPC_EMU_BREAK_RULE`), the
//! conformance rule of the same id fails, the exit code says so, and the other rules of
//! the run still pass.

use crate::support::{result, run, run_json};
use serial_test::parallel;

fn broken(backend: &str, rule: &str, family: &str) {
    let (report, out) = run_json(
        &["--backend", backend, "--rule", family],
        &[("DEVIPC_EMU_BREAK_RULE", rule)],
    );
    let r = result(&report, backend, rule);
    assert_eq!(r["result"], "fail", "{rule} with the rule broken: {r}");
    assert_eq!(out.status.code(), Some(1), "exit code with a failing rule");
    let failed = report["summary"]["failed"].as_u64().unwrap();
    assert_eq!(failed, 1, "only the broken rule fails: {report}");
    assert!(report["summary"]["passed"].as_u64().unwrap() > 0);
}

#[test]
#[parallel]
fn breaking_hip_open_in_exporter_fails_its_rule() {
    broken(
        "emulated-hip",
        "hip.mem.open-in-exporter-rejected",
        "hip.mem.*",
    );
}

#[test]
#[parallel]
fn breaking_ascend_same_process_import_fails_its_rule() {
    broken(
        "emulated-ascend",
        "ascend.vmm.same-process-import-rejected",
        "ascend.vmm.*",
    );
}

#[test]
#[parallel]
fn breaking_a_behaviour_rule_fails_it_too() {
    broken(
        "emulated-hip",
        "hip.event.unrecorded-is-complete",
        "hip.event.*",
    );
}

#[test]
#[parallel]
fn the_table_reports_the_failure_with_its_source() {
    let out = run(
        &[
            "--backend",
            "emulated-hip",
            "--rule",
            "hip.mem.open-in-exporter-rejected",
        ],
        &[("DEVIPC_EMU_BREAK_RULE", "hip.mem.open-in-exporter-rejected")],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL hip.mem.open-in-exporter-rejected"),
        "{text}"
    );
    assert!(text.contains("source: "), "{text}");
    assert!(text.contains("but the rule says it is refused"), "{text}");
    assert!(
        text.trim_end().ends_with("0 passed, 1 failed, 0 skipped"),
        "{text}"
    );
}
