//! Option structs and enumerations shared by several groups: the backend kind and the
//! export options.
//!
//! Every option struct begins with `uint32_t struct_size`, which the caller sets to
//! `sizeof` the struct it was compiled with (the `*_init` functions do): a library newer
//! than the caller's header reads only the fields that header had, and a struct smaller
//! than the first version of it is `DEVIPC_ERR_INVALID_ARGUMENT`. Passing NULL for options
//! means the defaults.

use safe::{BackendKind, ExportOptions};

use crate::boundary::{Failure, Outcome, call};
use crate::status::devipc_status;

/// A vendor runtime: `DEVIPC_BACKEND_ASCEND` or `DEVIPC_BACKEND_HIP`.
pub type devipc_backend_kind = u32;

/// Huawei Ascend NPUs (ACL runtime).
pub const DEVIPC_BACKEND_ASCEND: devipc_backend_kind = 1;
/// AMD GPUs (HIP).
pub const DEVIPC_BACKEND_HIP: devipc_backend_kind = 2;

/// The kind `kind` names.
pub(crate) fn backend_kind(kind: devipc_backend_kind) -> Outcome<BackendKind> {
    match kind {
        DEVIPC_BACKEND_ASCEND => Ok(BackendKind::Ascend),
        DEVIPC_BACKEND_HIP => Ok(BackendKind::Hip),
        other => Err(Failure::invalid(format!(
            "backend kind {other} is neither DEVIPC_BACKEND_ASCEND (1) nor DEVIPC_BACKEND_HIP (2)"
        ))),
    }
}

/// The C value of `kind`.
pub(crate) fn kind_value(kind: BackendKind) -> devipc_backend_kind {
    match kind {
        BackendKind::Ascend => DEVIPC_BACKEND_ASCEND,
        // `BackendKind` is non-exhaustive; every kind devipc has today is named above.
        _ => DEVIPC_BACKEND_HIP,
    }
}

/// Flag of `devipc_export_options::flags`: any process on the node may import the export,
/// without a grant (the vendors' "disable pid validation"). Without it only the processes
/// granted may import (on backends with access control: Ascend).
pub const DEVIPC_EXPORT_ANY_PROCESS: u32 = 1;

/// Options of the exports (`devipc_buffer_export`, `devipc_runtime_export_external`,
/// `devipc_signal_export`). Start from `devipc_export_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct devipc_export_options {
    /// `sizeof(devipc_export_options)` as the caller compiled it.
    pub struct_size: u32,
    /// `DEVIPC_EXPORT_*` flags, or 0: only granted processes may import.
    pub flags: u32,
}

/// The flags this library knows.
const KNOWN_EXPORT_FLAGS: u32 = DEVIPC_EXPORT_ANY_PROCESS;

/// Fills `*opts` with the defaults (only granted processes may import) and its
/// `struct_size`.
///
/// # Safety
/// `opts` is NULL or valid for a write of a `devipc_export_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn devipc_export_options_init(
    opts: *mut devipc_export_options,
) -> devipc_status {
    call(|| {
        let defaults = devipc_export_options {
            struct_size: size_of::<devipc_export_options>() as u32,
            flags: 0,
        };
        // SAFETY: the caller's guarantee for `opts`.
        unsafe { crate::ffi::put(opts, "opts", defaults) }
    })
}

/// The export options `*opts` names (NULL: the defaults).
///
/// # Safety
/// `opts` is NULL, or points to `struct_size` readable bytes that begin with a
/// `uint32_t struct_size`.
pub(crate) unsafe fn export_options(opts: *const devipc_export_options) -> Outcome<ExportOptions> {
    if opts.is_null() {
        return Ok(ExportOptions::granted_only());
    }
    // SAFETY: not NULL; every option struct begins with its size (the caller's guarantee).
    let size = unsafe { opts.cast::<u32>().read_unaligned() } as usize;
    if size < size_of::<devipc_export_options>() {
        return Err(Failure::invalid(format!(
            "devipc_export_options.struct_size is {size}, at least {} expected: set it with \
             devipc_export_options_init",
            size_of::<devipc_export_options>()
        )));
    }
    // SAFETY: at least the fields of this version are readable (checked just above).
    let flags = unsafe { std::ptr::addr_of!((*opts).flags).read_unaligned() };
    if flags & !KNOWN_EXPORT_FLAGS != 0 {
        return Err(Failure::invalid(format!(
            "devipc_export_options.flags {flags:#x} has bits this library does not know \
             (known: {KNOWN_EXPORT_FLAGS:#x})"
        )));
    }
    Ok(if flags & DEVIPC_EXPORT_ANY_PROCESS != 0 {
        ExportOptions::any_process()
    } else {
        ExportOptions::granted_only()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_for_size_and_flags() {
        let mut opts = devipc_export_options {
            struct_size: 0,
            flags: 0,
        };
        // SAFETY: a local struct.
        assert_eq!(unsafe { devipc_export_options_init(&mut opts) }, 0);
        assert_eq!(
            opts.struct_size as usize,
            size_of::<devipc_export_options>()
        );
        opts.flags = DEVIPC_EXPORT_ANY_PROCESS;
        // SAFETY: as above.
        let any = unsafe { export_options(&opts) }.unwrap();
        assert_eq!(any, ExportOptions::any_process());
        opts.flags = 2;
        // SAFETY: as above.
        assert!(unsafe { export_options(&opts) }.is_err());
        opts.flags = 0;
        opts.struct_size = 4;
        // SAFETY: as above.
        assert!(unsafe { export_options(&opts) }.is_err());
        // SAFETY: NULL is the defaults.
        let defaults = unsafe { export_options(std::ptr::null()) }.unwrap();
        assert_eq!(defaults, ExportOptions::granted_only());
    }
}
