//! The C ABI from C and C++: compiles the programs of `capi/tests/c/` (and the README's C
//! example) with gcc / g++ against `include/devipc.h` and the `libdevipc.so` cargo built
//! for this test, runs each in its own emulator directories, and checks that it passed and
//! left nothing behind in the emulator.
//!
//! Without gcc or g++ every test prints a `SKIPPED` banner and passes, or fails under
//! `DEVIPC_NO_SKIP=1`. Two variables let `capi/ci-check` reuse the same tests:
//! `DEVIPC_CAPI_CFLAGS` adds compiler flags (the sanitizers), `DEVIPC_CAPI_RUNNER` runs
//! every program under a command (valgrind), split on spaces.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use devipc_testkit::{TestRoot, skip};

devipc_testkit::hermetic_device_masks!();

/// How long one program may run (valgrind is slow).
const PROGRAM_LIMIT: Duration = Duration::from_secs(600);

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("capi/ is inside the workspace")
        .to_path_buf()
}

/// The directory holding `libdevipc.so` / `libdevipc.a`: the parent of this test binary's
/// `deps/`.
///
/// `cargo test` does not build a library without an rlib for its integration tests (and
/// this one has none: see Cargo.toml), so the first test that needs it runs `cargo build`
/// for this package into the same target directory (a no-op when it is up to date), as
/// `emulator/cdylib/tests/dlopen.rs` does.
fn profile_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>/deps/<test>")
                .to_path_buf();
            let target_dir = profile_dir.parent().expect("target/<profile>");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", env!("CARGO_PKG_NAME"), "--target-dir"])
                .arg(target_dir);
            if profile_dir.file_name().is_some_and(|p| p == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build for libdevipc");
            assert!(status.success(), "building libdevipc failed");
            profile_dir
        })
        .clone()
}

/// A compiler on the PATH, or `None`.
fn find(tool: &str) -> Option<String> {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found.then(|| tool.to_owned())
}

/// A test's build directory (removed on drop) holding the library under its soname.
struct Build {
    dir: PathBuf,
    lib: PathBuf,
}

impl Build {
    /// A fresh build directory for `name`, or `None` (after a loud skip) without `tool`.
    fn new(name: &str, tool: &str) -> Option<Build> {
        if find(tool).is_none() {
            skip(
                &format!("capi {name}"),
                &format!("no `{tool}` on the PATH (apt-get install gcc g++)"),
            );
            return None;
        }
        let built = profile_dir().join("libdevipc.so");
        assert!(
            built.is_file(),
            "{} is missing after cargo build -p devipc-capi",
            built.display()
        );
        let dir = std::env::temp_dir().join(format!("devipc-capi-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).expect("make the build directory");
        // From here on the directory is removed on drop, also when a test fails.
        let build = Build { dir, lib };
        for name in ["libdevipc.so", "libdevipc.so.0"] {
            std::os::unix::fs::symlink(&built, build.lib.join(name)).expect("link the library");
        }
        Some(build)
    }

    /// Compiles `sources` (paths under `capi/tests/c/`, or absolute) with `tool` in
    /// `std` into `out`, linked with libdevipc (`static_lib`: libdevipc.a).
    fn compile(
        &self,
        tool: &str,
        std: &str,
        sources: &[PathBuf],
        out: &str,
        static_lib: bool,
    ) -> PathBuf {
        let exe = self.dir.join(out);
        let include = workspace().join("include");
        let tests_c = workspace().join("capi/tests/c");
        let mut cmd = Command::new(tool);
        cmd.arg(format!("-std={std}"))
            .args(["-g", "-Wall", "-Wextra", "-Werror", "-pedantic"])
            .arg("-I")
            .arg(&include)
            .arg("-I")
            .arg(&tests_c);
        if let Ok(extra) = std::env::var("DEVIPC_CAPI_CFLAGS") {
            cmd.args(extra.split_whitespace());
        }
        cmd.args(sources).arg("-o").arg(&exe);
        if static_lib {
            cmd.arg(profile_dir().join("libdevipc.a"));
            cmd.args([
                "-ldl",
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-lc",
            ]);
        } else {
            cmd.arg("-L")
                .arg(&self.lib)
                .arg("-ldevipc")
                .arg(format!("-Wl,-rpath,{}", self.lib.display()))
                .arg("-lpthread");
        }
        let output = cmd.output().expect("run the compiler");
        assert!(
            output.status.success(),
            "{cmd:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_sanitized(&exe);
        exe
    }

    /// Runs `exe args` with `root`'s emulator directories and `env`, under
    /// `DEVIPC_CAPI_RUNNER` when set; returns its stdout after checking that it exited 0.
    fn run(&self, exe: &Path, args: &[&str], root: &TestRoot, env: &[(&str, &str)]) -> String {
        let runner: Vec<String> = std::env::var("DEVIPC_CAPI_RUNNER")
            .map(|r| r.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let mut cmd = match runner.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(args)
            .env_remove("DEVIPC_BACKEND")
            .envs(root.env())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the program");
        let started = Instant::now();
        while child.try_wait().expect("wait for the program").is_none() {
            if started.elapsed() > PROGRAM_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{cmd:?} ran past {PROGRAM_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = child
            .wait_with_output()
            .expect("collect the program's output");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{cmd:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        );
        stdout
    }
}

/// When `DEVIPC_CAPI_CFLAGS` asks for AddressSanitizer, `exe` links it (its `__asan_init`
/// symbol; binutils' `nm`), so a sanitizer run cannot pass by silently not sanitizing.
fn assert_sanitized(exe: &Path) {
    let flags = std::env::var("DEVIPC_CAPI_CFLAGS").unwrap_or_default();
    if !flags.contains("-fsanitize=address") {
        return;
    }
    let out = Command::new("nm")
        .arg(exe)
        .output()
        .expect("run nm (binutils) on the sanitized program");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("__asan_init"),
        "{} was built with {flags} but does not link AddressSanitizer",
        exe.display()
    );
}

impl Drop for Build {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn source(name: &str) -> PathBuf {
    workspace().join("capi/tests/c").join(name)
}

/// Compiles `program.c` and runs it with `kind`; it must print `PASS`.
fn run_c(program: &str, kind: &str) {
    let name = format!("{program}-{kind}");
    let Some(build) = Build::new(&name, "gcc") else {
        return;
    };
    let exe = build.compile(
        "gcc",
        "c99",
        &[source(&format!("{program}.c"))],
        program,
        false,
    );
    let root = TestRoot::new(&name);
    let out = build.run(&exe, &[kind], &root, &[]);
    assert!(out.contains(&format!("PASS {program} {kind}")), "{out}");
    root.assert_emulator_clean();
}

#[test]
fn the_header_compiles_alone_as_c99_and_as_cxx17() {
    let Some(build) = Build::new("header-c", "gcc") else {
        return;
    };
    let c = build.compile("gcc", "c99", &[source("header_alone.c")], "alone-c", false);
    let root = TestRoot::new("header");
    build.run(&c, &[], &root, &[]);
    let Some(build) = Build::new("header-cxx", "g++") else {
        return;
    };
    let cxx_source = build.dir.join("header_alone.cpp");
    std::fs::copy(source("header_alone.c"), &cxx_source).expect("copy the source");
    let cxx = build.compile("g++", "c++17", &[cxx_source], "alone-cxx", false);
    build.run(&cxx, &[], &root, &[]);
}

#[test]
fn producer_and_consumer_processes_on_emulated_hip() {
    run_c("pair", "hip");
}

#[test]
fn producer_and_consumer_processes_on_emulated_ascend() {
    run_c("pair", "ascend");
}

#[test]
fn every_error_path_on_emulated_hip() {
    run_c("errors", "hip");
}

#[test]
fn every_error_path_on_emulated_ascend() {
    run_c("errors", "ascend");
}

#[test]
fn several_threads_on_emulated_hip() {
    run_c("threads", "hip");
}

#[test]
fn several_threads_on_emulated_ascend() {
    run_c("threads", "ascend");
}

#[test]
fn fork_while_another_thread_uses_the_handles_on_emulated_hip() {
    run_c("fork", "hip");
}

#[test]
fn fork_while_another_thread_uses_the_handles_on_emulated_ascend() {
    run_c("fork", "ascend");
}

#[test]
fn the_rendezvous_between_two_processes_on_emulated_hip() {
    run_c("rendezvous", "hip");
}

#[test]
fn the_rendezvous_between_two_processes_on_emulated_ascend() {
    run_c("rendezvous", "ascend");
}

#[test]
fn the_data_plane_on_emulated_hip() {
    run_c("dataplane", "hip");
}

#[test]
fn the_data_plane_on_emulated_ascend() {
    run_c("dataplane", "ascend");
}

#[test]
fn a_cxx17_program_holds_the_handles_in_raii_types() {
    let Some(build) = Build::new("raii", "g++") else {
        return;
    };
    let exe = build.compile("g++", "c++17", &[source("raii.cpp")], "raii", false);
    for kind in ["hip", "ascend"] {
        let root = TestRoot::new(&format!("raii-{kind}"));
        let out = build.run(&exe, &[kind], &root, &[]);
        assert!(out.contains(&format!("PASS raii {kind}")), "{out}");
        root.assert_emulator_clean();
    }
}

/// The first ```c block of README.md's "## C" section.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("read README.md");
    let section = readme
        .split("\n## C\n")
        .nth(1)
        .expect("README.md has a `## C` section");
    let start = section
        .find("```c\n")
        .expect("a ```c block in the C section")
        + 5;
    let len = section[start..].find("\n```").expect("the block's end");
    section[start..start + len + 1].to_owned()
}

#[test]
fn the_readme_c_example_runs_as_written_with_both_libraries() {
    let Some(build) = Build::new("readme", "gcc") else {
        return;
    };
    let src = build.dir.join("example.c");
    std::fs::write(&src, readme_example()).expect("write the example");
    let shared = build.compile("gcc", "c99", std::slice::from_ref(&src), "example", false);
    let fixed = build.compile("gcc", "c99", &[src], "example-static", true);
    for exe in [&shared, &fixed] {
        for backend in ["emulated-hip", "emulated-ascend"] {
            let root = TestRoot::new(&format!("readme-{backend}"));
            let out = build.run(exe, &[], &root, &[("DEVIPC_BACKEND", backend)]);
            assert_eq!(out, "hello\n", "{} on {backend}", exe.display());
            root.assert_emulator_clean();
        }
    }
}
