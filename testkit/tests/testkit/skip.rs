//! `devipc_testkit::skip` in a real test run: loud and passing by default, a failure
//! under `DEVIPC_NO_SKIP=1`.

use std::process::Command;

/// Set for the re-run of [`skipping_test`] only.
const PROBE_ENV: &str = "DEVIPC_TESTKIT_SKIP_PROBE";

/// Skips when re-run by [`skips_are_loud_and_fail_under_no_skip`]; does nothing otherwise.
#[test]
fn skipping_test() {
    if std::env::var_os(PROBE_ENV).is_some() {
        devipc_testkit::skip("skipping_test", "the probe's missing dependency");
    }
}

#[test]
fn skips_are_loud_and_fail_under_no_skip() {
    let run = |no_skip: &str| {
        Command::new(std::env::current_exe().unwrap())
            .args(["skip::skipping_test", "--exact", "--test-threads=1"])
            .env(PROBE_ENV, "1")
            .env(devipc_testkit::NO_SKIP_ENV, no_skip)
            .output()
            .unwrap()
    };
    // Passing, with the banner on stderr although libtest captures the test's output.
    let out = run("0");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SKIPPED skipping_test: the probe's missing dependency"),
        "{stderr}"
    );
    // Failing under DEVIPC_NO_SKIP=1, with the reason.
    let out = run("1");
    assert!(!out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("DEVIPC_NO_SKIP=1 forbids skipping: skipping_test cannot run here"),
        "{all}"
    );
}
