//! The real vendor runtimes as installed on this machine. CI has Debian's libamdhip64
//! (ROCm 5.2) and no GPU: `--backend hip` must report the backend as unable to start
//! (no device), run only the rules that need just the library (and pass them), skip
//! every other rule with that reason, and exit 0. There is no Ascend runtime: every
//! Ascend rule is skipped because the backend cannot start. Never is "no device" a pass.

use crate::support::{results, run_json};
use serial_test::parallel;

#[test]
#[parallel]
fn hip_without_a_gpu_runs_library_rules_and_skips_the_rest() {
    let (report, out) = run_json(&["--backend", "hip"], &[]);
    let b = &report["backends"][0];
    assert_eq!(b["backend"], "hip");
    let rs = results(&report, "hip");
    assert!(!rs.is_empty());
    if let Some(lib) = b["library_error"].as_str() {
        // No HIP runtime installed: everything is skipped with that reason.
        devipc_testkit::skip(
            "conformance --backend hip on the real runtime",
            &format!("libamdhip64 not installed (apt-get install libamdhip64-dev): {lib}"),
        );
        for r in rs {
            assert_eq!(r["result"], "skip", "{r}");
            assert!(
                r["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("backend cannot start"),
                "{r}"
            );
        }
        assert!(out.status.success());
        return;
    }
    if b["started"] == true {
        // A machine with a GPU: the real runtime is checked; nothing may fail.
        assert_eq!(report["summary"]["failed"], 0, "{report}");
        return;
    }
    let why = b["start_error"].as_str().expect("a start error");
    assert!(why.contains("hipErrorNoDevice"), "{why}");
    let mut passed = 0;
    for r in rs {
        let library_only = r["needs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "library only (no device)");
        if library_only {
            assert_eq!(r["result"], "pass", "library-only rule: {r}");
            passed += 1;
        } else {
            assert_eq!(r["result"], "skip", "{r}");
            let detail = r["detail"].as_str().unwrap();
            assert!(detail.starts_with("needs a device"), "{detail}");
            assert!(detail.contains("hipErrorNoDevice"), "{detail}");
        }
    }
    assert!(passed >= 2, "the library-only rules ran");
    assert_eq!(report["summary"]["passed"], passed);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(
        report["summary"]["skipped"].as_u64().unwrap() as usize,
        rs.len() - passed
    );
    assert!(
        out.status.success(),
        "skips are not failures: {}",
        out.status
    );
    let version = b["version"]
        .as_str()
        .expect("the version is read without a device");
    assert!(version.starts_with('5') || version.starts_with('6') || version.starts_with('7'));
}

#[test]
#[parallel]
fn ascend_without_a_runtime_skips_everything_with_the_reason() {
    let (report, out) = run_json(&["--backend", "ascend"], &[]);
    let b = &report["backends"][0];
    if b["started"] == true {
        assert_eq!(report["summary"]["failed"], 0, "{report}");
        return;
    }
    let rs = results(&report, "ascend");
    assert!(rs.len() >= 40);
    for r in rs {
        assert_eq!(r["result"], "skip", "{r}");
        let detail = r["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("backend cannot start") || detail.starts_with("needs a device"),
            "{detail}"
        );
    }
    assert_eq!(report["summary"]["passed"], 0);
    assert!(out.status.success());
}
