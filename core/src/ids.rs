//! Ids and plain-data handles that cross the [`DeviceIpc`](crate::DeviceIpc) trait.
//!
//! Handles ([`Allocation`], [`Mapping`], [`SignalHandle`]) are plain data: a
//! backend-internal [`HandleId`] plus what the caller needs to use the object. The backend
//! keeps the vendor objects and validates every handle it is given, so a stale, foreign or
//! twice-released handle is an [`Error::UnknownHandle`], never
//! undefined behaviour. The safe RAII layer in the `devipc` crate owns these handles.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which vendor runtime a backend, token or handle belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BackendKind {
    /// Huawei Ascend NPUs through the ACL runtime (`libascendcl.so` / `libacl_rt.so`).
    Ascend,
    /// AMD GPUs through HIP (`libamdhip64.so`).
    Hip,
}

impl BackendKind {
    /// Every backend kind, in a stable order.
    pub const ALL: [BackendKind; 2] = [BackendKind::Ascend, BackendKind::Hip];

    /// Lower-case name used in messages, environment variables and tokens' text.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Ascend => "ascend",
            BackendKind::Hip => "hip",
        }
    }

    /// The name with its indefinite article, for messages: "an ascend", "a hip".
    pub const fn with_article(self) -> &'static str {
        match self {
            BackendKind::Ascend => "an ascend",
            BackendKind::Hip => "a hip",
        }
    }

    /// The environment variable that names this backend's library file exactly.
    pub const fn library_env_var(self) -> &'static str {
        match self {
            BackendKind::Ascend => "DEVIPC_ASCEND_LIB",
            BackendKind::Hip => "DEVIPC_HIP_LIB",
        }
    }

    /// Wire code used in tokens.
    pub(crate) const fn wire(self) -> u8 {
        match self {
            BackendKind::Ascend => 1,
            BackendKind::Hip => 2,
        }
    }

    /// Inverse of [`BackendKind::wire`].
    pub(crate) fn from_wire(code: u8) -> Option<Self> {
        BackendKind::ALL.into_iter().find(|k| k.wire() == code)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown backend `{s}`: expected `ascend` or `hip`"
                ))
            })
    }
}

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

/// The caller's own stream (`aclrtStream` / `hipStream_t`), passed through untouched.
///
/// devipc never creates or destroys a `RawStream`; frameworks keep their streams. The
/// value is the stream pointer as an integer so that the type is plain, `Send` data.
///
/// Backends hand the value to the vendor runtime as a stream pointer, and a runtime
/// dereferences it. So a `RawStream` other than [`RawStream::DEFAULT`] can only be made
/// with an `unsafe` constructor, whose caller vouches for the stream: the safe calls that
/// take one ([`Signal::notify_on`](../devipc/struct.Signal.html), `DeviceIpc::notify`)
/// stay safe because no safe code can invent a stream.
///
/// ```
/// use devipc_core::RawStream;
/// let default = RawStream::DEFAULT;
/// // SAFETY: 0 is the default stream.
/// let same = unsafe { RawStream::from_raw(0) };
/// assert_eq!(default, same);
/// ```
///
/// An integer is not a stream without the caller's promise:
///
/// ```compile_fail
/// let s = devipc_core::RawStream(0x1234);
/// ```
///
/// ```compile_fail
/// let s = devipc_core::RawStream::from_raw(0x1234);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RawStream(usize);

impl RawStream {
    /// The runtime's default (null) stream.
    pub const DEFAULT: RawStream = RawStream(0);

    /// Wraps a vendor stream pointer.
    ///
    /// # Safety
    /// `ptr` is null (the default stream) or a live stream of the vendor runtime the
    /// value will be used with, created on the device of the signal it is used with, and it
    /// stays alive (is not destroyed) while any call that was given it runs.
    #[allow(unsafe_code, reason = "the constructor carries the stream contract")]
    pub unsafe fn from_ptr<T>(ptr: *mut T) -> Self {
        RawStream(ptr as usize)
    }

    /// Wraps a vendor stream pointer given as an integer (as frameworks expose them,
    /// e.g. `torch.cuda.Stream.cuda_stream`).
    ///
    /// # Safety
    /// As [`RawStream::from_ptr`].
    #[allow(unsafe_code, reason = "the constructor carries the stream contract")]
    pub unsafe fn from_raw(value: usize) -> Self {
        RawStream(value)
    }

    /// The stream pointer as an integer.
    pub fn as_raw(self) -> usize {
        self.0
    }

    /// The vendor stream pointer.
    pub fn as_ptr<T>(self) -> *mut T {
        self.0 as *mut T
    }

    /// Whether this is the default (null) stream.
    pub fn is_default(self) -> bool {
        self.0 == 0
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

/// Who may import an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PidValidation {
    /// Only processes named by `grant` may import (the vendors' default).
    #[default]
    Trustlist,
    /// Any process on the node may import (`…_DISABLE_PID_VALIDATION`).
    AnyProcess,
}

/// Options for `export`, `export_external` and `export_signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExportOptions {
    /// Who may import.
    pub validation: PidValidation,
}

impl ExportOptions {
    /// Only granted processes may import (the default).
    pub const fn trustlist() -> Self {
        ExportOptions {
            validation: PidValidation::Trustlist,
        }
    }

    /// Any process may import; `grant` becomes unnecessary.
    pub const fn any_process() -> Self {
        ExportOptions {
            validation: PidValidation::AnyProcess,
        }
    }
}

/// Options for `allocate_with`: how the memory is made, which decides how it is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AllocateOptions {
    /// The mechanism the memory will be exported with; `None` lets the backend choose its
    /// default for the runtime it runs on.
    pub mechanism: Option<crate::token::Mechanism>,
}

impl AllocateOptions {
    /// Memory for `mechanism` (e.g. [`Mechanism::HipVmmFd`](crate::Mechanism::HipVmmFd):
    /// HIP virtual memory shared as a file descriptor).
    pub const fn mechanism(mechanism: crate::token::Mechanism) -> Self {
        AllocateOptions {
            mechanism: Some(mechanism),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_kind_parses_and_prints() {
        for k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>().unwrap(), k);
            assert_eq!(BackendKind::from_wire(k.wire()), Some(k));
        }
        assert_eq!(" HIP ".parse::<BackendKind>().unwrap(), BackendKind::Hip);
        assert!(matches!(
            "cuda".parse::<BackendKind>(),
            Err(Error::InvalidArgument { .. })
        ));
        assert_eq!(BackendKind::from_wire(0), None);
    }

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

    #[test]
    fn raw_stream_round_trips_pointer() {
        let mut x = 5u8;
        // SAFETY: the value is only converted back, never used as a stream.
        #[allow(unsafe_code, reason = "test of the unsafe constructor")]
        let s = unsafe { RawStream::from_ptr(&mut x as *mut u8) };
        assert_eq!(s.as_ptr::<u8>(), &mut x as *mut u8);
        assert_eq!(RawStream::DEFAULT.as_ptr::<u8>(), std::ptr::null_mut());
    }

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

    #[test]
    fn export_options_default_to_trustlist() {
        assert_eq!(ExportOptions::default(), ExportOptions::trustlist());
        assert_eq!(
            ExportOptions::any_process().validation,
            PidValidation::AnyProcess
        );
    }
}
