//! What the rendezvous adds to [`Runtime`]: [`Runtime::connect`] and
//! [`Runtime::connect_with`], one blocking exchange against a deadline.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use devipc_core::{DeviceId, Error, Result};
use devipc_shm::os;

use super::line_io::{LineReader, send_all};
use super::options::ConnectOptions;
use super::peer::{PeerCredentials, denied, uid_allowed};
use super::socket_path;
use super::wire::{Hello, PROTOCOL_VERSION, Reply, ReplyDecoder};
use crate::buffer::ImportedBuffer;
#[cfg(doc)]
use crate::buffer::SharedBuffer;
use crate::runtime::Runtime;
use crate::signal::Signal;

/// How often [`ConnectOptions::wait_for_server`] retries a socket that is not there yet.
const RETRY_INTERVAL: Duration = Duration::from_millis(20);

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

impl Runtime {
    /// Obtains a buffer (and its signals) from the exporter serving at the Unix socket
    /// `path` ([`SharedBuffer::share`]) and imports them on `device`, with the default
    /// [`ConnectOptions`].
    pub fn connect(
        &self,
        path: impl AsRef<Path>,
        device: impl Into<DeviceId>,
    ) -> Result<Connected> {
        self.connect_with(path, device, ConnectOptions::default())
    }

    /// As [`Runtime::connect`], with `opts`.
    ///
    /// Errors: the socket's [`Error::Io`] (e.g. `NotFound`, `ConnectionRefused`); an
    /// exporter of another uid is refused (`PermissionDenied`); the exporter's refusal as
    /// described in the [module docs](super); [`Error::Timeout`] when the exchange does
    /// not finish within [`ConnectOptions::timeout`]; [`Error::InvalidArgument`] or
    /// [`Error::InvalidToken`] when the peer does not speak the protocol; then whatever
    /// importing the tokens gives.
    pub fn connect_with(
        &self,
        path: impl AsRef<Path>,
        device: impl Into<DeviceId>,
        opts: ConnectOptions,
    ) -> Result<Connected> {
        let device = device.into();
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
        let exporter: PeerCredentials = os::peer_credentials(&stream)
            .map_err(|e| {
                Error::io(
                    format!("{ctx}: reading the exporter's credentials (SO_PEERCRED)"),
                    e,
                )
            })?
            .into();
        let own_uid = os::effective_uid();
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
        let fd = reader.take_fd();
        drop(stream);

        match reply {
            Reply::Refused { code, reason } => Err(code.into_error(&ctx, reason, self)),
            Reply::Offer { mem, signals } => {
                let buffer = if mem.mechanism().carries_fd() {
                    // The object's descriptor came with the offer (`SCM_RIGHTS`).
                    let fd = fd.ok_or_else(|| {
                        Error::invalid_argument(format!(
                            "{ctx}: the exporter sent a {} token without its file descriptor",
                            mem.mechanism()
                        ))
                    })?;
                    self.import_with_fd(&mem, fd, device)?
                } else {
                    // A descriptor nobody asked for is closed (`fd` drops).
                    self.import(&mem, device)?
                };
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
