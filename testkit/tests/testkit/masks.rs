//! `hermetic_device_masks!` in a real test binary: the shell's device masks are gone
//! before any test runs, unless `DEVIPC_TEST_KEEP_VISIBILITY=1`; a child a test starts
//! with a mask keeps it.

use std::process::Command;

use devipc_testkit::{KEEP_VISIBILITY_ENV, MASKS_CLEARED_ENV, VISIBILITY_ENV_VARS};

/// Set for the re-run of [`report_masks`] only.
const PROBE_ENV: &str = "DEVIPC_TESTKIT_MASK_PROBE";

/// Prints the masks this process sees when re-run by the tests below.
#[test]
fn report_masks() {
    if std::env::var_os(PROBE_ENV).is_some() {
        for key in VISIBILITY_ENV_VARS {
            println!("@@ {key}={:?}", std::env::var_os(key));
        }
    }
}

/// This binary re-run on [`report_masks`] with every mask set, and `keep` as
/// `DEVIPC_TEST_KEEP_VISIBILITY`, as a shell starts it (`from_shell`) or as a test starts
/// a child; the lines it printed.
fn masks_seen(keep: &str, from_shell: bool) -> Vec<String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["masks::report_masks", "--exact", "--nocapture"])
        .env(PROBE_ENV, "1")
        .env(KEEP_VISIBILITY_ENV, keep);
    if from_shell {
        cmd.env_remove(MASKS_CLEARED_ENV);
    }
    for key in VISIBILITY_ENV_VARS {
        cmd.env(key, "3");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("@@ ").map(str::to_owned))
        .collect()
}

#[test]
fn the_shells_masks_never_reach_a_test() {
    assert_eq!(std::env::var(MASKS_CLEARED_ENV).as_deref(), Ok("1"));
    let seen = masks_seen("0", true);
    assert_eq!(seen.len(), VISIBILITY_ENV_VARS.len(), "{seen:?}");
    for (line, key) in seen.iter().zip(VISIBILITY_ENV_VARS) {
        assert_eq!(line, &format!("{key}=None"));
    }
}

#[test]
fn keep_visibility_keeps_them() {
    let seen = masks_seen("1", true);
    for (line, key) in seen.iter().zip(VISIBILITY_ENV_VARS) {
        assert_eq!(line, &format!("{key}=Some(\"3\")"));
    }
    assert_eq!(seen.len(), VISIBILITY_ENV_VARS.len(), "{seen:?}");
}

#[test]
fn a_child_keeps_the_masks_its_test_set() {
    let seen = masks_seen("0", false);
    assert_eq!(seen.len(), VISIBILITY_ENV_VARS.len(), "{seen:?}");
    for (line, key) in seen.iter().zip(VISIBILITY_ENV_VARS) {
        assert_eq!(line, &format!("{key}=Some(\"3\")"));
    }
}
