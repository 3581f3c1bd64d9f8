//! [`DeviceSpan`]: a checked piece of device memory that stream-ordered copies read or
//! write, and what keeps it alive until they are done.
//!
//! A span comes from a buffer ([`SharedBuffer::span`](crate::SharedBuffer::span),
//! [`ImportedBuffer::span`](crate::ImportedBuffer::span), or the [`DeviceBuffer`] trait),
//! checked against the buffer's bounds, which for an import are the vendor object's real
//! size; [`DeviceSpan::slice`] narrows it, checked again. It holds the memory itself: a
//! request that copies through a span keeps the allocation (or the import's mapping)
//! until the copy completed, even when the buffer it came from is dropped first. Framework
//! memory devipc did not allocate enters through the `unsafe` [`DeviceSpan::external`],
//! whose caller promises the same.
//!
//! [`DeviceBuffer`]: crate::DeviceBuffer

use std::ops::Range;
use std::sync::Arc;

use devipc_core::{DeviceId, DevicePtr, Error, Result};

use crate::buffer::{Owned, Source, checked_span};
use crate::runtime::Runtime;

/// What keeps a span's memory allocated or mapped.
#[derive(Debug, Clone)]
pub(crate) enum Keep {
    /// Memory this process allocated.
    Owned(Arc<Owned>),
    /// An import (or a same-process view of an own export).
    Imported(Source),
    /// Framework memory: the caller of [`DeviceSpan::external`] keeps it.
    External,
}

impl Keep {
    /// The address of the object kept alive (0 for framework memory, which keeps nothing):
    /// two spans with the same identity keep the same memory.
    pub(crate) fn identity(&self) -> usize {
        match self {
            Keep::Owned(o) => Arc::as_ptr(o) as usize,
            Keep::Imported(source) => source.identity(),
            Keep::External => 0,
        }
    }
}

/// A bounds-checked span of device memory for stream-ordered copies
/// ([`Stream::copy`](crate::Stream::copy) and friends). Cloning it is cheap; every clone
/// keeps the memory alive.
#[derive(Debug, Clone)]
pub struct DeviceSpan {
    rt: Runtime,
    ptr: DevicePtr,
    len: usize,
    device: DeviceId,
    keep: Keep,
}

impl DeviceSpan {
    /// `range` of a buffer at `base` of `len` bytes on `device`, checked.
    pub(crate) fn of_buffer(
        rt: &Runtime,
        base: DevicePtr,
        len: usize,
        device: DeviceId,
        range: Range<usize>,
        keep: Keep,
    ) -> Result<DeviceSpan> {
        let n = range.end.checked_sub(range.start).ok_or_else(|| {
            Error::invalid_argument(format!(
                "range {}..{} ends before it starts",
                range.start, range.end
            ))
        })?;
        Ok(DeviceSpan {
            rt: rt.clone(),
            ptr: checked_span(base, len, range.start, n)?,
            len: n,
            device,
            keep,
        })
    }

    /// A span of framework memory devipc did not allocate or import (a block of the
    /// framework's allocator, e.g. a torch tensor's storage): `len` bytes at `ptr` on
    /// `device` of `rt`'s vendor runtime.
    ///
    /// # Safety
    /// `ptr..ptr + len` is device memory of `rt`'s vendor runtime on `device` in this
    /// process, and stays allocated, and is not freed or reused, until every request that
    /// copies through this span (or a slice or clone of it) has completed. devipc cannot
    /// check either: the runtime would copy through whatever the pointer names.
    #[allow(unsafe_code, reason = "the constructor carries the memory contract")]
    pub unsafe fn external(rt: &Runtime, device: DeviceId, ptr: DevicePtr, len: usize) -> Self {
        DeviceSpan {
            rt: rt.clone(),
            ptr,
            len,
            device,
            keep: Keep::External,
        }
    }

    /// The part `range` (offsets within this span) of this span, checked.
    pub fn slice(&self, range: Range<usize>) -> Result<DeviceSpan> {
        DeviceSpan::of_buffer(
            &self.rt,
            self.ptr,
            self.len,
            self.device,
            range,
            self.keep.clone(),
        )
    }

    /// Its device address in this process.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device it is on (for an import, the device it is mapped on).
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The runtime whose memory it is.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// What keeps its memory alive, as an address (see [`Keep::identity`]).
    pub(crate) fn keep_identity(&self) -> usize {
        self.keep.identity()
    }
}
