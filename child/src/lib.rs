//! devipc's child-process harness: this program re-run as a child in a named role, spoken
//! to over its stdin/stdout, with a deadline on every wait.
//!
//! devipc's behaviour across processes is checked with real processes, and every place
//! that needs a second process starts it the same way: the integration tests (through
//! `devipc-testkit`), the conformance runner and its peers, the doctor's two-process
//! check (`devipc doctor`) and the benchmark's peers. The parent builds a [`Command`]
//! (the role goes in arguments or the environment, as the program dispatches), spawns a
//! [`Child`] and exchanges lines with it: the child sends messages `@@ <key> <value>`
//! ([`say`]), the parent sends plain lines that the child reads with [`hear`] (the
//! protocol is in [`wire`]). A wait that runs out kills the child and says so; a child
//! that says `@@ fail <reason>` fails [`Child::expect`]; the child's stderr is passed
//! through or kept (its tail) for error messages ([`Command::capture_stderr`]).
//!
//! Parent side:
//! ```no_run
//! # use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut child = devipc_child::Command::new("importer")?
//!     .arg("__role")
//!     .arg("importer")
//!     .capture_stderr(4000)
//!     .spawn()?;
//! let pid = child.expect("pid", Duration::from_secs(10))?;
//! child.send("token devipc2:...")?;
//! child.finish(Duration::from_secs(10))?;
//! # Ok(()) }
//! ```
//! Child side:
//! ```no_run
//! # use std::time::Duration;
//! devipc_child::start_watchdog(Duration::from_secs(60), "importer: giving up".into());
//! let ok = devipc_child::run_role("importer", || -> Result<(), String> {
//!     devipc_child::say("pid", &std::process::id().to_string());
//!     let token = devipc_child::hear().ok_or("no token")?;
//!     Ok(())
//! });
//! std::process::exit(if ok { 0 } else { 1 });
//! ```

pub mod wire;

pub use wire::{WATCHDOG_EXIT, hear, run_role, say, start_watchdog};

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A timeout that never runs out: the wait blocks until the child answers or exits.
pub const FOREVER: Duration = Duration::MAX;

/// How long [`Child::next`] waits for a child that closed its stdout to exit, to say how
/// it ended.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// One message `@@ <key> <value>`, as `(key, value)`.
pub type Message = (String, String);

/// What [`Child::expect`] does with the messages it reads while waiting for another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtherMessages {
    /// Drops them.
    #[default]
    Drop,
    /// Keeps them for a later `expect` (and [`Child::has_kept`]): for children that
    /// answer some requests out of order.
    Keep,
    /// Fails with [`ChildError::Unexpected`]: for a strict conversation.
    Refuse,
}

/// How to start a [`Child`]: [`Command::new`] (or [`Command::program`]), options, then
/// [`Command::spawn`]. The child's stdin and stdout are always pipes.
#[derive(Debug)]
#[must_use = "a command does nothing until spawned"]
pub struct Command {
    name: String,
    cmd: std::process::Command,
    new_group: bool,
    stderr_keep: Option<usize>,
    others: OtherMessages,
    drop_grace: Duration,
}

impl Command {
    /// This program (`std::env::current_exe`) as the child `name` (for messages; the
    /// role itself goes in [`Command::arg`] or [`Command::env`]). Fails when this
    /// program cannot be found.
    pub fn new(name: &str) -> std::io::Result<Command> {
        Ok(Command::program(name, std::env::current_exe()?))
    }

    /// `program` as the child `name` (e.g. a copy of this program that another user can
    /// execute).
    pub fn program(name: &str, program: impl AsRef<OsStr>) -> Command {
        Command {
            name: name.to_owned(),
            cmd: std::process::Command::new(program),
            new_group: false,
            stderr_keep: None,
            others: OtherMessages::Drop,
            drop_grace: Duration::ZERO,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.cmd.args(args);
        self
    }

    /// Sets a variable for the child, on top of this process's environment (changes to
    /// the environment apply in the order they are made: the last one wins).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Sets several variables, as [`Command::env`] does.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.cmd.envs(vars);
        self
    }

    /// Does not pass this process's variable `key` on.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    /// Does not pass on any of this process's variables whose names start with `prefix`.
    pub fn env_remove_prefix(mut self, prefix: &str) -> Self {
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with(prefix) {
                self.cmd.env_remove(&key);
            }
        }
        self
    }

    /// Runs the child in directory `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Runs the child as user `uid`, group `gid` (needs root; std drops the supplementary
    /// groups).
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.cmd.uid(uid).gid(gid);
        self
    }

    /// Makes the child lead a new process group, which [`Child::kill`] (and every kill
    /// after a timeout) kills as a whole: the peers the child started die with it.
    pub fn new_process_group(mut self) -> Self {
        self.new_group = true;
        self
    }

    /// Keeps (up to the last `keep` bytes of) what the child writes to stderr, for
    /// [`Child::stderr`] and [`Child::explain`], instead of passing it through to this
    /// process's stderr. `usize::MAX` keeps all of it.
    pub fn capture_stderr(mut self, keep: usize) -> Self {
        self.stderr_keep = Some(keep);
        self
    }

    /// What [`Child::expect`] does with other messages (by default drops them).
    pub fn other_messages(mut self, others: OtherMessages) -> Self {
        self.others = others;
        self
    }

    /// On drop, closes the child's stdin and gives it `grace` to exit (a child serving
    /// lines exits at the end of its input, releasing what it holds) before killing it.
    /// By default it is killed at once.
    pub fn grace_on_drop(mut self, grace: Duration) -> Self {
        self.drop_grace = grace;
        self
    }

    /// Starts the child.
    pub fn spawn(mut self) -> std::io::Result<Child> {
        self.cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match self.stderr_keep {
                Some(_) => Stdio::piped(),
                None => Stdio::inherit(),
            });
        if self.new_group {
            self.cmd.process_group(0);
        }
        let mut proc = self.cmd.spawn()?;
        let stdout = proc.stdout.take().expect("piped stdout");
        let (tx, messages) = channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match out.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&line);
                if let Some(msg) = wire::parse_message(text.trim_end_matches(['\n', '\r']))
                    && tx.send(msg).is_err()
                {
                    break;
                }
            }
        });
        let stderr = self.stderr_keep.map(|keep| {
            let pipe = proc.stderr.take().expect("piped stderr");
            Stderr::collect(pipe, keep)
        });
        Ok(Child {
            name: self.name,
            stdin: proc.stdin.take(),
            proc,
            messages,
            stderr,
            leads_group: self.new_group,
            status: None,
            others: self.others,
            kept: VecDeque::new(),
            drop_grace: self.drop_grace,
        })
    }
}

/// The tail of a child's stderr, collected by a thread.
#[derive(Debug)]
struct Stderr {
    keep: usize,
    kept: Arc<Mutex<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

impl Stderr {
    fn collect(mut pipe: impl Read + Send + 'static, keep: usize) -> Stderr {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > keep.saturating_mul(2) {
                    let cut = kept.len() - keep;
                    kept.drain(..cut);
                }
            }
        });
        Stderr {
            keep,
            kept,
            thread: Some(thread),
        }
    }
}

/// A child process speaking the `@@` line protocol. On drop it is killed (with its process
/// group when it leads one, after the grace of [`Command::grace_on_drop`]) and reaped.
#[derive(Debug)]
pub struct Child {
    name: String,
    proc: std::process::Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    messages: Receiver<Message>,
    /// `None` when stderr is passed through.
    stderr: Option<Stderr>,
    leads_group: bool,
    /// Set once the child is reaped.
    status: Option<ExitStatus>,
    others: OtherMessages,
    /// Messages read while waiting for another key (with [`OtherMessages::Keep`]).
    kept: VecDeque<Message>,
    drop_grace: Duration,
}

/// Why talking to a child failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildError {
    /// Nothing arrived in time; the child was killed.
    Timeout(Duration),
    /// The child closed its stdout (exited or crashed) first; how it ended.
    Exited(String),
    /// The child said `@@ fail <reason>` ([`Child::expect`] only).
    Failed(String),
    /// The child said another message (with [`OtherMessages::Refuse`]).
    Unexpected {
        /// The message's key.
        key: String,
        /// The message's value.
        value: String,
    },
    /// The child's stdin was already closed.
    StdinClosed,
    /// Writing to the child's stdin failed (the OS error).
    Write(String),
}

impl Child {
    /// The child's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Sends one line to the child's stdin.
    pub fn send(&mut self, line: &str) -> Result<(), ChildError> {
        let stdin = self.stdin.as_mut().ok_or(ChildError::StdinClosed)?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| ChildError::Write(e.to_string()))
    }

    /// Closes the child's stdin: a child reading it sees the end ([`hear`] gives `None`).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next message, waiting at most `timeout` ([`FOREVER`]: no deadline); `None` when
    /// the child closed its stdout. Nothing is interpreted: a `fail` message is returned
    /// like any other, and kept messages are not looked at. On a timeout the child is
    /// killed.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Message>, ChildError> {
        self.recv_until(Instant::now().checked_add(timeout), timeout)
    }

    fn recv_until(
        &mut self,
        deadline: Option<Instant>,
        timeout: Duration,
    ) -> Result<Option<Message>, ChildError> {
        let got = match deadline {
            None => self
                .messages
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => self
                .messages
                .recv_timeout(d.saturating_duration_since(Instant::now())),
        };
        match got {
            Ok(msg) => Ok(Some(msg)),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(ChildError::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => Ok(None),
        }
    }

    /// As [`Child::recv`], with the child's end an error: [`ChildError::Exited`] says how
    /// it ended (after waiting a few seconds for it to exit, then killing it).
    pub fn next(&mut self, timeout: Duration) -> Result<Message, ChildError> {
        let got = self.recv(timeout)?;
        got.ok_or_else(|| self.exited())
    }

    fn exited(&mut self) -> ChildError {
        ChildError::Exited(match self.wait_for_exit(EXIT_GRACE) {
            Ok(status) => describe_status(status),
            Err(how) => how,
        })
    }

    /// Reads messages until one with `key` and returns its value, waiting at most
    /// `timeout` in all. A child saying `@@ fail <reason>`, exiting first or saying
    /// nothing in time is an error; other messages are handled as
    /// [`Command::other_messages`] says.
    pub fn expect(&mut self, key: &str, timeout: Duration) -> Result<String, ChildError> {
        self.expect_one_of(&[key], timeout).map(|(_, v)| v)
    }

    /// As [`Child::expect`], for the first message with any of `keys` (a kept one first).
    pub fn expect_one_of(
        &mut self,
        keys: &[&str],
        timeout: Duration,
    ) -> Result<Message, ChildError> {
        if let Some(i) = self.kept.iter().position(|(k, _)| keys.contains(&&**k)) {
            return Ok(self.kept.remove(i).expect("a kept message"));
        }
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let Some((k, v)) = self.recv_until(deadline, timeout)? else {
                return Err(self.exited());
            };
            if k == "fail" {
                return Err(ChildError::Failed(v));
            }
            if keys.contains(&&*k) {
                return Ok((k, v));
            }
            match self.others {
                OtherMessages::Drop => {}
                OtherMessages::Keep => self.kept.push_back((k, v)),
                OtherMessages::Refuse => return Err(ChildError::Unexpected { key: k, value: v }),
            }
        }
    }

    /// Whether a message with `key` was read already and kept (see
    /// [`OtherMessages::Keep`]); reads nothing.
    pub fn has_kept(&self, key: &str) -> bool {
        self.kept.iter().any(|(k, _)| k == key)
    }

    /// Closes the child's stdin and waits at most `timeout` ([`FOREVER`]: no deadline)
    /// for it to exit; then kills it. The error says what went wrong.
    pub fn wait(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        self.close_stdin();
        self.wait_for_exit(timeout)
    }

    /// [`Child::wait`], `Ok` only for exit status 0; the error says how it ended (e.g.
    /// `exited with code 1`, `killed by signal 6 (SIGABRT)`).
    pub fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        match self.wait(timeout) {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(describe_status(status)),
            Err(how) => Err(how),
        }
    }

    /// Waits up to `timeout` for the child to exit (killing it after) and reaps it.
    fn wait_for_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            let status = self
                .proc
                .wait()
                .map_err(|e| format!("waiting for it failed: {e}"))?;
            self.status = Some(status);
            return Ok(status);
        };
        loop {
            match self.proc.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    return Ok(status);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    self.kill();
                    return Err(format!("did not exit within {timeout:?} and was killed"));
                }
                Err(e) => return Err(format!("waiting for it failed: {e}")),
            }
        }
    }

    /// SIGKILLs the child (and its process group when it leads one).
    fn signal_kill(&mut self) {
        if self.leads_group {
            let pid = self.proc.id() as libc::pid_t;
            // SAFETY: kill(2) with a negative pid signals the process group the child
            // leads (it was started with process_group(0)); no memory is involved.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.proc.kill();
    }

    /// SIGKILLs the child (and its process group when it leads one) and reaps it.
    pub fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.signal_kill();
        if let Ok(status) = self.proc.wait() {
            self.status = Some(status);
        }
    }

    /// SIGKILLs the child and waits (up to `timeout`) until the kernel has killed it, but
    /// does not reap it: the child stays a zombie, its pid taken, until [`Child::reap`]
    /// (or drop). For tests of what happens while a dead process's pid still exists.
    pub fn kill_no_reap(&mut self, timeout: Duration) -> Result<(), String> {
        if self.status.is_some() {
            return Ok(());
        }
        self.signal_kill();
        let pid = self.proc.id() as i32;
        let deadline = Instant::now().checked_add(timeout);
        loop {
            // Dead as devipc's liveness checks see it: a killed leader shows `Z` while its
            // other threads are still exiting, and counts as alive until they are gone.
            match devipc_shm::process::read_stat(pid) {
                Ok(Some(s)) if !s.is_dead() => {}
                Ok(_) => return Ok(()),
                Err(e) => return Err(format!("reading /proc/{pid}/stat: {e}")),
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(format!("child {pid} did not die"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reaps a child that ended (after [`Child::kill_no_reap`]); waits for it otherwise.
    pub fn reap(&mut self) {
        let _ = self.wait_for_exit(FOREVER);
    }

    /// How the child ended, once it was reaped.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// The tail of what the child wrote to stderr so far (after it was reaped: all it
    /// wrote, up to the kept length); empty when stderr is not captured.
    pub fn stderr(&mut self) -> String {
        let reaped = self.status.is_some();
        let Some(stderr) = &mut self.stderr else {
            return String::new();
        };
        if reaped && let Some(t) = stderr.thread.take() {
            let _ = t.join();
        }
        let kept = stderr.kept.lock().unwrap_or_else(|p| p.into_inner());
        let start = kept.len().saturating_sub(stderr.keep);
        String::from_utf8_lossy(&kept[start..]).into_owned()
    }

    /// `what` plus the child's stderr tail, for an error message.
    pub fn explain(&mut self, what: &str) -> String {
        let stderr = self.stderr();
        let stderr = stderr.trim();
        if stderr.is_empty() {
            format!("{what} (no stderr)")
        } else {
            format!("{what}; stderr of `{}`:\n{stderr}", self.name)
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.close_stdin();
            let _ = self.wait_for_exit(self.drop_grace);
        }
    }
}

impl ChildError {
    /// A sentence for an error message, naming the child and what was waited for.
    pub fn describe(&self, child: &str, waiting_for: &str) -> String {
        match self {
            ChildError::Timeout(t) => format!(
                "child `{child}` did not answer ({waiting_for}) within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::Exited(how) => {
                format!("child `{child}` ended before answering ({waiting_for}): {how}")
            }
            ChildError::Failed(why) => format!("child `{child}` failed ({waiting_for}): {why}"),
            ChildError::Unexpected { key, value } => {
                format!("child `{child}` said `{key} {value}` instead of {waiting_for}")
            }
            ChildError::StdinClosed => format!("child `{child}`: stdin already closed"),
            ChildError::Write(e) => format!("child `{child}`: writing to child `{child}`: {e}"),
        }
    }
}

impl std::fmt::Display for ChildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildError::Timeout(t) => write!(
                f,
                "the child did not answer within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::Exited(how) => write!(f, "the child ended before answering: {how}"),
            ChildError::Failed(why) => write!(f, "the child failed: {why}"),
            ChildError::Unexpected { key, value } => {
                write!(f, "unexpected `{key} {value}` from the child")
            }
            ChildError::StdinClosed => write!(f, "the child's stdin is closed"),
            ChildError::Write(e) => write!(f, "writing to the child: {e}"),
        }
    }
}

impl std::error::Error for ChildError {}

/// How a process ended, e.g. `exited with code 1` or `killed by signal 6 (SIGABRT)`.
pub fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    match status.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGILL => " (SIGILL)",
                _ => "",
            };
            format!("killed by signal {sig}{name}")
        }
        None => format!("ended with {status}"),
    }
}
