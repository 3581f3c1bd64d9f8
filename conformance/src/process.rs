//! Child processes: the runner re-executes itself in child roles and talks to them over
//! pipes, with a deadline on every wait.
//!
//! The runner starts one child per backend to probe it and one per rule to run the
//! scenario; a scenario starts peers (further children) for the other side of a
//! cross-process rule. All are the same binary (`std::env::current_exe`) started as
//! `devipc-conformance __role <role> ...`. Parent and child exchange lines
//! `@@ <key> <value>` on the child's stdin/stdout; other stdout lines (a vendor library
//! printing) are ignored, and the child's stderr is kept (its tail goes into a failure's
//! detail). A child that does not answer in time is killed (with its process group, so
//! its own peers die too) and reported as a failure, never as a pass.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// First argument of a child invocation: `devipc-conformance __role <role> ...`.
pub const ROLE_ARG: &str = "__role";
/// How much of a child's stderr a report keeps (the tail).
const STDERR_KEEP: usize = 4000;

/// A child process speaking the `@@` line protocol. Killed (with its process group when it
/// leads one) and reaped on drop.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: std::process::Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<(String, String)>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    leads_group: bool,
    status: Option<ExitStatus>,
}

/// Why waiting on a child ended without the expected message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcError {
    /// Nothing arrived in time; the child was killed.
    Timeout(Duration),
    /// The child closed its stdout (exited or crashed) first.
    Exited(String),
    /// The pipe to the child failed.
    Io(String),
}

impl Proc {
    /// Starts `current_exe __role <args...>` with `env` on top of this process's
    /// environment. `new_group` makes the child lead a new process group (the runner's rule
    /// children), so killing it also kills the peers it started.
    pub fn spawn(
        name: &str,
        args: &[&str],
        env: &[(String, OsString)],
        new_group: bool,
    ) -> Result<Proc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg(ROLE_ARG)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if new_group {
            cmd.process_group(0);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting child `{name}`: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(msg) = parse_message(&line)
                    && tx.send(msg).is_err()
                {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * STDERR_KEEP {
                    let cut = kept.len() - STDERR_KEEP;
                    kept.drain(..cut);
                }
            }
        });
        Ok(Proc {
            name: name.to_owned(),
            stdin: child.stdin.take(),
            child,
            messages: rx,
            stderr,
            stderr_thread: Some(stderr_thread),
            leads_group: new_group,
            status: None,
        })
    }

    /// The child's name (its role in messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) -> Result<(), ProcError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| ProcError::Io("stdin already closed".into()))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| ProcError::Io(format!("writing to child `{}`: {e}", self.name)))
    }

    /// The next `@@` message `(key, value)`, waiting at most `timeout`. On a timeout the
    /// child is killed.
    pub fn next(&mut self, timeout: Duration) -> Result<(String, String), ProcError> {
        match self.messages.recv_timeout(timeout) {
            Ok(msg) => Ok(msg),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(ProcError::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait_for_exit(Duration::from_secs(5));
                Err(ProcError::Exited(status))
            }
        }
    }

    /// Closes the child's stdin and waits for it to exit, at most `timeout` (then kills
    /// it). Returns a description of how it ended, `Ok` only for exit code 0.
    pub fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        self.stdin = None;
        let status = self.wait_for_exit(timeout);
        match self.status {
            Some(s) if s.success() => Ok(()),
            _ => Err(status),
        }
    }

    /// Waits up to `timeout` for the child to exit (killing it after), and describes the
    /// way it ended.
    fn wait_for_exit(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.status {
                return describe_status(status);
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    self.kill();
                    return format!("did not exit within {timeout:?} and was killed");
                }
                Err(e) => return format!("waiting for it failed: {e}"),
            }
        }
    }

    /// SIGKILLs the child (and its process group when it leads one) and reaps it.
    pub fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        if self.leads_group {
            // SAFETY: kill(2) with a negative pid signals the process group the child leads
            // (it was started with process_group(0)); no memory is involved.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.status = Some(status);
        }
    }

    /// The tail of what the child wrote to stderr so far (after it exited: all of it).
    pub fn stderr(&mut self) -> String {
        if self.status.is_some()
            && let Some(t) = self.stderr_thread.take()
        {
            let _ = t.join();
        }
        let kept = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        let start = kept.len().saturating_sub(STDERR_KEEP);
        String::from_utf8_lossy(&kept[start..]).trim().to_owned()
    }

    /// `what` plus the child's stderr tail, for a failure detail.
    pub fn explain(&mut self, what: &str) -> String {
        let stderr = self.stderr();
        if stderr.is_empty() {
            format!("{what} (no stderr)")
        } else {
            format!("{what}; stderr of `{}`:\n{stderr}", self.name)
        }
    }
}

impl Drop for Proc {
    /// Closes the child's stdin (a shell exits at the end of its input), gives it a moment
    /// to release what it holds, then kills it.
    fn drop(&mut self) {
        if self.status.is_none() {
            self.stdin = None;
            self.wait_for_exit(Duration::from_secs(2));
        }
    }
}

impl ProcError {
    /// A sentence for a failure detail, naming the child.
    pub fn describe(&self, child: &str, waiting_for: &str) -> String {
        match self {
            ProcError::Timeout(t) => format!(
                "child `{child}` did not answer ({waiting_for}) within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ProcError::Exited(how) => {
                format!("child `{child}` ended before answering ({waiting_for}): {how}")
            }
            ProcError::Io(e) => format!("child `{child}`: {e}"),
        }
    }
}

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

/// Splits `@@ key value` (possibly after other text on the line) into its parts.
fn parse_message(line: &str) -> Option<(String, String)> {
    let at = line.find("@@ ")?;
    let msg = &line[at + 3..];
    let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
    Some((k.to_owned(), unescape(v)))
}

/// Writes `@@ key value` to stdout (the child's side); `value` may hold newlines.
pub fn say(key: &str, value: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {key} {}", escape(value));
    let _ = out.flush();
}

/// Reads one line from stdin (the child's side); `None` at end of input.
pub fn hear() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
    }
}

/// Makes a value one line: `\` becomes `\\`, a newline `\n`.
pub fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Inverse of [`escape`].
pub fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Starts a thread that ends this process after `limit`: a child whose parent vanished
/// without killing it does not live on.
pub fn start_watchdog(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("devipc-conformance child watchdog: still running after {limit:?}, exiting");
        std::process::exit(97);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in ["plain", "two\nlines", "back\\slash\\n", "", "\\", "end\n"] {
            assert_eq!(unescape(&escape(s)), s);
            assert!(!escape(s).contains('\n'));
        }
    }

    #[test]
    fn messages_parse_after_noise() {
        assert_eq!(
            parse_message("test x ... @@ result pass fine"),
            Some(("result".into(), "pass fine".into()))
        );
        assert_eq!(
            parse_message("@@ ready"),
            Some(("ready".into(), String::new()))
        );
        assert_eq!(parse_message("no marker"), None);
    }
}
