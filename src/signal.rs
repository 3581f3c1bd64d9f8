//! [`Signal`]: a cross-process binary semaphore (DESIGN section 5.5).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use devipc_core::fork::{PerProcess, PerProcessGuard, forget_inherited};
use std::time::Duration;

use devipc_core::{
    DeviceId, DeviceIpc, Error, ExportOptions, ProcessId, RawStream, Result, SignalGenerations,
    SignalHandle, SignalToken, TokenIdentity,
};

use crate::runtime::Runtime;
use crate::stream::{Stream, same_vendor_runtime};

/// A signal: `notify` once, and one `wait` (here or in a peer) returns and resets it.
/// Dropping it destroys this process's handle (once the last same-process import of it
/// is dropped too).
#[derive(Debug)]
pub struct Signal {
    inner: Arc<SignalInner>,
}

/// One backend signal handle, shared by a [`Signal`] and this process's own imports of it.
#[derive(Debug)]
struct SignalInner {
    rt: Runtime,
    handle: Option<SignalHandle>,
}

impl Drop for SignalInner {
    fn drop(&mut self) {
        if self.rt.inner.is_inherited() {
            // The parent's signal, copied by `fork`: the parent destroys it.
            return;
        }
        if let Some(handle) = self.handle.take()
            && let Err(e) = self.rt.inner.raw_backend().destroy_signal(handle)
        {
            log::error!("devipc: destroying a signal failed: {e}");
            self.rt.inner.release_failed(e);
        }
    }
}

/// Signals this process exported, for the same-process shortcut: a vendor cannot open
/// its own export (HIP answers `hipErrorInvalidContext`), so an import of a token this
/// process exported shares the local handle instead (as DESIGN 5.1 does for memory).
/// Per process (see `devipc_core::fork`).
static LOCAL_SIGNALS: PerProcess<HashMap<TokenIdentity, Weak<SignalInner>>> =
    PerProcess::new(forget_inherited);

fn local_signals() -> PerProcessGuard<'static, HashMap<TokenIdentity, Weak<SignalInner>>> {
    LOCAL_SIGNALS.lock()
}

impl Signal {
    /// Takes ownership of `handle`, made by `rt`'s backend.
    pub(crate) fn new(rt: &Runtime, handle: SignalHandle) -> Signal {
        Signal {
            inner: Arc::new(SignalInner {
                rt: rt.clone(),
                handle: Some(handle),
            }),
        }
    }

    /// The signal this process exported as `token`, sharing its handle (no vendor call:
    /// a vendor cannot open its own export).
    pub(crate) fn local(token: &SignalToken) -> Result<Signal> {
        let local = local_signals()
            .get(&token.identity())
            .and_then(Weak::upgrade);
        match local {
            Some(inner) => Ok(Signal { inner }),
            None => Err(Error::invalid_argument(
                "this process exported the signal token, but not through a devipc Signal that \
                 is still alive: the signal was destroyed, or it was exported through the raw \
                 layer (devipc::raw), whose exports the Runtime does not track",
            )),
        }
    }

    fn handle(&self) -> &SignalHandle {
        // Only `drop` takes it.
        self.inner
            .handle
            .as_ref()
            .expect("signal handle present until drop")
    }

    fn rt(&self) -> &Runtime {
        &self.inner.rt
    }

    /// The runtime it belongs to (the rendezvous grants through it).
    pub(crate) fn runtime(&self) -> &Runtime {
        self.rt()
    }

    /// The device it belongs to.
    pub fn device(&self) -> DeviceId {
        self.handle().device
    }

    /// Exports it as a token for a peer.
    pub fn export(&self, opts: ExportOptions) -> Result<SignalToken> {
        let token = self
            .rt()
            .inner
            .backend()?
            .export_signal(self.handle(), opts)?;
        let mut local = local_signals();
        local.retain(|_, w| w.strong_count() > 0);
        local.insert(token.identity(), Arc::downgrade(&self.inner));
        Ok(token)
    }

    /// Allows `peers` to import `token`.
    pub fn grant(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        self.rt().inner.backend()?.grant_signal(token, peers)
    }

    /// Raises the signal after the work queued so far on the default stream.
    pub fn notify(&self) -> Result<()> {
        self.notify_on(RawStream::DEFAULT)
    }

    /// Raises the signal after the work queued so far on `stream` (the caller's own).
    ///
    /// Safe because a [`RawStream`] other than the default can only be made with an
    /// `unsafe` constructor ([`RawStream::from_ptr`]), whose caller promised a live stream
    /// of this runtime on the signal's device.
    pub fn notify_on(&self, stream: RawStream) -> Result<()> {
        self.rt().inner.backend()?.notify(self.handle(), stream)
    }

    /// Raises the signal after the work enqueued so far on `stream`, a devipc [`Stream`]
    /// (devipc's own or a wrapped framework stream) of the signal's device and vendor
    /// runtime: the borrow keeps the stream alive for the call.
    pub fn notify_on_stream(&self, stream: &Stream) -> Result<()> {
        self.check_stream(stream)?;
        self.notify_on(stream.raw())
    }

    /// As [`Signal::wait`], and orders `stream`'s later work after the notifier's (see
    /// [`Signal::notify_on_stream`] for the stream).
    pub fn wait_on_stream(&self, stream: &Stream, timeout: Option<Duration>) -> Result<()> {
        self.check_stream(stream)?;
        self.wait_on(stream.raw(), timeout)
    }

    /// Posts the signal's next generation on `stream` (a devipc [`Stream`] of the signal's
    /// device and vendor runtime) and returns it: 1, 2, ... in post order, the same in
    /// every process that holds the signal. A peer's [`Signal::wait_for`] of that
    /// generation orders its stream's later work after the work queued on `stream` before
    /// this call, on the device: no host synchronisation on either side.
    ///
    /// A later post never satisfies a wait meant for an earlier generation's successor: a
    /// signal keeps a small ring of interprocess events, and a post that would reuse the
    /// slot of a generation whose wait has not been issued yet waits for it first, up to
    /// `timeout` ([`Error::Timeout`]; `None` waits as long as it takes). So a producer may
    /// run a ring's length ahead of its consumer (four posts), no further.
    ///
    /// Posts from several threads or processes are numbered in the order they are made.
    pub fn post(&self, stream: &Stream, timeout: Option<Duration>) -> Result<u64> {
        self.check_stream(stream)?;
        self.rt()
            .inner
            .backend()?
            .post_signal(self.handle(), stream.raw(), timeout)
    }

    /// Makes `stream`'s later work wait, on the device, for the work queued before the
    /// post of `generation` (see [`Signal::post`]). The calling thread blocks only until
    /// that post was made, up to `timeout` ([`Error::Timeout`]): once the producer's host
    /// is ahead, this returns at once and the wait happens on the device. Generation 0
    /// is before every post: no wait.
    ///
    /// A wait for a generation whose successors' waits were already issued may wait for
    /// a later post's work (never for less). A generation whose post failed in the posting
    /// process is an error here, not a wait for nothing.
    pub fn wait_for(
        &self,
        stream: &Stream,
        generation: u64,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.check_stream(stream)?;
        self.rt().inner.backend()?.wait_signal_generation(
            self.handle(),
            stream.raw(),
            generation,
            timeout,
        )
    }

    /// The latest generation posted and the latest one a wait was issued for, as every
    /// process holding the signal sees them.
    pub fn generations(&self) -> Result<SignalGenerations> {
        self.rt().inner.backend()?.signal_generations(self.handle())
    }

    /// A stream this signal's calls may use: of the same vendor runtime and device.
    fn check_stream(&self, stream: &Stream) -> Result<()> {
        let (mine, theirs) = (self.rt(), stream.runtime());
        if !same_vendor_runtime(mine, theirs) {
            return Err(Error::invalid_argument(format!(
                "a stream of {} used with a signal of {}: both must be of the same vendor \
                 runtime",
                theirs.info().describe(),
                mine.info().describe()
            )));
        }
        if stream.device() != self.device() {
            return Err(Error::invalid_argument(format!(
                "a stream of device {} used with a signal of device {}",
                stream.device(),
                self.device()
            )));
        }
        Ok(())
    }

    /// Blocks until the signal is raised, then resets it. `None` waits forever; a
    /// timeout gives [`Error::Timeout`](crate::Error::Timeout), whose `after` is the time
    /// actually waited, measured.
    ///
    /// `wait(Some(d))` returns no earlier than `d` and at most a small slack after it on
    /// every backend: on HIP the signal word is a futex with the caller's deadline; on
    /// Ascend the runtime's notify wait counts whole seconds, so devipc keeps the deadline
    /// on the host and polls (slack: `devipc_ascend::notify::WAIT_SLACK`, 50 ms, in
    /// practice one or two milliseconds). Only an Ascend runtime without the event API
    /// falls back to the vendor's whole seconds. A record that arrives just after an
    /// Ascend wait timed out is kept for the next `wait` (see `devipc_ascend::notify`).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        self.wait_on(RawStream::DEFAULT, timeout)
    }

    /// As [`Signal::wait`], and orders `stream`'s later work after the notifier's.
    pub fn wait_on(&self, stream: RawStream, timeout: Option<Duration>) -> Result<()> {
        self.rt()
            .inner
            .backend()?
            .wait(self.handle(), stream, timeout)
    }
}

#[cfg(test)]
mod tests {
    use devipc_core::BackendKind;

    use super::*;
    use crate::raw::Backend;
    use crate::recording_backend::RecordingBackend;

    #[test]
    fn a_same_process_signal_import_shares_the_handle_without_a_vendor_call() {
        let probe = RecordingBackend::with_identity(BackendKind::Hip, ProcessId::current(), 41);
        let rt = Runtime::from_backend(Backend::from(probe));
        let count = |m: &str| match rt.backend() {
            Backend::Recording(p) => p.count(m),
            #[allow(unreachable_patterns, reason = "other variants exist per feature")]
            _ => unreachable!("probe runtime"),
        };
        let signal = rt.create_signal(DeviceId(0)).unwrap();
        let token = signal.export(ExportOptions::default()).unwrap();
        let local = rt.import_signal(&token, DeviceId(0)).unwrap();
        assert_eq!(
            count("import_signal"),
            0,
            "no vendor import of one's own signal"
        );
        local.notify().unwrap();
        assert_eq!(count("notify"), 1);
        drop(signal);
        assert_eq!(
            count("destroy_signal"),
            0,
            "the import still uses the handle"
        );
        drop(local);
        assert_eq!(
            count("destroy_signal"),
            1,
            "destroyed once, by the last user"
        );
        let err = rt.import_signal(&token, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert_eq!(count("import_signal"), 0);
    }

    /// A same-process import makes the checks a vendor import would: the token's backend
    /// kind and the device (review of issue 14, finding F7).
    #[test]
    fn a_same_process_signal_import_checks_the_backend_and_the_device() {
        let hip = Runtime::from_backend(Backend::from(RecordingBackend::with_identity(
            BackendKind::Hip,
            ProcessId::current(),
            41,
        )));
        let ascend = Runtime::from_backend(Backend::from(RecordingBackend::with_identity(
            BackendKind::Ascend,
            ProcessId::current(),
            41,
        )));
        let signal = hip.create_signal(DeviceId(0)).unwrap();
        let token = signal.export(ExportOptions::default()).unwrap();
        let err = ascend.import_signal(&token, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
        let err = hip.import_signal(&token, DeviceId(77)).unwrap_err();
        assert!(matches!(err, Error::InvalidDevice { .. }), "{err}");
        assert!(hip.import_signal(&token, DeviceId(0)).is_ok());
    }
}
