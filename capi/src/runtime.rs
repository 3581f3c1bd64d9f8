//! Runtimes: starting a backend ([`devipc_runtime_open_from_env`] and friends), what it
//! reports (kind, devices, physical identity, capabilities), and grants.

use std::ffi::c_char;

use safe::{BackendChoice, DeviceId, MemToken, ProcessId, Runtime};

use crate::boundary::{Failure, Outcome, call};
use crate::ffi;
use crate::handle::{self, Handle};
use crate::options::{backend_kind, devipc_backend_kind, kind_value};
use crate::status::devipc_status;
use crate::token::devipc_mem_token;

/// A started backend (the safe API's `Runtime`). Buffers, imports and signals made from
/// it keep it alive, so its handle may be freed before theirs.
pub struct devipc_runtime {
    _opaque: [u8; 0],
}

impl Handle for devipc_runtime {
    type Target = Runtime;
    const KIND: &'static str = "runtime";
}

/// The runtime `rt` names.
pub(crate) fn runtime(rt: *const devipc_runtime) -> Outcome<std::sync::Arc<Runtime>> {
    handle::get(rt, "rt")
}

/// Starts the backend `DEVIPC_BACKEND` names (`ascend`, `hip`, `emulated-ascend`,
/// `emulated-hip`, `auto`; unset: `auto`, the first vendor runtime that starts) and stores
/// its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write (it is NULL on failure).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_open_from_env(
    out: *mut *mut devipc_runtime,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(Runtime::from_env()?)
    })
}

/// Starts the backend `choice` names, spelled as `DEVIPC_BACKEND` is (`"emulated-hip"`,
/// ...), and stores its handle in `*out`.
///
/// # Safety
/// `choice` is a NUL-terminated string; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_open_choice(
    choice: *const c_char,
    out: *mut *mut devipc_runtime,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        // SAFETY: the caller's guarantee for `choice`.
        let text = unsafe { ffi::text(choice, "choice", safe::Error::invalid_argument) }?;
        let choice: BackendChoice = text.parse()?;
        out.set(Runtime::from_choice(choice)?)
    })
}

/// Starts the vendor runtime of `kind` (discovers and loads its library) and stores its
/// handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_open(
    kind: devipc_backend_kind,
    out: *mut *mut devipc_runtime,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(Runtime::open(backend_kind(kind)?)?)
    })
}

/// Starts the devipc emulator speaking `kind`'s ABI (host shared memory, no device; see
/// `DEVIPC_EMU_*` in the README) and stores its handle in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_open_emulated(
    kind: devipc_backend_kind,
    out: *mut *mut devipc_runtime,
) -> devipc_status {
    call(|| {
        // SAFETY: the caller's guarantee for `out`.
        let out = unsafe { handle::Out::new(out, "out")? };
        out.set(Runtime::emulated(backend_kind(kind)?)?)
    })
}

/// Frees the runtime handle in `*rt` and sets `*rt` to NULL (NULL: nothing to do). The
/// backend stops once every buffer, import and signal made from it is freed too.
///
/// # Safety
/// `rt` is valid for a read and a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_free(rt: *mut *mut devipc_runtime) -> devipc_status {
    // SAFETY: the caller's guarantee for `rt`.
    call(|| unsafe { handle::free(rt, "rt") })
}

/// Stores the runtime's backend kind (`DEVIPC_BACKEND_*`) in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_backend_kind(
    rt: *const devipc_runtime,
    out: *mut devipc_backend_kind,
) -> devipc_status {
    call(|| {
        let kind = kind_value(runtime(rt)?.info().kind);
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", kind) }
    })
}

/// Stores in `*out` whether the runtime is the devipc emulator.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_is_emulated(
    rt: *const devipc_runtime,
    out: *mut bool,
) -> devipc_status {
    call(|| {
        let emulated = runtime(rt)?.info().source.is_emulated();
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", emulated) }
    })
}

/// Writes a one-line description of the runtime, e.g. `"hip 6.2.0 (emulated)"`, as
/// `devipc_last_error_message` writes its text (`needed` may be NULL).
///
/// # Safety
/// `buf` is NULL or valid for writes of `len` bytes; `needed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_describe(
    rt: *const devipc_runtime,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> devipc_status {
    call(|| {
        let text = runtime(rt)?.info().describe();
        // SAFETY: the caller's guarantee for `buf`, `len` and `needed`.
        unsafe { ffi::write_text(&text, "buf", buf.cast(), len, needed) }
    })
}

/// Stores in `*out` the id peers grant so that this process may import: what
/// `devipc_runtime_grant` / `devipc_signal_grant` take (Ascend: the host tgid; HIP: getpid).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_process_id(
    rt: *const devipc_runtime,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let pid = runtime(rt)?.process_id().0;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", pid) }
    })
}

/// Stores the number of devices visible to this process in `*out`.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_device_count(
    rt: *const devipc_runtime,
    out: *mut u32,
) -> devipc_status {
    call(|| {
        let count = runtime(rt)?.device_count()?;
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put(out, "out", count) }
    })
}

/// The physical identity of a device: the same for one device in every process of the
/// host, whatever visibility mask each runs under. Fields the runtime cannot tell have
/// their `has_*` flag false (and are 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct devipc_physical_device {
    /// `sizeof(devipc_physical_device)`, set by the caller before the call.
    pub struct_size: u32,
    /// Whether the PCI address is known (HIP).
    pub has_pci_bus_id: bool,
    /// PCI domain (segment).
    pub pci_domain: u32,
    /// PCI bus.
    pub pci_bus: u8,
    /// PCI device, 0..=31.
    pub pci_device: u8,
    /// PCI function, 0..=7.
    pub pci_function: u8,
    /// Whether the UUID is known.
    pub has_uuid: bool,
    /// The device UUID's 16 bytes.
    pub uuid: [u8; 16],
    /// Whether the physical chip id is known (Ascend).
    pub has_physical_id: bool,
    /// The physical chip id.
    pub physical_id: u32,
}

/// Stores the physical identity of this process's `device` in `*out`, whose `struct_size`
/// the caller set.
///
/// # Safety
/// `out` is valid for writes of `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_physical_device(
    rt: *const devipc_runtime,
    device: u32,
    out: *mut devipc_physical_device,
) -> devipc_status {
    call(|| {
        let p = runtime(rt)?.physical_device(DeviceId(device))?;
        let mut c = devipc_physical_device::default();
        if let Some(pci) = p.pci_bus_id {
            c.has_pci_bus_id = true;
            c.pci_domain = pci.domain;
            c.pci_bus = pci.bus;
            c.pci_device = pci.device;
            c.pci_function = pci.function;
        }
        if let Some(uuid) = p.uuid {
            c.has_uuid = true;
            c.uuid = uuid.0;
        }
        if let Some(id) = p.physical_id {
            c.has_physical_id = true;
            c.physical_id = id;
        }
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put_struct(out, "out", c) }
    })
}

/// What a backend supports on this runtime (read it instead of guessing from the kind).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct devipc_capabilities {
    /// `sizeof(devipc_capabilities)`, set by the caller before the call.
    pub struct_size: u32,
    /// Grants restrict who may import (Ascend); HIP has no access control.
    pub access_control: bool,
    /// Allocating and exporting memory works.
    pub export_allocation: bool,
    /// `devipc_runtime_export_external` of framework memory works.
    pub export_external: bool,
    /// Signals work.
    pub signals: bool,
    /// Importing on another device than the exporter's works (peer access).
    pub cross_device_import: bool,
    /// `DEVIPC_EXPORT_ANY_PROCESS` is honoured.
    pub disable_pid_validation: bool,
}

/// Stores the runtime's capabilities in `*out`, whose `struct_size` the caller set.
///
/// # Safety
/// `out` is valid for writes of `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_capabilities(
    rt: *const devipc_runtime,
    out: *mut devipc_capabilities,
) -> devipc_status {
    call(|| {
        let caps = runtime(rt)?.info().capabilities;
        let c = devipc_capabilities {
            struct_size: 0,
            access_control: caps.access_control,
            export_allocation: caps.export_allocation,
            export_external: caps.export_external,
            signals: caps.signals,
            cross_device_import: caps.cross_device_import,
            disable_pid_validation: caps.disable_pid_validation,
        };
        // SAFETY: the caller's guarantee for `out`.
        unsafe { ffi::put_struct(out, "out", c) }
    })
}

/// The process ids `pids[0..count]`.
///
/// # Safety
/// `pids` is NULL (with `count` 0) or valid for reads of `count` ids.
pub(crate) unsafe fn pid_list(pids: *const u32, count: usize) -> Outcome<Vec<ProcessId>> {
    // SAFETY: the caller's guarantee.
    let pids = unsafe { ffi::slice(pids, count, "pids")? };
    Ok(pids.iter().map(|p| ProcessId(*p)).collect())
}

/// Lets the processes `pids[0..count]` (each peer's `devipc_runtime_process_id`) import
/// `token`, exported from this runtime (a buffer's export or an external one). Needed
/// unless the token was exported with `DEVIPC_EXPORT_ANY_PROCESS` or the backend has no
/// access control.
///
/// # Safety
/// `pids` is valid for reads of `count` ids (NULL when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_runtime_grant(
    rt: *const devipc_runtime,
    token: *const devipc_mem_token,
    pids: *const u32,
    count: usize,
) -> devipc_status {
    call(|| {
        let rt = runtime(rt)?;
        let token: std::sync::Arc<MemToken> = handle::get(token, "token")?;
        // SAFETY: the caller's guarantee for `pids` and `count`.
        let pids = unsafe { pid_list(pids, count)? };
        rt.grant(&token, &pids).map_err(Failure::from)
    })
}
