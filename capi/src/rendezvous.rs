//! The rendezvous (the safe API's `devipc::rendezvous`): an exporter serves a buffer, and
//! signals, at a Unix socket (`devipc_buffer_share`, `devipc_share_server_accept`); an
//! importer connects to it (`devipc_runtime_connect`) and takes what it received (the
//! import, the signals) as handles of their own. The socket carries the importer's process
//! id, which the exporter grants, and the tokens; the kernel's peer credentials
//! (`SO_PEERCRED`) are checked on both sides.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use safe::rendezvous::{ConnectOptions, Connected, ShareOptions, ShareServer};
use safe::{DeviceId, ImportedBuffer, Signal};

use crate::boundary::{Failure, Outcome, call};
use crate::buffer::{buffer, devipc_buffer};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::import::devipc_import;
use crate::options::{devipc_export_options, export_options};
use crate::runtime::{devipc_runtime, runtime};
use crate::signal::{devipc_signal, signal};
use crate::status::devipc_status;

/// An exporter's server at a Unix socket (the safe API's `ShareServer`). Freeing it stops
/// serving and removes the socket.
pub struct devipc_share_server {
    _opaque: [u8; 0],
}

impl Handle for devipc_share_server {
    type Target = RwLock<ShareServer>;
    const KIND: &'static str = "share server";
}

/// What `devipc_runtime_connect` received: the import and the signals, each taken once as
/// a handle of its own.
pub struct devipc_connection {
    _opaque: [u8; 0],
}

/// The parts of a connection not taken yet.
pub struct Received {
    buffer: Mutex<Option<ImportedBuffer>>,
    signals: Mutex<Vec<Option<Signal>>>,
    exporter_pid: u32,
}

impl Handle for devipc_connection {
    type Target = Received;
    const KIND: &'static str = "connection";
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Options of `devipc_buffer_share`. Start from `devipc_share_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct devipc_share_options {
    /// `sizeof(devipc_share_options)` as the caller compiled it.
    pub struct_size: u32,
    /// `DEVIPC_EXPORT_*` flags of the exports (0: each importer is granted as it connects).
    pub export_flags: u32,
    /// The time a connected importer has for the whole exchange, in milliseconds (0: the
    /// default, 10 s).
    pub io_timeout_ms: i64,
    /// Also accept importers running as this uid (-1: only this process's uid).
    pub allow_uid: i64,
    /// Permission bits of the socket file (0: the default, 0600; at most 0777).
    pub socket_mode: u32,
}

/// Options of `devipc_runtime_connect`. Start from `devipc_connect_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct devipc_connect_options {
    /// `sizeof(devipc_connect_options)` as the caller compiled it.
    pub struct_size: u32,
    /// `DEVIPC_CONNECT_*` flags.
    pub flags: u32,
    /// The time the whole rendezvous may take, in milliseconds (0: the default, 30 s).
    pub timeout_ms: i64,
    /// Also trust an exporter running as this uid (-1: only this process's uid).
    pub allow_uid: i64,
}

/// Flag of `devipc_connect_options::flags`: keep retrying, within the timeout, while the
/// socket does not exist yet or nobody listens on it.
pub const DEVIPC_CONNECT_WAIT_FOR_SERVER: u32 = 1;

/// Fills `*opts` with the defaults and its `struct_size`.
///
/// # Safety
/// `opts` is NULL or valid for a write of a `devipc_share_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_share_options_init(
    opts: *mut devipc_share_options,
) -> devipc_status {
    call(|| {
        let defaults = devipc_share_options {
            struct_size: size_of::<devipc_share_options>() as u32,
            export_flags: 0,
            io_timeout_ms: 0,
            allow_uid: -1,
            socket_mode: 0,
        };
        // SAFETY: the caller's guarantee for `opts`.
        unsafe { ffi::put(opts, "opts", defaults) }
    })
}

/// Fills `*opts` with the defaults and its `struct_size`.
///
/// # Safety
/// `opts` is NULL or valid for a write of a `devipc_connect_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connect_options_init(
    opts: *mut devipc_connect_options,
) -> devipc_status {
    call(|| {
        let defaults = devipc_connect_options {
            struct_size: size_of::<devipc_connect_options>() as u32,
            flags: 0,
            timeout_ms: 0,
            allow_uid: -1,
        };
        // SAFETY: the caller's guarantee for `opts`.
        unsafe { ffi::put(opts, "opts", defaults) }
    })
}

/// `*opts` (NULL: the defaults) after its `struct_size` was checked.
///
/// # Safety
/// `opts` is NULL or points to `struct_size` readable bytes beginning with the size.
unsafe fn read_options<T: Copy>(opts: *const T, name: &str) -> Outcome<Option<T>> {
    if opts.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL; every option struct begins with its size (the caller's guarantee).
    let size = unsafe { opts.cast::<u32>().read_unaligned() } as usize;
    if size < size_of::<T>() {
        return Err(Failure::invalid(format!(
            "{name}.struct_size is {size}, at least {} expected: set it with {name}_init",
            size_of::<T>()
        )));
    }
    // SAFETY: the whole struct of this version is readable (checked just above).
    Ok(Some(unsafe { opts.read_unaligned() }))
}

/// A uid option: -1 none, else a `u32`.
fn uid(value: i64, name: &str) -> Outcome<Option<u32>> {
    match value {
        -1 => Ok(None),
        v => u32::try_from(v)
            .map(Some)
            .map_err(|_| Failure::invalid(format!("{name}.allow_uid {v} is neither -1 nor a uid"))),
    }
}

/// A positive millisecond option (0: the default).
fn millis(value: i64, name: &str) -> Outcome<Option<std::time::Duration>> {
    match value {
        0 => Ok(None),
        v if v > 0 => Ok(Some(std::time::Duration::from_millis(v as u64))),
        v => Err(Failure::invalid(format!("{name}: {v} ms is negative"))),
    }
}

/// The safe API's share options for `*opts`.
///
/// # Safety
/// As [`read_options`].
unsafe fn share_options(opts: *const devipc_share_options) -> Outcome<ShareOptions> {
    // SAFETY: the caller's guarantee for `opts`.
    let Some(o) = (unsafe { read_options(opts, "devipc_share_options") })? else {
        return Ok(ShareOptions::new());
    };
    let export = devipc_export_options {
        struct_size: size_of::<devipc_export_options>() as u32,
        flags: o.export_flags,
    };
    // SAFETY: a local struct of this version.
    let mut out = ShareOptions::new().export_options(unsafe { export_options(&export) }?);
    if let Some(t) = millis(o.io_timeout_ms, "devipc_share_options.io_timeout_ms")? {
        out = out.io_timeout(t);
    }
    if let Some(u) = uid(o.allow_uid, "devipc_share_options")? {
        out = out.allow_uid(u);
    }
    if o.socket_mode != 0 {
        out = out.socket_mode(o.socket_mode);
    }
    Ok(out)
}

/// The safe API's connect options for `*opts`.
///
/// # Safety
/// As [`read_options`].
unsafe fn connect_options(opts: *const devipc_connect_options) -> Outcome<ConnectOptions> {
    // SAFETY: the caller's guarantee for `opts`.
    let Some(o) = (unsafe { read_options(opts, "devipc_connect_options") })? else {
        return Ok(ConnectOptions::new());
    };
    if o.flags & !DEVIPC_CONNECT_WAIT_FOR_SERVER != 0 {
        return Err(Failure::invalid(format!(
            "devipc_connect_options.flags {:#x} has bits this library does not know",
            o.flags
        )));
    }
    let mut out =
        ConnectOptions::new().wait_for_server(o.flags & DEVIPC_CONNECT_WAIT_FOR_SERVER != 0);
    if let Some(t) = millis(o.timeout_ms, "devipc_connect_options.timeout_ms")? {
        out = out.timeout(t);
    }
    if let Some(u) = uid(o.allow_uid, "devipc_connect_options")? {
        out = out.allow_uid(u);
    }
    Ok(out)
}

/// Serves `len` bytes of the buffer from `offset` (`len` 0: to its end) at the Unix socket
/// `path` and stores the server's handle in `*out`. Importers then `devipc_runtime_connect`
/// after each `devipc_share_server_accept`.
///
/// # Safety
/// `path` is a NUL-terminated string; `opts` is NULL or a `devipc_share_options` with its
/// `struct_size` set; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_buffer_share(
    buf: *const devipc_buffer,
    offset: usize,
    len: usize,
    path: *const std::ffi::c_char,
    opts: *const devipc_share_options,
    out: *mut *mut devipc_share_server,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let buf = buffer(buf)?;
        // SAFETY: the caller's guarantee for `path`.
        let path = unsafe { ffi::text(path, "path", safe::Error::invalid_argument)? };
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { share_options(opts) }?;
        let end = if len == 0 {
            buf.len()
        } else {
            offset
                .checked_add(len)
                .ok_or_else(|| Failure::invalid("offset + len overflows"))?
        };
        out.set(RwLock::new(buf.share_range(offset..end, path, opts)?))
    })
}

/// Adds `sig` to what importers receive (after the signals added before); add them before
/// accepting.
#[unsafe(no_mangle)]
pub extern "C" fn devipc_share_server_add_signal(
    server: *const devipc_share_server,
    sig: *const devipc_signal,
) -> devipc_status {
    call(|| {
        let server: Arc<RwLock<ShareServer>> = handle::get(server, "server")?;
        let sig = signal(sig)?;
        let mut server = server.write().unwrap_or_else(|p| p.into_inner());
        Ok(server.add_signal(&sig)?)
    })
}

/// Serves the next importer (checks its credentials, grants its process id, sends the
/// tokens) and stores its process id in `*peer_pid` (NULL: not wanted). `timeout_ms`
/// negative (`DEVIPC_WAIT_FOREVER`) waits without a limit; past it, `DEVIPC_ERR_TIMEOUT`
/// (an exchange in progress continues at the next call). A refused or misbehaving peer is
/// this call's error; the server stays usable. Several threads may accept at once.
///
/// # Safety
/// `peer_pid` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_share_server_accept(
    server: *const devipc_share_server,
    timeout_ms: i64,
    peer_pid: *mut u32,
) -> devipc_status {
    call(|| {
        let server: Arc<RwLock<ShareServer>> = handle::get(server, "server")?;
        let server = server.read().unwrap_or_else(|p| p.into_inner());
        let peer = match ffi::timeout(timeout_ms) {
            Some(t) => server.accept_timeout(t)?,
            None => server.accept()?,
        };
        // SAFETY: the caller's guarantee for `peer_pid`.
        unsafe { ffi::put_optional(peer_pid, peer.process_id.0) };
        Ok(())
    })
}

/// Stops serving (once no call on another thread uses the server), removes the socket,
/// frees the handle in `*server` and sets `*server` to NULL (NULL: nothing to do).
/// Importers keep what they imported.
///
/// # Safety
/// `server` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_share_server_free(
    server: *mut *mut devipc_share_server,
) -> devipc_status {
    // SAFETY: the caller's guarantee for `server`.
    call(|| unsafe { handle::free(server, "server") })
}

/// Connects to the exporter serving at the Unix socket `path`, imports what it shares on
/// `device` and stores the connection's handle in `*out`; take the import and the signals
/// from it. Errors: the socket's (`DEVIPC_ERR_IO`: nobody serves there, or an exporter of
/// another uid), the exporter's refusal, `DEVIPC_ERR_TIMEOUT`, then whatever importing the
/// tokens gives.
///
/// # Safety
/// `path` is a NUL-terminated string; `opts` is NULL or a `devipc_connect_options` with
/// its `struct_size` set; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_connect(
    rt: *const devipc_runtime,
    path: *const std::ffi::c_char,
    device: u32,
    opts: *const devipc_connect_options,
    out: *mut *mut devipc_connection,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let rt = runtime(rt)?;
        // SAFETY: the caller's guarantee for `path`.
        let path = unsafe { ffi::text(path, "path", safe::Error::invalid_argument)? };
        // SAFETY: the caller's guarantee for `opts`.
        let opts = unsafe { connect_options(opts) }?;
        let Connected {
            buffer,
            signals,
            exporter,
            ..
        } = rt.connect_with(path, DeviceId(device), opts)?;
        out.set(Received {
            buffer: Mutex::new(Some(buffer)),
            signals: Mutex::new(signals.into_iter().map(Some).collect()),
            exporter_pid: exporter.pid,
        })
    })
}

fn connection(c: *const devipc_connection) -> Outcome<Arc<Received>> {
    handle::get(c, "conn")
}

/// Takes the import of the connection as a handle of its own in `*out` (once: again is
/// `DEVIPC_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connection_take_import(
    conn: *const devipc_connection,
    out: *mut *mut devipc_import,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let taken = lock(&connection(conn)?.buffer).take();
        out.set(taken.ok_or_else(|| Failure::invalid("the connection's import was taken already"))?)
    })
}

/// Stores how many signals the exporter shared in `*count`.
///
/// # Safety
/// `count` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connection_signal_count(
    conn: *const devipc_connection,
    count: *mut usize,
) -> devipc_status {
    call(|| {
        let n = lock(&connection(conn)?.signals).len();
        // SAFETY: the caller's guarantee for `count`.
        unsafe { ffi::put(count, "count", n) }
    })
}

/// Takes signal `index` (in the order the exporter added them) as a handle of its own in
/// `*out` (once: again, or an index past the count, is `DEVIPC_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connection_take_signal(
    conn: *const devipc_connection,
    index: usize,
    out: *mut *mut devipc_signal,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        let conn = connection(conn)?;
        let taken = lock(&conn.signals).get_mut(index).and_then(Option::take);
        out.set(taken.ok_or_else(|| {
            Failure::invalid(format!(
                "no signal {index} to take (past the count, or taken)"
            ))
        })?)
    })
}

/// Stores the exporter's process id, as the kernel reported it, in `*pid` (0 when the
/// exporter lives in a pid namespace this process cannot see).
///
/// # Safety
/// `pid` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connection_exporter_pid(
    conn: *const devipc_connection,
    pid: *mut u32,
) -> devipc_status {
    call(|| {
        let p = connection(conn)?.exporter_pid;
        // SAFETY: the caller's guarantee for `pid`.
        unsafe { ffi::put(pid, "pid", p) }
    })
}

/// Frees the connection in `*conn` (what was not taken from it is released) and sets
/// `*conn` to NULL (NULL: nothing to do).
///
/// # Safety
/// `conn` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_connection_free(
    conn: *mut *mut devipc_connection,
) -> devipc_status {
    // SAFETY: the caller's guarantee for `conn`.
    call(|| unsafe { handle::free(conn, "conn") })
}
