//! Flags and sizes devipc passes to the ACL IPC functions.
//!
//! The `#define`s of `acl/acl_rt.h` for VMM export, key-based IPC memory and notify IPC
//! (api-facts A.3, A.6–A.8), each with the C type of its literal (`0x1UL` is an
//! `unsigned long`, i.e. `u64` on LP64; `0x1U` is `u32`), plus the one size the headers
//! leave unnamed, the IPC key length. The backend builds its calls from these; the
//! emulator validates flags against them. Mind the notify flags: their
//! PID-validation and peer-access bits are `0x02`, not `0x1` as for memory.
#![allow(
    non_upper_case_globals,
    reason = "the vendor's macro names are kept verbatim"
)]

use std::mem::size_of;

use crate::abi::{ConstDecl, ConstKind};

/// Generates constants and their [`ConstDecl`] records.
macro_rules! c_consts {
    ($( $(#[$doc:meta])* $kind:ident $name:ident : $ty:ty = $value:expr; )*) => {
        $( $(#[$doc])* pub const $name: $ty = $value; )*

        /// Records of every constant of this module, for the ABI check.
        pub(crate) const CONST_DECLS: &[ConstDecl] = &[$(
            ConstDecl {
                name: stringify!($name),
                value: $name as i128,
                rust_type: stringify!($ty),
                size: size_of::<$ty>(),
                signed: <$ty>::MIN != 0,
                kind: ConstKind::$kind,
            },
        )*];
    };
}

c_consts! {
    /// `aclrtMemExportToShareableHandle` flag: only processes on the trustlist set with
    /// `aclrtMemSetPidToShareableHandle` may import.
    Macro ACL_RT_VMM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
    /// `aclrtMemExportToShareableHandle` flag: any process may import.
    Macro ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;

    /// `aclrtIpcMemGetExportKey` flag: only processes on the trustlist set with
    /// `aclrtIpcMemSetImportPid` may import.
    Macro ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
    /// `aclrtIpcMemGetExportKey` flag: any process may import.
    Macro ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;
    /// `aclrtIpcMemImportByKey` flag: no peer access is set up.
    Macro ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT: u64 = 0x0;
    /// `aclrtIpcMemImportByKey` flag: enable peer access to the owner's device, for use
    /// from another device (CANN 8.3.RC1 and later; "reserved, 0" before).
    Macro ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x1;

    /// `aclrtNotifyGetExportKey` flag: only processes on the trustlist set with
    /// `aclrtNotifySetImportPid` may import.
    Macro ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT: u64 = 0x0;
    /// `aclrtNotifyGetExportKey` flag: any process may import. Note: `0x02`, unlike the
    /// memory flags.
    Macro ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x02;
    /// `aclrtNotifyImportByKey` flag: no peer access is set up.
    Macro ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT: u64 = 0x0;
    /// `aclrtNotifyImportByKey` flag: enable peer access (recommended by the vendor
    /// docs). Note: `0x02`, unlike the memory flag.
    Macro ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x02;

    /// `aclrtCreateNotify` flag: a notify usable from the host (the default). The header
    /// calls the flag reserved (0); the runtime docs define this and
    /// [`ACL_NOTIFY_DEVICE_USE_ONLY`]. C type `unsigned int`; widen with `u64::from` for
    /// the `uint64_t flag` parameter.
    Macro ACL_NOTIFY_DEFAULT: u32 = 0x0000_0000;
    /// `aclrtCreateNotify` flag: a notify used only on the device.
    Macro ACL_NOTIFY_DEVICE_USE_ONLY: u32 = 0x0000_0001;

    /// `aclrtCreateEventWithFlag` / `aclrtCreateEventExWithFlag` flag: host-synchronisable.
    Macro ACL_EVENT_SYNC: u32 = 0x0000_0001;
    /// Event flag: captures stream progress.
    Macro ACL_EVENT_CAPTURE_STREAM_PROGRESS: u32 = 0x0000_0002;
    /// Event flag: keeps timestamps (`aclrtEventElapsedTime`).
    Macro ACL_EVENT_TIME_LINE: u32 = 0x0000_0008;
    /// Event flag: used on the device only.
    Macro ACL_EVENT_DEVICE_USE_ONLY: u32 = 0x0000_0010;
    /// Event flag: an external event.
    Macro ACL_EVENT_EXTERNAL: u32 = 0x0000_0020;
    /// `aclrtCreateEventExWithFlag` flag: an event that `aclrtIpcGetEventHandle` exports to
    /// other processes (alone: the runtime exports only events whose flag is exactly this).
    Macro ACL_EVENT_IPC: u32 = 0x0000_0040;
    /// Size of `aclrtIpcEventHandle`.
    Macro ACL_IPC_EVENT_HANDLE_SIZE: u32 = 64;

    /// Size of the `versionStr` buffer of `aclsysGetVersionStr`. A C `int` macro, typed
    /// `usize` here because it is a buffer length.
    LengthMacro ACL_PKG_VERSION_MAX_SIZE: usize = 128;
    /// Size of each version-part buffer of `aclCANNPackageVersion`. A C `int` macro, typed
    /// `usize` here because it is a buffer length.
    LengthMacro ACL_PKG_VERSION_PARTS_MAX_SIZE: usize = 64;

    /// Length in bytes of the key buffer of `aclrtIpcMemGetExportKey` and
    /// `aclrtNotifyGetExportKey` (the `len` argument), including the terminating NUL.
    ///
    /// devipc's name: the headers define no constant. The runtime docs say `len` is
    /// "fixed at 65" for IPC memory and "at least 65" for notifies (api-facts C.4, C.6),
    /// and torch_npu uses `kAclIpcHandleSize = 65`.
    Devipc ACL_IPC_KEY_LEN: usize = 65;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_type_and_signedness() {
        let find = |n: &str| CONST_DECLS.iter().find(|c| c.name == n).unwrap();
        let notify = find("ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION");
        assert_eq!((notify.value, notify.size, notify.signed), (2, 8, false));
        let dev = find("ACL_NOTIFY_DEVICE_USE_ONLY");
        assert_eq!((dev.value, dev.size, dev.signed), (1, 4, false));
        assert_eq!(find("ACL_IPC_KEY_LEN").kind, ConstKind::Devipc);
        assert_eq!(find("ACL_IPC_KEY_LEN").value, 65);
    }
}
