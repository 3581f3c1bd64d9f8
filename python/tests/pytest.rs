//! Runs the Python tests (`python/tests/*.py`, pytest) as part of `cargo test`: creates a
//! virtual environment under the target directory (cached, keyed by the interpreter and
//! `tests/requirements.txt`), installs the requirements, builds and installs the package
//! from this checkout with pip (the README's `pip install ./python`, maturin as the build
//! backend), and runs pytest with its output streamed.
//!
//! Without python3, its venv module or network for pip, the test prints a loud `SKIPPED`
//! banner and passes; `DEVIPC_NO_SKIP=1` (CI) makes that a failure. The package is built
//! in its own target directory (`cargo test` holds the lock of the workspace's), in the
//! dev profile unless `DEVIPC_PY_PROFILE` names another.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use devipc_testkit::skip;

const TEST: &str = "devipc-python pytest";

/// The interpreter to build the environment with: `DEVIPC_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("DEVIPC_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs `cmd` with its output shown; `Err` with a description when it fails to start or
/// exits non-zero.
fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("+ {shown}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} exited with {s}")),
        Err(e) => Err(format!("{shown} did not start: {e}")),
    }
}

/// `python -c code`'s trimmed stdout, or `None` if it fails.
fn output(python: &str, code: &str) -> Option<String> {
    let out = Command::new(python).args(["-c", code]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The cached environment for this interpreter and these requirements, created and
/// filled if needed. `Err(reason)` means "cannot run here" (a skip).
fn environment(python: &str, root: &Path, requirements: &Path) -> Result<PathBuf, String> {
    let version = output(python, "import sys; print(sys.version)")
        .ok_or_else(|| format!("no working `{python}` (install python3, or set DEVIPC_PYTHON)"))?;
    output(python, "import venv, ensurepip").ok_or_else(|| {
        format!(
            "`{python}` lacks the venv/ensurepip modules (Debian: apt-get install python3-venv)"
        )
    })?;
    let reqs = std::fs::read_to_string(requirements).map_err(|e| format!("{e}"))?;
    let mut h = DefaultHasher::new();
    (version, reqs).hash(&mut h);
    let venv = root.join(format!("venv-{:016x}", h.finish()));
    let ready = venv.join("devipc-requirements-installed");
    if ready.exists() {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(Command::new(python).args(["-m", "venv"]).arg(&venv))
        .map_err(|e| format!("could not create a virtual environment: {e}"))?;
    run(Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--timeout",
            "30",
            "--retries",
            "2",
            "-r",
        ])
        .arg(requirements))
    .map_err(|e| format!("pip could not install the test requirements (network?): {e}"))?;
    std::fs::write(&ready, b"").map_err(|e| format!("{e}"))?;
    Ok(venv)
}

#[test]
fn python_tests_pass() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("devipc-python");
    std::fs::create_dir_all(&root).unwrap();
    let python = python();
    let venv = match environment(&python, &root, &crate_dir.join("tests/requirements.txt")) {
        Ok(v) => v,
        Err(reason) => return skip(TEST, &reason),
    };
    let bin = venv.join("bin");
    let profile = std::env::var("DEVIPC_PY_PROFILE").unwrap_or_else(|_| "dev".to_owned());
    // The environment's scripts first (the build backend runs `maturin` by name).
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .expect("PATH entries without ':'");
    // The README's install command, with maturin from the environment (no download).
    run(Command::new(bin.join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            "--force-reinstall",
        ])
        .arg(crate_dir)
        .env("PATH", &path)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env("MATURIN_PEP517_ARGS", format!("--profile {profile}")))
    .expect("building and installing the devipc Python package");
    // Out of the source tree, so that `import devipc` finds the installed package.
    run(Command::new(bin.join("pytest"))
        .args(["-q", "-rs", "-p", "no:cacheprovider", "--durations=5"])
        .arg(crate_dir.join("tests"))
        .current_dir(&root)
        .env("PATH", &path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("DEVIPC_BACKEND")
        .stdin(Stdio::null()))
    .expect("the Python tests failed (their output is above)");
}
