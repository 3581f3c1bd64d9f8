//! Runs the Python tests (`python/tests/*.py`, pytest) as part of `cargo test`: creates a
//! virtual environment (cached, keyed by the interpreter and the requirement files),
//! installs `tests/requirements.txt` (and `tests/requirements-torch.txt` when
//! `DEVIPC_PY_TORCH=1`), builds and installs the package from this checkout with pip (the
//! README's `pip install ./python`, maturin as the build backend), and runs pytest with its
//! output streamed: `python_tests_pass` runs everything but `test_torch.py` and
//! `test_ray.py`, `torch_tests_pass` runs the first where torch imports,
//! `ray_tests_pass` the second where torch and ray import, and
//! `pytest_runs_from_the_package_folder` runs the README's `cd python && python -m pytest`
//! (the package's source folder must not shadow the installed package there).
//!
//! Without python3, its venv module or network for pip (or torch, for the second test),
//! a test prints a loud `SKIPPED` banner and passes; `DEVIPC_NO_SKIP=1` (CI) makes that a
//! failure. The environments live in `DEVIPC_PY_VENV_CACHE` if set (.ci/fresh-machine
//! shares the main run's), else under the target directory. The package is built in its
//! own target directory (`cargo test` holds the lock of the workspace's), in the dev
//! profile unless `DEVIPC_PY_PROFILE` names another.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

use std::ffi::OsString;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use devipc_testkit::skip;
use serial_test::serial;

/// The crate's directory (`python/`): cargo's run-time `CARGO_MANIFEST_DIR` (right even
/// when another checkout with the same sources built this binary in a shared target
/// directory), else the one it was built in.
fn crate_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
    })
}

/// Whether the torch requirements are installed too.
fn with_torch() -> bool {
    std::env::var_os("DEVIPC_PY_TORCH").is_some_and(|v| v == "1")
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

/// Whether `python -c code` succeeds, and its trimmed stdout.
fn output(python: &Path, code: &str) -> Option<String> {
    let out = Command::new(python).args(["-c", code]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A ready environment with the package installed.
struct Env {
    bin: PathBuf,
    /// `PATH` with the environment's scripts first (the build backend runs `maturin`).
    path: OsString,
    /// Where pytest runs: outside the source tree, so `import devipc` is the installed one.
    workdir: PathBuf,
}

/// The cached environment for this interpreter and these requirements, created and
/// filled if needed. `Err(reason)` means "cannot run here" (a skip).
fn environment(cache: &Path) -> Result<PathBuf, String> {
    let python = PathBuf::from(std::env::var("DEVIPC_PYTHON").unwrap_or_else(|_| "python3".into()));
    let version = output(&python, "import sys; print(sys.version)").ok_or_else(|| {
        format!(
            "no working `{}` (install python3, or set DEVIPC_PYTHON)",
            python.display()
        )
    })?;
    output(&python, "import venv, ensurepip").ok_or_else(|| {
        format!(
            "`{}` lacks the venv/ensurepip modules (Debian: apt-get install python3-venv)",
            python.display()
        )
    })?;
    let mut files = vec![crate_dir().join("tests/requirements.txt")];
    if with_torch() {
        files.push(crate_dir().join("tests/requirements-torch.txt"));
    }
    let mut h = DefaultHasher::new();
    version.hash(&mut h);
    for f in &files {
        std::fs::read_to_string(f)
            .map_err(|e| format!("{}: {e}", f.display()))?
            .hash(&mut h);
    }
    let venv = cache.join(format!("venv-{:016x}", h.finish()));
    let ready = venv.join("devipc-requirements-installed");
    if ready.exists() {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(Command::new(&python).args(["-m", "venv"]).arg(&venv))
        .map_err(|e| format!("could not create a virtual environment: {e}"))?;
    let mut pip = Command::new(venv.join("bin/python"));
    pip.args([
        "-m",
        "pip",
        "install",
        "-q",
        // No second copy of every wheel (torch's are ~3.5 GB) in pip's cache.
        "--no-cache-dir",
        "--timeout",
        "60",
        "--retries",
        "2",
    ]);
    for f in &files {
        pip.arg("-r").arg(f);
    }
    run(&mut pip)
        .map_err(|e| format!("pip could not install the test requirements (network?): {e}"))?;
    std::fs::write(&ready, b"").map_err(|e| format!("{e}"))?;
    Ok(venv)
}

/// Creates (once per test binary) the environment and installs the package into it.
fn setup() -> &'static Result<Env, String> {
    static ENV: OnceLock<Result<Env, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let workdir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("devipc-python");
        let cache = std::env::var_os("DEVIPC_PY_VENV_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| workdir.clone());
        std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
        std::fs::create_dir_all(&workdir).map_err(|e| format!("{}: {e}", workdir.display()))?;
        let bin = environment(&cache)?.join("bin");
        let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .map_err(|e| format!("PATH: {e}"))?;
        let profile = std::env::var("DEVIPC_PY_PROFILE").unwrap_or_else(|_| "dev".to_owned());
        // The README's install command, with maturin from the environment (no download).
        // A failure here is the package's, not a missing dependency: it panics below.
        run(Command::new(bin.join("python"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-cache-dir",
                "--no-build-isolation",
                "--no-deps",
            ])
            .arg("--force-reinstall")
            .arg(crate_dir())
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", workdir.join("target"))
            .env("MATURIN_PEP517_ARGS", format!("--profile {profile}")))
        .map(|()| Env { bin, path, workdir })
        .map_err(|e| format!("BUILD FAILED: {e}"))
    })
}

/// The ready environment, or `None` after a loud skip. Panics if the package failed to
/// build or install.
fn env_or_skip(test: &str) -> Option<&'static Env> {
    match setup() {
        Ok(env) => Some(env),
        Err(e) if e.starts_with("BUILD FAILED") => panic!("{e}"),
        Err(reason) => {
            skip(test, reason);
            None
        }
    }
}

/// Runs pytest in `env` with `args`; panics when it fails.
fn pytest(env: &Env, args: &[&str]) {
    let tests = crate_dir().join("tests");
    // `python -m pytest`, not the `pytest` script: a script's shebang names the
    // interpreter of the environment it was installed in, which is another checkout's
    // when a target directory (and its cached environment) was copied from there.
    run(Command::new(env.bin.join("python"))
        .args([
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--durations=5",
            "--rootdir",
        ])
        .arg(crate_dir())
        .args(
            args.iter()
                .map(|a| a.replace("{tests}", &tests.display().to_string())),
        )
        .current_dir(&env.workdir)
        .env("PATH", &env.path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("DEVIPC_BACKEND")
        .stdin(Stdio::null()))
    .unwrap_or_else(|e| panic!("the Python tests failed (their output is above): {e}"));
}

#[test]
#[serial]
fn python_tests_pass() {
    let Some(env) = env_or_skip("devipc-python pytest") else {
        return;
    };
    pytest(
        env,
        &[
            "{tests}",
            "--ignore={tests}/test_torch.py",
            "--ignore={tests}/test_ray.py",
        ],
    );
}

/// The README's commands: after `pip install ./python`, `cd python && python -m pytest`
/// imports the installed package, not the source folder (which lacks the built extension
/// and, first on `sys.path` as the working directory, would shadow it). One quick test
/// file stands for the whole run.
#[test]
fn pytest_runs_from_the_package_folder() {
    let Some(env) = env_or_skip("devipc-python pytest from python/") else {
        return;
    };
    let python = env.bin.join("python");
    let found = Command::new(&python)
        .args([
            "-c",
            "import devipc, devipc._devipc; print(devipc.__file__)",
        ])
        .current_dir(crate_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("the environment's python starts");
    assert!(
        found.status.success(),
        "`import devipc._devipc` fails from {}: {}",
        crate_dir().display(),
        String::from_utf8_lossy(&found.stderr)
    );
    let file = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
    assert!(
        !file.starts_with(crate_dir()),
        "`import devipc` from {} found the source folder ({}), not the installed package",
        crate_dir().display(),
        file.display()
    );
    run(Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_api.py",
        ])
        .current_dir(crate_dir())
        .env("PATH", &env.path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("DEVIPC_BACKEND")
        .stdin(Stdio::null()))
    .unwrap_or_else(|e| panic!("`python -m pytest` from python/ failed (output above): {e}"));
}

#[test]
#[serial]
fn torch_tests_pass() {
    const TEST: &str = "devipc-python torch tests";
    let Some(env) = env_or_skip(TEST) else {
        return;
    };
    if output(&env.bin.join("python"), "import torch").is_none() {
        return skip(
            TEST,
            "torch is not installed in the test environment (DEVIPC_PY_TORCH=1 installs \
             PyPI's torch: about 3.5 GB to download, 5.4 GB installed)",
        );
    }
    pytest(env, &["{tests}/test_torch.py"]);
}

#[test]
#[serial]
fn ray_tests_pass() {
    const TEST: &str = "devipc-python Ray transport tests";
    let Some(env) = env_or_skip(TEST) else {
        return;
    };
    if output(&env.bin.join("python"), "import torch, ray").is_none() {
        return skip(
            TEST,
            "torch and ray are not both installed in the test environment \
             (DEVIPC_PY_TORCH=1 installs tests/requirements-torch.txt: torch and the pinned ray)",
        );
    }
    pytest(env, &["{tests}/test_ray.py"]);
}
