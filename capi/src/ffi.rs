//! Reading and writing the caller's memory: out-parameters, input slices and strings,
//! output byte and text buffers. Each helper is `unsafe` with the one contract the header
//! states for every pointer argument: NULL, or valid for the access the function
//! documents, for the length given. NULL where a value is required is
//! [`Failure::Null`], never a dereference.

use std::ffi::{CStr, c_char};
use std::time::Duration;

use crate::boundary::{Failure, Outcome};

/// Stores `value` in `*out`.
///
/// # Safety
/// `out` is NULL or valid for a write of a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, what: &'static str, value: T) -> Outcome {
    if out.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the caller's guarantee that it is valid for a write.
    unsafe { out.write(value) };
    Ok(())
}

/// Stores `value` in `*out` when `out` is not NULL (an optional out-parameter).
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn put_optional<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: not NULL; the caller's guarantee that it is valid for a write.
        unsafe { out.write(value) };
    }
}

/// The `len` bytes at `ptr` (NULL is allowed for `len` 0).
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` bytes, unchanged while the slice is used.
pub(crate) unsafe fn slice<'a, T>(
    ptr: *const T,
    len: usize,
    what: &'static str,
) -> Outcome<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the caller's guarantee for `len` elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `len` writable bytes at `ptr` (NULL is allowed for `len` 0).
///
/// # Safety
/// `ptr` is NULL or valid for writes of `len` bytes, not aliased while the slice is used.
pub(crate) unsafe fn slice_mut<'a>(
    ptr: *mut u8,
    len: usize,
    what: &'static str,
) -> Outcome<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the caller's guarantee for `len` bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// The NUL-terminated UTF-8 string at `ptr`; text that is not UTF-8 is `bad(reason)`.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string, unchanged while the result is used.
pub(crate) unsafe fn text<'a>(
    ptr: *const c_char,
    what: &'static str,
    bad: impl FnOnce(String) -> safe::Error,
) -> Outcome<&'a str> {
    if ptr.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the caller's guarantee of a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str()
        .map_err(|e| Failure::Devipc(bad(format!("`{what}` is not UTF-8 ({e})"))))
}

/// Writes `text` and a NUL into `buf` (`len` bytes) and its size with the NUL into
/// `*needed` (when not NULL). Too small: as much as fits, NUL-terminated (when `len` > 0),
/// and [`Failure::TooSmall`].
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
pub(crate) unsafe fn write_text(
    text: &str,
    what: &'static str,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> Outcome {
    let size = text.len() + 1;
    // SAFETY: the caller's guarantee for `needed`.
    unsafe { put_optional(needed, size) };
    // SAFETY: the caller's guarantee for `buf` and `len`.
    let out = unsafe { slice_mut(buf, len, what)? };
    let n = text.len().min(len.saturating_sub(1));
    if let Some(room) = out.get_mut(..n) {
        room.copy_from_slice(&text.as_bytes()[..n]);
    }
    if let Some(end) = out.get_mut(n) {
        *end = 0;
    }
    if len < size {
        return Err(Failure::TooSmall {
            what,
            len,
            needed: size,
        });
    }
    Ok(())
}

/// Writes `bytes` into `buf` (`len` bytes) and their count into `*needed` (when not NULL);
/// too small: nothing written, and [`Failure::TooSmall`].
///
/// # Safety
/// As [`write_text`].
pub(crate) unsafe fn write_bytes(
    bytes: &[u8],
    what: &'static str,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> Outcome {
    // SAFETY: the caller's guarantee for `needed`.
    unsafe { put_optional(needed, bytes.len()) };
    if len < bytes.len() {
        return Err(Failure::TooSmall {
            what,
            len,
            needed: bytes.len(),
        });
    }
    // SAFETY: the caller's guarantee for `buf` and `len`.
    let out = unsafe { slice_mut(buf, len, what)? };
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// Stores `value` in `*out`, an output struct that begins with `uint32_t struct_size`
/// set by the caller: refused when smaller than this version's struct; the caller's
/// `struct_size` is kept.
///
/// # Safety
/// `out` is NULL or points to `struct_size` writable bytes that begin with a `uint32_t`
/// holding that size; `T` is `repr(C)` and begins with that `u32`.
pub(crate) unsafe fn put_struct<T>(out: *mut T, what: &'static str, value: T) -> Outcome {
    if out.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: not NULL; the struct begins with its size (the caller's guarantee).
    let size = unsafe { out.cast::<u32>().read_unaligned() };
    if (size as usize) < size_of::<T>() {
        return Err(Failure::invalid(format!(
            "`{what}`->struct_size is {size}, at least {} expected: set it to sizeof the struct",
            size_of::<T>()
        )));
    }
    // SAFETY: at least size_of::<T>() writable bytes (checked above).
    unsafe { out.write_unaligned(value) };
    // SAFETY: as above; the caller's size is kept.
    unsafe { out.cast::<u32>().write_unaligned(size) };
    Ok(())
}

/// A wait's limit from milliseconds: negative waits forever.
pub(crate) fn timeout(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_does_not_fit_is_cut_and_terminated() {
        let mut buf = [0xffu8; 4];
        let mut needed = 0;
        // SAFETY: a local buffer and a local size.
        let r = unsafe { write_text("hello", "buf", buf.as_mut_ptr(), 4, &mut needed) };
        assert!(matches!(r, Err(Failure::TooSmall { needed: 6, .. })));
        assert_eq!(&buf, b"hel\0");
        assert_eq!(needed, 6);
        let mut buf = [0xffu8; 6];
        // SAFETY: as above.
        unsafe { write_text("hello", "buf", buf.as_mut_ptr(), 6, std::ptr::null_mut()) }.unwrap();
        assert_eq!(&buf, b"hello\0");
    }

    #[test]
    fn a_size_query_writes_nothing() {
        let mut needed = 0;
        // SAFETY: no buffer, a local size.
        let r = unsafe { write_bytes(b"abc", "buf", std::ptr::null_mut(), 0, &mut needed) };
        assert!(matches!(r, Err(Failure::TooSmall { needed: 3, .. })));
        assert_eq!(needed, 3);
        // SAFETY: a NULL pointer with a length is refused before any write.
        let r = unsafe { write_text("abc", "buf", std::ptr::null_mut(), 8, &mut needed) };
        assert!(matches!(r, Err(Failure::Null("buf"))));
    }

    #[test]
    fn negative_timeouts_wait_forever() {
        assert_eq!(timeout(-1), None);
        assert_eq!(timeout(0), Some(Duration::ZERO));
        assert_eq!(timeout(1500), Some(Duration::from_millis(1500)));
    }
}
