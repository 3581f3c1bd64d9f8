//! [`Held`]: the Rust buffer behind a Python buffer object, shared with every DLPack view
//! of it (the Python object holds it in a [`Slot`](crate::slot::Slot), which `close()`
//! empties).
//!
//! A DLPack consumer (a numpy array, a torch tensor) keeps an `Arc<Held>` in its managed
//! tensor's context, so the memory stays mapped while the view lives, whatever happens to
//! the Python buffer object. `close()` refuses while such views exist
//! (`BufferInUseError`, [`BUFFER_IN_USE`](crate::errors::BUFFER_IN_USE)); dropping the Python object
//! without closing it only drops its own reference (the last view then releases the
//! memory).

use std::ops::Range;
use std::sync::Arc;

use dlpark::ffi::{DLDevice, DLDeviceType};

use devipc::{BackendKind, DeviceId, DeviceSpan, ImportedBuffer, SharedBuffer};

use crate::span::Users;

/// The memory a Python buffer object stands for.
#[derive(Debug)]
pub(crate) enum Mem {
    /// Allocated here ([`SharedBuffer`]).
    Shared(SharedBuffer),
    /// Imported from a token ([`ImportedBuffer`]).
    Imported(ImportedBuffer),
}

/// A buffer and where DLPack says it lives.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) mem: Mem,
    /// The DLPack device of the memory (see [`dl_device`]).
    pub(crate) dl_device: DLDevice,
    /// The streams that enqueued copies through it (the DLPack handshake's work to order).
    pub(crate) users: Arc<Users>,
}

impl Held {
    /// Wraps `mem` of a runtime of `kind`, emulated or not.
    pub(crate) fn new(mem: Mem, kind: BackendKind, emulated: bool) -> Held {
        let device = match &mem {
            Mem::Shared(b) => b.device(),
            Mem::Imported(b) => b.device(),
        };
        Held {
            dl_device: dl_device(kind, emulated, device),
            mem,
            users: Arc::default(),
        }
    }

    /// The device address in this process.
    pub(crate) fn ptr(&self) -> u64 {
        match &self.mem {
            Mem::Shared(b) => b.ptr().0,
            Mem::Imported(b) => b.ptr().0,
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        match &self.mem {
            Mem::Shared(b) => b.len(),
            Mem::Imported(b) => b.len(),
        }
    }

    /// The devipc device id.
    pub(crate) fn device(&self) -> DeviceId {
        match &self.mem {
            Mem::Shared(b) => b.device(),
            Mem::Imported(b) => b.device(),
        }
    }

    /// The bytes `range`, for stream-ordered copies (bounds-checked by devipc).
    pub(crate) fn span(&self, range: Range<usize>) -> devipc::Result<DeviceSpan> {
        match &self.mem {
            Mem::Shared(b) => b.span(range),
            Mem::Imported(b) => b.span(range),
        }
    }

    /// Copies `src` in at `offset` (bounds-checked by devipc).
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> devipc::Result<()> {
        match &self.mem {
            Mem::Shared(b) => b.write(offset, src),
            Mem::Imported(b) => b.write(offset, src),
        }
    }

    /// Copies bytes at `offset` out into `dst` (bounds-checked by devipc).
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> devipc::Result<()> {
        match &self.mem {
            Mem::Shared(b) => b.read(offset, dst),
            Mem::Imported(b) => b.read(offset, dst),
        }
    }
}

/// The DLPack device of memory on `device` of a `kind` runtime: the emulator's device
/// memory is host shared memory (`kDLCPU`: a consumer reads it in place); real HIP memory
/// is `kDLROCM`; real Ascend memory is `kDLExtDev` (what torch and torch_npu map to
/// PrivateUse1).
pub(crate) fn dl_device(kind: BackendKind, emulated: bool, device: DeviceId) -> DLDevice {
    if emulated {
        return DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        };
    }
    let device_type = match kind {
        BackendKind::Hip => DLDeviceType::ROCM,
        _ => DLDeviceType::EXTDEV,
    };
    DLDevice {
        device_type,
        // Device ids are small (bounded by the device count).
        device_id: i32::try_from(device.0).unwrap_or(i32::MAX),
    }
}
