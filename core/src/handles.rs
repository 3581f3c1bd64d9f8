//! The plain-data handles that cross the [`DeviceIpc`](crate::DeviceIpc) trait.
//!
//! Handles ([`Allocation`], [`Mapping`], [`SignalHandle`], [`StreamHandle`],
//! [`EventHandle`]) are plain data: a
//! backend-internal [`HandleId`] plus what the caller needs to use the object. The backend
//! keeps the vendor objects and validates every handle it is given, so a stale, foreign or
//! twice-released handle is an [`Error::UnknownHandle`], never
//! undefined behaviour. The safe RAII layer in the `devipc` crate owns these handles.

use crate::error::{Error, Result};
use crate::ids::{DeviceId, DevicePtr, HandleId};
use crate::stream::RawStream;

/// Exportable device memory owned by this process (from [`DeviceIpc::allocate`]).
///
/// [`DeviceIpc::allocate`]: crate::DeviceIpc::allocate
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Allocation {
    /// Backend-internal id.
    pub id: HandleId,
    /// The device it lives on.
    pub device: DeviceId,
    /// Its device address in this process.
    pub ptr: DevicePtr,
    /// Usable size in bytes (at least the size asked for).
    pub size: usize,
}

impl Allocation {
    /// Checks that the backend's record of this allocation (`ptr`, `size`, `device`) is
    /// what the caller holds: a handle whose fields were changed is refused.
    pub fn check_matches(&self, ptr: DevicePtr, size: usize, device: DeviceId) -> Result<()> {
        if self.ptr == ptr && self.size == size && self.device == device {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "allocation {} does not match the backend's record (pointer, size or device changed)",
                self.id
            )))
        }
    }

    /// Checks that `range` is a non-empty byte range inside an object of `size` bytes (the
    /// export rule shared by every backend).
    pub fn check_range(range: &std::ops::Range<usize>, size: usize) -> Result<()> {
        if range.start >= range.end || range.end > size {
            return Err(Error::invalid_argument(format!(
                "range {}..{} is empty or outside the {size}-byte allocation",
                range.start, range.end
            )));
        }
        Ok(())
    }
}

/// An imported view of a peer's memory (from [`DeviceIpc::import`]).
///
/// [`DeviceIpc::import`]: crate::DeviceIpc::import
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// Backend-internal id.
    pub id: HandleId,
    /// The device it is mapped on in this process.
    pub device: DeviceId,
    /// The address of the exported range (the token's offset already applied).
    pub ptr: DevicePtr,
    /// Length of the exported range in bytes.
    pub len: usize,
    /// Where the whole mapped vendor object starts in this process.
    pub object_base: DevicePtr,
    /// Size of the whole mapped vendor object, as the runtime reports it (never the
    /// token's claim): every view of this mapping must stay inside
    /// `object_base..object_base + object_size`.
    pub object_size: usize,
}

impl Mapping {
    /// The mapping of `token`'s range in an object the runtime mapped at `object_base`
    /// and reports to be `object_size` bytes. A token whose range does not fit the real
    /// object (a forged or corrupted offset, length or object size) is refused: the CRC
    /// only catches accidents.
    pub fn for_token(
        id: HandleId,
        device: DeviceId,
        object_base: DevicePtr,
        object_size: usize,
        token: &crate::MemToken,
    ) -> Result<Mapping> {
        let range = token.range_within(object_size)?;
        Ok(Mapping {
            id,
            device,
            ptr: object_base.offset(range.start)?,
            len: range.len(),
            object_base,
            object_size,
        })
    }
}

/// A signal (Ascend IPC Notify, HIP interprocess event plus sequence word).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignalHandle {
    /// Backend-internal id.
    pub id: HandleId,
    /// The device it belongs to.
    pub device: DeviceId,
}

/// Where a signal's generations stand ([`DeviceIpc::signal_generations`]), as every
/// process holding the signal sees them.
///
/// [`DeviceIpc::signal_generations`]: crate::DeviceIpc::signal_generations
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SignalGenerations {
    /// The latest generation posted (its record queued); 0 before the first post.
    pub posted: u64,
    /// The latest generation a wait was issued for; 0 before the first wait.
    pub waited: u64,
}

/// A stream devipc created (from [`DeviceIpc::create_stream`]): its device and the
/// vendor stream, which the backend destroys at [`DeviceIpc::destroy_stream`].
///
/// [`DeviceIpc::create_stream`]: crate::DeviceIpc::create_stream
/// [`DeviceIpc::destroy_stream`]: crate::DeviceIpc::destroy_stream
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamHandle {
    /// Backend-internal id.
    pub id: HandleId,
    /// The device it belongs to.
    pub device: DeviceId,
    /// The vendor stream, for the calls that enqueue on it.
    pub raw: RawStream,
}

/// A local, queryable event (from [`DeviceIpc::create_event`]; never an IPC event).
///
/// [`DeviceIpc::create_event`]: crate::DeviceIpc::create_event
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventHandle {
    /// Backend-internal id.
    pub id: HandleId,
    /// The device it belongs to.
    pub device: DeviceId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_checks() {
        let a = Allocation {
            id: HandleId::mint(3),
            device: DeviceId(1),
            ptr: DevicePtr(0x1000),
            size: 64,
        };
        assert!(a.check_matches(DevicePtr(0x1000), 64, DeviceId(1)).is_ok());
        assert!(a.check_matches(DevicePtr(0x1000), 65, DeviceId(1)).is_err());
        assert!(a.check_matches(DevicePtr(0x1000), 64, DeviceId(0)).is_err());
        assert!(Allocation::check_range(&(0..64), 64).is_ok());
        assert!(Allocation::check_range(&(10..10), 64).is_err());
        assert!(Allocation::check_range(&(0..65), 64).is_err());
    }
}
