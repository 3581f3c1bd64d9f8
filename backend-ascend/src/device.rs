//! The devices a call needs: binding the thread's current ACL device for one call and
//! restoring the caller's, peer access between devices, and host copies (`read`/`write`),
//! whose question is which device to bind and whether the copy must be staged.
//!
//! # Binding
//!
//! ACL keeps the current device (and its default context) per thread, and the framework
//! around devipc uses it too. [`DeviceScope`] makes the device a call needs current
//! (`aclrtSetDevice`) and puts the caller's back when dropped, so devipc never moves a
//! thread that had a device onto another one.
//!
//! A thread that had **no** device (`aclrtGetDevice` fails with
//! `ACL_ERROR_RT_CONTEXT_NULL`, 107002) is left on the device devipc set. ACL has no call
//! that unbinds a thread: the only undo is `aclrtResetDevice`, which drops the process's
//! reference on the device's default context and, at zero, releases every resource made
//! in it: the memory devipc just mapped, the notify it just created, and anything the
//! framework made on that device. Leaving the binding is harmless (the thread merely has
//! a current device now, as after any ACL call that needs one); resetting is not.
//!
//! # Host copies
//!
//! The device ranges devipc mapped, the route a copy into each takes, and the staged
//! route for memory imported by IPC key onto another device than the exporter's.
//!
//! `read` and `write` are one path, `AscendBackend::host_copy`, whose `Transfer` says
//! the direction. The backend remembers every range it maps (allocations and imports of
//! both memory mechanisms, a `DeviceRange`) with its device and `CopyRoute`. A copy into
//! a `Direct` range, or into memory devipc did not map (framework memory, on the thread's
//! current device as it is), is one synchronous `aclrtMemcpy` with the range's device
//! bound.
//!
//! A key import used from another device than the exporter's is `Staged`: the vendor
//! allows only *asynchronous device-to-device* copies of such memory: no host copies, no
//! `ACL_MEMCPY_DEFAULT`, no synchronous `aclrtMemcpy` (RT-DOC 11-07, api-facts C.4). So
//! `read`/`write` on it go through a staging buffer on the importing device, which is
//! ordinary local memory the host may copy to and from:
//!
//! 1. bind the importing device; `aclrtMalloc` a staging buffer of
//!    `min(len, STAGING_CHUNK)` bytes; `aclrtCreateStream` (each pushed onto a
//!    rollback guard right after it succeeds);
//! 2. per chunk of at most [`STAGING_CHUNK`] bytes:
//!    - write: `aclrtMemcpy` host -> staging, then `aclrtMemcpyAsync` staging -> import
//!      (`ACL_MEMCPY_DEVICE_TO_DEVICE`) on the stream, then `aclrtSynchronizeStream`;
//!    - read: `aclrtMemcpyAsync` import -> staging on the stream,
//!      `aclrtSynchronizeStream`, then `aclrtMemcpy` staging -> host;
//!
//!    so the stream is idle before the buffer is reused;
//! 3. destroy the stream, then free the buffer (no task of the stream can still use the
//!    buffer when it goes), on success and on every error path alike; a release that
//!    fails after a complete transfer is reported as the call's error.
//!
//! The copies run on a stream of their own rather than the default stream: synchronising
//! the default stream would also wait for whatever the framework queued on it.
//!
//! A runtime without `aclrtMemcpyAsync` cannot copy such memory from the host at all:
//! [`Error::Unsupported`], before any vendor call.

use std::collections::BTreeMap;

use crate::backend::{AscendBackend, lock};
use crate::result;
use crate::result::{Rollback, Undo};
use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::types::{ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE};
use devipc_core::fork::{PerProcess, forget_inherited};
use devipc_core::{BackendKind, DeviceId, DevicePtr, Error, Result};

/// The caller's device, restored on drop. Not `Send`: it belongs to the thread it bound.
pub(crate) struct DeviceScope<'a> {
    api: &'a AclApi,
    /// The device to put back; `None` when the thread was already on the bound device or
    /// had none (see the module docs).
    previous: Option<i32>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> DeviceScope<'a> {
    /// Makes `device` current on this thread until the scope ends.
    pub(crate) fn bind(api: &'a AclApi, device: i32) -> Result<Self> {
        let previous = current_device(api)?;
        if previous != Some(device) {
            result::set_device(api, device)?;
        }
        Ok(DeviceScope {
            api,
            previous: previous.filter(|&p| p != device),
            _not_send: std::marker::PhantomData,
        })
    }
}

/// The thread's current device, or `None` when it has none (107002). Any other failure
/// is an error: devipc cannot tell what to restore.
pub(crate) fn current_device(api: &AclApi) -> Result<Option<i32>> {
    result::get_device(api)
}

impl Drop for DeviceScope<'_> {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            if let Err(e) = result::set_device(self.api, previous) {
                log::error!("devipc-ascend: could not restore the thread's device {previous}: {e}");
            }
        }
    }
}

impl AscendBackend {
    /// `enable_peer_access`: lets `device` access `peer`'s memory
    /// (`aclrtDeviceEnablePeerAccess` with `device` bound), once per pair; a device and
    /// itself need nothing. The `ascend-vmm` import calls it for memory of another device,
    /// and the `ascend-notify` import where the runtime refuses its peer-access flag.
    pub(crate) fn enable_peer(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        let dev = self.check_device(device)?;
        let peer_dev = self.check_device(peer)?;
        if device == peer || lock(&self.peers_enabled).contains(&(device, peer)) {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::device_enable_peer_access(&self.api, peer_dev)?;
        lock(&self.peers_enabled).push((device, peer));
        Ok(())
    }
}

/// The most bytes one staged chunk moves, and so the largest staging buffer: large
/// enough that the per-chunk calls cost little next to the copy, small enough to fit
/// next to the framework's memory.
pub const STAGING_CHUNK: usize = 4 << 20;

/// A device address range devipc mapped in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceRange {
    pub(crate) end: u64,
    /// The device the range is mapped on (bound for copies).
    pub(crate) device: DeviceId,
    /// How host copies reach it.
    pub(crate) route: CopyRoute,
}

/// How `read`/`write` copy between the host and a [`DeviceRange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyRoute {
    /// Synchronous `aclrtMemcpy` host <-> device.
    Direct,
    /// Through a staging buffer on the range's device, with asynchronous
    /// device-to-device copies: memory imported by IPC key onto another device than the
    /// exporter's, which takes no other copy (RT-DOC 11-07, api-facts C.4; see the module
    /// docs).
    Staged,
}

/// The direction and host side of a host copy.
pub(crate) enum Transfer<'a> {
    /// Host -> device: `write`.
    Write(&'a [u8]),
    /// Device -> host: `read`.
    Read(&'a mut [u8]),
}

impl Transfer<'_> {
    fn len(&self) -> usize {
        match self {
            Transfer::Write(src) => src.len(),
            Transfer::Read(dst) => dst.len(),
        }
    }
}

/// The error for a staged copy on a runtime without `aclrtMemcpyAsync`.
fn no_async_copy() -> Error {
    Error::unsupported(
        BackendKind::Ascend,
        "host reads and writes of memory imported by IPC key onto another device than the \
         exporter's on this runtime: the vendor allows only asynchronous device-to-device \
         copies of such memory (RT-DOC 11-07), and the runtime does not export \
         aclrtMemcpyAsync (import the key on the exporter's device instead)",
    )
}

/// Device address ranges devipc mapped in this process (allocations and imports of every
/// Ascend backend), for host copies to find the device to bind and the route, and for
/// stream copies to apply the vendor's copy rules: start -> range. Process-wide because
/// addresses are (two runtimes of one process share the address space, and an import made
/// through one may be copied on another's stream); per process across `fork`.
static RANGES: PerProcess<BTreeMap<u64, DeviceRange>> = PerProcess::new(forget_inherited);

/// The range of `ranges` containing `ptr`, if any.
pub(crate) fn range_containing(
    ranges: &BTreeMap<u64, DeviceRange>,
    ptr: u64,
) -> Option<DeviceRange> {
    ranges
        .range(..=ptr)
        .next_back()
        .filter(|(_, r)| ptr < r.end)
        .map(|(_, r)| *r)
}

impl AscendBackend {
    /// `read` and `write`: copies between the host side of `transfer` and as many bytes of
    /// device memory at `remote`. The device bound is the one of the devipc allocation or
    /// mapping holding `remote`; for memory devipc did not map (framework memory) the
    /// thread's current device is used as it is. A [`CopyRoute::Staged`] mapping is
    /// copied through a staging buffer ([`AscendBackend::staged_copy`]).
    ///
    /// # Safety
    /// As [`DeviceIpc::write`](devipc_core::DeviceIpc::write) and
    /// [`DeviceIpc::read`](devipc_core::DeviceIpc::read): the device bytes are memory the
    /// caller may write (or read), mapped until the call returns.
    pub(crate) unsafe fn host_copy(&self, remote: DevicePtr, transfer: Transfer<'_>) -> Result<()> {
        if transfer.len() == 0 {
            return Ok(());
        }
        let range = self.range_of(remote.0);
        if let Some(r) = range.filter(|r| r.route == CopyRoute::Staged) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.staged_copy(r.device, remote.0, transfer) };
        }
        let _scope = match range {
            Some(r) => Some(DeviceScope::bind(&self.api, r.device.as_c_int()?)?),
            None => None,
        };
        match transfer {
            // SAFETY: the caller guarantees `src.len()` writable device bytes at `remote`.
            Transfer::Write(src) => unsafe {
                result::memcpy_host_to_device(&self.api, remote.0, src.len(), src)
            },
            // SAFETY: the caller guarantees `dst.len()` readable device bytes at `remote`.
            Transfer::Read(dst) => unsafe {
                result::memcpy_device_to_host(&self.api, dst, remote.0)
            },
        }
    }

    /// Remembers a device range devipc mapped.
    pub(crate) fn add_range(&self, start: u64, range: DeviceRange) {
        RANGES.lock().insert(start, range);
    }

    /// Forgets a device range.
    pub(crate) fn remove_range(&self, start: u64) {
        RANGES.lock().remove(&start);
    }

    /// The devipc range starting at `start`, if any.
    pub(crate) fn range_at(&self, start: u64) -> Option<DeviceRange> {
        RANGES.lock().get(&start).copied()
    }

    /// The devipc range containing `ptr`, if any (mapped by any Ascend backend of this
    /// process: a copy on one runtime's stream may name another's import).
    pub(crate) fn range_of(&self, ptr: u64) -> Option<DeviceRange> {
        range_containing(&RANGES.lock(), ptr)
    }

    /// Runs `f` over the ranges devipc mapped, under one lock: for checks of many
    /// addresses (a batch's descriptors), with [`range_containing`].
    pub(crate) fn with_ranges<R>(&self, f: impl FnOnce(&BTreeMap<u64, DeviceRange>) -> R) -> R {
        f(&RANGES.lock())
    }

    /// Copies between the host and `len` bytes of device memory at `remote`, a
    /// `CopyRoute::Staged` range mapped on `device`, as the module docs describe.
    ///
    /// # Safety
    /// `remote..remote + len` is device memory mapped on `device` that the caller may
    /// read or write (as [`DeviceIpc::write`](devipc_core::DeviceIpc::write) and
    /// [`DeviceIpc::read`](devipc_core::DeviceIpc::read) require), mapped until the call
    /// returns.
    unsafe fn staged_copy(
        &self,
        device: DeviceId,
        remote: u64,
        mut transfer: Transfer<'_>,
    ) -> Result<()> {
        self.api.aclrtMemcpyAsync.ok_or_else(no_async_copy)?;
        let len = transfer.len();
        if len == 0 {
            return Ok(());
        }
        if u64::try_from(len)
            .ok()
            .and_then(|l| remote.checked_add(l))
            .is_none()
        {
            return Err(Error::invalid_argument(format!(
                "{len} bytes at {remote:#x} overflow the address space"
            )));
        }
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        let mut held = Rollback::new(&self.api);
        let capacity = len.min(STAGING_CHUNK);
        let staging = result::malloc(&self.api, capacity, ACL_MEM_MALLOC_HUGE_FIRST)?;
        held.push(Undo::Free(staging));
        let stream = result::create_stream(&self.api)?;
        held.push(Undo::DestroyStream(stream));
        let mut offset = 0;
        while offset < len {
            let n = (len - offset).min(STAGING_CHUNK);
            // No overflow: remote + len fits, checked above.
            let at = remote + offset as u64;
            match &mut transfer {
                Transfer::Write(src) => {
                    let chunk = &src[offset..offset + n];
                    // SAFETY: `chunk` is a live host slice of `n` bytes; the staging
                    // buffer holds `capacity >= n` bytes and no task uses it (the stream
                    // was synchronised after the previous chunk).
                    unsafe { result::memcpy_host_to_device(&self.api, staging, capacity, chunk) }?;
                    // SAFETY: both operands are device memory (the staging buffer, and
                    // `n` bytes of the import the caller vouches for) and stay mapped
                    // until the stream is synchronised below (the buffer is freed only
                    // after the stream is destroyed); the stream is live, of this device.
                    unsafe {
                        result::memcpy_async(
                            &self.api,
                            at,
                            n,
                            staging,
                            n,
                            ACL_MEMCPY_DEVICE_TO_DEVICE,
                            stream,
                        )
                    }?;
                    // SAFETY: the stream was created by this operation and is still live.
                    unsafe { result::synchronize_stream(&self.api, stream) }?;
                }
                Transfer::Read(dst) => {
                    // SAFETY: as for the write: device memory on both sides, the stream
                    // live, the buffer kept until the stream is gone.
                    unsafe {
                        result::memcpy_async(
                            &self.api,
                            staging,
                            capacity,
                            at,
                            n,
                            ACL_MEMCPY_DEVICE_TO_DEVICE,
                            stream,
                        )
                    }?;
                    // SAFETY: the stream was created by this operation and is still live.
                    unsafe { result::synchronize_stream(&self.api, stream) }?;
                    let chunk = &mut dst[offset..offset + n];
                    // SAFETY: `chunk` is a live, exclusively borrowed host slice of `n`
                    // bytes; the staging buffer holds the `n` bytes just copied.
                    unsafe { result::memcpy_device_to_host(&self.api, chunk, staging) }?;
                }
            }
            offset += n;
        }
        held.release()
    }
}
