//! [`Event`]: a local, queryable event: recorded on a [`Stream`], it completes when the
//! stream's work queued before it is done. The host asks ([`Event::is_complete`]) or
//! waits ([`Event::wait`]); another stream waits for it without blocking the host
//! ([`Stream::wait_event`]).
//!
//! It is always a process-local event (on Ascend never an `ACL_EVENT_IPC` event, which
//! cannot be queried); cross-process ordering is a [`Signal`](crate::Signal)'s job.

use std::sync::Arc;
use std::time::Duration;

use devipc_core::{DeviceId, DeviceIpc, EventHandle, Result};

use crate::runtime::Runtime;
use crate::stream::Stream;

/// A local, queryable event: recorded on a [`Stream`], it completes when the stream's
/// work queued before it is done. Always process-local (on Ascend never an
/// `ACL_EVENT_IPC` event, which cannot be queried); cross-process ordering is a
/// [`Signal`](crate::Signal)'s job. Cloning shares it; the last clone destroys it.
#[derive(Debug, Clone)]
pub struct Event {
    inner: Arc<EventInner>,
}

#[derive(Debug)]
struct EventInner {
    rt: Runtime,
    handle: Option<EventHandle>,
}

impl Drop for EventInner {
    fn drop(&mut self) {
        if self.rt.inner.is_inherited() {
            return;
        }
        if let Some(handle) = self.handle.take()
            && let Err(e) = self.rt.inner.raw_backend().destroy_event(handle)
        {
            log::error!("devipc: destroying an event failed: {e}");
            self.rt.inner.release_failed(e);
        }
    }
}

impl Event {
    /// A new event on `device` of `rt`.
    pub(crate) fn new(rt: &Runtime, device: DeviceId) -> Result<Event> {
        let handle = rt.inner.backend()?.create_event(device)?;
        Ok(Event {
            inner: Arc::new(EventInner {
                rt: rt.clone(),
                handle: Some(handle),
            }),
        })
    }

    pub(crate) fn handle(&self) -> &EventHandle {
        // Only `drop` takes it.
        self.inner
            .handle
            .as_ref()
            .expect("event handle present until drop")
    }

    /// The device it belongs to.
    pub fn device(&self) -> DeviceId {
        self.handle().device
    }

    /// Records it on `stream` (a stream of the event's device): it completes when the
    /// work queued on `stream` so far is done.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.record(self)
    }

    /// Whether its latest record completed (an event never recorded has). A failure of
    /// the work before the record, where the runtime reports it, is the error.
    pub fn is_complete(&self) -> Result<bool> {
        self.inner.rt.inner.backend()?.query_event(self.handle())
    }

    /// Waits until its latest record completed, at most `timeout` (`None`: as long as it
    /// takes); [`Error::Timeout`](crate::Error::Timeout) when the time is up.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        self.inner
            .rt
            .inner
            .backend()?
            .synchronize_event(self.handle(), timeout)
    }
}
