//! Test support for devipc's multi-process tests.
//!
//! devipc's behaviour across processes is tested with real processes: a test starts
//! children by re-running its own test binary on one entry test (conventionally named
//! `child_role`) with [`ROLE_ENV`] naming the role to play. Parent and child talk over the
//! child's stdin/stdout in lines `@@ <key> <value>`; anything else on stdout (the test
//! harness's own output) is ignored. Every test gets a [`TestRoot`]: its own emulator
//! state directory and devipc runtime directory, removed on drop, so tests never share
//! state and can assert that nothing was left behind.
//!
//! Parent side:
//! ```no_run
//! # use devipc_testkit::{Child, TestRoot};
//! let root = TestRoot::new("my-test");
//! let mut child = Child::spawn("child_role", "importer", &root, &[]);
//! let pid = child.expect("pid");
//! child.send("token devipc1:...");
//! child.wait_success();
//! root.assert_emulator_clean();
//! ```
//! Child side:
//! ```no_run
//! #[test]
//! fn child_role() {
//!     devipc_testkit::run_child(|role, parent| match role {
//!         "importer" => {
//!             parent.say("pid", &std::process::id().to_string());
//!             let token = parent.hear();
//!             Ok(())
//!         }
//!         other => Err(format!("unknown role {other}")),
//!     });
//! }
//! ```

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// Names the role a re-executed test binary plays.
pub const ROLE_ENV: &str = "DEVIPC_TEST_ROLE";
/// Generous wait for things that should happen: tests must not fail on a loaded machine.
pub const LONG: Duration = Duration::from_secs(60);
/// A child still running after this kills itself, so a broken test leaves no process.
pub const CHILD_WATCHDOG: Duration = Duration::from_secs(180);

/// A test's private directories, removed on drop (also when the test fails):
/// `/dev/shm/devipc-it-<pid>-<name>/{emu,run}` (or under the temp dir).
#[derive(Debug)]
pub struct TestRoot {
    root: PathBuf,
}

impl TestRoot {
    /// Creates the root for test `name` (unique per test process and name), on `/dev/shm`
    /// when there is one (tmpfs, as the emulator's default state directory: a temp dir on
    /// disk makes every metadata update pay for writeback), else in the temp dir.
    pub fn new(name: &str) -> TestRoot {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let root = base.join(format!("devipc-it-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("create the test root");
        TestRoot { root }
    }

    /// The root itself.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The emulator state directory (`DEVIPC_EMU_DIR`); created by the emulator.
    pub fn emu_dir(&self) -> PathBuf {
        self.root.join("emu")
    }

    /// devipc's runtime directory (`DEVIPC_RUNTIME_DIR`); created on first use.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// The environment a child needs to use these directories.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("DEVIPC_EMU_DIR", self.emu_dir().into_os_string()),
            ("DEVIPC_RUNTIME_DIR", self.run_dir().into_os_string()),
        ]
    }

    /// Asserts that the emulator left nothing behind but its `ledger` bookkeeping file,
    /// and that the runtime directory holds no files.
    pub fn assert_emulator_clean(&self) {
        let left = |dir: PathBuf| -> Vec<String> {
            let mut names: Vec<String> = match std::fs::read_dir(&dir) {
                Ok(entries) => entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(_) => Vec::new(),
            };
            names.sort();
            names
        };
        let emu = left(self.emu_dir());
        assert!(
            emu.iter().all(|n| n == "ledger"),
            "leftover files in the emulator state directory: {emu:?}"
        );
        let run = left(self.run_dir());
        assert!(
            run.is_empty(),
            "leftover files in the runtime directory: {run:?}"
        );
    }
}

impl Drop for TestRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A child process playing one role; killed and reaped on drop.
#[derive(Debug)]
pub struct Child {
    role: String,
    proc: std::process::Child,
    out: BufReader<ChildStdout>,
    inp: ChildStdin,
}

impl Child {
    /// Re-runs this test binary on the test `entry` with [`ROLE_ENV`]` = role`, the
    /// root's directories, and `env` on top.
    pub fn spawn(entry: &str, role: &str, root: &TestRoot, env: &[(&str, String)]) -> Child {
        let mut cmd = Command::new(std::env::current_exe().expect("current test binary"));
        cmd.args([entry, "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE_ENV, role)
            .envs(root.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut proc = cmd.spawn().expect("spawn a child role");
        let out = BufReader::new(proc.stdout.take().expect("piped stdout"));
        let inp = proc.stdin.take().expect("piped stdin");
        Child {
            role: role.to_owned(),
            proc,
            out,
            inp,
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Reads lines until `@@ <key> <value>` and returns the value. A child reporting
    /// `@@ fail <reason>`, or exiting first, fails the test.
    pub fn expect(&mut self, key: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .out
                .read_line(&mut line)
                .expect("read the child's stdout");
            assert!(n > 0, "child {} exited before saying {key:?}", self.role);
            // The harness prints "test child_role ... " without a newline before the test
            // runs, so a message may follow it on the same line.
            let Some((_, msg)) = line.trim_end().split_once("@@ ") else {
                continue;
            };
            let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
            if k == "fail" {
                panic!("child {} failed: {v}", self.role);
            }
            if k == key {
                return v.to_owned();
            }
        }
    }

    /// Sends one line to the child's stdin.
    pub fn send(&mut self, line: &str) {
        writeln!(self.inp, "{line}").expect("write to the child");
        self.inp.flush().expect("flush to the child");
    }

    /// Waits for the child and asserts it succeeded.
    pub fn wait_success(mut self) {
        let status = self.proc.wait().expect("wait for the child");
        assert!(status.success(), "child {} exited with {status}", self.role);
    }

    /// SIGKILLs the child and reaps it.
    pub fn kill(mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.proc.try_wait() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
    }
}

/// The child's side of the conversation with its parent.
#[derive(Debug, Default)]
pub struct Parent {
    _private: (),
}

impl Parent {
    /// Sends `@@ key value` to the parent.
    pub fn say(&self, key: &str, value: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "@@ {key} {value}");
        let _ = out.flush();
    }

    /// Reads the next line the parent sent (empty when the parent closed the pipe).
    pub fn hear(&self) -> String {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap_or(0);
        line.trim_end().to_owned()
    }

    /// Reads the next line and checks it is `expected`.
    pub fn hear_exactly(&self, expected: &str) -> Result<(), String> {
        let got = self.hear();
        if got == expected {
            Ok(())
        } else {
            Err(format!(
                "expected {expected:?} from the parent, got {got:?}"
            ))
        }
    }
}

/// The body of the entry test: when [`ROLE_ENV`] is set, runs `role_fn` for that role and
/// exits the process (0 on success; on error reports `@@ fail <reason>` and exits 1); when
/// it is not set (the normal test run), returns at once.
pub fn run_child(role_fn: impl FnOnce(&str, &Parent) -> Result<(), String>) {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_WATCHDOG);
        eprintln!("child watchdog: giving up");
        std::process::exit(97);
    });
    let parent = Parent::default();
    let code = match role_fn(&role, &parent) {
        Ok(()) => 0,
        Err(e) => {
            parent.say("fail", &e);
            eprintln!("child role {role} failed: {e}");
            1
        }
    };
    std::process::exit(code);
}
