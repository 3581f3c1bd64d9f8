//! The descriptors of stream-ordered copies ([`DeviceIpc::copy_async`]).
//!
//! A [`CopyDesc`] names raw addresses; the `devipc` facade builds them from checked spans
//! of its buffers, so every descriptor it hands a backend lies inside the objects it
//! names. Backends take them as they are ([`DeviceIpc::copy_async`] is `unsafe`).
//!
//! [`DeviceIpc::copy_async`]: crate::DeviceIpc::copy_async

/// Which sides of a copy are device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// Device memory to device memory (local, imported or framework memory; the two
    /// sides may be on different devices).
    DeviceToDevice,
    /// Host memory to device memory.
    HostToDevice,
    /// Device memory to host memory.
    DeviceToHost,
}

impl CopyKind {
    /// Whether the destination is device memory.
    pub fn device_dst(self) -> bool {
        !matches!(self, CopyKind::DeviceToHost)
    }

    /// Whether the source is device memory.
    pub fn device_src(self) -> bool {
        !matches!(self, CopyKind::HostToDevice)
    }
}

impl std::fmt::Display for CopyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CopyKind::DeviceToDevice => "device to device",
            CopyKind::HostToDevice => "host to device",
            CopyKind::DeviceToHost => "device to host",
        })
    }
}

/// One copy of `len` bytes from `src` to `dst` (addresses in this process: device
/// pointers, or host pointers on the host side of `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyDesc {
    /// Destination address.
    pub dst: usize,
    /// Source address.
    pub src: usize,
    /// Bytes to copy.
    pub len: usize,
    /// Which sides are device memory.
    pub kind: CopyKind,
}

impl std::fmt::Display for CopyDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes {} ({:#x} -> {:#x})",
            self.len, self.kind, self.src, self.dst
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_which_side_is_device_memory() {
        assert!(CopyKind::DeviceToDevice.device_dst() && CopyKind::DeviceToDevice.device_src());
        assert!(CopyKind::HostToDevice.device_dst() && !CopyKind::HostToDevice.device_src());
        assert!(!CopyKind::DeviceToHost.device_dst() && CopyKind::DeviceToHost.device_src());
        let d = CopyDesc {
            dst: 0x20,
            src: 0x10,
            len: 4,
            kind: CopyKind::HostToDevice,
        };
        assert_eq!(d.to_string(), "4 bytes host to device (0x10 -> 0x20)");
    }
}
