//! The raw backend trait, [`DeviceIpc`].
//!
//! Every backend (Ascend, HIP; real runtime or emulator) implements it; the `devipc`
//! facade dispatches to it statically through its `Backend` enum (a `match` over the
//! variants) and wraps the plain-data handles in RAII types. The trait is object safe,
//! has no generics or associated types, and every acquire has its release:
//! `allocate`/`free`, `export*` + `import`/`close`, `export_external`/`close_external`,
//! `create_signal` or `import_signal`/`destroy_signal`, `create_stream`/`destroy_stream`,
//! `create_event`/`destroy_event`.
//!
//! The raw copies (`read`, `write`, `copy_async`) take bare pointers, so they are `unsafe`
//! to call; the `devipc` facade's buffers and spans check every span against the object
//! they view and call them for you:
//!
//! ```compile_fail
//! fn peek(backend: &dyn devipc_core::DeviceIpc) {
//!     let mut byte = [0u8; 1];
//!     let _ = backend.read(devipc_core::DevicePtr(0x1000), &mut byte);
//! }
//! ```
//!
//! Contract for implementors:
//! - Handles are validated: a handle that is unknown, already released or from another
//!   backend instance gives [`Error::UnknownHandle`].
//! - A token from another backend, or from the emulator when this is a real runtime (and
//!   vice versa), gives [`Error::BackendMismatch`].
//! - Device ids are checked against `device_count` first ([`Error::InvalidDevice`]).
//! - Each call binds the thread's current device as needed and restores the caller's.
//! - On an error, whatever the call acquired is released before it returns.
//! - Handles are plain data and may be cloned, so a release (`free`, `close`,
//!   `destroy_signal`) can race a call on a clone of the same handle in another thread.
//!   The release makes the handle unknown to calls that start after it, and waits for the
//!   calls already using the object to return before it destroys it: no vendor object is
//!   destroyed under a call ([`HandleTable::pin`](crate::HandleTable::pin)). A `wait` on
//!   the signal being destroyed gives up within a poll interval with
//!   [`Error::UnknownHandle`], so the release is never held up by a wait nobody will
//!   notify.

use std::ops::Range;
use std::time::Duration;

use crate::copy::CopyDesc;
use crate::error::{Error, Result};
use crate::handles::{
    Allocation, EventHandle, Mapping, SignalGenerations, SignalHandle, StreamHandle,
};
use crate::ids::{DeviceId, DevicePtr, ProcessId};
use crate::info::BackendInfo;
use crate::options::{AllocateOptions, ExportOptions};
use crate::physical::PhysicalDevice;
use crate::stream::RawStream;
use crate::token::{MemToken, SignalToken};

/// Cross-process sharing of device memory and signals on one vendor runtime.
pub trait DeviceIpc: Send + Sync {
    /// Kind, library source, runtime version and capabilities.
    fn info(&self) -> &BackendInfo;

    /// Number of devices visible to this process.
    fn device_count(&self) -> Result<u32>;

    /// The id a peer must `grant` so that this process may import (Ascend: the bare tgid,
    /// the host pid even inside a container; HIP: `getpid`).
    fn process_id(&self) -> Result<ProcessId>;

    /// The physical identity of this process's `device`, which tokens carry so that an
    /// importer under another visibility mask finds the same device. Fields the runtime
    /// cannot tell are `None`. Constant for the life of the process: backends cache it.
    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice>;

    /// This process's index of the device `physical` names, or `None` when none of the
    /// devices this process sees is that device. [`Error::Unsupported`] when `physical`
    /// and this runtime's identities share no known field, so nothing can be compared (an
    /// unknown identity, or a runtime that cannot name its devices).
    fn device_of_physical(&self, physical: &PhysicalDevice) -> Result<Option<DeviceId>> {
        let count = self.device_count()?;
        let mut compared = false;
        for index in 0..count {
            let here = self.physical_device(DeviceId(index))?;
            match here.same_device(physical) {
                Some(true) => return Ok(Some(DeviceId(index))),
                Some(false) => compared = true,
                None => {}
            }
        }
        if compared || count == 0 {
            Ok(None)
        } else {
            Err(Error::unsupported(
                self.info().kind,
                format!(
                    "finding the device {physical}: this runtime names its devices by \
                     other fields (or none), so the identity cannot be compared; \
                     import with an explicit device index"
                ),
            ))
        }
    }

    /// This process's index of the device a token's object lives on, which decides
    /// whether an import crosses devices (peer access, import flags). `exported_on` is
    /// the exporter's own index, which a visibility mask may renumber here, so the
    /// token's `physical` identity is what is looked up; `None` when that device is not
    /// visible here (the runtime then decides whether the object can be reached). A
    /// token without an identity (format 2), or one this runtime cannot compare, is
    /// taken at its index, checked: the only reading left, right when both processes
    /// see the same devices in the same order.
    fn home_device(
        &self,
        exported_on: DeviceId,
        physical: &PhysicalDevice,
    ) -> Result<Option<DeviceId>> {
        if physical.is_known() {
            match self.device_of_physical(physical) {
                Err(Error::Unsupported { .. }) => {}
                found => return found,
            }
        }
        exported_on.check(self.device_count()?).map(Some)
    }

    /// Lets `device` access memory on `peer` (needed for cross-device imports).
    /// Enabling an already enabled pair succeeds.
    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()>;

    /// Allocates exportable device memory of at least `size` bytes. Release with
    /// [`DeviceIpc::free`].
    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation>;

    /// As [`DeviceIpc::allocate`], made for the mechanism `opts` names (HIP: legacy
    /// `hipMalloc` memory for `hip-ipc-mem`, virtual memory for `hip-vmm-fd`). A
    /// mechanism the backend or its runtime lacks is [`Error::Unsupported`].
    fn allocate_with(
        &self,
        device: DeviceId,
        size: usize,
        opts: AllocateOptions,
    ) -> Result<Allocation> {
        match opts.mechanism {
            None => self.allocate(device, size),
            Some(mechanism) => Err(Error::unsupported(
                self.info().kind,
                format!("allocating memory for the {mechanism} mechanism"),
            )),
        }
    }

    /// Frees memory from [`DeviceIpc::allocate`] or [`DeviceIpc::allocate_with`].
    fn free(&self, alloc: Allocation) -> Result<()>;

    /// Exports `range` (byte offsets within `alloc`) as a token. The token stays valid
    /// while `alloc` lives.
    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken>;

    /// Exports memory the framework allocated itself (`aclrtMalloc` / `hipMalloc`), not by
    /// [`DeviceIpc::allocate`]: `len` bytes starting at `ptr` on `device`.
    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken>;

    /// Ends the exports [`DeviceIpc::export_external`] made of the framework block that
    /// holds `ptr` on `device`, so the framework may free the block (Ascend:
    /// `aclrtIpcMemClose` of the exporter's key; HIP: the block's lease). Refused
    /// while an importer still maps the block. Tokens of the block stop working.
    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()>;

    /// Allows `peers` to import `token` (a no-op where the vendor has no access control,
    /// see [`Capabilities::access_control`](crate::Capabilities::access_control)).
    fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()>;

    /// Maps a peer's exported memory on `device`. Release with [`DeviceIpc::close`].
    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping>;

    /// A new file descriptor for the vendor object behind `token`, a token of a
    /// mechanism that [carries an fd](crate::Mechanism::carries_fd) which this backend
    /// exported and still exports: what an exporter sends beside the token (over a
    /// Unix socket with `SCM_RIGHTS`). The caller owns it and closes it after sending.
    fn export_fd(&self, token: &MemToken) -> Result<std::os::fd::OwnedFd> {
        Err(Error::unsupported(
            self.info().kind,
            format!("file descriptors for {} tokens", token.mechanism()),
        ))
    }

    /// As [`DeviceIpc::import`], with the file descriptor the exporter sent beside a
    /// token that [carries one](crate::Mechanism::carries_fd). The fd is checked
    /// against the token (it must name the object the token names) and consumed.
    fn import_fd(
        &self,
        token: &MemToken,
        fd: std::os::fd::OwnedFd,
        device: DeviceId,
    ) -> Result<Mapping> {
        drop(fd);
        let _ = device;
        Err(Error::unsupported(
            self.info().kind,
            format!(
                "importing {} tokens with a file descriptor",
                token.mechanism()
            ),
        ))
    }

    /// Releases a mapping from [`DeviceIpc::import`] or [`DeviceIpc::import_fd`].
    fn close(&self, mapping: Mapping) -> Result<()>;

    /// Copies host bytes to device memory at `dst` (synchronous).
    ///
    /// # Safety
    /// `dst..dst + src.len()` lies inside memory this backend instance allocated or
    /// mapped (an [`Allocation`], a [`Mapping`], or external memory the caller owns),
    /// which stays allocated or mapped until the call returns. The runtime is given
    /// the pointer as is: a wrong one writes over whatever memory it names.
    #[allow(
        unsafe_code,
        reason = "raw device pointers: the safe wrappers check spans"
    )]
    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;

    /// Copies device memory at `src` to host bytes (synchronous).
    ///
    /// # Safety
    /// As [`DeviceIpc::write`], for `src..src + dst.len()`.
    #[allow(
        unsafe_code,
        reason = "raw device pointers: the safe wrappers check spans"
    )]
    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;

    /// Creates an exportable signal on `device`. Release with [`DeviceIpc::destroy_signal`].
    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle>;

    /// Exports a signal as a token.
    fn export_signal(&self, signal: &SignalHandle, opts: ExportOptions) -> Result<SignalToken>;

    /// Allows `peers` to import a signal token.
    fn grant_signal(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()>;

    /// Opens a peer's signal on `device`. Release with [`DeviceIpc::destroy_signal`].
    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle>;

    /// Raises the signal, ordered after work already queued on `stream`.
    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()>;

    /// Blocks until the signal is raised, then resets it (binary semaphore). `None` waits
    /// forever; otherwise gives [`Error::Timeout`].
    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()>;

    /// Destroys a created or imported signal.
    fn destroy_signal(&self, signal: SignalHandle) -> Result<()>;

    /// Posts the signal's next generation on `stream`: records it after the work queued so
    /// far on `stream` and returns the generation (1, 2, ...), the same in every process.
    /// A signal keeps a ring of interprocess events: when the waiting side has not yet
    /// issued the wait for the generation a ring's length back, the post waits for it, up
    /// to `timeout` ([`Error::Timeout`]; `None` waits as long as it takes), so a later post
    /// never takes the place of a record an earlier wait still needs.
    fn post_signal(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<u64> {
        let _ = (signal, stream, timeout);
        Err(Error::unsupported(
            self.info().kind,
            "signals with generations",
        ))
    }

    /// Makes `stream`'s later work wait, on the device, for the work queued before
    /// generation `generation`'s post. The calling thread waits only until that post was
    /// made (its record queued), up to `timeout`; generation 0 is no wait.
    fn wait_signal_generation(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        generation: u64,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let _ = (signal, stream, generation, timeout);
        Err(Error::unsupported(
            self.info().kind,
            "signals with generations",
        ))
    }

    /// The latest generations posted and waited for.
    fn signal_generations(&self, signal: &SignalHandle) -> Result<SignalGenerations> {
        let _ = signal;
        Err(Error::unsupported(
            self.info().kind,
            "signals with generations",
        ))
    }

    // -----------------------------------------------------------------------------------
    // The data plane: streams, local events and stream-ordered copies. Every call binds
    // the device it names (the stream's, the event's) itself and restores the caller's,
    // whatever thread makes it. A backend without them reports `Unsupported`.

    /// Creates a stream on `device`. Release with [`DeviceIpc::destroy_stream`].
    fn create_stream(&self, device: DeviceId) -> Result<StreamHandle> {
        let _ = device;
        Err(Error::unsupported(self.info().kind, "streams"))
    }

    /// Destroys a stream from [`DeviceIpc::create_stream`]. The work already queued on it
    /// still runs (the vendors' destroy may wait for it: callers that must not block
    /// destroy from a thread of their own).
    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        let _ = stream;
        Err(Error::unsupported(self.info().kind, "streams"))
    }

    /// Blocks until the work queued on `stream` (a stream of `device`) is done, and
    /// returns the first failure of that work.
    fn synchronize_stream(&self, device: DeviceId, stream: RawStream) -> Result<()> {
        let _ = (device, stream);
        Err(Error::unsupported(self.info().kind, "streams"))
    }

    /// Creates a local, queryable event on `device` (never an IPC event, which Ascend
    /// cannot query). Release with [`DeviceIpc::destroy_event`].
    fn create_event(&self, device: DeviceId) -> Result<EventHandle> {
        let _ = device;
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Destroys an event from [`DeviceIpc::create_event`].
    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        let _ = event;
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Records `event` on `stream`, a stream of the event's device (or its default
    /// stream): the event completes when the stream's work queued before it is done.
    fn record_event(&self, event: &EventHandle, stream: RawStream) -> Result<()> {
        let _ = (event, stream);
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Whether the event's latest record completed (an event never recorded has). A
    /// failure of the work queued before the record, where the runtime reports it on
    /// the event, is this call's error.
    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        let _ = event;
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Blocks until the event's latest record completed, at most `timeout`
    /// ([`Error::Timeout`]; `None` waits as long as it takes). Errors as
    /// [`DeviceIpc::query_event`].
    fn synchronize_event(&self, event: &EventHandle, timeout: Option<Duration>) -> Result<()> {
        let _ = (event, timeout);
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Makes the work queued on `stream` (a stream of `device`) after this call wait for
    /// the event's latest record, without blocking the host.
    fn stream_wait_event(
        &self,
        device: DeviceId,
        stream: RawStream,
        event: &EventHandle,
    ) -> Result<()> {
        let _ = (device, stream, event);
        Err(Error::unsupported(self.info().kind, "local events"))
    }

    /// Enqueues `copies` on `stream` (a stream of `device`) as one batch, in stream order
    /// after the work already queued; the call does not wait for them. A descriptor
    /// refused at enqueue gives [`Error::Copy`] with its index (the copies before it
    /// are enqueued and run). A failure while the copies run is reported by the next
    /// synchronisation (of the stream, or of an event recorded after them).
    ///
    /// Rules of the vendors are checked here where the runtime would corrupt or refuse
    /// silently (Ascend: memory imported by IPC key onto another device than the
    /// exporter's takes only device-to-device copies).
    ///
    /// # Safety
    /// Every descriptor's device side lies inside memory this backend instance
    /// allocated or mapped, or external memory the caller owns, and its host side inside
    /// host memory the caller owns; all of it stays allocated (mapped) and unaliased by
    /// other writes until the copies completed. `stream` is the default stream or a live
    /// stream of `device` that stays alive until then.
    #[allow(
        unsafe_code,
        reason = "raw device pointers: the safe wrappers check spans"
    )]
    unsafe fn copy_async(
        &self,
        device: DeviceId,
        stream: RawStream,
        copies: &[CopyDesc],
    ) -> Result<()> {
        let _ = (device, stream, copies);
        Err(Error::unsupported(self.info().kind, "asynchronous copies"))
    }
}
