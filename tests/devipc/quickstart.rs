//! The examples run to completion on both emulated backends and leave nothing behind in
//! the emulator's state directory: the quickstart (the README's first command) and
//! many_consumers. `cargo test` builds the examples; these tests run the built binaries.

use std::path::PathBuf;
use std::process::Command;

use devipc_testkit::TestRoot;

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "cargo test builds the examples: {} is missing",
        path.display()
    );
    path
}

#[test]
fn quickstart_runs_on_both_emulated_backends() {
    for backend in ["emulated-ascend", "emulated-hip"] {
        let root = TestRoot::new(&format!("quickstart-{backend}"));
        let out = Command::new(example("quickstart"))
            .envs(root.env())
            .env("DEVIPC_BACKEND", backend)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{backend}: {}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(stdout.contains("1000 round trips"), "{backend}: {stdout}");
        assert!(
            stderr.contains("consumer: answered 1000 rounds"),
            "{backend}: {stderr}"
        );
        root.assert_emulator_clean();
    }
}

#[test]
fn many_consumers_runs_on_both_emulated_backends() {
    for backend in ["emulated-ascend", "emulated-hip"] {
        let root = TestRoot::new(&format!("many-consumers-{backend}"));
        let out = Command::new(example("many_consumers"))
            .arg("6")
            .envs(root.env())
            .env("DEVIPC_BACKEND", backend)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{backend}: {}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(
            stdout.contains("6 consumers imported the buffer"),
            "{backend}: {stdout}"
        );
        root.assert_emulator_clean();
    }
}
