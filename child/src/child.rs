//! [`Child`]: a running child, spoken to over its stdin and stdout, and how it ends (wait,
//! finish, kill, group kills, reaping).

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::process::{ChildStdin, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::command::OtherMessages;
use crate::error::{ChildError, describe_status};
use crate::pipes::*;
#[cfg(doc)]
use crate::{Command, hear};
use crate::{EXIT_GRACE, FOREVER, MAX_LINE, Message, POLL_SLICE, STDERR_DRAIN};

/// A child process speaking the `@@` line protocol. On drop it is killed (with its process
/// group when it leads one, after the grace of [`Command::grace_on_drop`]) and reaped.
///
/// No call blocks without a deadline on something only a descendant of the child holds:
/// once the child has ended, reads of its stdout and [`Child::stderr`] stop soon even
/// when a process it started still holds the pipes open.
#[derive(Debug)]
pub struct Child {
    pub(crate) name: String,
    pub(crate) proc: std::process::Child,
    /// `None` once closed.
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) inbox: Arc<Inbox>,
    /// Set once the child is seen to have ended (exited, not yet or already reaped): the
    /// readers of its pipes stop when they run dry.
    pub(crate) ended: Arc<AtomicBool>,
    /// `None` when stderr is passed through.
    pub(crate) stderr: Option<Stderr>,
    pub(crate) leads_group: bool,
    /// Set once the child is reaped.
    pub(crate) status: Option<ExitStatus>,
    pub(crate) others: OtherMessages,
    /// Messages read while waiting for another key (with [`OtherMessages::Keep`]).
    pub(crate) kept: VecDeque<Message>,
    pub(crate) drop_grace: Duration,
    pub(crate) send_timeout: Duration,
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

    /// Sends one line to the child's stdin, waiting at most the send timeout
    /// ([`Command::send_timeout`]) for the child to take it; when it does not, the child
    /// is killed and the error is [`ChildError::SendTimeout`].
    pub fn send(&mut self, line: &str) -> Result<(), ChildError> {
        self.send_within(line, self.send_timeout)
    }

    /// [`Child::send`] with its own deadline ([`FOREVER`]: none).
    pub fn send_within(&mut self, line: &str, timeout: Duration) -> Result<(), ChildError> {
        let stdin = self.stdin.as_mut().ok_or(ChildError::StdinClosed)?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let deadline = Instant::now().checked_add(timeout);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match stdin.write(rest) {
                Ok(0) => return Err(ChildError::Write("the pipe took nothing".to_owned())),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    let room = match left {
                        Some(left) if left.is_zero() => false,
                        _ => poll_fd(stdin.as_raw_fd(), libc::POLLOUT, left)
                            .map_err(|e| ChildError::Write(e.to_string()))?,
                    };
                    if !room {
                        self.kill();
                        return Err(ChildError::SendTimeout(timeout));
                    }
                }
                Err(e) => return Err(ChildError::Write(e.to_string())),
            }
        }
        Ok(())
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

    pub(crate) fn recv_until(
        &mut self,
        deadline: Option<Instant>,
        timeout: Duration,
    ) -> Result<Option<Message>, ChildError> {
        loop {
            let slice = deadline.map_or(POLL_SLICE, |d| {
                d.saturating_duration_since(Instant::now()).min(POLL_SLICE)
            });
            match self.inbox.pop(slice) {
                Popped::Item(Item::Message(msg)) => return Ok(Some(msg)),
                Popped::Item(Item::TooLong { key }) => {
                    return Err(ChildError::MessageTooLong {
                        key,
                        limit: MAX_LINE,
                    });
                }
                Popped::Ended => return Ok(None),
                Popped::Empty => {}
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.kill();
                return Err(ChildError::Timeout(timeout));
            }
            // A child that ended lets the reader stop once its stdout runs dry, even when
            // a descendant holds the pipe open.
            let _ = self.observe_end(false);
        }
    }

    /// As [`Child::recv`], with the child's end an error: [`ChildError::Exited`] says how
    /// it ended (after waiting a few seconds for it to exit, then killing it).
    pub fn next(&mut self, timeout: Duration) -> Result<Message, ChildError> {
        let got = self.recv(timeout)?;
        got.ok_or_else(|| self.exited())
    }

    pub(crate) fn exited(&mut self) -> ChildError {
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
    pub(crate) fn wait_for_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let deadline = Instant::now().checked_add(timeout);
        loop {
            match self.observe_end(deadline.is_none()) {
                Ok(true) => return self.reap_ended(),
                Ok(false) if deadline.is_some_and(|d| Instant::now() >= d) => {
                    self.kill();
                    return Err(format!("did not exit within {timeout:?} and was killed"));
                }
                Ok(false) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(format!("waiting for it failed: {e}")),
            }
        }
    }

    /// Whether the child has ended (it may still be a zombie: it is not reaped here).
    /// `block` waits until it does. On first seeing the end, kills what is left of the
    /// group it leads (its pid cannot have been reused yet: the zombie holds it) and
    /// tells the readers of its pipes.
    pub(crate) fn observe_end(&mut self, block: bool) -> std::io::Result<bool> {
        if self.status.is_some() {
            return Ok(true);
        }
        let pid = self.proc.id();
        let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
        // SAFETY: siginfo_t is plain data; all zeroes is a valid value (si_pid 0 means
        // "no child ended" after WNOHANG).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waitid(2) on our own child with a valid out-pointer; WNOWAIT leaves
            // it waitable, so std's `Child` still reaps it.
            if unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // SAFETY: waitid filled `info` (or left it zeroed); si_pid is valid for SIGCHLD
        // information.
        if unsafe { info.si_pid() } == 0 {
            return Ok(false);
        }
        self.on_end();
        Ok(true)
    }

    /// The child has ended (and is not reaped yet): its group goes with it.
    pub(crate) fn on_end(&mut self) {
        if self.leads_group {
            self.signal_group();
        }
        self.ended.store(true, Ordering::Release);
    }

    /// Reaps a child that [`Child::observe_end`] saw end.
    pub(crate) fn reap_ended(&mut self) -> Result<ExitStatus, String> {
        let status = self
            .proc
            .wait()
            .map_err(|e| format!("waiting for it failed: {e}"))?;
        self.status = Some(status);
        Ok(status)
    }

    /// SIGKILLs the process group the child leads.
    pub(crate) fn signal_group(&self) {
        let pid = self.proc.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the process group the child leads
        // (it was started with process_group(0), and is not reaped yet, so the group id
        // is still its own); no memory is involved. ESRCH (nobody left) is fine.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }

    /// SIGKILLs the child (and its process group when it leads one).
    pub(crate) fn signal_kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        if self.leads_group {
            self.signal_group();
        }
        let _ = self.proc.kill();
    }

    /// SIGKILLs the child (and its process group when it leads one) and reaps it. When it
    /// was reaped already, its group was killed then.
    pub fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.signal_kill();
        let _ = self.wait_for_exit(FOREVER);
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
    ///
    /// Never waits long: after the child was reaped it waits at most a few seconds for
    /// the rest of stderr, and a process the child started that still holds the pipe is
    /// left behind (what it writes later is kept, but not waited for).
    pub fn stderr(&mut self) -> String {
        let reaped = self.status.is_some();
        let Some(stderr) = &mut self.stderr else {
            return String::new();
        };
        if reaped && let Some(t) = stderr.thread.take() {
            let until = Instant::now() + STDERR_DRAIN;
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
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
        self.inbox.close();
    }
}
