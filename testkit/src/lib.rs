//! Test support for devipc's multi-process tests.
//!
//! devipc's behaviour across processes is tested with real processes: a test starts
//! children by re-running its own test binary on one entry test (conventionally named
//! `child_role`) with [`ROLE_ENV`] naming the role to play. Parent and child talk over the
//! child's stdin/stdout in lines `@@ <key> <value>`; anything else on stdout (the test
//! harness's own output) is ignored. The processes, the protocol and the kills are
//! `devipc-child`'s (the harness the conformance runner, the doctor and the benchmark use
//! too); this crate adds what tests need on top: the libtest entry, per-test directories,
//! panics instead of errors, and loud skips. Every test gets a [`TestRoot`]: its own emulator
//! state directory and devipc runtime directory, removed on drop, so tests never share
//! state and can assert that nothing was left behind.
//!
//! Parent side:
//! ```no_run
//! # use devipc_testkit::{Child, TestRoot};
//! let root = TestRoot::new("my-test");
//! let mut child = Child::spawn("child_role", "importer", &root, &[]);
//! let pid = child.expect("pid");
//! child.send("token devipc3:...");
//! child.wait_success();
//! root.assert_emulator_clean();
//! ```
//! In a test binary with a module per topic, each module has its own entry test, which
//! libtest names `<module>::child_role`: [`child_entry`] names the caller's.
//! [`Child::build`] starts a child with more control over its environment (variables
//! removed or added), over the messages it sends out of order
//! ([`ChildBuilder::keep_other_messages`]) and over the user it runs as
//! ([`ChildBuilder::user`]); [`Child::kill_no_reap`] leaves a killed child a zombie, for
//! tests of what happens while its pid still exists.
//!
//! A test whose dependency is missing here (a system package, root, a second uid) calls
//! [`skip`]: loud, and a failure under `DEVIPC_NO_SKIP=1`.
//!
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

mod env_guard;
mod raw_io;
mod skip;

pub use env_guard::EnvGuard;
pub use raw_io::RawIo;
pub use skip::{NO_SKIP_ENV, sibling_pidfd_getfd_refused, skip, skips_forbidden};

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use devipc_child::{ChildError, FOREVER, Message, OtherMessages};

/// Names the role a re-executed test binary plays.
pub const ROLE_ENV: &str = "DEVIPC_TEST_ROLE";
/// Generous wait for things that should happen: tests must not fail on a loaded machine.
pub const LONG: Duration = Duration::from_secs(60);
/// A child still running after this kills itself, so a broken test leaves no process.
pub const CHILD_WATCHDOG: Duration = Duration::from_secs(180);

/// A test's private directories, removed on drop (also when the test fails):
/// `/dev/shm/devipc-it-<pid>-<n>-<name>/{emu,run}` (or under the temp dir), where `<n>`
/// counts the roots of the process, so two tests may use the same name.
#[derive(Debug)]
pub struct TestRoot {
    root: PathBuf,
}

impl TestRoot {
    /// Creates a fresh root for test `name` (`name` is for humans), on `/dev/shm`
    /// when there is one (tmpfs, as the emulator's default state directory: a temp dir on
    /// disk makes every metadata update pay for writeback), else in the temp dir.
    pub fn new(name: &str) -> TestRoot {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let root = base.join(format!("devipc-it-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("create the test root");
        // Private whatever the umask (Debian gives users 002): devipc refuses state
        // directories under a group-writable parent, as OpenSSH's StrictModes does.
        std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("make the test root private");
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

    /// A copy of this test binary that every user can execute, in `<root>/exe/` (both
    /// mode 0755; the root itself is made 0755, while the emulator and runtime
    /// directories inside it stay private), made on first call. For children run as
    /// another user ([`ChildBuilder::user`]), which may not reach the original: a
    /// checkout under a 0700 home directory is a normal place for a test binary.
    pub fn executable_for_others(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.root.join("exe");
        let exe = std::env::current_exe()?;
        let name = exe.file_name().unwrap_or_else(|| OsStr::new("test-binary"));
        let copy = dir.join(name);
        if !copy.exists() {
            std::fs::create_dir_all(&dir)?;
            for d in [&self.root, &dir] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
            }
            // Copied under a temporary name and renamed, so a copy is whole or absent.
            let partial = dir.join(".partial");
            std::fs::copy(&exe, &partial)?;
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
            std::fs::rename(&partial, &copy)?;
        }
        Ok(copy)
    }

    /// The environment of a process whose vendor library discovery this test controls:
    /// `(name, None)` removes a variable, `(name, Some(value))` sets it. No backend is
    /// chosen, the HIP runtime is found only where the system keeps it (the loader
    /// path), and the Ascend one is looked for first in `<root>/no-cann` (which does not
    /// exist), so nothing the caller's environment says about either vendor leaks in.
    pub fn discovery_env(&self) -> Vec<(&'static str, Option<OsString>)> {
        let mut env: Vec<(&'static str, Option<OsString>)> = [
            "DEVIPC_BACKEND",
            "DEVIPC_HIP_LIB",
            "ROCM_PATH",
            "HIP_PATH",
            "DEVIPC_ASCEND_LIB",
            "ASCEND_TOOLKIT_HOME",
        ]
        .into_iter()
        .map(|name| (name, None))
        .collect();
        env.push((
            "ASCEND_HOME_PATH",
            Some(self.root.join("no-cann").into_os_string()),
        ));
        env
    }

    /// The environment a child needs to use these directories.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("DEVIPC_EMU_DIR", self.emu_dir().into_os_string()),
            ("DEVIPC_RUNTIME_DIR", self.run_dir().into_os_string()),
        ]
    }

    /// The violations the strict emulator recorded in this root (one line each, `rule=<id>
    /// pid=<pid> object=<id> <what>`; see `devipc_emulator::state::violations`), oldest
    /// first; empty when none happened.
    pub fn recorded_violations(&self) -> Vec<String> {
        std::fs::read_to_string(self.emu_dir().join("violations"))
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Removes the violation records, after a test checked the ones it provoked.
    pub fn clear_violations(&self) {
        let _ = std::fs::remove_file(self.emu_dir().join("violations"));
    }

    /// Asserts that the emulator left nothing behind but its `ledger` bookkeeping file (so
    /// also that it recorded no violation), and that the runtime directory holds no files.
    pub fn assert_emulator_clean(&self) {
        // Processes never remove their own liveness beacons (not even at exit, while their
        // other threads still run): the next process's sweep does, as here.
        for dir in [self.emu_dir(), self.run_dir()] {
            if dir.exists() {
                devipc_shm::liveness::sweep(&dir).expect("sweeping dead liveness beacons");
            }
        }
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
            "leftover files in the emulator state directory: {emu:?}{}",
            self.recorded_violations()
                .iter()
                .map(|v| format!("\n  violation: {v}"))
                .collect::<String>()
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

/// How to start a [`Child`]: [`Child::build`], options, then [`ChildBuilder::spawn`].
#[derive(Debug)]
#[must_use = "a builder does nothing until spawned"]
pub struct ChildBuilder<'a> {
    entry: String,
    role: String,
    root: &'a TestRoot,
    removed: Vec<OsString>,
    removed_prefixes: Vec<String>,
    env: Vec<(OsString, OsString)>,
    keep_other_messages: bool,
    user: Option<(u32, u32)>,
}

impl ChildBuilder<'_> {
    /// Sets a variable for the child (on top of the root's; the last setting wins).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets several variables, as [`ChildBuilder::env`] does.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Does not pass this test process's variable `key` on (the role, the root's
    /// variables and those set with [`ChildBuilder::env`] are set all the same).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.removed.push(key.as_ref().to_owned());
        self
    }

    /// Does not pass on any of this test process's variables whose names start with
    /// `prefix` (e.g. `"DEVIPC_"`: nothing the caller's environment says leaks into the
    /// child); the role, the root's variables and those set with [`ChildBuilder::env`] are
    /// set all the same.
    pub fn env_remove_prefix(mut self, prefix: &str) -> Self {
        self.removed_prefixes.push(prefix.to_owned());
        self
    }

    /// Applies [`TestRoot::discovery_env`] (before the variables set later).
    pub fn discovery_env(mut self) -> Self {
        for (name, value) in self.root.discovery_env() {
            match value {
                None => self = self.env_remove(name),
                Some(v) => self = self.env(name, v),
            }
        }
        self
    }

    /// Keeps the messages [`Child::expect`] reads while waiting for another key, for a
    /// later `expect` (or [`Child::has_kept`]), instead of dropping them: for children that
    /// answer some requests out of order.
    pub fn keep_other_messages(mut self) -> Self {
        self.keep_other_messages = true;
        self
    }

    /// Runs the child as user `uid`, group `gid` (needs root). That user may not be able
    /// to reach this test binary (a checkout or target directory under a 0700 home), so
    /// the child runs a copy placed in the root's directory for others
    /// ([`TestRoot::executable_for_others`]), from that directory. Start it with
    /// [`ChildBuilder::try_spawn`] and [`skip`] when the system refuses.
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Starts the child: this test binary re-run on the entry test with [`ROLE_ENV`]` =
    /// role`. Panics when it cannot start.
    pub fn spawn(self) -> Child {
        self.try_spawn().expect("spawn a child role")
    }

    /// As [`ChildBuilder::spawn`], returning the error when the child cannot start (for
    /// [`ChildBuilder::user`]: the other user cannot execute the copy, e.g. on a `noexec`
    /// mount, or this process may not switch users).
    pub fn try_spawn(self) -> std::io::Result<Child> {
        let mut cmd = match self.user {
            None => devipc_child::Command::new(&self.role)?,
            Some((uid, gid)) => {
                let exe = self.root.executable_for_others()?;
                let dir = exe.parent().expect("the copy is in a directory").to_owned();
                devipc_child::Command::program(&self.role, &exe)
                    .user(uid, gid)
                    .current_dir(dir)
            }
        };
        cmd = cmd.args([&*self.entry, "--exact", "--nocapture", "--test-threads=1"]);
        // The vendors' device masks of the shell that runs the tests would renumber the
        // children's devices: a child sees every device unless its test sets a mask.
        for key in VISIBILITY_ENV_VARS {
            cmd = cmd.env_remove(key);
        }
        for key in &self.removed {
            cmd = cmd.env_remove(key);
        }
        for prefix in &self.removed_prefixes {
            cmd = cmd.env_remove_prefix(prefix);
        }
        let others = if self.keep_other_messages {
            OtherMessages::Keep
        } else {
            OtherMessages::Drop
        };
        cmd.env(ROLE_ENV, &self.role)
            // The masks were stripped above; the child keeps those its test sets (even
            // when the test removed every `DEVIPC_` variable).
            .env(MASKS_CLEARED_ENV, "1")
            .envs(self.root.env())
            .envs(self.env)
            .other_messages(others)
            .spawn()
            .map(Child)
    }
}

/// The device visibility variables of both vendors, which children never inherit (a
/// test sets them with [`ChildBuilder::env`]).
pub const VISIBILITY_ENV_VARS: [&str; 4] = [
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
];

/// Set to `1` to keep the shell's device masks in the test processes (a run on real
/// hardware that must stay on the devices a mask names).
pub const KEEP_VISIBILITY_ENV: &str = "DEVIPC_TEST_KEEP_VISIBILITY";

/// Makes a test binary see every device whatever the shell that runs it has set: expands
/// to a function that runs before `main` and removes [`VISIBILITY_ENV_VARS`] from the
/// process environment (unless [`KEEP_VISIBILITY_ENV`] is `1`), so in-process emulated
/// runtimes and every process the tests start (examples, the CLI, the conformance runner,
/// pytest) see the emulator's devices, not what `HIP_VISIBLE_DEVICES=3` meant for the
/// machine's real GPUs. The emulator honours these variables as the vendors do, so without
/// this a developer's shell with a mask fails most emulated tests. Tests that need a mask
/// set it on the child they start. Put it once in each test binary's root file.
#[macro_export]
macro_rules! hermetic_device_masks {
    () => {
        #[$crate::ctor::ctor(unsafe, crate_path = $crate::ctor)]
        fn devipc_testkit_hermetic_device_masks() {
            // SAFETY: runs before `main`, while the process has one thread, so nothing
            // reads the environment concurrently.
            unsafe { $crate::strip_visibility_env() }
        }
    };
}

#[doc(hidden)]
pub use ctor;

/// Set (to `1`) in a test process whose masks [`strip_visibility_env`] removed, and so in
/// every process it starts: a child re-running a test binary keeps the masks its test set.
pub const MASKS_CLEARED_ENV: &str = "DEVIPC_TEST_MASKS_CLEARED";

/// Removes [`VISIBILITY_ENV_VARS`] from this process's environment and sets
/// [`MASKS_CLEARED_ENV`], unless [`KEEP_VISIBILITY_ENV`] is `1` or this process was
/// started by a test process (which cleared its own); what [`hermetic_device_masks!`] runs
/// before `main`.
///
/// # Safety
/// No other thread may read or write the environment meanwhile (`std::env::remove_var`).
pub unsafe fn strip_visibility_env() {
    if std::env::var_os(KEEP_VISIBILITY_ENV).is_some_and(|v| v == "1")
        || std::env::var_os(MASKS_CLEARED_ENV).is_some()
    {
        return;
    }
    for key in VISIBILITY_ENV_VARS {
        // SAFETY: the caller guarantees no concurrent environment access.
        unsafe { std::env::remove_var(key) };
    }
    // SAFETY: as above.
    unsafe { std::env::set_var(MASKS_CLEARED_ENV, "1") };
}

/// The libtest name of the `child_role` entry test of the module this is called from, for
/// [`Child::spawn`] and [`Child::build`]: `<module>::child_role`.
///
/// A crate's integration tests are one test binary with a module per topic (issue 14),
/// each module one file named after itself (`tests/<binary>/<module>.rs`), each with its
/// own `child_role` test; libtest names that test by its module path. The module is the
/// stem of the caller's file, so a helper that starts children for its module calls this
/// itself (or is `#[track_caller]`). Panics when called from a `main.rs` or `mod.rs`.
#[track_caller]
pub fn child_entry() -> String {
    let file = std::panic::Location::caller().file();
    let module = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|m| *m != "mod" && *m != "main")
        .unwrap_or_else(|| panic!("{file}: a child is started from a topic module"));
    format!("{module}::child_role")
}

/// A child process playing one role; killed and reaped on drop. A test's view of a
/// [`devipc_child::Child`]: no deadlines (the child's watchdog ends a stuck one), and
/// what goes wrong panics.
#[derive(Debug)]
pub struct Child(devipc_child::Child);

/// A message's value as a test sees it: without trailing whitespace, as when each message
/// was one raw line.
fn trimmed((key, value): Message) -> Message {
    let value = value.trim_end().to_owned();
    (key, value)
}

impl Child {
    /// Re-runs this test binary on the test `entry` with [`ROLE_ENV`]` = role`, the
    /// root's directories, and `env` on top.
    pub fn spawn(entry: &str, role: &str, root: &TestRoot, env: &[(&str, String)]) -> Child {
        Child::build(entry, role, root)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .spawn()
    }

    /// A child to start like [`Child::spawn`] does, with more options.
    pub fn build<'a>(entry: &str, role: &str, root: &'a TestRoot) -> ChildBuilder<'a> {
        ChildBuilder {
            entry: entry.to_owned(),
            role: role.to_owned(),
            root,
            removed: Vec::new(),
            removed_prefixes: Vec::new(),
            env: Vec::new(),
            keep_other_messages: false,
            user: None,
        }
    }

    /// The role the child plays.
    pub fn role(&self) -> &str {
        self.0.name()
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// Reads the next message `@@ <key> <value>` as `(key, value)`, skipping other
    /// output; `None` when the child closed its stdout. Nothing is interpreted: a
    /// `fail` message is returned like any other, and kept messages are not looked at.
    pub fn next_message(&mut self) -> Option<(String, String)> {
        match self.0.recv(FOREVER) {
            Ok(msg) => msg.map(trimmed),
            Err(e) => panic!("{}", e.describe(self.role(), "a message")),
        }
    }

    /// Reads lines until `@@ <key> <value>` and returns the value. A child reporting
    /// `@@ fail <reason>`, or exiting first, fails the test. Other messages are dropped,
    /// or kept for later with [`ChildBuilder::keep_other_messages`].
    pub fn expect(&mut self, key: &str) -> String {
        self.expect_one_of(&[key]).1
    }

    /// As [`Child::expect`], for the first message with any of `keys`: `(key, value)`.
    pub fn expect_one_of(&mut self, keys: &[&str]) -> (String, String) {
        match self.0.expect_one_of(keys, FOREVER) {
            Ok(msg) => trimmed(msg),
            Err(ChildError::Failed(why)) => panic!("child {} failed: {why}", self.role()),
            Err(ChildError::Exited(_)) => match keys {
                [key] => panic!("child {} exited before saying {key:?}", self.role()),
                _ => panic!("child {} exited before saying any of {keys:?}", self.role()),
            },
            Err(e) => panic!("{}", e.describe(self.role(), &format!("{keys:?}"))),
        }
    }

    /// Whether a message with `key` was read already and kept (see
    /// [`ChildBuilder::keep_other_messages`]); reads nothing.
    pub fn has_kept(&self, key: &str) -> bool {
        self.0.has_kept(key)
    }

    /// Sends one line to the child's stdin.
    pub fn send(&mut self, line: &str) {
        if let Err(e) = self.0.send(line) {
            panic!("write to the child: {e}");
        }
    }

    /// Closes the child's stdin (as `std::process::Child::wait` does: a child reading it
    /// sees the end, [`Parent::hear_line`] gives `None`) and waits for the child to exit.
    pub fn wait(mut self) -> std::process::ExitStatus {
        match self.0.wait(FOREVER) {
            Ok(status) => status,
            Err(e) => panic!("wait for the child: {e}"),
        }
    }

    /// [`Child::wait`]s and asserts the child succeeded.
    pub fn wait_success(self) {
        let role = self.role().to_owned();
        let status = self.wait();
        assert!(status.success(), "child {role} exited with {status}");
    }

    /// SIGKILLs the child and reaps it.
    pub fn kill(mut self) {
        self.0.kill();
    }

    /// SIGKILLs the child and waits (up to [`LONG`]) until the kernel has killed it, but
    /// does not reap it: the child stays a zombie, its pid taken, until [`Child::reap`]
    /// (or drop).
    pub fn kill_no_reap(&mut self) {
        if let Err(e) = self.0.kill_no_reap(LONG) {
            panic!("{e}");
        }
    }

    /// Reaps a child that ended (after [`Child::kill_no_reap`]).
    pub fn reap(&mut self) {
        self.0.reap();
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
        devipc_child::say(key, value);
    }

    /// Reads the next line the parent sent (empty when the parent closed the pipe).
    pub fn hear(&self) -> String {
        self.hear_line().unwrap_or_default()
    }

    /// Reads the next line the parent sent, without its line end; `None` when the parent
    /// closed the pipe (so an empty line is told from the end).
    pub fn hear_line(&self) -> Option<String> {
        devipc_child::hear().map(|line| line.trim_end().to_owned())
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
/// it is not set (the normal test run), returns at once. A child still running after
/// [`CHILD_WATCHDOG`] exits (97).
pub fn run_child(role_fn: impl FnOnce(&str, &Parent) -> Result<(), String>) {
    run_child_within(CHILD_WATCHDOG, role_fn);
}

/// [`run_child`] with another watchdog: the child exits (97) after `watchdog`.
pub fn run_child_within(
    watchdog: Duration,
    role_fn: impl FnOnce(&str, &Parent) -> Result<(), String>,
) {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    devipc_child::start_watchdog(watchdog, "child watchdog: giving up".to_owned());
    let parent = Parent::default();
    let ok = devipc_child::run_role(&format!("child role {role} failed"), || {
        role_fn(&role, &parent)
    });
    std::process::exit(if ok { 0 } else { 1 });
}
