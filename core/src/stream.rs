//! [`RawStream`]: the caller's own vendor stream, passed through the
//! [`DeviceIpc`](crate::DeviceIpc) trait untouched.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_stream_round_trips_pointer() {
        let mut x = 5u8;
        // SAFETY: the value is only converted back, never used as a stream.
        #[allow(unsafe_code, reason = "test of the unsafe constructor")]
        let s = unsafe { RawStream::from_ptr(&mut x as *mut u8) };
        assert_eq!(s.as_ptr::<u8>(), &mut x as *mut u8);
        assert_eq!(RawStream::DEFAULT.as_ptr::<u8>(), std::ptr::null_mut());
    }
}
