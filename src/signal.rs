//! [`Signal`]: a cross-process binary semaphore (DESIGN section 5.5).

use std::time::Duration;

use devipc_core::{
    DeviceId, DeviceIpc, ExportOptions, ProcessId, RawStream, Result, SignalHandle, SignalToken,
};

use crate::runtime::Runtime;

/// A signal: `notify` once, and one `wait` (here or in a peer) returns and resets it.
/// Dropping it destroys this process's handle.
#[derive(Debug)]
pub struct Signal {
    rt: Runtime,
    handle: Option<SignalHandle>,
}

impl Runtime {
    /// Creates an exportable signal on `device`.
    pub fn create_signal(&self, device: DeviceId) -> Result<Signal> {
        let handle = self.inner.backend.create_signal(device)?;
        Ok(Signal {
            rt: self.clone(),
            handle: Some(handle),
        })
    }

    /// Opens a peer's signal on `device`.
    pub fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<Signal> {
        let handle = self.inner.backend.import_signal(token, device)?;
        Ok(Signal {
            rt: self.clone(),
            handle: Some(handle),
        })
    }
}

impl Signal {
    fn handle(&self) -> &SignalHandle {
        // Only `drop` takes it.
        self.handle
            .as_ref()
            .expect("signal handle present until drop")
    }

    /// The runtime it belongs to (the rendezvous grants through it).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The device it belongs to.
    pub fn device(&self) -> DeviceId {
        self.handle().device
    }

    /// Exports it as a token for a peer.
    pub fn export(&self, opts: ExportOptions) -> Result<SignalToken> {
        self.rt.inner.backend.export_signal(self.handle(), opts)
    }

    /// Allows `peers` to import `token`.
    pub fn grant(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        self.rt.inner.backend.grant_signal(token, peers)
    }

    /// Raises the signal after the work queued so far on the default stream.
    pub fn notify(&self) -> Result<()> {
        self.notify_on(RawStream::DEFAULT)
    }

    /// Raises the signal after the work queued so far on `stream` (the caller's own).
    pub fn notify_on(&self, stream: RawStream) -> Result<()> {
        self.rt.inner.backend.notify(self.handle(), stream)
    }

    /// Blocks until the signal is raised, then resets it. `None` waits forever; a
    /// timeout gives [`Error::Timeout`](crate::Error::Timeout).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        self.wait_on(RawStream::DEFAULT, timeout)
    }

    /// As [`Signal::wait`], and orders `stream`'s later work after the notifier's.
    pub fn wait_on(&self, stream: RawStream, timeout: Option<Duration>) -> Result<()> {
        self.rt.inner.backend.wait(self.handle(), stream, timeout)
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take()
            && let Err(e) = self.rt.inner.backend.destroy_signal(handle)
        {
            eprintln!("devipc: destroying a signal failed: {e}");
        }
    }
}
