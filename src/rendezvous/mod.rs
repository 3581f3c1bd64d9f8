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
//! use devipc::rendezvous::ShareOptions;
//! use devipc::{BackendKind, Runtime};
//! // Exporter.
//! let rt = Runtime::emulated(BackendKind::Hip)?;
//! let buffer = rt.allocate(0, 4096)?;
//! let ready = rt.create_signal(0)?;
//! let server = buffer
//!     .share("/run/user/1000/model.sock", ShareOptions::new())?
//!     .with_signal(&ready)?;
//! let peer = server.accept()?; // one importer; call again for the next
//! println!("granted pid {}", peer.process_id);
//!
//! // Importer (another process).
//! let rt = Runtime::emulated(BackendKind::Hip)?;
//! let shared = rt.connect("/run/user/1000/model.sock", 0)?;
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
//! - Tokens are in their text form (`devipc3:...`, see [`raw::token`](crate::raw::token)).
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

// The importer's side: `Runtime::connect`.
mod connect;
// Bounded, deadline-limited reading and sending of lines.
mod line_io;
// `ShareOptions`, `ConnectOptions`.
mod options;
// The peer's credentials and the checks on them.
mod peer;
// The exporter's side: making a server and the accept loop.
mod server;
// The socket file: resolving, binding and removing it, and reaching long paths.
mod socket_path;
#[cfg(test)]
mod tests;
// The protocol's lines: hello, offer, refusal.
mod wire;

pub use connect::Connected;
pub use options::{ConnectOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IO_TIMEOUT, ShareOptions};
pub use peer::{PeerCredentials, PeerInfo, PidCheck};
pub use server::ShareServer;
pub use wire::{MAGIC, MAX_LINE, MAX_SIGNALS, PROTOCOL_VERSION};

#[cfg(doc)]
use crate::{
    Error, ExportOptions, ProcessId, buffer::SharedBuffer, runtime::Runtime, signal::Signal,
};
