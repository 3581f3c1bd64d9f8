//! [`Command`]: how a child is started (program, role, environment, process group, how its
//! stderr and other messages are handled, the send deadline).

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::DEFAULT_SEND_TIMEOUT;
use crate::child::Child;
use crate::pipes::*;
#[cfg(doc)]
use crate::{ChildError, FOREVER, start_watchdog};

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
    pub(crate) name: String,
    pub(crate) cmd: std::process::Command,
    pub(crate) new_group: bool,
    pub(crate) stderr_keep: Option<usize>,
    pub(crate) others: OtherMessages,
    pub(crate) drop_grace: Duration,
    pub(crate) send_timeout: Duration,
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
            send_timeout: DEFAULT_SEND_TIMEOUT,
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

    /// Makes the child lead a new process group, which lives as long as the child: the
    /// group is SIGKILLed as a whole when the child is killed ([`Child::kill`], a timeout,
    /// drop) and also when it is seen to end by itself (a wait, [`Child::finish`], drop, or
    /// a read that finds it gone), so the processes it started die with it and release
    /// its stdout and stderr. (A descendant that leaves the group, e.g. with `setsid`,
    /// escapes.)
    ///
    /// Not the default: a child in its own group no longer gets the signals a terminal
    /// (Ctrl-C) or a test runner sends to this process's group; its watchdog
    /// ([`start_watchdog`]) ends it then.
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

    /// How long [`Child::send`] waits for the child to take a line (default
    /// [`DEFAULT_SEND_TIMEOUT`]; [`FOREVER`]: no deadline). A child that does not read its
    /// stdin takes only what the pipe holds (64 KiB on Linux).
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
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
        let stdin = proc.stdin.take().expect("piped stdin");
        // The parent's end only: `send` waits for room with poll(2) and a deadline.
        set_nonblocking(stdin.as_raw_fd())?;
        let ended = Arc::new(AtomicBool::new(false));
        let inbox = Arc::new(Inbox::default());
        let stdout = proc.stdout.take().expect("piped stdout");
        {
            let (inbox, ended) = (Arc::clone(&inbox), Arc::clone(&ended));
            std::thread::spawn(move || {
                let mut lines = Lines::default();
                pump(stdout, &ended, |bytes| {
                    lines.feed(bytes, &mut |item| inbox.push(item))
                });
                lines.finish(&mut |item| inbox.push(item));
                inbox.end();
            });
        }
        let stderr = self.stderr_keep.map(|keep| {
            let pipe = proc.stderr.take().expect("piped stderr");
            Stderr::collect(pipe, keep, Arc::clone(&ended))
        });
        Ok(Child {
            name: self.name,
            stdin: Some(stdin),
            proc,
            inbox,
            ended,
            stderr,
            leads_group: self.new_group,
            status: None,
            others: self.others,
            kept: VecDeque::new(),
            drop_grace: self.drop_grace,
            send_timeout: self.send_timeout,
        })
    }
}
