//! The whole catalogue on the default targets (both emulated backends, and the memory
//! rules again on emulated HIP with `hip-vmm-fd` memory), where every rule must pass, and
//! the `--json` report's schema checked against the rule list.

use std::collections::BTreeSet;
use std::process::Output;
use std::sync::OnceLock;

use crate::support::{not_passed, run, run_json};
use serde_json::Value;
use serial_test::{parallel, serial};

/// One full run on the default targets (both emulated backends and `emulated-hip-vmm`),
/// shared by the tests (here and in `vmm_variant`).
pub(crate) fn full_run() -> &'static (Value, Output) {
    static RUN: OnceLock<(Value, Output)> = OnceLock::new();
    RUN.get_or_init(|| run_json(&[], &[]))
}

#[test]
#[serial]
fn every_rule_passes_on_the_emulated_targets() {
    let (report, out) = full_run();
    let failed = not_passed(report);
    assert!(
        failed.is_empty(),
        "rules that did not pass:\n{}",
        failed.join("\n")
    );
    assert!(out.status.success(), "exit status {}", out.status);
    let backends: Vec<&str> = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(
        backends,
        ["emulated-ascend", "emulated-hip", "emulated-hip-vmm"]
    );
    for b in report["backends"].as_array().unwrap() {
        assert_eq!(b["started"], true, "{b}");
        assert_eq!(b["state_clean"], true, "{}", b["leftovers"]);
    }
}

#[test]
#[serial]
fn json_report_follows_the_schema() {
    let (report, _) = full_run();
    assert_eq!(report["schema"], "devipc-conformance/1");
    // The rule list per backend kind, from --list --json.
    let list = |backend: &str| -> BTreeSet<String> {
        let (v, out) = run_json(&["--list", "--backend", backend], &[]);
        assert!(out.status.success());
        assert_eq!(v["schema"], "devipc-conformance/list/1");
        v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["rule"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut total = [0u64; 3];
    for b in report["backends"].as_array().unwrap() {
        let name = b["backend"].as_str().unwrap();
        let results = b["results"].as_array().unwrap();
        let ids: Vec<&str> = results
            .iter()
            .map(|r| r["rule"].as_str().unwrap())
            .collect();
        let unique: BTreeSet<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(unique.len(), ids.len(), "{name}: a rule appears twice");
        assert_eq!(
            unique,
            list(name),
            "{name}: the report does not list every rule"
        );
        let mut counts = [0u64; 3];
        for r in results {
            for field in [
                "rule", "level", "applies", "summary", "source", "expect", "detail",
            ] {
                assert!(r[field].is_string(), "{name}: {field} of {r}");
            }
            assert!(r["needs"].is_array(), "{r}");
            assert!(
                r["mechanisms"].is_array() && r["memory"].is_boolean(),
                "{r}"
            );
            assert_eq!(r["allocation"], b["allocation"], "{name}: {r}");
            assert!(r["time_ms"].is_u64(), "{r}");
            assert!(["vendor", "portable"].contains(&r["level"].as_str().unwrap()));
            assert!(["ascend", "hip", "all"].contains(&r["applies"].as_str().unwrap()));
            let slot = match r["result"].as_str().unwrap() {
                "pass" => 0,
                "fail" => 1,
                "skip" => 2,
                other => panic!("{name}: result {other}"),
            };
            counts[slot] += 1;
        }
        let s = &b["summary"];
        assert_eq!(
            [&s["passed"], &s["failed"], &s["skipped"]].map(|v| v.as_u64().unwrap()),
            counts,
            "{name}: summary does not match the results"
        );
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
        assert!(b["describe"].is_string(), "{b}");
        assert!(b["allocation"].is_string(), "{b}");
        assert!(b["devices"].is_u64() && b["leftovers"].is_array() && b["started"].is_boolean());
    }
    let s = &report["summary"];
    assert_eq!(
        [&s["passed"], &s["failed"], &s["skipped"]].map(|v| v.as_u64().unwrap()),
        total,
        "the overall summary does not add up"
    );
    assert!(total[0] >= 80, "only {} rules passed", total[0]);
}

#[test]
#[parallel]
fn the_table_ends_with_the_summary_line() {
    let out = run(&["--rule", "portable.error.*"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("== emulated-ascend: ascend"), "{text}");
    assert!(text.contains("== emulated-hip: hip"), "{text}");
    assert!(
        text.contains("== emulated-hip-vmm: hip") && text.contains(", allocating hip-vmm-fd =="),
        "{text}"
    );
    assert!(text.contains("portable.error.double-close"), "{text}");
    assert!(
        text.contains("\nemulated-hip: 4 passed, 0 failed, 0 skipped"),
        "{text}"
    );
    // The error rules about memory: corrupt-token, bad-device, double-close.
    assert!(
        text.contains("\nemulated-hip-vmm: 3 passed, 0 failed, 0 skipped"),
        "{text}"
    );
    assert_eq!(
        text.trim_end().lines().last(),
        Some("11 passed, 0 failed, 0 skipped"),
        "{text}"
    );
}

/// The HIP rules again with the emulator in ROCm 5.2 mode, where
/// hipIpcMemLazyEnablePeerAccess is 0, `hipMemAllocationProp` has its 5.2 layout and VMM
/// IPC does not exist: everything passes except the rules that exist only from a later
/// release (`needs HIP >= ...`), which are skipped. The list grew from 2 to 6 with the VMM
/// rules (issue 15): the four that export or import an fd need ROCm 6.2; the other VMM
/// rules run at 5.2 (`hip.vmm.ipc-needs-rocm-6.2` checks the refused export there). Issue
/// 25 added `hip.device.vmm-attribute-reported` (the attribute is in the headers from 5.3).
#[test]
#[serial]
fn hip_rules_pass_in_rocm5_mode() {
    let (report, out) = run_json(
        &["--backend", "emulated-hip"],
        &[("DEVIPC_EMU_HIP_VERSION", "5.2")],
    );
    let mut not_passing = not_passed(&report);
    not_passing.sort();
    let skipped = [
        "hip.device.vmm-attribute-reported",
        "hip.mem.address-range-unknown-not-found",
        "hip.mem.open-in-exporter-rejected",
        "hip.vmm.export-handle-type-matches",
        "hip.vmm.export-import-shares-memory",
        "hip.vmm.import-exported-fd",
        "hip.vmm.import-os-handle-convention",
    ];
    assert_eq!(
        not_passing.len(),
        skipped.len(),
        "{}",
        not_passing.join("\n")
    );
    for (line, rule) in not_passing.iter().zip(skipped) {
        assert!(
            line.contains(&format!("\"{rule}\""))
                && line.contains("skip")
                && line.contains("needs HIP >="),
            "{line}"
        );
    }
    assert!(out.status.success());
    assert_eq!(report["backends"][0]["version"], "5.2.0");
}

/// The VMM rules on both sides of the `osHandle` switch (ROCm 7.0: a pointer to the fd;
/// 7.1: the fd value) and at the release where the legacy-IPC attribute answers (7.12):
/// every one passes (ROCm 6.2, the emulator's default, is the full run's).
#[test]
#[parallel]
fn hip_vmm_rules_pass_at_each_import_convention() {
    for version in ["7.0", "7.1", "7.12"] {
        let (report, out) = run_json(
            &["--backend", "emulated-hip", "--rule", "hip.vmm.*"],
            &[("DEVIPC_EMU_HIP_VERSION", version)],
        );
        let failed = not_passed(&report);
        assert!(failed.is_empty(), "HIP {version}:\n{}", failed.join("\n"));
        assert!(out.status.success(), "HIP {version}");
        let results = crate::support::results(&report, "emulated-hip");
        assert_eq!(results.len(), 18, "HIP {version}: the hip.vmm rules");
        let shares = crate::support::result(
            &report,
            "emulated-hip",
            "hip.vmm.export-import-shares-memory",
        );
        let how = if version == "7.0" { "pointer" } else { "value" };
        assert!(
            shares["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("imported by {how}")),
            "HIP {version}: {shares}"
        );
    }
}

#[test]
#[parallel]
fn list_and_usage_errors() {
    let out = run(&["--list"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let n: usize = text
        .lines()
        .last()
        .and_then(|l| l.strip_suffix(" rules"))
        .and_then(|n| n.parse().ok())
        .expect("a rule count");
    assert!(n >= 40, "{n} rules");
    assert!(!text.contains("selftest"), "hidden rules are listed");
    for bad in [&["--backend", "cuda"][..], &["--timeout", "x"], &["--what"]] {
        let out = run(bad, &[]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}
