//! [`Held`]: the Rust buffer behind a Python buffer object, shared with every DLPack view
//! of it, and [`Slot`], the Python object's handle on it that `close()` empties.
//!
//! A DLPack consumer (a numpy array, a torch tensor) keeps an `Arc<Held>` in its managed
//! tensor's context, so the memory stays mapped while the view lives, whatever happens to
//! the Python buffer object. `close()` refuses while such views exist
//! ([`BufferInUseError`](crate::errors::BufferInUseError)); dropping the Python object
//! without closing it only drops its own reference (the last view then releases the
//! memory).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dlpark::ffi::{DLDevice, DLDeviceType};
use pyo3::prelude::*;

use devipc::{BackendKind, DeviceId, ImportedBuffer, SharedBuffer};

use crate::errors::{self, BufferInUseError};

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

/// A Python buffer object's reference to its [`Held`]; `None` once closed.
#[derive(Debug)]
pub(crate) struct Slot {
    held: Mutex<Option<Arc<Held>>>,
    /// How error messages name the object (`"the shared buffer"`).
    what: &'static str,
}

impl Slot {
    /// A slot holding `held`.
    pub(crate) fn new(held: Held, what: &'static str) -> Slot {
        Slot {
            held: Mutex::new(Some(Arc::new(held))),
            what,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<Held>>> {
        // Each critical section is one take or clone: a poisoned lock is consistent.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The buffer, or [`ClosedError`](crate::errors::ClosedError).
    pub(crate) fn get(&self) -> PyResult<Arc<Held>> {
        self.lock().clone().ok_or_else(|| errors::closed(self.what))
    }

    /// Whether `close()` ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Releases the buffer now; refused while DLPack views of it are alive. Closing twice
    /// is a no-op.
    pub(crate) fn close(&self) -> PyResult<()> {
        let mut held = self.lock();
        let Some(arc) = held.as_ref() else {
            return Ok(());
        };
        let views = Arc::strong_count(arc) - 1;
        if views > 0 {
            return Err(errors::plain::<BufferInUseError>(
                "buffer_in_use",
                format!(
                    "{} is still used by {views} DLPack view(s) (arrays or tensors made with \
                     from_dlpack, or views not yet consumed): delete them first",
                    self.what
                ),
            ));
        }
        let last = held.take();
        drop(held);
        drop(last);
        Ok(())
    }
}
