//! A child that hangs, crashes, or whose peer never answers is reported as a FAIL with
//! its stderr, within the timeout, never as a pass. The misbehaving rules are hidden and
//! selectable only with DEVIPC_CONFORMANCE_SELFTEST=1.

use std::time::{Duration, Instant};

use crate::support::{result, run_json};
use serial_test::{parallel, serial};

#[test]
#[serial]
fn hanging_and_crashing_children_are_failures() {
    let started = Instant::now();
    let (report, out) = run_json(
        &[
            "--backend",
            "emulated-hip",
            "--rule",
            "selftest.*",
            "--timeout",
            "3",
        ],
        &[("DEVIPC_CONFORMANCE_SELFTEST", "1")],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "a failing run exits 1");
    assert_eq!(report["summary"]["failed"], 3, "{report}");
    assert_eq!(report["summary"]["passed"], 0, "{report}");

    let hang = result(&report, "emulated-hip", "selftest.child.hangs");
    assert_eq!(hang["result"], "fail");
    let detail = hang["detail"].as_str().unwrap();
    assert!(
        detail.contains("did not answer") && detail.contains("killed"),
        "{detail}"
    );

    let crash = result(&report, "emulated-hip", "selftest.child.crashes");
    assert_eq!(crash["result"], "fail");
    let detail = crash["detail"].as_str().unwrap();
    assert!(detail.contains("SIGABRT"), "{detail}");
    assert!(
        detail.contains("aborting on purpose"),
        "the child's stderr: {detail}"
    );

    let peer = result(&report, "emulated-hip", "selftest.peer.hangs");
    assert_eq!(peer["result"], "fail");
    let detail = peer["detail"].as_str().unwrap();
    assert!(
        detail.contains("sleeper") && detail.contains("did not answer"),
        "{detail}"
    );

    // Each of the three waits is bounded by the 3 s timeout (plus the start-up of the
    // children), not by the hour the scenarios ask for.
    assert!(took < Duration::from_secs(40), "the run took {took:?}");
}

#[test]
#[parallel]
fn hidden_rules_need_the_knob() {
    let (report, out) = run_json(&["--backend", "emulated-hip", "--rule", "selftest.*"], &[]);
    assert!(out.status.success());
    assert_eq!(report["summary"]["passed"], 0);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["skipped"], 0);
}
