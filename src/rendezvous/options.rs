//! The options of both sides: how the exporter serves ([`ShareOptions`]) and how the
//! importer reaches it ([`ConnectOptions`]).

use std::time::Duration;

use devipc_core::ExportOptions;

#[cfg(doc)]
use super::ShareServer;
#[cfg(doc)]
use crate::buffer::SharedBuffer;
#[cfg(doc)]
use crate::runtime::Runtime;

/// Default time a connected importer has for the whole exchange with the exporter.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time an importer gives the whole rendezvous, connecting included.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How [`SharedBuffer::share`] serves importers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareOptions {
    pub(super) export: ExportOptions,
    pub(super) io_timeout: Duration,
    pub(super) allowed_uids: Vec<u32>,
    pub(super) socket_mode: u32,
}

impl Default for ShareOptions {
    fn default() -> Self {
        ShareOptions {
            export: ExportOptions::granted_only(),
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
    /// [`ExportOptions::granted_only`]: each importer is granted as it connects).
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
    pub(super) timeout: Duration,
    pub(super) wait_for_server: bool,
    pub(super) allowed_uids: Vec<u32>,
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
