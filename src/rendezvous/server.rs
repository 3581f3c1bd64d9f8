//! The exporter's side of the rendezvous: making a [`ShareServer`], and the accept loop
//! that serves every connected importer at once, each against its own deadline. The
//! socket file itself (where it goes, binding it, removing it) is `socket_path`'s.
//!
//! A connection is a small state machine (read the hello, then send the tokens) driven by
//! one `poll` over the listener and every open connection, all non-blocking: a silent or
//! trickling peer costs a slot and a file descriptor until its deadline, never another
//! peer's time. The thread that is in [`ShareServer::accept`] drives the loop; other
//! threads in `accept` meanwhile wait for it to hand them an outcome (or the turn to
//! drive). The connections in progress live in the server between calls, so an exchange
//! that straddles two calls continues where it was.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use devipc_core::{
    DeviceId, DeviceIpc, DevicePtr, Error, MemToken, PidValidation, ProcessId, Result, SignalToken,
};
use devipc_shm::os;

use super::line_io::{LineBuffer, LineError};
use super::options::ShareOptions;
use super::peer::{PeerCredentials, PeerInfo, check_claim, denied, uid_allowed};
use super::socket_path;
use super::wire::{ErrCode, Hello, MAX_SIGNALS, encode_offer, encode_refusal};
use crate::buffer::SharedBuffer;
use crate::runtime::Runtime;
use crate::signal::Signal;

/// Most connections the exporter keeps open at once while their exchanges are in
/// progress. One more closes the oldest (with an `ERR failed` reply): a crowd of idle
/// peers can only push each other out, while an importer, which sends its hello as soon
/// as it connects, is done within moments of being accepted.
pub(super) const MAX_PENDING: usize = 64;
/// Most connections taken from the kernel's queue in one round of the loop, so that one
/// round's outcomes stay bounded and the connections already open get their turn.
const ACCEPT_BATCH: usize = 64;

/// A socket at which a [`SharedBuffer`] or framework memory (and signals) are handed to
/// importers; made by [`SharedBuffer::share`] or [`Runtime::share_external`].
///
/// Holds the buffer, so its memory stays allocated while the server lives (framework
/// memory is the framework's to keep). Signals are
/// exported when added but not held: keep them alive while importers may connect (an
/// importer of a destroyed signal gets a typed error, never a dangling handle).
/// Dropping the server removes the socket file (if it is still ours) and closes the
/// connections still in progress. Importers that already imported keep their mappings.
#[derive(Debug)]
pub struct ShareServer {
    listener: UnixListener,
    path: PathBuf,
    /// `(st_dev, st_ino)` of the socket file we created: Drop removes only that one.
    socket_id: (u64, u64),
    /// What the token names, kept alive for a buffer.
    source: Source,
    token: MemToken,
    /// The vendor object's descriptor, sent with each offer (`SCM_RIGHTS`) when the
    /// token's mechanism [carries one](devipc_core::Mechanism::carries_fd).
    fd: Option<OwnedFd>,
    signals: Vec<(Runtime, SignalToken)>,
    opts: ShareOptions,
    /// The connections in progress and the outcomes no caller has taken yet.
    pending: Mutex<Pending>,
    /// Signalled when the driving thread hands back the loop (with outcomes, or for
    /// another thread to drive).
    turn: Condvar,
}

/// What the accept loop carries between calls.
#[derive(Debug, Default)]
struct Pending {
    /// Open connections, oldest first. Empty while a thread drives: it holds them.
    conns: Vec<Conn>,
    /// Finished exchanges, in the order they finished; each `accept` returns one.
    outcomes: VecDeque<Result<PeerInfo>>,
    /// Whether a thread is in the loop.
    driving: bool,
}

/// One connected peer and how far its exchange got.
#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    credentials: PeerCredentials,
    /// Accepted plus [`ShareOptions::io_timeout`]: the whole exchange must end by then.
    deadline: Instant,
    state: ConnState,
}

#[derive(Debug)]
enum ConnState {
    /// Reading the importer's hello.
    Hello(LineBuffer),
    /// Sending the tokens to an importer already granted.
    Offer {
        bytes: Vec<u8>,
        sent: usize,
        peer: PeerInfo,
    },
}

impl Conn {
    fn who(&self) -> String {
        who(&self.credentials)
    }
}

/// How errors name a peer.
fn who(c: &PeerCredentials) -> String {
    format!("importer pid {} uid {}", c.pid, c.uid)
}

/// Where an exchange stands after some progress.
enum Step {
    /// Waiting for the peer.
    Wait,
    /// Finished: its outcome, or `None` for a liveness probe (not an importer).
    Done(Option<Result<PeerInfo>>),
}

/// Why a hello was not granted: the `ERR` reply (when there is one) and our error.
struct Refusal {
    reply: Option<(ErrCode, String)>,
    error: Error,
}

/// The loop while one thread drives it: holds the connections, and hands them and the
/// outcomes back to the server when dropped (also if the driving thread unwinds).
struct Turn<'a> {
    server: &'a ShareServer,
    conns: Vec<Conn>,
    outcomes: Vec<Result<PeerInfo>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut pending = self.server.lock();
        pending.conns = std::mem::take(&mut self.conns);
        pending.outcomes.extend(self.outcomes.drain(..));
        pending.driving = false;
        self.server.turn.notify_all();
    }
}

// ---------------------------------------------------------------------------------------
// Making a server.

/// What a [`ShareServer`] hands out.
#[derive(Debug)]
enum Source {
    /// A buffer of this process, held so that it stays allocated.
    Buffer(SharedBuffer),
    /// Framework memory exported with [`Runtime::share_external`]: its lifetime is the
    /// framework's; the runtime that exported it grants.
    External(Runtime),
}

impl SharedBuffer {
    /// Serves the whole buffer at the Unix socket `path`: exports it with `opts`'s export
    /// options and binds the socket. Importers then need [`ShareServer::accept`].
    ///
    /// The socket appears at `path` already with its final mode (it is bound under a
    /// temporary name in the same directory and linked). A stale socket at `path` (no
    /// one listening) is replaced; a live one gives [`Error::Io`] of kind `AddrInUse`, and
    /// any other file gives [`Error::Io`] of kind `AlreadyExists`: devipc never removes
    /// what it did not create.
    ///
    /// A path longer than a socket address holds (107 bytes) is served and reached
    /// through its directory (see the [module docs](crate::rendezvous)); a path no client
    /// could reach (its file name alone longer than 82 bytes) gives
    /// [`Error::InvalidArgument`].
    pub fn share(&self, path: impl AsRef<Path>, opts: ShareOptions) -> Result<ShareServer> {
        self.share_range(0..self.len(), path, opts)
    }

    /// As [`SharedBuffer::share`], for `range` of the buffer only.
    pub fn share_range(
        &self,
        range: Range<usize>,
        path: impl AsRef<Path>,
        opts: ShareOptions,
    ) -> Result<ShareServer> {
        ShareServer::serve(Source::Buffer(self.clone()), path.as_ref(), opts, |opts| {
            self.export_range(range, opts.export)
        })
    }
}

impl Runtime {
    /// Serves framework memory (`len` bytes at `ptr` on `device`, allocated by the
    /// framework, not by devipc) at the Unix socket `path`: exports it as
    /// [`Runtime::export_external`] does (HIP picks the mechanism the memory needs:
    /// `hip-ipc-mem` for `hipMalloc` memory, `hip-vmm-fd` for virtual memory, whose file
    /// descriptor then goes with each offer), and binds the socket as
    /// [`SharedBuffer::share`] does.
    ///
    /// The memory's lifetime is the framework's: keep it allocated while importers may
    /// connect and map it, and end the export with [`Runtime::close_external`] once they
    /// closed (and the server is dropped).
    pub fn share_external(
        &self,
        device: impl Into<DeviceId>,
        ptr: DevicePtr,
        len: usize,
        path: impl AsRef<Path>,
        opts: ShareOptions,
    ) -> Result<ShareServer> {
        let device = device.into();
        ShareServer::serve(
            Source::External(self.clone()),
            path.as_ref(),
            opts,
            |opts| self.export_external(device, ptr, len, opts.export),
        )
    }
}

impl ShareServer {
    /// Checks `opts` and `path`, exports with `export`, takes the object's descriptor
    /// when the token carries one, and binds the socket.
    fn serve(
        source: Source,
        path: &Path,
        opts: ShareOptions,
        export: impl FnOnce(&ShareOptions) -> Result<MemToken>,
    ) -> Result<ShareServer> {
        if opts.io_timeout.is_zero() {
            return Err(Error::invalid_argument(
                "ShareOptions::io_timeout must not be zero",
            ));
        }
        if opts.socket_mode & !0o777 != 0 {
            return Err(Error::invalid_argument(format!(
                "socket mode {:#o} has bits outside 0o777",
                opts.socket_mode
            )));
        }
        // Before exporting: a path no importer could reach is the caller's mistake.
        let path = socket_path::resolve(path)?;
        let token = export(&opts)?;
        let rt = match &source {
            Source::Buffer(b) => b.runtime(),
            Source::External(rt) => rt,
        };
        let fd = if token.mechanism().carries_fd() {
            Some(rt.backend().export_fd(&token)?)
        } else {
            None
        };
        let (listener, socket_id) = socket_path::bind_socket(&path, opts.socket_mode)?;
        Ok(ShareServer {
            listener,
            path,
            socket_id,
            source,
            token,
            fd,
            signals: Vec::new(),
            opts,
            pending: Mutex::default(),
            turn: Condvar::new(),
        })
    }
}

impl ShareServer {
    /// Adds `signal` to what importers receive (after the ones added before).
    pub fn with_signal(mut self, signal: &Signal) -> Result<Self> {
        self.add_signal(signal)?;
        Ok(self)
    }

    /// Adds `signal` to what importers receive: exports it now, grants each importer.
    /// At most [`MAX_SIGNALS`]; the signal must come from a runtime of the buffer's
    /// backend kind.
    pub fn add_signal(&mut self, signal: &Signal) -> Result<()> {
        if self.signals.len() >= MAX_SIGNALS {
            return Err(Error::invalid_argument(format!(
                "a rendezvous hands out at most {MAX_SIGNALS} signals"
            )));
        }
        let rt = signal.runtime();
        let (ours, theirs) = (self.runtime().info().kind, rt.info().kind);
        if ours != theirs {
            return Err(Error::BackendMismatch {
                expected: format!(
                    "{} signal (the shared buffer is {ours} memory)",
                    ours.with_article()
                ),
                found: format!("{} signal", theirs.with_article()),
            });
        }
        let token = signal.export(self.opts.export)?;
        self.signals.push((rt.clone(), token));
        Ok(())
    }

    /// The socket's path (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The token importers receive for the buffer.
    pub fn token(&self) -> &MemToken {
        &self.token
    }

    /// The tokens importers receive for the signals, in order.
    pub fn signal_tokens(&self) -> impl ExactSizeIterator<Item = &SignalToken> {
        self.signals.iter().map(|(_, t)| t)
    }

    /// Waits (without a limit) for the next importer to be served: checks its
    /// credentials, grants its process id, replies with the tokens.
    ///
    /// While it waits, it serves every connected peer at once, each within
    /// [`ShareOptions::io_timeout`] of being accepted, so a silent, trickling or
    /// non-reading peer delays nobody else; at most 64 connections are kept open, and
    /// one more closes the oldest (see the [module docs](crate::rendezvous)). Returns the
    /// first exchange that ends: a refused or misbehaving peer gives an error here (after
    /// an `ERR` reply when it is still listening); the server stays usable, so call
    /// `accept` again for the next one. A connection of an accepted uid closed without a
    /// byte (a liveness probe, such as another exporter's check that the path is in use)
    /// is skipped, not served. Returns once the tokens are sent: whether the importer then
    /// imports them is its business. Exchanges still in progress continue at the next
    /// call. Several threads may call it at once, each getting its own outcome.
    pub fn accept(&self) -> Result<PeerInfo> {
        self.accept_within(None)
    }

    /// As [`ShareServer::accept`], but gives [`Error::Timeout`] when no exchange ends
    /// within `timeout` (an exchange still in progress then continues at the next call).
    pub fn accept_timeout(&self, timeout: Duration) -> Result<PeerInfo> {
        self.accept_within(Some(timeout))
    }

    fn runtime(&self) -> &Runtime {
        match &self.source {
            Source::Buffer(b) => b.runtime(),
            Source::External(rt) => rt,
        }
    }

    fn context(&self) -> String {
        format!("devipc rendezvous at {}", self.path.display())
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Nothing under this lock can be left half-updated by a panic (the driving
        // thread's connections are restored by `Turn`'s Drop), so a poisoned lock is fine.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn accept_within(&self, timeout: Option<Duration>) -> Result<PeerInfo> {
        // A child forked while the server lived: the socket, its importers and what it
        // grants are the parent's.
        self.runtime().inner.backend()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let (mut turn, left) = {
                let mut pending = self.lock();
                let left = loop {
                    if let Some(outcome) = pending.outcomes.pop_front() {
                        return outcome;
                    }
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if left.is_some_and(|l| l.is_zero()) {
                        return Err(Error::Timeout {
                            what: format!(
                                "{}: waiting for an importer (none finished its exchange)",
                                self.context()
                            ),
                            after: timeout.unwrap_or_default(),
                        });
                    }
                    if !pending.driving {
                        break left;
                    }
                    // Another thread drives: it hands back outcomes, or the loop.
                    pending = match left {
                        None => self
                            .turn
                            .wait(pending)
                            .unwrap_or_else(PoisonError::into_inner),
                        Some(left) => match self.turn.wait_timeout(pending, left) {
                            Ok((guard, _)) => guard,
                            Err(poisoned) => poisoned.into_inner().0,
                        },
                    };
                };
                pending.driving = true;
                let conns = std::mem::take(&mut pending.conns);
                (
                    Turn {
                        server: self,
                        conns,
                        outcomes: Vec::new(),
                    },
                    left,
                )
            };
            let result = self.round(&mut turn, left);
            drop(turn);
            result?;
        }
    }

    /// One round of the loop: waits (at most `left`, and not past the earliest
    /// connection's deadline) until the listener or a connection is ready, advances every
    /// ready connection, ends the overdue ones, and accepts what is queued.
    fn round(&self, turn: &mut Turn<'_>, left: Option<Duration>) -> Result<()> {
        let now = Instant::now();
        let earliest = turn
            .conns
            .iter()
            .map(|c| c.deadline.saturating_duration_since(now))
            .min();
        let wait = match (left, earliest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let (listener_ready, ready) = {
            let mut fds = Vec::with_capacity(1 + turn.conns.len());
            fds.push(os::PollFd::new(self.listener.as_fd(), true, false));
            for conn in &turn.conns {
                let reading = matches!(conn.state, ConnState::Hello(_));
                fds.push(os::PollFd::new(conn.stream.as_fd(), reading, !reading));
            }
            os::poll(&mut fds, wait)
                .map_err(|e| Error::io(format!("{}: waiting for importers", self.context()), e))?;
            let ready: Vec<bool> = fds[1..].iter().map(os::PollFd::is_ready).collect();
            (fds[0].is_ready(), ready)
        };

        let conns = std::mem::take(&mut turn.conns);
        for (mut conn, ready) in conns.into_iter().zip(ready) {
            let step = if ready {
                self.progress(&mut conn)
            } else {
                Step::Wait
            };
            match step {
                Step::Done(outcome) => turn.outcomes.extend(outcome),
                Step::Wait if Instant::now() >= conn.deadline => {
                    turn.outcomes.push(Err(self.expire(conn)));
                }
                Step::Wait => turn.conns.push(conn),
            }
        }
        if listener_ready {
            self.accept_queued(turn)?;
        }
        Ok(())
    }

    /// Accepts up to [`ACCEPT_BATCH`] queued connections and starts each at once (an
    /// importer's hello is usually there already).
    fn accept_queued(&self, turn: &mut Turn<'_>) -> Result<()> {
        for _ in 0..ACCEPT_BATCH {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // The peer gave up before we got to it, or a signal: the next one.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue;
                }
                Err(e) => {
                    // Out of file descriptors, most likely: close the oldest connection
                    // so that the next call can accept again.
                    if !turn.conns.is_empty() {
                        let oldest = turn.conns.remove(0);
                        turn.outcomes.push(Err(self.evict(oldest)));
                    }
                    return Err(Error::io(
                        format!("{}: accepting a connection", self.context()),
                        e,
                    ));
                }
            };
            if turn.conns.len() >= MAX_PENDING {
                let oldest = turn.conns.remove(0);
                turn.outcomes.push(Err(self.evict(oldest)));
            }
            match self.start(stream) {
                Ok(mut conn) => match self.progress(&mut conn) {
                    Step::Done(outcome) => turn.outcomes.extend(outcome),
                    Step::Wait => turn.conns.push(conn),
                },
                Err(e) => turn.outcomes.push(Err(e)),
            }
        }
        Ok(())
    }

    /// Takes a new connection: reads the kernel's credentials and refuses a uid we do not
    /// accept before reading anything from it.
    fn start(&self, stream: UnixStream) -> Result<Conn> {
        let ctx = self.context();
        // Accepted sockets do not inherit the listener's O_NONBLOCK on Linux; every read
        // and write of the loop relies on it.
        stream
            .set_nonblocking(true)
            .map_err(|e| Error::io(format!("{ctx}: configuring the connection"), e))?;
        let credentials: PeerCredentials = os::peer_credentials(&stream)
            .map_err(|e| {
                Error::io(
                    format!("{ctx}: reading the importer's credentials (SO_PEERCRED)"),
                    e,
                )
            })?
            .into();
        let conn = Conn {
            stream,
            credentials,
            deadline: Instant::now() + self.opts.io_timeout,
            state: ConnState::Hello(LineBuffer::default()),
        };
        let own_uid = os::effective_uid();
        if !uid_allowed(credentials.uid, own_uid, &self.opts.allowed_uids) {
            let reason = format!(
                "uid {} may not import from this exporter (uid {own_uid}); the exporter can allow it with ShareOptions::allow_uid",
                credentials.uid
            );
            refuse(&conn.stream, ErrCode::Denied, &reason);
            return Err(denied(format!("{ctx}: refused {}", conn.who()), reason));
        }
        Ok(conn)
    }

    /// Advances an exchange as far as it goes without waiting.
    fn progress(&self, conn: &mut Conn) -> Step {
        if let ConnState::Hello(buf) = &mut conn.state {
            let Some(line) = buf.read_available(&conn.stream) else {
                return Step::Wait;
            };
            match self.examine(conn, line) {
                Ok((peer, bytes)) => {
                    conn.state = ConnState::Offer {
                        bytes,
                        sent: 0,
                        peer,
                    };
                }
                Err(None) => return Step::Done(None),
                Err(Some(refusal)) => {
                    if let Some((code, reason)) = refusal.reply {
                        refuse(&conn.stream, code, &reason);
                    }
                    return Step::Done(Some(Err(refusal.error)));
                }
            }
        }
        let ConnState::Offer { bytes, sent, peer } = &mut conn.state else {
            return Step::Wait;
        };
        while *sent < bytes.len() {
            // The descriptor goes with the offer's first bytes.
            let sending = match (&self.fd, *sent) {
                (Some(fd), 0) => os::send_with_fds(&conn.stream, bytes, &[fd.as_fd()]),
                _ => os::send_nosignal(&conn.stream, &bytes[*sent..]),
            };
            match sending {
                Ok(0) => {
                    let e = io::Error::from(io::ErrorKind::WriteZero);
                    return Step::Done(Some(Err(self.send_error(&conn.credentials, e))));
                }
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
                Err(e) => return Step::Done(Some(Err(self.send_error(&conn.credentials, e)))),
            }
        }
        Step::Done(Some(Ok(*peer)))
    }

    fn send_error(&self, peer: &PeerCredentials, e: io::Error) -> Error {
        let who = who(peer);
        Error::io(
            format!("{}: sending the tokens to {who}", self.context()),
            e,
        )
    }

    /// Checks a hello and grants its sender. `Ok`: the peer and the reply to send;
    /// `Err(None)`: a liveness probe (closed without a byte), not an importer.
    fn examine(
        &self,
        conn: &Conn,
        line: std::result::Result<String, LineError>,
    ) -> std::result::Result<(PeerInfo, Vec<u8>), Option<Refusal>> {
        let ctx = self.context();
        let who = conn.who();
        let after = self.opts.io_timeout;
        let refused = |code: ErrCode, reason: String, error: Error| {
            Some(Refusal {
                reply: Some((code, reason)),
                error,
            })
        };
        let line = match line {
            Ok(line) => line,
            Err(LineError::Closed) => return Err(None),
            Err(e) => {
                let reason = e.describe("the hello", after);
                return Err(refused(
                    ErrCode::Protocol,
                    reason,
                    e.into_error(format!("{ctx}: {who}"), "the hello", after),
                ));
            }
        };
        let hello = Hello::parse(&line).map_err(|reason| {
            let error = Error::invalid_argument(format!("{ctx}: {who} sent a bad hello: {reason}"));
            refused(ErrCode::Protocol, reason, error)
        })?;

        let kind = self.runtime().info().kind;
        if hello.backend != kind {
            let reason = format!(
                "this exporter runs {kind}, the importer runs {}",
                hello.backend
            );
            let error = Error::BackendMismatch {
                expected: format!("an importer running {kind}"),
                found: format!("{who} running {} ({ctx})", hello.backend),
            };
            return Err(refused(ErrCode::Backend, reason, error));
        }

        let strict = self.runtime().process_id() == ProcessId::current();
        let pid_check = check_claim(hello.pid, conn.credentials.pid, strict).map_err(|reason| {
            let error = denied(format!("{ctx}: refused {who}"), reason.clone());
            refused(ErrCode::Denied, reason, error)
        })?;

        if let Err(e) = self.grant(hello.pid) {
            let reason = format!("the exporter could not grant process {}: {e}", hello.pid);
            return Err(refused(ErrCode::Failed, reason, e));
        }
        let tokens: Vec<&SignalToken> = self.signal_tokens().collect();
        let peer = PeerInfo {
            process_id: hello.pid,
            credentials: conn.credentials,
            pid_check,
        };
        Ok((peer, encode_offer(&self.token, &tokens).into_bytes()))
    }

    /// The error for a connection whose deadline passed (with an `ERR` reply while its
    /// hello was incomplete).
    fn expire(&self, conn: Conn) -> Error {
        let (ctx, who, after) = (self.context(), conn.who(), self.opts.io_timeout);
        match conn.state {
            ConnState::Hello(_) => {
                let e = LineError::Timeout;
                refuse(
                    &conn.stream,
                    ErrCode::Protocol,
                    &e.describe("the hello", after),
                );
                e.into_error(format!("{ctx}: {who}"), "the hello", after)
            }
            ConnState::Offer { .. } => Error::Timeout {
                what: format!("{ctx}: sending the tokens to {who}"),
                after,
            },
        }
    }

    /// Closes a connection to make room for a newer one, with an `ERR failed` reply
    /// while its hello was incomplete.
    fn evict(&self, conn: Conn) -> Error {
        let reason = format!(
            "the exporter is busy: {MAX_PENDING} connections were in progress, and this one, the oldest, was closed to make room"
        );
        if matches!(conn.state, ConnState::Hello(_)) {
            refuse(&conn.stream, ErrCode::Failed, &reason);
        }
        Error::io(
            format!("{}: dropped {}", self.context(), conn.who()),
            io::Error::other(reason),
        )
    }

    /// Grants `pid` on every handed-out token (nothing to do for any-process exports).
    fn grant(&self, pid: ProcessId) -> Result<()> {
        if self.opts.export.validation != PidValidation::Trustlist {
            return Ok(());
        }
        self.runtime().grant(&self.token, &[pid])?;
        for (rt, token) in &self.signals {
            rt.inner.backend()?.grant_signal(token, &[pid])?;
        }
        Ok(())
    }
}

/// Sends an `ERR` line, best effort and without waiting: the peer may be gone, and its
/// error is ours to report anyway. Nothing else was sent on the connection before, so a
/// line of at most [`MAX_LINE`](super::MAX_LINE) bytes fits in its empty send buffer.
fn refuse(stream: &UnixStream, code: ErrCode, reason: &str) {
    let _ = os::send_nosignal(stream, encode_refusal(code, reason).as_bytes());
}

impl Drop for ShareServer {
    fn drop(&mut self) {
        if self.runtime().inner.is_inherited() {
            // A forked child's copy: the socket is the parent's, which still serves it.
            return;
        }
        socket_path::remove_if_ours(&self.path, self.socket_id);
    }
}
