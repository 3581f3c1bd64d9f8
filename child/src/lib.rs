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
//! protocol is in [`wire`]). A wait that runs out kills the child and says so; so does a
//! line sent to a child that does not read it ([`Command::send_timeout`]); a child that
//! says `@@ fail <reason>` fails [`Child::expect`]; the child's stderr is passed through or
//! kept (its tail) for error messages ([`Command::capture_stderr`]).
//!
//! The parent's memory and waits stay bounded whatever the child does: a line of its
//! stdout is held up to [`MAX_LINE`] bytes (a longer message is an error, longer noise is
//! dropped), messages read ahead are bounded in bytes, and once the child has ended no
//! read waits for the end of a pipe that a process it started still holds. A child that
//! leads its own process group ([`Command::new_process_group`]) takes the group with it
//! when it ends.
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
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{ChildStdin, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A timeout that never runs out: the wait blocks until the child answers or exits.
pub const FOREVER: Duration = Duration::MAX;

/// The longest line of the child's stdout the parent holds, in bytes (1 MiB). A longer
/// message is refused ([`ChildError::MessageTooLong`]); a longer line that is not a
/// message is dropped (only its first `MAX_LINE` bytes are ever held).
pub const MAX_LINE: usize = 1 << 20;

/// How long [`Child::send`] waits, by default, for the child to take a line it does not
/// read (see [`Command::send_timeout`]).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`Child::next`] waits for a child that closed its stdout to exit, to say how
/// it ended.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// At most this many bytes of messages wait, read but not yet received, before the
/// reader stops reading the child's stdout (the child then blocks writing it); one
/// message is always let through, however long.
const INBOX_BYTES: usize = 16 << 20;

/// How often a wait looks whether the child ended, and how long a reader of its pipes
/// waits for more output once it has.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// How long [`Child::stderr`] waits, after the child was reaped, for the rest of its
/// stderr; a descendant that still holds the pipe does not make it wait longer.
const STDERR_DRAIN: Duration = Duration::from_secs(2);

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
    send_timeout: Duration,
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

/// Sets `O_NONBLOCK` on `fd`.
fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl(2) on a descriptor this process owns (the parent's end of a pipe);
    // F_GETFL/F_SETFL touch only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout` (`None`: no limit) until `fd` has `events` (or is closed);
/// whether it has.
fn poll_fd(fd: RawFd, events: libc::c_short, timeout: Option<Duration>) -> std::io::Result<bool> {
    let ms = timeout.map_or(-1, |t| {
        libc::c_int::try_from(t.as_millis().max(u128::from(!t.is_zero())))
            .unwrap_or(libc::c_int::MAX)
    });
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd for an open descriptor, for the length of the call.
        match unsafe { libc::poll(&mut pfd, 1, ms) } {
            n if n > 0 => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Reads a pipe from the child until its end, handing each chunk to `sink` (which
/// returns `false` to stop). Also stops once the child has ended (`ended`, set by the
/// [`Child`] that saw it) and the pipe stays empty for a moment: everything the child
/// wrote has been read then, and a descendant that still holds the pipe open does not
/// keep the reader (and whoever waits for it) waiting.
fn pump(mut pipe: impl Read + AsRawFd, ended: &AtomicBool, mut sink: impl FnMut(&[u8]) -> bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let ended_before = ended.load(Ordering::Acquire);
        match poll_fd(pipe.as_raw_fd(), libc::POLLIN, Some(POLL_SLICE)) {
            Ok(true) => {}
            Ok(false) if ended_before => return,
            Ok(false) => continue,
            Err(_) => return,
        }
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if !sink(&buf[..n]) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What the stdout reader hands the parent.
#[derive(Debug)]
enum Item {
    Message(Message),
    /// A message line longer than [`MAX_LINE`], with its key (cut to 100 bytes).
    TooLong {
        key: String,
    },
}

impl Item {
    /// Bytes it holds, for the inbox's budget.
    fn size(&self) -> usize {
        match self {
            Item::Message((k, v)) => k.len() + v.len() + 16,
            Item::TooLong { key } => key.len() + 16,
        }
    }
}

/// Splits the child's stdout into lines, holding at most [`MAX_LINE`] bytes of one, and
/// turns message lines into [`Item`]s.
#[derive(Debug, Default)]
struct Lines {
    line: Vec<u8>,
    /// The current line is longer than `MAX_LINE` (only its start is held).
    overlong: bool,
}

impl Lines {
    /// Takes the next bytes; `emit` gets each item and returns `false` to stop (then so
    /// does `feed`).
    fn feed(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(Item) -> bool) -> bool {
        while !bytes.is_empty() {
            let (part, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = MAX_LINE - self.line.len();
            if part.len() > room {
                self.overlong = true;
            }
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            bytes = rest;
            if complete && !self.flush(emit) {
                return false;
            }
        }
        true
    }

    /// The end of the output: a last line without a line end counts too.
    fn finish(&mut self, emit: &mut impl FnMut(Item) -> bool) {
        if !self.line.is_empty() {
            self.flush(emit);
        }
    }

    fn flush(&mut self, emit: &mut impl FnMut(Item) -> bool) -> bool {
        let line = std::mem::take(&mut self.line);
        let overlong = std::mem::replace(&mut self.overlong, false);
        let mut line = &line[..];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        let item = if overlong {
            line.strip_prefix(b"@@ ").map(|msg| {
                let key = msg.split(|&b| b == b' ').next().unwrap_or_default();
                let key = &key[..key.len().min(100)];
                Item::TooLong {
                    key: String::from_utf8_lossy(key).into_owned(),
                }
            })
        } else {
            wire::parse_message(&String::from_utf8_lossy(line)).map(Item::Message)
        };
        item.is_none_or(emit)
    }
}

/// The messages read from the child's stdout and not yet received, bounded in bytes
/// ([`INBOX_BYTES`]).
#[derive(Debug, Default)]
struct Inbox {
    state: Mutex<InboxState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct InboxState {
    items: VecDeque<Item>,
    bytes: usize,
    /// The reader is done: no item comes after those queued.
    ended: bool,
    /// The [`Child`] is gone: nothing is received any more.
    closed: bool,
}

/// What [`Inbox::pop`] found.
enum Popped {
    Item(Item),
    Ended,
    Empty,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`, waiting while the budget is spent; `false` once the parent is gone.
    fn push(&self, item: Item) -> bool {
        let size = item.size();
        let mut s = self.lock();
        while !s.closed && !s.items.is_empty() && s.bytes + size > INBOX_BYTES {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.closed {
            return false;
        }
        s.bytes += size;
        s.items.push_back(item);
        self.changed.notify_all();
        true
    }

    /// The reader is done.
    fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// The parent is gone: drops what is queued and lets the reader stop.
    fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.items.clear();
        s.bytes = 0;
        self.changed.notify_all();
    }

    /// The next item, waiting at most `wait` for one.
    fn pop(&self, wait: Duration) -> Popped {
        let until = Instant::now().checked_add(wait);
        let mut s = self.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                s.bytes -= item.size();
                self.changed.notify_all();
                return Popped::Item(item);
            }
            if s.ended {
                return Popped::Ended;
            }
            let left = match until {
                Some(u) => u.saturating_duration_since(Instant::now()),
                None => POLL_SLICE,
            };
            if left.is_zero() {
                return Popped::Empty;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The tail of a child's stderr, collected by a thread.
#[derive(Debug)]
struct Stderr {
    keep: usize,
    kept: Arc<Mutex<Vec<u8>>>,
    /// `None` once joined, or left to end by itself (a descendant holds the pipe).
    thread: Option<JoinHandle<()>>,
}

impl Stderr {
    fn collect(
        pipe: impl Read + AsRawFd + Send + 'static,
        keep: usize,
        ended: Arc<AtomicBool>,
    ) -> Stderr {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let thread = std::thread::spawn(move || {
            pump(pipe, &ended, |bytes| {
                let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(bytes);
                if kept.len() > keep.saturating_mul(2) {
                    let cut = kept.len() - keep;
                    kept.drain(..cut);
                }
                true
            });
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
///
/// No call blocks without a deadline on something only a descendant of the child holds:
/// once the child has ended, reads of its stdout and [`Child::stderr`] stop soon even
/// when a process it started still holds the pipes open.
#[derive(Debug)]
pub struct Child {
    name: String,
    proc: std::process::Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    inbox: Arc<Inbox>,
    /// Set once the child is seen to have ended (exited, not yet or already reaped): the
    /// readers of its pipes stop when they run dry.
    ended: Arc<AtomicBool>,
    /// `None` when stderr is passed through.
    stderr: Option<Stderr>,
    leads_group: bool,
    /// Set once the child is reaped.
    status: Option<ExitStatus>,
    others: OtherMessages,
    /// Messages read while waiting for another key (with [`OtherMessages::Keep`]).
    kept: VecDeque<Message>,
    drop_grace: Duration,
    send_timeout: Duration,
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
    /// The child did not take a line sent to it within the send timeout (it does not read
    /// its stdin and the pipe is full); the child was killed.
    SendTimeout(Duration),
    /// The child wrote a message line longer than [`MAX_LINE`] (`limit`) bytes; it was
    /// skipped, the child left running.
    MessageTooLong {
        /// The message's key (its first 100 bytes).
        key: String,
        /// The longest line held, in bytes.
        limit: usize,
    },
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

    fn recv_until(
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
    fn observe_end(&mut self, block: bool) -> std::io::Result<bool> {
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
    fn on_end(&mut self) {
        if self.leads_group {
            self.signal_group();
        }
        self.ended.store(true, Ordering::Release);
    }

    /// Reaps a child that [`Child::observe_end`] saw end.
    fn reap_ended(&mut self) -> Result<ExitStatus, String> {
        let status = self
            .proc
            .wait()
            .map_err(|e| format!("waiting for it failed: {e}"))?;
        self.status = Some(status);
        Ok(status)
    }

    /// SIGKILLs the process group the child leads.
    fn signal_group(&self) {
        let pid = self.proc.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the process group the child leads
        // (it was started with process_group(0), and is not reaped yet, so the group id
        // is still its own); no memory is involved. ESRCH (nobody left) is fine.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }

    /// SIGKILLs the child (and its process group when it leads one).
    fn signal_kill(&mut self) {
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
            ChildError::SendTimeout(t) => format!(
                "child `{child}` did not read its input ({waiting_for}) within {:.1}s and \
                 was killed",
                t.as_secs_f64()
            ),
            ChildError::MessageTooLong { key, limit } => format!(
                "child `{child}` sent a message `{key}` longer than {limit} bytes \
                 ({waiting_for})"
            ),
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
            ChildError::SendTimeout(t) => write!(
                f,
                "the child did not read its input within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::MessageTooLong { key, limit } => {
                write!(
                    f,
                    "the child sent a message `{key}` longer than {limit} bytes"
                )
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and returns what came out, the largest line buffer seen included.
    fn split(chunks: &[&[u8]]) -> (Vec<String>, usize) {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        let mut held = 0;
        let mut emit = |item: Item| {
            out.push(match item {
                Item::Message((k, v)) => format!("{k}={v}"),
                Item::TooLong { key } => format!("too long: {key}"),
            });
            true
        };
        for chunk in chunks {
            assert!(lines.feed(chunk, &mut emit));
            held = held.max(lines.line.capacity());
        }
        lines.finish(&mut emit);
        (out, held)
    }

    #[test]
    fn lines_split_across_chunks_and_keep_only_messages() {
        let (out, _) = split(&[
            b"test x ... \n@@ a 1\r\n@@ b tw",
            b"o\\nlines\nnoise @@ fail x\n\n@@ c",
        ]);
        assert_eq!(out, ["a=1", "b=two\nlines", "c="]);
    }

    #[test]
    fn an_overlong_line_is_held_to_max_line() {
        let flood = vec![b'x'; 256 * 1024];
        let mut chunks: Vec<&[u8]> = vec![&flood; 12];
        chunks.push(b"\n@@ after 1\n");
        let (out, held) = split(&chunks);
        assert_eq!(out, ["after=1"]);
        assert!(held <= 2 * MAX_LINE, "held {held} bytes");

        let mut big = b"@@ big ".to_vec();
        big.resize(MAX_LINE + 1, b'y');
        big.extend_from_slice(b"\n@@ small ok\n");
        let (out, _) = split(&[&big]);
        assert_eq!(out, ["too long: big", "small=ok"]);
        // Exactly MAX_LINE bytes is still a message.
        big.truncate(MAX_LINE);
        big.push(b'\n');
        let (out, _) = split(&[&big]);
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with("big=yyy"), "{}", &out[0][..10]);
    }

    #[test]
    fn the_inbox_holds_back_the_reader_past_its_budget_until_closed() {
        let inbox = Arc::new(Inbox::default());
        let big = || Item::Message(("k".into(), "v".repeat(INBOX_BYTES / 2)));
        assert!(inbox.push(big()));
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = Arc::clone(&inbox);
        std::thread::spawn(move || {
            let _ = tx.send(reader.push(big()) && reader.push(big()));
        });
        // The second big item waits for room; receiving one makes it.
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert!(matches!(inbox.pop(Duration::ZERO), Popped::Item(_)));
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        inbox.close();
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(false));
    }
}
