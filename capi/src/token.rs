//! Tokens: what crosses the process boundary, as text (`devipc3:...`) or bytes, both
//! ways. A memory token (`devipc_mem_token`) names an export of device memory; a signal
//! token (`devipc_signal_token`) an exported signal. Parsing is checked: bytes or text
//! that are not a valid token are `DEVIPC_ERR_INVALID_TOKEN`, never a crash.

use std::ffi::c_char;
use std::sync::Arc;

use safe::{Error, MemToken, SignalToken};

use crate::boundary::{Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::options::{devipc_backend_kind, kind_value};
use crate::status::devipc_status;

/// A memory token (the safe API's `MemToken`): an export of device memory, for a peer.
pub struct devipc_mem_token {
    _opaque: [u8; 0],
}

impl Handle for devipc_mem_token {
    type Target = MemToken;
    const KIND: &'static str = "memory token";
}

/// A signal token (the safe API's `SignalToken`): an exported signal, for a peer.
pub struct devipc_signal_token {
    _opaque: [u8; 0],
}

impl Handle for devipc_signal_token {
    type Target = SignalToken;
    const KIND: &'static str = "signal token";
}

/// The memory token `token` names.
pub(crate) fn mem_token(token: *const devipc_mem_token) -> Outcome<Arc<MemToken>> {
    handle::get(token, "token")
}

/// The signal token `token` names.
pub(crate) fn signal_token(token: *const devipc_signal_token) -> Outcome<Arc<SignalToken>> {
    handle::get(token, "token")
}

// ---- Memory tokens ----

/// Writes the token's text form (`devipc3:` + URL-safe base64, NUL-terminated) into `buf`
/// (`len` bytes) and its size with the NUL into `*needed` (may be NULL). `buf` NULL with
/// `len` 0 asks for the size (`DEVIPC_ERR_BUFFER_TOO_SMALL`, `*needed` set).
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_to_text(
    token: *const devipc_mem_token,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let text = mem_token(token)?.to_text();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        unsafe { ffi::write_text(&text, "buf", buf.cast(), len, needed) }
    })
}

/// Parses a memory token's text form (NUL-terminated) into a new handle in `*out`.
///
/// # Safety
/// `text` is a NUL-terminated string; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_from_text(
    text: *const c_char,
    out: *mut *mut devipc_mem_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        // SAFETY: the caller's guarantee for `text`.
        let text = unsafe { ffi::text(text, "text", Error::invalid_token) }?;
        out.set(MemToken::from_text(text)?)
    })
}

/// Writes the token's binary form into `buf` (`len` bytes) and its length into `*needed`
/// (may be NULL). Too small (or `buf` NULL with `len` 0): nothing written,
/// `DEVIPC_ERR_BUFFER_TOO_SMALL`.
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_to_bytes(
    token: *const devipc_mem_token,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let bytes = mem_token(token)?.to_bytes();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        unsafe { ffi::write_bytes(&bytes, "buf", buf, len, needed) }
    })
}

/// Parses a memory token's binary form (`len` bytes at `bytes`) into a new handle in `*out`.
///
/// # Safety
/// `bytes` is valid for reads of `len` bytes; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_from_bytes(
    bytes: *const u8,
    len: usize,
    out: *mut *mut devipc_mem_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        // SAFETY: the caller's guarantee for `bytes` and `len`.
        let bytes = unsafe { ffi::slice(bytes, len, "bytes") }?;
        out.set(MemToken::from_bytes(bytes)?)
    })
}

/// Stores the number of bytes the token's export covers in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_len(
    token: *const devipc_mem_token,
    out: *mut u64,
) -> devipc_status {
    call(|| {
        let len = mem_token(token)?.len();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", len) }
    })
}

/// Stores the exporter's device index (in the exporter's process) in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_device(
    token: *const devipc_mem_token,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let device = mem_token(token)?.device().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", device) }
    })
}

/// Stores the backend kind the token belongs to (`DEVIPC_BACKEND_*`) in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_backend_kind(
    token: *const devipc_mem_token,
    out: *mut devipc_backend_kind,
) -> devipc_status {
    call(|| {
        let kind = kind_value(mem_token(token)?.backend());
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", kind) }
    })
}

/// Frees the token handle in `*token` and sets `*token` to NULL (NULL: nothing to do).
/// The export itself lives on: it ends with the buffer it came from.
///
/// # Safety
/// `token` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_mem_token_free(token: *mut *mut devipc_mem_token) -> devipc_status {
    // SAFETY: the caller's guarantee for `token`.
    call(|| unsafe { handle::free(token, "token") })
}

// ---- Signal tokens ----

/// As `devipc_mem_token_to_text`, for a signal token.
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_token_to_text(
    token: *const devipc_signal_token,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let text = signal_token(token)?.to_text();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        unsafe { ffi::write_text(&text, "buf", buf.cast(), len, needed) }
    })
}

/// As `devipc_mem_token_from_text`, for a signal token.
///
/// # Safety
/// `text` is a NUL-terminated string; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_token_from_text(
    text: *const c_char,
    out: *mut *mut devipc_signal_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        // SAFETY: the caller's guarantee for `text`.
        let text = unsafe { ffi::text(text, "text", Error::invalid_token) }?;
        out.set(SignalToken::from_text(text)?)
    })
}

/// As `devipc_mem_token_to_bytes`, for a signal token.
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_token_to_bytes(
    token: *const devipc_signal_token,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let bytes = signal_token(token)?.to_bytes();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        unsafe { ffi::write_bytes(&bytes, "buf", buf, len, needed) }
    })
}

/// As `devipc_mem_token_from_bytes`, for a signal token.
///
/// # Safety
/// `bytes` is valid for reads of `len` bytes; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_token_from_bytes(
    bytes: *const u8,
    len: usize,
    out: *mut *mut devipc_signal_token,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        // SAFETY: the caller's guarantee for `bytes` and `len`.
        let bytes = unsafe { ffi::slice(bytes, len, "bytes") }?;
        out.set(SignalToken::from_bytes(bytes)?)
    })
}

/// Frees the signal token handle in `*token` and sets `*token` to NULL (NULL: nothing to
/// do). The signal itself lives on.
///
/// # Safety
/// `token` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_signal_token_free(
    token: *mut *mut devipc_signal_token,
) -> devipc_status {
    // SAFETY: the caller's guarantee for `token`.
    call(|| unsafe { handle::free(token, "token") })
}
