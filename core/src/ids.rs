//! The ids that name things across the [`DeviceIpc`](crate::DeviceIpc) trait: a device
//! ([`DeviceId`]), a process ([`ProcessId`]), a backend-internal handle ([`HandleId`])
//! and a device address ([`DevicePtr`]).
//!
//! They are plain numbers with the checks every backend makes on them (a device id
//! against the device count, a pointer plus an offset against overflow).

use std::fmt;

use crate::error::{Error, Result};

/// A device ordinal as the vendor runtime numbers it (`aclrtSetDevice`, `hipSetDevice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DeviceId(pub u32);

impl DeviceId {
    /// The id as the vendors' `int32_t` / `int` parameter.
    ///
    /// Fails for ids above `i32::MAX`, which no vendor runtime can address.
    pub fn as_c_int(self) -> Result<i32> {
        i32::try_from(self.0)
            .map_err(|_| Error::invalid_argument(format!("device id {} exceeds i32::MAX", self.0)))
    }

    /// Checks the id against a device count.
    pub fn check(self, count: u32) -> Result<Self> {
        if self.0 < count {
            Ok(self)
        } else {
            Err(Error::InvalidDevice {
                device: self,
                count,
            })
        }
    }
}

/// `DeviceId::from(0)` and `0.into()` name device 0, as `DeviceId(0)` does.
///
/// ```
/// use devipc_core::DeviceId;
/// let d: DeviceId = 1.into();
/// assert_eq!(d, DeviceId(1));
/// assert_eq!(DeviceId::from(1), d);
/// ```
impl From<u32> for DeviceId {
    fn from(ordinal: u32) -> Self {
        DeviceId(ordinal)
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The process id a peer must grant.
///
/// On Ascend this is the bare tgid (`aclrtDeviceGetBareTgid`): the host pid, even inside a
/// container. On HIP it is `getpid()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId(pub u32);

impl ProcessId {
    /// The current process as the kernel of its own pid namespace sees it.
    pub fn current() -> Self {
        ProcessId(std::process::id())
    }

    /// The id as the vendors' `int32_t` pid parameter.
    pub fn as_c_int(self) -> Result<i32> {
        i32::try_from(self.0)
            .map_err(|_| Error::invalid_argument(format!("process id {} exceeds i32::MAX", self.0)))
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A device virtual address in the current process.
///
/// Only meaningful in the process that obtained it; never send one to a peer (send a token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device pointer.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// Whether this is the null pointer.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }

    /// Checks the arguments of an `export_external`: a non-null pointer and a non-zero
    /// length (every backend's rule, before any vendor call).
    pub fn check_external_span(self, len: usize) -> Result<()> {
        if self.is_null() || len == 0 {
            return Err(Error::invalid_argument(
                "external export needs a non-null pointer and a non-zero length",
            ));
        }
        Ok(())
    }

    /// `self + offset`, or `InvalidArgument` on overflow.
    pub fn offset(self, offset: usize) -> Result<DevicePtr> {
        u64::try_from(offset)
            .ok()
            .and_then(|o| self.0.checked_add(o))
            .map(DevicePtr)
            .ok_or_else(|| {
                Error::invalid_argument(format!("device pointer {self} + {offset} overflows"))
            })
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A backend-internal handle id; unique within one process, never reused.
///
/// Only a [`HandleTable`](crate::HandleTable) mints ids, so safe code cannot forge one:
/// the only ids a caller holds are those of the handles it was given (a guessed number
/// cannot release a [`SharedBuffer`](../devipc/struct.SharedBuffer.html)'s memory behind
/// its back).
///
/// ```compile_fail
/// let guessed = devipc_core::HandleId(5);
/// ```
///
/// ```compile_fail
/// let alloc = devipc_core::Allocation {
///     id: devipc_core::HandleId::mint(5),
///     device: devipc_core::DeviceId(0),
///     ptr: devipc_core::DevicePtr(0x1000),
///     size: 64,
/// };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandleId(u64);

impl HandleId {
    /// Mints an id; only [`HandleTable`](crate::HandleTable) does.
    pub(crate) const fn mint(raw: u64) -> HandleId {
        HandleId(raw)
    }

    /// The number, for logs and for tokens that carry it (a generation).
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for HandleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_checks() {
        assert_eq!(DeviceId(1).check(2).unwrap(), DeviceId(1));
        assert!(matches!(
            DeviceId(2).check(2),
            Err(Error::InvalidDevice {
                device: DeviceId(2),
                count: 2
            })
        ));
        assert_eq!(DeviceId(7).as_c_int().unwrap(), 7);
        assert!(DeviceId(u32::MAX).as_c_int().is_err());
    }

    #[test]
    fn pointer_offset_checks_overflow() {
        assert_eq!(DevicePtr(0x1000).offset(0x10).unwrap(), DevicePtr(0x1010));
        assert!(DevicePtr(u64::MAX).offset(1).is_err());
        assert!(DevicePtr::NULL.is_null());
        assert!(DevicePtr(0x10).check_external_span(1).is_ok());
        assert!(DevicePtr::NULL.check_external_span(1).is_err());
        assert!(DevicePtr(0x10).check_external_span(0).is_err());
    }
}
