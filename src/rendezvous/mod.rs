//! Rendezvous over a Unix socket: hand a [`SharedBuffer`] and its [`Signal`]s to a peer
//! process without building a side channel.
//!
//! Sharing otherwise takes three steps the user wires up: learn the importer's
//! [`ProcessId`], [`grant`](SharedBuffer::grant) it, send the tokens. Here the exporter
//! calls [`SharedBuffer::share`] with a socket path and [`ShareServer::accept`]s importers;
//! each importer calls [`Runtime::connect`] with the same path. The importer sends its
//! process id, the exporter checks it against the kernel's view of the socket peer
//! (`SO_PEERCRED`), grants it on the buffer's token and every signal's token, and replies
//! with the tokens; the importer imports them. This module sits on top of the safe API
//! ([`SharedBuffer::export_range`], grants, [`Runtime::import`],
//! [`Runtime::import_signal`]) and adds no backend calls of its own.
//!
//! ```no_run
//! # fn main() -> devipc::Result<()> {
//! use devipc::{BackendKind, DeviceId, Runtime, ShareOptions};
//! // Exporter.
//! let rt = Runtime::emulated(BackendKind::Hip)?;
//! let buffer = rt.allocate(DeviceId(0), 4096)?;
//! let ready = rt.create_signal(DeviceId(0))?;
//! let server = buffer
//!     .share("/run/user/1000/model.sock", ShareOptions::new())?
//!     .with_signal(&ready)?;
//! let peer = server.accept()?; // one importer; call again for the next
//! println!("granted pid {}", peer.process_id);
//!
//! // Importer (another process).
//! let rt = Runtime::emulated(BackendKind::Hip)?;
//! let shared = rt.connect("/run/user/1000/model.sock", DeviceId(0))?;
//! shared.signals[0].wait(None)?;
//! # Ok(()) }
//! ```
//!
//! # Protocol, version 1
//!
//! Lines of printable ASCII (`0x20..=0x7e`) ended by `\n`, each at most [`MAX_LINE`]
//! bytes before the `\n`; fields are separated by single spaces. One exchange per
//! connection:
//!
//! ```text
//! importer -> exporter   DEVIPC-RENDEZVOUS 1 pid=<ProcessId> backend=<ascend|hip>
//! exporter -> importer   OK
//!                        mem <MemToken text>
//!                        signal <SignalToken text>     zero to MAX_SIGNALS lines, in the
//!                                                      order the exporter added them
//!                        END
//!                  or    ERR <code> <reason>
//! ```
//!
//! - The hello names the protocol ([`MAGIC`]) and its version ([`PROTOCOL_VERSION`]),
//!   then `key=value` fields: `pid` is the importer's [`Runtime::process_id`] (decimal,
//!   non-zero), the id the exporter grants; `backend` its backend kind. Unknown keys are
//!   ignored (later minor additions stay compatible); a repeated key is an error. An
//!   exporter refuses another version with `ERR protocol`, before reading any field.
//! - Tokens are in their text form (`devipc2:...`, see [`raw::token`](crate::raw::token)).
//! - `<code>` says who is at fault and becomes the importer's error:
//!   `denied` (credentials refused: [`Error::Io`] of kind
//!   [`PermissionDenied`](std::io::ErrorKind::PermissionDenied)), `protocol` (a malformed
//!   or late hello: [`Error::InvalidArgument`]), `backend` (the importer runs another
//!   backend: [`Error::BackendMismatch`]), `failed` (the exporter could not grant:
//!   [`Error::Io`] of kind `Other`; also any code a later version adds). `<reason>` is a
//!   human-readable sentence.
//! - Nothing else is sent; either side then closes the connection.
//!
//! Both sides bound every wait: the exporter gives a connected importer
//! [`ShareOptions::io_timeout`] for the whole exchange, and the importer gives the exchange
//! [`ConnectOptions::timeout`]. Line and signal-count limits bound what either side
//! buffers.
//!
//! # Serving under load
//!
//! [`ShareServer::accept`] serves every connected peer at once from one thread: a `poll`
//! loop over the listening socket and each connection, all non-blocking, each connection
//! with its own deadline ([`ShareOptions::io_timeout`] from when it was accepted). A
//! silent peer, one that sends a byte a second, one that never reads its reply, or one
//! killed halfway costs a slot until its deadline, and delays nobody: an importer sends
//! its hello as soon as it connects, so it is served as soon as it is accepted. Peers of
//! a uid that is not accepted are refused before anything is read from them. Resources
//! are bounded: at most 64 connections are kept open (a 65th closes the oldest, which
//! gets `ERR failed` and the exporter's `accept` an error), each buffers at most one
//! line in and one reply out, and no thread is started. The kernel queues connections
//! while no thread is in `accept`; they are served at the next call. An importer that
//! finds that queue full retries until its [`ConnectOptions::timeout`] instead of
//! waiting in `connect`.
//!
//! # Socket paths
//!
//! A Unix socket address holds a path of at most 107 bytes. A longer path is bound and
//! reached through its directory (`/proc/self/fd/<fd>/<name>`, the directory opened with
//! `O_PATH`), on both sides; this needs `/proc`, and a file name of at most 82 bytes.
//! A path no client could reach is refused by [`SharedBuffer::share`] and by
//! [`Runtime::connect`] with [`Error::InvalidArgument`].
//!
//! # Who may import
//!
//! - The socket file is created with mode 0600 ([`ShareOptions::socket_mode`]), so only
//!   our uid (and root) can connect at all.
//! - The peer's uid as the kernel reports it (`SO_PEERCRED`) must equal ours, or be
//!   listed with [`ShareOptions::allow_uid`]. Root is not special: list uid 0 to allow it.
//!   The importer checks the exporter's uid the same way ([`ConnectOptions::allow_uid`]),
//!   so it never imports from a socket someone else planted.
//! - The claimed process id. When the exporter's [`Runtime::process_id`] is its kernel
//!   pid, `std::process::id()` (HIP, the emulator, Ascend outside containers), the claim
//!   must equal the peer's `SO_PEERCRED` pid: a process cannot obtain a grant for another
//!   process, and a peer whose pid is not visible in our namespace is refused
//!   ([`PidCheck::Verified`]). Ascend inside a container names processes by their bare
//!   tgid, the host pid, which the kernel does not show us; then a claim that differs from
//!   the socket pid is accepted on the uid check alone ([`PidCheck::Unverified`]): a
//!   process of our uid could obtain a grant for another pid. That is the weaker
//!   guarantee such deployments get; the 0600 socket limits it to our uid.
//! - Grants accumulate: every accepted importer stays on the tokens' trustlists (there is
//!   no revoke in the vendor APIs). Tokens exported with [`ExportOptions::any_process`]
//!   need no grant, and none is made.

mod server;
mod socket_path;

pub use server::ShareServer;

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use devipc_core::{
    BackendKind, DeviceId, Error, ExportOptions, MemToken, ProcessId, Result, SignalToken,
};
use devipc_shm::sys;

use crate::imported::ImportedBuffer;
use crate::runtime::Runtime;
#[cfg(doc)]
use crate::shared::SharedBuffer;
use crate::signal::Signal;

/// First field of the importer's hello: names the protocol.
pub const MAGIC: &str = "DEVIPC-RENDEZVOUS";
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest line either side accepts, in bytes without the `\n` (a signal token line
/// needs about 270).
pub const MAX_LINE: usize = 1024;
/// Most signals one exporter hands out with a buffer.
pub const MAX_SIGNALS: usize = 64;
/// Default time a connected importer has for the whole exchange with the exporter.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time an importer gives the whole rendezvous, connecting included.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often [`ConnectOptions::wait_for_server`] retries a socket that is not there yet.
const RETRY_INTERVAL: Duration = Duration::from_millis(20);

// ---------------------------------------------------------------------------------------
// Public types.

/// How [`SharedBuffer::share`] serves importers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareOptions {
    export: ExportOptions,
    io_timeout: Duration,
    allowed_uids: Vec<u32>,
    socket_mode: u32,
}

impl Default for ShareOptions {
    fn default() -> Self {
        ShareOptions {
            export: ExportOptions::trustlist(),
            io_timeout: DEFAULT_IO_TIMEOUT,
            allowed_uids: Vec::new(),
            socket_mode: 0o600,
        }
    }
}

impl ShareOptions {
    /// Trustlist exports, [`DEFAULT_IO_TIMEOUT`], only our uid, socket mode 0600.
    pub fn new() -> Self {
        ShareOptions::default()
    }

    /// How the buffer and the signals are exported (default
    /// [`ExportOptions::trustlist`]: each importer is granted as it connects).
    pub fn export_options(mut self, export: ExportOptions) -> Self {
        self.export = export;
        self
    }

    /// The time a connected importer has for the whole exchange (default
    /// [`DEFAULT_IO_TIMEOUT`]); must not be zero.
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.io_timeout = timeout;
        self
    }

    /// Also accepts importers running as `uid` (our own uid is always accepted). They
    /// need a [`socket_mode`](ShareOptions::socket_mode) and directory permissions that
    /// let them connect.
    pub fn allow_uid(mut self, uid: u32) -> Self {
        if !self.allowed_uids.contains(&uid) {
            self.allowed_uids.push(uid);
        }
        self
    }

    /// Permission bits of the socket file (default 0600; at most 0777). Connecting needs
    /// write permission; the uid check applies whatever the mode.
    pub fn socket_mode(mut self, mode: u32) -> Self {
        self.socket_mode = mode;
        self
    }
}

/// How [`Runtime::connect_with`] reaches an exporter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    timeout: Duration,
    wait_for_server: bool,
    allowed_uids: Vec<u32>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            timeout: DEFAULT_CONNECT_TIMEOUT,
            wait_for_server: false,
            allowed_uids: Vec::new(),
        }
    }
}

impl ConnectOptions {
    /// [`DEFAULT_CONNECT_TIMEOUT`], fail at once when nobody listens, only our uid.
    pub fn new() -> Self {
        ConnectOptions::default()
    }

    /// The time the whole rendezvous may take, waiting for the exporter to
    /// [`accept`](ShareServer::accept) included (default [`DEFAULT_CONNECT_TIMEOUT`]);
    /// must not be zero.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether to keep retrying, within the timeout, while the socket does not exist yet
    /// or nobody listens on it (the exporter has not started). Default: fail at once.
    pub fn wait_for_server(mut self, wait: bool) -> Self {
        self.wait_for_server = wait;
        self
    }

    /// Also trusts an exporter running as `uid` (our own uid is always trusted).
    pub fn allow_uid(mut self, uid: u32) -> Self {
        if !self.allowed_uids.contains(&uid) {
            self.allowed_uids.push(uid);
        }
        self
    }
}

/// The kernel's record of the process at the other end of the socket (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerCredentials {
    /// Its pid in our pid namespace; 0 when it lives where we cannot see it.
    pub pid: u32,
    /// Its effective uid when it connected (importer) or started listening (exporter).
    pub uid: u32,
    /// Its effective gid at the same moment.
    pub gid: u32,
}

impl From<sys::PeerCred> for PeerCredentials {
    fn from(c: sys::PeerCred) -> Self {
        PeerCredentials {
            pid: c.pid,
            uid: c.uid,
            gid: c.gid,
        }
    }
}

/// How far the exporter could verify an importer's claimed [`ProcessId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PidCheck {
    /// The claim equals the kernel's pid of the socket peer.
    Verified,
    /// The claim differs from the socket pid and the exporter's backend names processes
    /// by host pid (Ascend in a container), so it could not be checked; accepted on the
    /// uid check alone (see the [module docs](self)).
    Unverified,
}

/// An importer the exporter served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerInfo {
    /// The id the importer claimed, now granted on every handed-out token.
    pub process_id: ProcessId,
    /// What the kernel says about the importer.
    pub credentials: PeerCredentials,
    /// Whether the claim was checked against the kernel's pid.
    pub pid_check: PidCheck,
}

/// What [`Runtime::connect`] obtained from an exporter.
#[derive(Debug)]
#[non_exhaustive]
pub struct Connected {
    /// The exporter's buffer (or the range it shared), mapped here.
    pub buffer: ImportedBuffer,
    /// The exporter's signals, in the order it added them.
    pub signals: Vec<Signal>,
    /// What the kernel says about the exporter (the process that listens on the socket).
    pub exporter: PeerCredentials,
}

fn uid_allowed(uid: u32, own: u32, extra: &[u32]) -> bool {
    uid == own || extra.contains(&uid)
}

/// Checks an importer's claimed id against the kernel's pid of the socket peer.
/// `strict`: the exporter's process ids are kernel pids of this namespace, so the claim
/// must be the peer's pid. Returns the refusal reason.
fn check_claim(
    claim: ProcessId,
    peer_pid: u32,
    strict: bool,
) -> std::result::Result<PidCheck, String> {
    if peer_pid != 0 && claim.0 == peer_pid {
        return Ok(PidCheck::Verified);
    }
    if !strict {
        return Ok(PidCheck::Unverified);
    }
    if peer_pid == 0 {
        Err(format!(
            "the importer claims process {claim}, but its pid is not visible in the exporter's pid namespace, so the claim cannot be checked"
        ))
    } else {
        Err(format!(
            "the importer claims process {claim}, but the kernel says it is process {peer_pid}; a process may only ask for itself"
        ))
    }
}

/// A refusal on credentials: [`Error::Io`] of kind `PermissionDenied`.
fn denied(context: String, reason: String) -> Error {
    Error::io(
        context,
        io::Error::new(io::ErrorKind::PermissionDenied, reason),
    )
}

// ---------------------------------------------------------------------------------------
// Importer.

impl Runtime {
    /// Obtains a buffer (and its signals) from the exporter serving at the Unix socket
    /// `path` ([`SharedBuffer::share`]) and imports them on `device`, with the default
    /// [`ConnectOptions`].
    pub fn connect(&self, path: impl AsRef<Path>, device: DeviceId) -> Result<Connected> {
        self.connect_with(path, device, ConnectOptions::default())
    }

    /// As [`Runtime::connect`], with `opts`.
    ///
    /// Errors: the socket's [`Error::Io`] (e.g. `NotFound`, `ConnectionRefused`); an
    /// exporter of another uid is refused (`PermissionDenied`); the exporter's refusal as
    /// described in the [module docs](self); [`Error::Timeout`] when the exchange does
    /// not finish within [`ConnectOptions::timeout`]; [`Error::InvalidArgument`] or
    /// [`Error::InvalidToken`] when the peer does not speak the protocol; then whatever
    /// importing the tokens gives.
    pub fn connect_with(
        &self,
        path: impl AsRef<Path>,
        device: DeviceId,
        opts: ConnectOptions,
    ) -> Result<Connected> {
        if opts.timeout.is_zero() {
            return Err(Error::invalid_argument(
                "ConnectOptions::timeout must not be zero",
            ));
        }
        let path = path.as_ref();
        let ctx = format!("devipc rendezvous at {}", path.display());
        socket_path::check_reachable(path)
            .map_err(|reason| Error::invalid_argument(format!("{ctx}: {reason}")))?;
        let deadline = Instant::now() + opts.timeout;
        let stream = connect_stream(path, deadline, &opts, &ctx)?;
        let exporter: PeerCredentials = sys::peer_credentials(&stream)
            .map_err(|e| {
                Error::io(
                    format!("{ctx}: reading the exporter's credentials (SO_PEERCRED)"),
                    e,
                )
            })?
            .into();
        let own_uid = sys::effective_uid();
        if !uid_allowed(exporter.uid, own_uid, &opts.allowed_uids) {
            return Err(denied(
                format!("{ctx}: checking the exporter"),
                format!(
                    "the socket is served by uid {} (pid {}), not by our uid {own_uid}; \
                     not importing from it (trust it with ConnectOptions::allow_uid)",
                    exporter.uid, exporter.pid
                ),
            ));
        }

        let hello = Hello {
            version: PROTOCOL_VERSION,
            pid: self.process_id(),
            backend: self.info().kind,
        };
        if let Err(e) = send_all(&stream, hello.encode().as_bytes(), deadline) {
            // An exporter that refused us before reading (a uid it does not accept) and
            // closed: its reason waits in our receive queue, and says more than EPIPE.
            let mut reader = LineReader::new(&stream, Instant::now() + RETRY_INTERVAL);
            if let Ok(line) = reader.read_line()
                && let Ok(Some(Reply::Refused { code, reason })) =
                    ReplyDecoder::default().push(&line)
            {
                return Err(code.into_error(&ctx, reason, self));
            }
            return Err(io_or_timeout(
                e,
                format!("{ctx}: sending the hello"),
                opts.timeout,
            ));
        }

        let mut reader = LineReader::new(&stream, deadline);
        let mut decoder = ReplyDecoder::default();
        let reply = loop {
            let line = reader
                .read_line()
                .map_err(|e| e.into_error(ctx.clone(), "the exporter's reply", opts.timeout))?;
            match decoder.push(&line) {
                Ok(Some(reply)) => break reply,
                Ok(None) => {}
                Err(e) => return Err(e.into_error(&ctx)),
            }
        };
        drop(stream);

        match reply {
            Reply::Refused { code, reason } => Err(code.into_error(&ctx, reason, self)),
            Reply::Offer { mem, signals } => {
                let buffer = self.import(&mem, device)?;
                let signals = signals
                    .iter()
                    .map(|t| self.import_signal(t, device))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Connected {
                    buffer,
                    signals,
                    exporter,
                })
            }
        }
    }
}

/// Connects, retrying while the exporter's queue of connections is full (it is busy, or
/// not in `accept`), and while nobody listens yet when `opts` says so; never past
/// `deadline` (a blocking `connect` to a full queue would wait without a limit).
fn connect_stream(
    path: &Path,
    deadline: Instant,
    opts: &ConnectOptions,
    ctx: &str,
) -> Result<UnixStream> {
    loop {
        let waiting = match socket_path::connect(path) {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                "waiting for room in the exporter's queue of connections (it is not accepting, or is flooded)".to_owned()
            }
            Err(e)
                if opts.wait_for_server
                    && matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                    ) =>
            {
                format!("waiting for an exporter to listen ({e})")
            }
            Err(e) => return Err(Error::io(format!("{ctx}: connecting"), e)),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout {
                what: format!("{ctx}: {waiting}"),
                after: opts.timeout,
            });
        }
        std::thread::sleep(left.min(RETRY_INTERVAL));
    }
}

fn io_or_timeout(e: io::Error, context: String, after: Duration) -> Error {
    if matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        Error::Timeout {
            what: context,
            after,
        }
    } else {
        Error::io(context, e)
    }
}

// ---------------------------------------------------------------------------------------
// Wire format.

/// The importer's first and only line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hello {
    version: u32,
    pid: ProcessId,
    backend: BackendKind,
}

impl Hello {
    fn encode(&self) -> String {
        format!(
            "{MAGIC} {} pid={} backend={}\n",
            self.version, self.pid, self.backend
        )
    }

    /// Parses a hello line (without its `\n`); the error is the reason sent back.
    fn parse(line: &str) -> std::result::Result<Hello, String> {
        let mut fields = line.split(' ');
        if fields.next() != Some(MAGIC) {
            return Err(format!(
                "not a devipc rendezvous hello (expected it to start with `{MAGIC} `)"
            ));
        }
        let version = fields
            .next()
            .and_then(parse_decimal)
            .ok_or("the protocol version is missing or not a decimal number")?;
        if version != PROTOCOL_VERSION {
            return Err(format!(
                "unsupported protocol version {version}; this exporter speaks version {PROTOCOL_VERSION}"
            ));
        }
        let (mut pid, mut backend) = (None, None);
        for field in fields {
            let (key, value) = field
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("field `{field}` is not key=value"))?;
            let seen = match key {
                "pid" => pid.replace(value).is_some(),
                "backend" => backend.replace(value).is_some(),
                _ => false,
            };
            if seen {
                return Err(format!("field `{key}` appears twice"));
            }
        }
        let pid = pid.ok_or("the pid field is missing")?;
        let pid = parse_decimal(pid)
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("pid `{pid}` is not a non-zero decimal process id"))?;
        let backend = backend.ok_or("the backend field is missing")?;
        let backend = BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == backend)
            .ok_or_else(|| format!("unknown backend `{backend}`"))?;
        Ok(Hello {
            version,
            pid: ProcessId(pid),
            backend,
        })
    }
}

/// A `u32` in plain decimal: digits only, no sign, no leading zeros beyond `0` itself.
fn parse_decimal(s: &str) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// The category of an `ERR` reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrCode {
    /// Credentials refused.
    Denied,
    /// The hello was malformed, late or of another version.
    Protocol,
    /// The importer runs another backend.
    Backend,
    /// The exporter failed (or a code this version does not know).
    Failed,
}

impl ErrCode {
    fn as_str(self) -> &'static str {
        match self {
            ErrCode::Denied => "denied",
            ErrCode::Protocol => "protocol",
            ErrCode::Backend => "backend",
            ErrCode::Failed => "failed",
        }
    }

    fn parse(s: &str) -> ErrCode {
        match s {
            "denied" => ErrCode::Denied,
            "protocol" => ErrCode::Protocol,
            "backend" => ErrCode::Backend,
            _ => ErrCode::Failed,
        }
    }

    /// The importer's error for an exporter's refusal.
    fn into_error(self, ctx: &str, reason: String, rt: &Runtime) -> Error {
        let context = format!("{ctx}: the exporter refused");
        match self {
            ErrCode::Denied => Error::io(
                context,
                io::Error::new(io::ErrorKind::PermissionDenied, reason),
            ),
            ErrCode::Protocol => Error::invalid_argument(format!("{context}: {reason}")),
            ErrCode::Backend => Error::BackendMismatch {
                expected: format!("an exporter running {}", rt.info().kind),
                found: format!("{ctx}: {reason}"),
            },
            ErrCode::Failed => Error::io(context, io::Error::other(reason)),
        }
    }
}

/// `ERR <code> <reason>\n`, the reason made printable ASCII and cut to fit [`MAX_LINE`].
fn encode_refusal(code: ErrCode, reason: &str) -> String {
    let mut line = format!("ERR {} ", code.as_str());
    let room = MAX_LINE - line.len();
    line.extend(
        reason
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .take(room),
    );
    line.push('\n');
    line
}

/// `OK`, the memory token, the signal tokens, `END`.
fn encode_offer(mem: &MemToken, signals: &[&SignalToken]) -> String {
    let mut out = format!("OK\nmem {mem}\n");
    for s in signals {
        out.push_str(&format!("signal {s}\n"));
    }
    out.push_str("END\n");
    out
}

/// What the exporter answered.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// The tokens, already granted to us.
    Offer {
        mem: MemToken,
        signals: Vec<SignalToken>,
    },
    /// `ERR <code> <reason>`.
    Refused { code: ErrCode, reason: String },
}

/// Reads the exporter's reply line by line.
#[derive(Debug, Default)]
struct ReplyDecoder {
    state: DecodeState,
    mem: Option<MemToken>,
    signals: Vec<SignalToken>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum DecodeState {
    /// Expecting `OK` or `ERR`.
    #[default]
    Start,
    /// Expecting `mem <token>`.
    Mem,
    /// Expecting `signal <token>` or `END`.
    Signals,
}

/// A reply that breaks the protocol.
#[derive(Debug)]
enum ReplyError {
    /// Not the line the protocol expects here.
    Protocol(String),
    /// A token line whose token does not parse.
    Token(String),
}

impl ReplyError {
    fn into_error(self, ctx: &str) -> Error {
        match self {
            ReplyError::Protocol(what) => Error::invalid_argument(format!(
                "{ctx}: the peer does not speak the devipc rendezvous protocol: {what}"
            )),
            ReplyError::Token(reason) => {
                Error::invalid_token(format!("{ctx}: the exporter sent {reason}"))
            }
        }
    }
}

impl ReplyDecoder {
    /// Feeds one line; `Some` when the reply is complete.
    fn push(&mut self, line: &str) -> std::result::Result<Option<Reply>, ReplyError> {
        let unexpected = |want: &str| {
            let shown: String = line.chars().take(64).collect();
            ReplyError::Protocol(format!("expected {want}, got `{shown}`"))
        };
        match self.state {
            DecodeState::Start => {
                if line == "OK" {
                    self.state = DecodeState::Mem;
                    return Ok(None);
                }
                if let Some(rest) = line.strip_prefix("ERR ") {
                    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
                    return Ok(Some(Reply::Refused {
                        code: ErrCode::parse(code),
                        reason: reason.to_owned(),
                    }));
                }
                Err(unexpected("`OK` or `ERR <code> <reason>`"))
            }
            DecodeState::Mem => {
                let text = line
                    .strip_prefix("mem ")
                    .ok_or_else(|| unexpected("`mem <token>`"))?;
                let mem = MemToken::from_text(text)
                    .map_err(|e| ReplyError::Token(format!("a bad memory token: {e}")))?;
                self.mem = Some(mem);
                self.state = DecodeState::Signals;
                Ok(None)
            }
            DecodeState::Signals => {
                if line == "END" {
                    let mem = self
                        .mem
                        .take()
                        .ok_or_else(|| unexpected("a memory token first"))?;
                    return Ok(Some(Reply::Offer {
                        mem,
                        signals: std::mem::take(&mut self.signals),
                    }));
                }
                let text = line
                    .strip_prefix("signal ")
                    .ok_or_else(|| unexpected("`signal <token>` or `END`"))?;
                if self.signals.len() >= MAX_SIGNALS {
                    return Err(ReplyError::Protocol(format!(
                        "more than {MAX_SIGNALS} signals"
                    )));
                }
                let signal = SignalToken::from_text(text).map_err(|e| {
                    ReplyError::Token(format!(
                        "a bad token for signal {}: {e}",
                        self.signals.len()
                    ))
                })?;
                self.signals.push(signal);
                Ok(None)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bounded, deadline-limited line I/O.

/// Why no line could be read.
#[derive(Debug)]
enum LineError {
    /// The deadline passed.
    Timeout,
    /// The peer closed the connection before sending a single byte.
    Closed,
    /// The peer closed the connection in the middle of a line.
    Eof,
    /// No `\n` within [`MAX_LINE`] bytes.
    TooLong,
    /// A byte outside printable ASCII.
    NotText(u8),
    /// The socket failed.
    Io(io::Error),
}

impl LineError {
    /// A sentence for an `ERR` reply.
    fn describe(&self, what: &str, after: Duration) -> String {
        match self {
            LineError::Timeout => format!("{what} did not complete within {after:?}"),
            LineError::Closed | LineError::Eof => {
                format!("the connection closed before {what} was complete")
            }
            LineError::TooLong => format!("{what} is longer than {MAX_LINE} bytes"),
            LineError::NotText(b) => {
                format!("{what} contains byte {b:#04x}; lines are printable ASCII")
            }
            LineError::Io(e) => format!("reading {what} failed: {e}"),
        }
    }

    fn into_error(self, ctx: impl std::fmt::Display, what: &str, after: Duration) -> Error {
        let sentence = self.describe(what, after);
        match self {
            LineError::Timeout => Error::Timeout {
                what: format!("{ctx}: {what}"),
                after,
            },
            LineError::Closed | LineError::Eof => Error::io(
                format!("{ctx}: reading {what}"),
                io::Error::new(io::ErrorKind::UnexpectedEof, sentence),
            ),
            LineError::TooLong | LineError::NotText(_) => {
                Error::invalid_argument(format!("{ctx}: {sentence}"))
            }
            LineError::Io(e) => Error::io(format!("{ctx}: reading {what}"), e),
        }
    }
}

/// The bytes of a line being received: at most [`MAX_LINE`] and a `\n`, plus one read's
/// worth past it.
#[derive(Debug, Default)]
struct LineBuffer {
    buf: Vec<u8>,
    /// Whether any byte arrived yet.
    received: bool,
}

impl LineBuffer {
    /// The first complete line, or why there will be none; `None`: not enough bytes yet.
    fn take_line(&mut self) -> Option<std::result::Result<String, LineError>> {
        if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
            if end > MAX_LINE {
                return Some(Err(LineError::TooLong));
            }
            let line: Vec<u8> = self.buf.drain(..=end).take(end).collect();
            if let Some(&bad) = line.iter().find(|b| !(b' '..=b'~').contains(*b)) {
                return Some(Err(LineError::NotText(bad)));
            }
            return Some(Ok(line.into_iter().map(char::from).collect()));
        }
        if self.buf.len() > MAX_LINE {
            return Some(Err(LineError::TooLong));
        }
        None
    }

    /// One `read` into the buffer. `Ok(false)`: the socket has nothing now (non-blocking)
    /// or its read timeout passed.
    fn fill(&mut self, stream: &UnixStream) -> std::result::Result<bool, LineError> {
        let mut chunk = [0u8; 512];
        let mut stream = stream;
        loop {
            return match stream.read(&mut chunk) {
                Ok(0) if !self.received => Err(LineError::Closed),
                Ok(0) => Err(LineError::Eof),
                Ok(n) => {
                    self.received = true;
                    self.buf.extend_from_slice(&chunk[..n]);
                    Ok(true)
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    Ok(false)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(LineError::Io(e)),
            };
        }
    }

    /// Reads what a non-blocking `stream` has, without waiting: the first line, or why
    /// there will be none; `None` while it is incomplete.
    fn read_available(
        &mut self,
        stream: &UnixStream,
    ) -> Option<std::result::Result<String, LineError>> {
        loop {
            if let Some(line) = self.take_line() {
                return Some(line);
            }
            match self.fill(stream) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Reads `\n`-terminated lines of at most [`MAX_LINE`] bytes from a blocking socket, never
/// past a deadline.
struct LineReader<'a> {
    stream: &'a UnixStream,
    deadline: Instant,
    buf: LineBuffer,
}

impl<'a> LineReader<'a> {
    fn new(stream: &'a UnixStream, deadline: Instant) -> Self {
        LineReader {
            stream,
            deadline,
            buf: LineBuffer::default(),
        }
    }

    fn read_line(&mut self) -> std::result::Result<String, LineError> {
        loop {
            if let Some(line) = self.buf.take_line() {
                return line;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LineError::Timeout);
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(LineError::Io)?;
            if !self.buf.fill(self.stream)? {
                return Err(LineError::Timeout);
            }
        }
    }
}

/// Sends all of `bytes` before `deadline`, without `SIGPIPE` (a vanished peer is an
/// error, not a signal that kills an embedding host).
fn send_all(stream: &UnixStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer did not take the data in time",
            ));
        }
        stream.set_write_timeout(Some(left))?;
        match sys::send_nosignal(stream, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer did not take the data in time",
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU8, Ordering};

    use devipc_core::token::{MemTokenParts, SignalTokenParts};
    use devipc_core::{Mechanism, TokenOrigin};

    use super::*;
    use crate::raw::Backend;
    use crate::recording_backend::RecordingBackend;

    const LONG: Duration = Duration::from_secs(30);

    /// A private directory for one test's sockets, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("devipc-rdv-ut-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        fn sock(&self) -> PathBuf {
            self.0.join("rdv.sock")
        }

        /// Every name in the directory, sorted.
        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A probe runtime of `kind` with process id `pid` and its own token identity.
    fn probe_runtime_as(kind: BackendKind, pid: ProcessId) -> Runtime {
        // Distinct payloads keep this test's exports apart from other tests' in the
        // process-wide table of local exports.
        static NEXT: AtomicU8 = AtomicU8::new(100);
        let payload = NEXT.fetch_add(1, Ordering::Relaxed);
        Runtime::from_backend(Backend::from(RecordingBackend::with_identity(
            kind, pid, payload,
        )))
    }

    /// A probe runtime whose process ids are this process's kernel pid (strict checks).
    fn probe_runtime() -> Runtime {
        probe_runtime_as(BackendKind::Hip, ProcessId::current())
    }

    fn probe(rt: &Runtime) -> &RecordingBackend {
        match rt.backend() {
            Backend::Recording(p) => p,
            #[allow(unreachable_patterns, reason = "other variants exist per feature")]
            _ => unreachable!("probe runtime"),
        }
    }

    fn mem_token() -> MemToken {
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::HipIpcMem,
            emulated: true,
            device: DeviceId(0),
            origin: TokenOrigin::current(ProcessId(42)),
            generation: 3,
            object_size: 4096,
            offset: 0,
            len: 4096,
            payload: vec![5; 64],
        })
        .unwrap()
    }

    fn signal_token(fill: u8) -> SignalToken {
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::HipIpcEvent,
            emulated: true,
            device: DeviceId(0),
            origin: TokenOrigin::current(ProcessId(42)),
            generation: 1,
            payload: vec![fill; 72],
        })
        .unwrap()
    }

    /// Sends `bytes` on a raw connection to `path` and returns the whole reply.
    fn raw_exchange(path: &Path, bytes: &[u8]) -> String {
        let mut s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(LONG)).unwrap();
        s.write_all(bytes).unwrap();
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                // A server that closes with our bytes still unread resets the connection
                // after its reply instead of ending it.
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("reading the reply: {e}"),
            }
        }
        String::from_utf8(reply).unwrap()
    }

    fn is_io(err: &Error, kind: io::ErrorKind) -> bool {
        matches!(err, Error::Io { source, .. } if source.kind() == kind)
    }

    // -- codec --------------------------------------------------------------------------

    #[test]
    fn hello_encodes_and_parses() {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            pid: ProcessId(4242),
            backend: BackendKind::Ascend,
        };
        let line = hello.encode();
        assert_eq!(line, "DEVIPC-RENDEZVOUS 1 pid=4242 backend=ascend\n");
        assert_eq!(Hello::parse(line.trim_end()), Ok(hello));
        // Field order is free and unknown fields are ignored.
        assert_eq!(
            Hello::parse("DEVIPC-RENDEZVOUS 1 future=x backend=ascend pid=4242"),
            Ok(hello)
        );
    }

    #[test]
    fn bad_hellos_are_refused_with_a_reason() {
        let cases = [
            ("", "not a devipc rendezvous hello"),
            ("GET / HTTP/1.1", "not a devipc rendezvous hello"),
            ("DEVIPC-RENDEZVOUS", "version is missing"),
            (
                "DEVIPC-RENDEZVOUS x pid=1 backend=hip",
                "version is missing",
            ),
            (
                "DEVIPC-RENDEZVOUS 2 pid=1 backend=hip",
                "unsupported protocol version 2",
            ),
            ("DEVIPC-RENDEZVOUS 1 backend=hip", "pid field is missing"),
            ("DEVIPC-RENDEZVOUS 1 pid=1", "backend field is missing"),
            ("DEVIPC-RENDEZVOUS 1 pid=0 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=-1 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=+1 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=01 backend=hip", "non-zero decimal"),
            (
                "DEVIPC-RENDEZVOUS 1 pid=4294967296 backend=hip",
                "non-zero decimal",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=cuda",
                "unknown backend `cuda`",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=HIP",
                "unknown backend `HIP`",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 pid=2 backend=hip",
                "`pid` appears twice",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1  backend=hip",
                "field `` is not key=value",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=hip x",
                "field `x` is not key=value",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=hip =y",
                "field `=y` is not key=value",
            ),
        ];
        for (line, want) in cases {
            let reason = Hello::parse(line).unwrap_err();
            assert!(reason.contains(want), "{line:?}: {reason:?} lacks {want:?}");
        }
    }

    #[test]
    fn decimals_are_canonical() {
        assert_eq!(parse_decimal("0"), Some(0));
        assert_eq!(parse_decimal("4294967295"), Some(u32::MAX));
        for bad in [
            "",
            "00",
            "007",
            "1e3",
            " 1",
            "1 ",
            "0x10",
            "4294967296",
            "١",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_refusal_is_one_bounded_printable_line() {
        let line = encode_refusal(ErrCode::Denied, "pid 7\nis not\tyou: ünïcode");
        assert_eq!(line, "ERR denied pid 7?is not?you: ?n?code\n");
        let long = encode_refusal(ErrCode::Failed, &"x".repeat(5 * MAX_LINE));
        assert_eq!(long.len(), MAX_LINE + 1);
        let mut decoder = ReplyDecoder::default();
        assert_eq!(
            decoder.push(long.trim_end()).unwrap(),
            Some(Reply::Refused {
                code: ErrCode::Failed,
                reason: "x".repeat(MAX_LINE - "ERR failed ".len())
            })
        );
    }

    #[test]
    fn offers_decode_back_to_their_tokens() {
        let mem = mem_token();
        for n in [0, 1, 3] {
            let signals: Vec<SignalToken> = (0..n).map(|i| signal_token(i as u8 + 1)).collect();
            let refs: Vec<&SignalToken> = signals.iter().collect();
            let text = encode_offer(&mem, &refs);
            let mut decoder = ReplyDecoder::default();
            let mut reply = None;
            for line in text.lines() {
                assert!(line.len() <= MAX_LINE);
                assert!(reply.is_none(), "lines after the end: {text}");
                reply = decoder.push(line).unwrap();
            }
            assert_eq!(
                reply,
                Some(Reply::Offer {
                    mem: mem.clone(),
                    signals
                })
            );
        }
    }

    #[test]
    fn replies_that_break_the_protocol_are_typed_errors() {
        let mem = format!("mem {}", mem_token());
        let sig = format!("signal {}", signal_token(1));
        let bad_mem = format!("mem {}", &mem_token().to_text()[..40]);
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["HTTP/1.1 200 OK"], "expected `OK`"),
            (vec!["ok"], "expected `OK`"),
            (vec!["OK", "END"], "expected `mem <token>`"),
            (vec!["OK", &sig], "expected `mem <token>`"),
            (vec!["OK", "mem garbage"], "bad memory token"),
            (vec!["OK", &bad_mem], "bad memory token"),
            (vec!["OK", &mem, &mem], "expected `signal <token>` or `END`"),
            (
                vec!["OK", &mem, "signal devipc2:AAAA"],
                "bad token for signal 0",
            ),
            (vec!["OK", &mem, &mem[4..]], "expected `signal"),
        ];
        for (lines, want) in cases {
            let mut decoder = ReplyDecoder::default();
            let mut result = Ok(None);
            for line in &lines {
                result = decoder.push(line);
                if result.is_err() {
                    break;
                }
            }
            let err = result.unwrap_err().into_error("ctx");
            assert!(err.to_string().contains(want), "{lines:?}: {err}");
            let token_error = want.contains("bad");
            assert_eq!(
                matches!(err, Error::InvalidToken { .. }),
                token_error,
                "{err:?}"
            );
            assert_eq!(
                matches!(err, Error::InvalidArgument { .. }),
                !token_error,
                "{err:?}"
            );
        }
        // At most MAX_SIGNALS signals.
        let mut decoder = ReplyDecoder::default();
        decoder.push("OK").unwrap();
        decoder.push(&mem).unwrap();
        for _ in 0..MAX_SIGNALS {
            decoder.push(&sig).unwrap();
        }
        let err = decoder.push(&sig).unwrap_err().into_error("ctx");
        assert!(err.to_string().contains("more than 64 signals"), "{err}");
    }

    #[test]
    fn refusal_codes_become_typed_importer_errors() {
        let rt = probe_runtime();
        let err = |code: &str| {
            let mut d = ReplyDecoder::default();
            match d.push(&format!("ERR {code} because")).unwrap().unwrap() {
                Reply::Refused { code, reason } => code.into_error("ctx", reason, &rt),
                other => panic!("{other:?}"),
            }
        };
        assert!(is_io(&err("denied"), io::ErrorKind::PermissionDenied));
        assert!(matches!(err("protocol"), Error::InvalidArgument { .. }));
        assert!(matches!(err("backend"), Error::BackendMismatch { .. }));
        assert!(is_io(&err("failed"), io::ErrorKind::Other));
        assert!(is_io(&err("from-the-future"), io::ErrorKind::Other));
        assert!(err("denied").to_string().contains("because"));
    }

    #[test]
    fn claims_are_checked_against_the_kernel_pid_when_pids_are_kernel_pids() {
        let p = ProcessId(100);
        assert_eq!(check_claim(p, 100, true), Ok(PidCheck::Verified));
        assert_eq!(check_claim(p, 100, false), Ok(PidCheck::Verified));
        let lie = check_claim(p, 101, true).unwrap_err();
        assert!(lie.contains("kernel says it is process 101"), "{lie}");
        let invisible = check_claim(p, 0, true).unwrap_err();
        assert!(invisible.contains("not visible"), "{invisible}");
        // Ascend in a container: the claim is a host pid the kernel does not show us.
        assert_eq!(check_claim(p, 101, false), Ok(PidCheck::Unverified));
        assert_eq!(check_claim(p, 0, false), Ok(PidCheck::Unverified));
    }

    #[test]
    fn uids_must_match_unless_allowed() {
        assert!(uid_allowed(1000, 1000, &[]));
        assert!(!uid_allowed(0, 1000, &[]));
        assert!(!uid_allowed(1001, 1000, &[]));
        assert!(uid_allowed(1001, 1000, &[1001]));
        let opts = ShareOptions::new().allow_uid(5).allow_uid(5);
        assert_eq!(opts.allowed_uids, [5]);
    }

    // -- line I/O -----------------------------------------------------------------------

    #[test]
    fn lines_are_split_bounded_and_deadline_limited() {
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"first\nsecond\nthi").unwrap();
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "first");
        assert_eq!(r.read_line().unwrap(), "second");
        b.write_all(b"rd\n").unwrap();
        assert_eq!(r.read_line().unwrap(), "third");
        // Exactly MAX_LINE is fine, one more is not.
        b.write_all(&[b'x'; MAX_LINE]).unwrap();
        b.write_all(b"\n").unwrap();
        assert_eq!(r.read_line().unwrap().len(), MAX_LINE);
        b.write_all(&[b'y'; MAX_LINE + 1]).unwrap();
        b.write_all(b"\n").unwrap();
        assert!(matches!(r.read_line(), Err(LineError::TooLong)));

        // Without a newline at all, the reader stops after MAX_LINE + 1 bytes, not at EOF.
        let (a, mut b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = b.write_all(&vec![b'z'; 64 * MAX_LINE]);
            b
        });
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert!(matches!(r.read_line(), Err(LineError::TooLong)));
        drop(a);
        drop(writer.join().unwrap());

        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"tab\there\n").unwrap();
        assert!(matches!(
            LineReader::new(&a, Instant::now() + LONG).read_line(),
            Err(LineError::NotText(b'\t'))
        ));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"cr\r\n").unwrap();
        assert!(matches!(
            LineReader::new(&a, Instant::now() + LONG).read_line(),
            Err(LineError::NotText(b'\r'))
        ));

        // A peer that says nothing runs into the deadline; one that leaves, into EOF.
        let (a, b) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let mut r = LineReader::new(&a, start + Duration::from_millis(100));
        assert!(matches!(r.read_line(), Err(LineError::Timeout)));
        assert!(start.elapsed() >= Duration::from_millis(100));
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert!(matches!(r.read_line(), Err(LineError::Closed)));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"whole\nhalf").unwrap();
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "whole");
        assert!(matches!(r.read_line(), Err(LineError::Eof)));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"whole\n").unwrap();
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "whole");
        assert!(
            matches!(r.read_line(), Err(LineError::Eof)),
            "after a line, closing ends a conversation; it is not a probe"
        );
    }

    #[test]
    fn a_trickling_peer_cannot_outlast_the_deadline() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let trickler = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                if b.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let start = Instant::now();
        let mut r = LineReader::new(&a, start + Duration::from_millis(200));
        assert!(matches!(r.read_line(), Err(LineError::Timeout)));
        assert!(start.elapsed() < Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        trickler.join().unwrap();
    }

    #[test]
    fn sending_to_a_vanished_peer_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let err = send_all(&a, b"hello\n", Instant::now() + LONG).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        // A peer that never reads: the deadline ends the send.
        let (a, _b) = UnixStream::pair().unwrap();
        let big = vec![0u8; 16 << 20];
        let err = send_all(&a, &big, Instant::now() + Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    // -- exporter and importer, in one process ------------------------------------------

    #[test]
    fn a_buffer_and_its_signals_reach_the_importer() {
        let dir = Dir::new("roundtrip");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let (s1, s2) = (
            rt.create_signal(DeviceId(0)).unwrap(),
            rt.create_signal(DeviceId(1)).unwrap(),
        );
        let server = buffer
            .share(dir.sock(), ShareOptions::new())
            .unwrap()
            .with_signal(&s1)
            .unwrap()
            .with_signal(&s2)
            .unwrap();
        assert!(server.path().is_absolute());
        assert_eq!(server.signal_tokens().len(), 2);
        let mode = std::fs::metadata(dir.sock()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(dir.names(), ["rdv.sock"], "no temporary socket left");

        let (peer, connected) = std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let connected = rt.connect(dir.sock(), DeviceId(1)).unwrap();
            (served.join().unwrap().unwrap(), connected)
        });
        assert_eq!(peer.process_id, ProcessId::current());
        assert_eq!(peer.pid_check, PidCheck::Verified);
        assert_eq!(peer.credentials.pid, std::process::id());
        assert_eq!(peer.credentials.uid, sys::effective_uid());
        assert_eq!(connected.exporter.pid, std::process::id());
        assert_eq!(connected.signals.len(), 2);
        // Our own export: the same-process shortcut, through the rendezvous.
        assert!(connected.buffer.is_local());
        assert_eq!(connected.buffer.device(), DeviceId(1));
        let p = probe(&rt);
        assert_eq!(p.count("export"), 1);
        assert_eq!(p.count("export_signal"), 2);
        assert_eq!(p.count("grant"), 1);
        assert_eq!(p.count("grant_signal"), 2);
        // Our own signals too: shared locally, no vendor import.
        assert_eq!(p.count("import_signal"), 0);

        drop(server);
        assert!(dir.names().is_empty(), "the socket outlived its server");
        // The importer's buffer keeps the exporter's memory alive (same process here).
        drop(buffer);
        assert_eq!(p.count("free"), 0);
        drop(connected);
        assert_eq!(p.count("free"), 1);
    }

    /// Serves one misbehaving client at a time and checks the server's error and the
    /// client's reply, then that a well-behaved importer is still served.
    #[test]
    fn a_bad_client_gets_an_error_and_the_server_serves_the_next() {
        let dir = Dir::new("bad-clients");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let server = buffer
            .share(
                dir.sock(),
                ShareOptions::new().io_timeout(Duration::from_millis(300)),
            )
            .unwrap();
        let me = std::process::id();
        let hello = |pid: u32, backend: &str| {
            format!("{MAGIC} {PROTOCOL_VERSION} pid={pid} backend={backend}\n").into_bytes()
        };
        let overlong = vec![b'A'; 4 * MAX_LINE];
        type Check = fn(&Error) -> bool;
        let cases: Vec<(&str, Vec<u8>, &str, Check)> = vec![
            (
                "a liar",
                hello(me + 1, "hip"),
                "ERR denied the importer claims process",
                |e| {
                    is_io(e, io::ErrorKind::PermissionDenied)
                        && e.to_string().contains("kernel says")
                },
            ),
            (
                "garbage",
                b"\x00\x01binary\n".to_vec(),
                "ERR protocol the hello contains byte 0x00",
                |e| matches!(e, Error::InvalidArgument { .. }),
            ),
            (
                "another protocol",
                b"GET / HTTP/1.1\n".to_vec(),
                "ERR protocol not a devipc rendezvous hello",
                |e| matches!(e, Error::InvalidArgument { .. }),
            ),
            (
                "an overlong line",
                overlong,
                "ERR protocol the hello is longer than 1024 bytes",
                |e| matches!(e, Error::InvalidArgument { .. }),
            ),
            (
                "a newer version",
                format!("{MAGIC} 2 pid={me} backend=hip\n").into_bytes(),
                "ERR protocol unsupported protocol version 2",
                |e| matches!(e, Error::InvalidArgument { .. }),
            ),
            (
                "another backend",
                hello(me, "ascend"),
                "ERR backend this exporter runs hip, the importer runs ascend",
                |e| matches!(e, Error::BackendMismatch { .. }),
            ),
            (
                "silence",
                Vec::new(),
                "ERR protocol the hello did not complete within",
                |e| matches!(e, Error::Timeout { .. }),
            ),
            (
                "half a hello",
                format!("{MAGIC} 1 pid=").into_bytes(),
                "ERR protocol the hello did not complete within",
                |e| matches!(e, Error::Timeout { .. }),
            ),
        ];
        for (what, bytes, want_reply, check) in cases {
            let (served, reply) = std::thread::scope(|s| {
                let served = s.spawn(|| server.accept_timeout(LONG));
                let reply = raw_exchange(server.path(), &bytes);
                (served.join().unwrap(), reply)
            });
            let err = served.unwrap_err();
            assert!(check(&err), "{what}: unexpected server error {err:?}");
            assert!(
                reply.starts_with(want_reply)
                    && reply.ends_with('\n')
                    && reply.lines().count() == 1,
                "{what}: reply {reply:?}"
            );
        }

        // A client that leaves in the middle of its hello.
        std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let mut c = UnixStream::connect(server.path()).unwrap();
            c.write_all(MAGIC.as_bytes()).unwrap();
            drop(c);
            let err = served.join().unwrap().unwrap_err();
            assert!(is_io(&err, io::ErrorKind::UnexpectedEof), "{err:?}");
        });
        // One that connects and leaves without a byte (a liveness probe, such as another
        // exporter's at the same path) is no importer: accept keeps waiting.
        drop(UnixStream::connect(server.path()).unwrap());
        let err = server
            .accept_timeout(Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");

        assert_eq!(probe(&rt).count("grant"), 0, "nobody was granted");
        let (peer, connected) = std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let connected = rt.connect(server.path(), DeviceId(0)).unwrap();
            (served.join().unwrap().unwrap(), connected)
        });
        assert_eq!(peer.process_id, ProcessId::current());
        assert!(connected.signals.is_empty());
        assert_eq!(probe(&rt).count("grant"), 1);
    }

    #[test]
    fn the_importer_sees_the_exporters_refusal_as_a_typed_error() {
        let dir = Dir::new("refused");
        // Exporter on ascend, importer on hip.
        let exporter = probe_runtime_as(BackendKind::Ascend, ProcessId::current());
        let buffer = exporter.allocate(DeviceId(0), 64).unwrap();
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        let importer = probe_runtime();
        std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let err = importer.connect(dir.sock(), DeviceId(0)).unwrap_err();
            assert!(matches!(err, Error::BackendMismatch { .. }), "{err:?}");
            assert!(err.to_string().contains("exporter runs ascend"), "{err}");
            let served = served.join().unwrap().unwrap_err();
            assert!(
                matches!(served, Error::BackendMismatch { .. }),
                "{served:?}"
            );
        });
    }

    /// Ascend in a container: the exporter's process ids are host pids, so a claim that
    /// differs from the socket pid is granted, marked unverified.
    #[test]
    fn host_pid_claims_are_granted_unverified_when_pids_are_not_kernel_pids() {
        let dir = Dir::new("host-pids");
        let rt = probe_runtime_as(BackendKind::Hip, ProcessId(std::process::id() + 1000));
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let signal = rt.create_signal(DeviceId(0)).unwrap();
        let server = buffer
            .share(dir.sock(), ShareOptions::new())
            .unwrap()
            .with_signal(&signal)
            .unwrap();
        let reply = std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let reply = raw_exchange(
                server.path(),
                format!("{MAGIC} 1 pid=77777 backend=hip\n").as_bytes(),
            );
            let peer = served.join().unwrap().unwrap();
            assert_eq!(peer.process_id, ProcessId(77777));
            assert_eq!(peer.pid_check, PidCheck::Unverified);
            reply
        });
        let lines: Vec<&str> = reply.lines().collect();
        assert_eq!(lines.len(), 4, "{reply}");
        assert_eq!(lines[0], "OK");
        assert_eq!(lines[1], format!("mem {}", server.token()));
        assert_eq!(lines[3], "END");
        assert_eq!(probe(&rt).count("grant"), 1);
        assert_eq!(probe(&rt).count("grant_signal"), 1);

        // A real importer of this exporter goes through the vendor import (the token is
        // not its own), and is granted under its own (kernel) pid.
        let importer = probe_runtime();
        let connected = std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let connected = importer.connect(dir.sock(), DeviceId(0)).unwrap();
            let peer = served.join().unwrap().unwrap();
            assert_eq!(peer.pid_check, PidCheck::Verified);
            connected
        });
        assert!(!connected.buffer.is_local());
        assert_eq!(probe(&importer).count("import"), 1);
        assert_eq!(probe(&importer).count("import_signal"), 1);
    }

    #[test]
    fn any_process_exports_are_handed_out_without_grants() {
        let dir = Dir::new("any-process");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let signal = rt.create_signal(DeviceId(0)).unwrap();
        let server = buffer
            .share(
                dir.sock(),
                ShareOptions::new().export_options(ExportOptions::any_process()),
            )
            .unwrap()
            .with_signal(&signal)
            .unwrap();
        std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let connected = rt.connect(dir.sock(), DeviceId(0)).unwrap();
            served.join().unwrap().unwrap();
            assert_eq!(connected.signals.len(), 1);
        });
        assert_eq!(probe(&rt).count("grant"), 0);
        assert_eq!(probe(&rt).count("grant_signal"), 0);
    }

    #[test]
    fn signals_must_match_the_buffers_backend_and_are_bounded() {
        let dir = Dir::new("signals");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let mut server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        let ascend = probe_runtime_as(BackendKind::Ascend, ProcessId::current());
        let foreign = ascend.create_signal(DeviceId(0)).unwrap();
        let err = server.add_signal(&foreign).unwrap_err();
        assert!(matches!(err, Error::BackendMismatch { .. }), "{err:?}");
        let signal = rt.create_signal(DeviceId(0)).unwrap();
        for _ in 0..MAX_SIGNALS {
            server.add_signal(&signal).unwrap();
        }
        let err = server.add_signal(&signal).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }

    #[test]
    fn options_are_validated() {
        let dir = Dir::new("options");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        for opts in [
            ShareOptions::new().io_timeout(Duration::ZERO),
            ShareOptions::new().socket_mode(0o4600),
        ] {
            let err = buffer.share(dir.sock(), opts).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        }
        let err = rt
            .connect_with(
                dir.sock(),
                DeviceId(0),
                ConnectOptions::new().timeout(Duration::ZERO),
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        let err = buffer.share("/", ShareOptions::new()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(dir.names().is_empty());
        // A wider mode when other uids are allowed.
        let server = buffer
            .share(dir.sock(), ShareOptions::new().socket_mode(0o660))
            .unwrap();
        let mode = std::fs::metadata(server.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o660);
    }

    #[test]
    fn accept_times_out_without_an_importer() {
        let dir = Dir::new("accept-timeout");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        let start = Instant::now();
        let err = server
            .accept_timeout(Duration::from_millis(100))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
        assert!(start.elapsed() >= Duration::from_millis(100));
    }

    // -- under load ---------------------------------------------------------------------

    /// Serves until an exchange ends with a success; returns it and the errors before it.
    fn serve_until_ok(server: &ShareServer) -> (PeerInfo, Vec<Error>) {
        let mut errors = Vec::new();
        loop {
            match server.accept_timeout(LONG) {
                Ok(peer) => return (peer, errors),
                Err(e @ Error::Timeout { .. }) if e.to_string().contains("waiting for") => {
                    panic!("nothing was served: {e}")
                }
                Err(e) => errors.push(e),
            }
        }
    }

    /// Silent, trickling and half-finished peers hold connections while an importer comes:
    /// it is served at once, not after their timeouts.
    #[test]
    fn idle_and_slow_peers_do_not_delay_an_importer() {
        let dir = Dir::new("crowd");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let timeout = Duration::from_secs(5);
        let server = buffer
            .share(dir.sock(), ShareOptions::new().io_timeout(timeout))
            .unwrap();
        let mut crowd: Vec<UnixStream> = (0..8)
            .map(|_| UnixStream::connect(dir.sock()).unwrap())
            .collect();
        let mut half = UnixStream::connect(dir.sock()).unwrap();
        half.write_all(MAGIC.as_bytes()).unwrap();
        crowd.push(half);
        let start = Instant::now();
        let (peer, _) = std::thread::scope(|s| {
            let served = s.spawn(|| serve_until_ok(&server));
            // A slowloris: one byte every 100 ms on one more connection, meanwhile.
            let trickler = s.spawn(|| {
                let mut c = UnixStream::connect(dir.sock()).unwrap();
                for b in MAGIC.bytes().take(10) {
                    let _ = c.write_all(&[b]);
                    std::thread::sleep(Duration::from_millis(100));
                }
                c
            });
            let connected = rt
                .connect_with(
                    dir.sock(),
                    DeviceId(0),
                    ConnectOptions::new().timeout(Duration::from_secs(2)),
                )
                .unwrap();
            drop(connected);
            crowd.push(trickler.join().unwrap());
            served.join().unwrap()
        });
        assert_eq!(peer.process_id, ProcessId::current());
        assert!(
            start.elapsed() < timeout,
            "served after {:?}, not before the crowd's timeouts",
            start.elapsed()
        );
        // The crowd is still pending; once its time is up, each is an error of its own.
        drop(crowd.pop());
        let err = server.accept_timeout(LONG).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::UnexpectedEof), "{err:?}");
    }

    /// Past the cap the oldest connection is closed, with a reply saying why and an error
    /// from `accept`; the newest is served.
    #[test]
    fn the_oldest_connection_makes_room_past_the_cap() {
        let dir = Dir::new("cap");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        let extra = 3;
        let mut crowd: Vec<UnixStream> = (0..server::MAX_PENDING + extra)
            .map(|_| UnixStream::connect(dir.sock()).unwrap())
            .collect();
        let (peer, errors) = std::thread::scope(|s| {
            let served = s.spawn(|| serve_until_ok(&server));
            let connected = rt.connect(dir.sock(), DeviceId(0)).unwrap();
            drop(connected);
            served.join().unwrap()
        });
        assert_eq!(peer.process_id, ProcessId::current());
        // The crowd's first `extra`, and one more for the importer, were closed.
        assert_eq!(errors.len(), extra + 1, "{errors:?}");
        for e in &errors {
            assert!(is_io(e, io::ErrorKind::Other), "{e:?}");
            assert!(e.to_string().contains("the exporter is busy"), "{e}");
        }
        for (i, c) in crowd.iter_mut().enumerate() {
            c.set_read_timeout(Some(Duration::from_millis(if i <= extra {
                5000
            } else {
                1
            })))
            .unwrap();
            let mut reply = String::new();
            let got = c.read_to_string(&mut reply);
            if i <= extra {
                got.unwrap();
                assert!(
                    reply.starts_with("ERR failed the exporter is busy: 64 connections"),
                    "connection {i}: {reply:?}"
                );
            } else {
                assert!(
                    got.is_err() && reply.is_empty(),
                    "connection {i} still waits"
                );
            }
        }
    }

    /// An exchange that has not ended when `accept_timeout` gives up continues at the next
    /// call; several threads in `accept` each get one outcome.
    #[test]
    fn exchanges_outlive_a_call_and_threads_share_the_loop() {
        let dir = Dir::new("threads");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        let hello = format!(
            "{MAGIC} {PROTOCOL_VERSION} pid={} backend=hip\n",
            std::process::id()
        );
        let (first, rest) = hello.split_at(10);
        let mut c = UnixStream::connect(dir.sock()).unwrap();
        c.write_all(first.as_bytes()).unwrap();
        let err = server
            .accept_timeout(Duration::from_millis(100))
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
        c.write_all(rest.as_bytes()).unwrap();
        let peer = server.accept_timeout(LONG).unwrap();
        assert_eq!(peer.process_id, ProcessId::current());
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        assert!(
            reply.starts_with("OK\n") && reply.ends_with("END\n"),
            "{reply}"
        );

        // Four threads, four importers: each thread returns one of them.
        let served = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| server.accept_timeout(LONG)))
                .collect();
            let importers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| rt.connect(dir.sock(), DeviceId(0)).map(drop)))
                .collect();
            for i in importers {
                i.join().unwrap().unwrap();
            }
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert!(served.iter().all(|p| p.is_ok()), "{served:?}");
        assert_eq!(probe(&rt).count("grant"), 5);
        // A short waiter does not wait for a thread that drives without a limit.
        std::thread::scope(|s| {
            s.spawn(|| {
                let err = server.accept_timeout(Duration::from_millis(200));
                assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
            });
            let long = s.spawn(|| server.accept_timeout(LONG));
            std::thread::sleep(Duration::from_millis(400));
            rt.connect(dir.sock(), DeviceId(0)).unwrap();
            long.join().unwrap().unwrap();
        });
    }

    /// An exporter whose queue of connections is full (flooded while not in `accept`):
    /// the importer gives up at its timeout instead of waiting in `connect` for ever, and
    /// another exporter at the path sees it is live.
    #[test]
    fn a_full_queue_times_the_importer_out() {
        const TEST: &str = "a_full_queue_times_the_importer_out";
        // Filling the queue takes as many descriptors as it holds (std listens with the
        // system's maximum, `somaxconn`); leave plenty to the tests running beside this one.
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let queue: usize = read("/proc/sys/net/core/somaxconn")
            .trim()
            .parse()
            .unwrap_or(usize::MAX);
        let open_files: usize = read("/proc/self/limits")
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
            .and_then(|soft| soft.parse().ok())
            .unwrap_or(usize::MAX);
        if queue.saturating_add(1000) > open_files {
            devipc_testkit::skip(
                TEST,
                &format!("a queue of {queue} needs more than {open_files} open files"),
            );
            return;
        }
        let dir = Dir::new("full-queue");
        let listener = UnixListener::bind(dir.sock()).unwrap();
        let mut queued = Vec::new();
        let full = loop {
            match sys::connect_unix_nonblocking(&dir.sock()) {
                Ok(s) => queued.push(s),
                Err(e) => break e,
            }
            assert!(queued.len() < 100_000, "the queue never filled");
        };
        if full.kind() != io::ErrorKind::WouldBlock {
            // Most likely out of descriptors (a low `ulimit -n`) before the queue filled.
            devipc_testkit::skip(
                TEST,
                &format!(
                    "could not fill the listener's queue ({} connections): {full}",
                    queued.len()
                ),
            );
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.sock();
        std::thread::spawn(move || {
            let rt = probe_runtime();
            let opts = ConnectOptions::new().timeout(Duration::from_millis(300));
            let start = Instant::now();
            let result = rt.connect_with(path, DeviceId(0), opts).map(drop);
            let _ = tx.send((result, start.elapsed()));
        });
        let (result, took) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("connect waited far past its timeout");
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
        assert!(err.to_string().contains("queue"), "{err}");
        assert!(took < Duration::from_secs(5), "{took:?}");

        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let err = buffer.share(dir.sock(), ShareOptions::new()).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::AddrInUse), "{err:?}");
        drop((queued, listener));
    }

    /// Long paths work through `share` and `connect`; unreachable ones are refused by
    /// both, before anything is exported.
    #[test]
    fn long_paths_are_shared_and_unreachable_ones_refused() {
        let dir = Dir::new("long");
        let mut deep = dir.0.clone();
        while deep.as_os_str().len() < 200 {
            deep.push("d".repeat(60));
        }
        std::fs::create_dir_all(&deep).unwrap();
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let path = deep.join("rdv.sock");
        let server = buffer.share(&path, ShareOptions::new()).unwrap();
        assert_eq!(server.path(), path);
        std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            rt.connect(&path, DeviceId(0)).unwrap();
            served.join().unwrap().unwrap();
        });
        drop(server);
        assert!(!path.exists());

        let exports = probe(&rt).count("export");
        let unreachable = deep.join("n".repeat(socket_path::MAX_NAME + 1));
        let err = buffer.share(&unreachable, ShareOptions::new()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(
            err.to_string().contains("too long for a Unix socket"),
            "{err}"
        );
        assert_eq!(
            probe(&rt).count("export"),
            exports,
            "refused before exporting"
        );
        let err = rt.connect(&unreachable, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }

    // -- the socket file ----------------------------------------------------------------

    #[test]
    fn a_stale_socket_is_replaced_and_other_files_are_refused() {
        let dir = Dir::new("paths");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let path = dir.sock();

        // Stale: a socket nobody listens on (its server died without cleaning up).
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let server = buffer.share(&path, ShareOptions::new()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // Live: refused, and the live server's socket stays.
        let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::AddrInUse), "{err:?}");
        assert!(path.exists());
        // (The probe connection above reached the live server; it was never accepted.)
        drop(server);
        assert!(!path.exists());

        // Not a socket: refused and left alone.
        std::fs::write(&path, b"precious").unwrap();
        let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::AlreadyExists), "{err:?}");
        assert!(err.to_string().contains("regular file"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
        std::fs::remove_dir(&path).unwrap();
        std::os::unix::fs::symlink(dir.0.join("elsewhere"), &path).unwrap();
        let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(&path).unwrap();
        assert!(dir.names().is_empty(), "{:?}", dir.names());

        // A missing directory is an I/O error naming the path.
        let err = buffer
            .share(dir.0.join("missing/rdv.sock"), ShareOptions::new())
            .unwrap_err();
        assert!(is_io(&err, io::ErrorKind::NotFound), "{err:?}");
    }

    #[test]
    fn drop_removes_only_its_own_socket() {
        let dir = Dir::new("drop");
        let rt = probe_runtime();
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        // Someone replaced the socket file: the server must not remove theirs.
        std::fs::remove_file(dir.sock()).unwrap();
        std::fs::write(dir.sock(), b"theirs").unwrap();
        drop(server);
        assert_eq!(std::fs::read(dir.sock()).unwrap(), b"theirs");
        std::fs::remove_file(dir.sock()).unwrap();
        // A relative path is resolved once, so a later chdir does not matter.
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        assert!(server.path().is_absolute());
        drop(server);
        assert!(dir.names().is_empty());
    }

    // -- the importer's side ------------------------------------------------------------

    #[test]
    fn connecting_to_nothing_fails_or_waits_for_the_exporter() {
        let dir = Dir::new("connect");
        let rt = probe_runtime();
        let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::NotFound), "{err:?}");
        drop(UnixListener::bind(dir.sock()).unwrap());
        let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
        assert!(is_io(&err, io::ErrorKind::ConnectionRefused), "{err:?}");
        std::fs::remove_file(dir.sock()).unwrap();

        let waiting = ConnectOptions::new()
            .wait_for_server(true)
            .timeout(Duration::from_millis(100));
        let err = rt
            .connect_with(dir.sock(), DeviceId(0), waiting)
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");

        // The exporter shows up while the importer waits.
        let buffer = rt.allocate(DeviceId(0), 64).unwrap();
        std::thread::scope(|s| {
            let importer = s.spawn(|| {
                rt.connect_with(
                    dir.sock(),
                    DeviceId(0),
                    ConnectOptions::new().wait_for_server(true),
                )
            });
            std::thread::sleep(Duration::from_millis(100));
            let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
            server.accept_timeout(LONG).unwrap();
            importer.join().unwrap().unwrap();
        });
    }

    /// An exporter that refuses before reading the hello (as for a uid it does not
    /// accept) and closes: the importer reports the refusal, not a broken pipe.
    #[test]
    fn a_refusal_before_the_hello_reaches_the_importer() {
        let dir = Dir::new("early-refusal");
        let rt = probe_runtime();
        let listener = UnixListener::bind(dir.sock()).unwrap();
        for _ in 0..20 {
            std::thread::scope(|s| {
                let fake = s.spawn(|| {
                    let (mut conn, _) = listener.accept().unwrap();
                    conn.write_all(b"ERR denied uid 1234 may not import\n")
                        .unwrap();
                });
                let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
                assert!(is_io(&err, io::ErrorKind::PermissionDenied), "{err:?}");
                assert!(err.to_string().contains("uid 1234 may not import"), "{err}");
                fake.join().unwrap();
            });
        }
    }

    /// Fake exporters: each answers the hello with `reply` and closes (or stays silent).
    #[test]
    fn an_exporter_that_breaks_the_protocol_is_a_typed_error() {
        let dir = Dir::new("fake-exporter");
        let rt = probe_runtime();
        let listener = UnixListener::bind(dir.sock()).unwrap();
        let fast = ConnectOptions::new().timeout(Duration::from_millis(300));
        let sig = format!("signal {}\n", signal_token(1));
        let many = format!(
            "OK\nmem {}\n{}END\n",
            mem_token(),
            sig.repeat(MAX_SIGNALS + 1)
        );
        type Check = fn(&Error) -> bool;
        let cases: Vec<(String, Check)> = vec![
            ("hello?\n".into(), |e| {
                matches!(e, Error::InvalidArgument { .. })
            }),
            ("OK\nmem devipc2:AAAA\n".into(), |e| {
                matches!(e, Error::InvalidToken { .. })
            }),
            (format!("OK\n{}\n", "x".repeat(MAX_LINE + 1)), |e| {
                matches!(e, Error::InvalidArgument { .. })
            }),
            (many, |e| e.to_string().contains("more than 64 signals")),
            // Cut short, and silent: EOF, then a timeout.
            (format!("OK\nmem {}\n", mem_token()), |e| {
                is_io(e, io::ErrorKind::UnexpectedEof)
            }),
            (String::new(), |e| matches!(e, Error::Timeout { .. })),
        ];
        for (reply, check) in cases {
            std::thread::scope(|s| {
                let fake = s.spawn(|| {
                    let (mut conn, _) = listener.accept().unwrap();
                    let mut hello = [0u8; 256];
                    let _ = conn.read(&mut hello).unwrap();
                    if reply.is_empty() {
                        // Silent until the importer gives up and closes.
                        let _ = conn.read(&mut hello);
                    } else {
                        let _ = conn.write_all(reply.as_bytes());
                    }
                });
                let err = rt
                    .connect_with(dir.sock(), DeviceId(0), fast.clone())
                    .unwrap_err();
                assert!(check(&err), "reply {:.80?}: {err:?}", reply);
                fake.join().unwrap();
            });
        }
    }
}
