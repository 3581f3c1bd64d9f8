//! The memory rules on `hip-vmm-fd` memory (issue 15): the `emulated-hip-vmm` target runs
//! the portable rules about memory devipc allocates once more, every buffer (the
//! scenario's and its facade peers') allocated with `AllocateOptions::mechanism(HipVmmFd)`,
//! under the same ids; the other targets' runs are as before. Read from `emulated`'s full
//! run (no extra run), except the ROCm 5.2 check, which only probes.

use std::collections::BTreeSet;

use serde_json::Value;
use serial_test::{parallel, serial};

use crate::emulated::full_run;
use crate::support::{results, run_json};

/// The portable rules that run on the VMM variant: every rule about memory devipc
/// allocates (sub-range offsets, same-process shortcut, cache, lifetime, grants, peers,
/// errors on memory tokens). Not here: the signal rules, `error.wrong-backend` (hand-made
/// tokens), and the framework-memory rules (`export_external` of `hipMalloc` memory).
const ON_VMM: [&str; 12] = [
    "portable.memory.cross-process-bytes",
    "portable.import.same-process-shortcut",
    "portable.import.cache-refcounted",
    "portable.lifetime.free-waits-for-importers",
    "portable.transfer.close-waits-for-copies",
    "portable.export.sub-range-offset",
    "portable.grant.trustlist",
    "portable.grant.any-process",
    "portable.import.cross-device",
    "portable.error.corrupt-token",
    "portable.error.bad-device",
    "portable.error.double-close",
];

fn ids(rs: &[Value]) -> BTreeSet<&str> {
    rs.iter().map(|r| r["rule"].as_str().unwrap()).collect()
}

fn mechanisms(r: &Value) -> Vec<&str> {
    r["mechanisms"]
        .as_array()
        .unwrap_or_else(|| panic!("no mechanisms: {r}"))
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect()
}

#[test]
#[serial]
fn the_memory_rules_run_and_pass_on_hip_vmm_memory() {
    let (report, _) = full_run();
    let b = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "emulated-hip-vmm")
        .expect("the default run has emulated-hip-vmm");
    assert_eq!(b["allocation"], "hip-vmm-fd");
    assert_eq!(b["started"], true, "{b}");
    let rs = results(report, "emulated-hip-vmm");
    assert_eq!(ids(rs), ON_VMM.into_iter().collect(), "the rules on VMM");
    for r in rs {
        assert_eq!(r["result"], "pass", "{r}");
        assert_eq!(r["allocation"], "hip-vmm-fd", "{r}");
        // Every token the scenario shared was hip-vmm-fd (a pass with none is a failure).
        assert_eq!(mechanisms(r), ["hip-vmm-fd"], "{r}");
    }
    let cache = rs
        .iter()
        .find(|r| r["rule"] == "portable.import.cache-refcounted")
        .unwrap();
    assert!(
        cache["detail"]
            .as_str()
            .unwrap()
            .contains("hipMemImportFromShareableHandle"),
        "{cache}"
    );
}

/// The default targets run what they ran before, on the same mechanisms: every portable
/// rule on emulated HIP (the memory rules on `hip-ipc-mem`), every one on emulated Ascend.
#[test]
#[serial]
fn the_default_runs_are_unchanged() {
    let (report, _) = full_run();
    let portable = |backend: &str| -> Vec<&Value> {
        results(report, backend)
            .iter()
            .filter(|r| r["level"] == "portable")
            .collect()
    };
    for backend in ["emulated-ascend", "emulated-hip"] {
        let b = report["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["backend"] == backend)
            .unwrap();
        assert_eq!(b["allocation"], "default", "{backend}");
        let rs = portable(backend);
        assert_eq!(
            rs.len(),
            22,
            "{backend}: the portable rules (17 + issue 16 placement + issue 25 transfer and \
             three signal-generation rules)"
        );
        for r in rs {
            assert_eq!(r["result"], "pass", "{backend}: {r}");
            assert_eq!(r["allocation"], "default", "{backend}: {r}");
            let rule = r["rule"].as_str().unwrap();
            let seen = mechanisms(r);
            if !ON_VMM.contains(&rule) {
                continue;
            }
            assert_eq!(r["memory"], true, "{r}");
            match backend {
                "emulated-hip" => assert_eq!(seen, ["hip-ipc-mem"], "{r}"),
                _ => assert!(
                    !seen.is_empty() && seen.iter().all(|m| m.starts_with("ascend-")),
                    "{r}"
                ),
            }
        }
    }
}

/// On a runtime without `Capabilities::vmm_fd` (emulated ROCm 5.2) the variant's rules
/// are skipped with the reason, and the run does not fail.
#[test]
#[parallel]
fn without_vmm_fd_the_variant_skips_with_the_reason() {
    let (report, out) = run_json(
        &["--backend", "emulated-hip-vmm"],
        &[("DEVIPC_EMU_HIP_VERSION", "5.2")],
    );
    assert!(out.status.success(), "{report}");
    let rs = results(&report, "emulated-hip-vmm");
    assert_eq!(ids(rs), ON_VMM.into_iter().collect());
    for r in rs {
        assert_eq!(r["result"], "skip", "{r}");
        let why = r["detail"].as_str().unwrap();
        assert!(
            why.contains("lacks Capabilities::vmm_fd") && why.contains("hip 5.2.0"),
            "{r}"
        );
    }
}
