//! The ACL surface's error type, the mapping from infrastructure errors to `aclError`
//! codes, and the thread's "recent error message".
//!
//! Every failing call becomes an [`AclFailure`]: the vendor code, the rule it enforces
//! (if any, see [`super::rules`]) and a message for humans. At the C boundary
//! ([`AclFailure::record`]) it is stored as the thread's last error
//! ([`crate::local::set_rule_error`]); `aclGetRecentErrMsg` returns it once as
//! `"<function>: <message> (<CODE_NAME> <code>) [rule <id>]"` and clears it, as the
//! vendor's "get and clear" does (RT-DOC `aclGetRecentErrMsg`).
//!
//! Infrastructure errors ([`EmuError`]) map to codes as follows:
//!
//! | `EmuError` | code | rule |
//! |---|---|---|
//! | `OutOfMemory`, `HostOutOfMemory` | 207001 `ACL_ERROR_RT_MEMORY_ALLOCATION` | `ascend.mem.device-memory-limit` |
//! | `InvalidDevice` | 107001 `ACL_ERROR_RT_INVALID_DEVICEID` | `ascend.device.id-range-checked` |
//! | `NoSuchObject`, `BadHandle`, `WrongKind`, `UnknownHandle`, `Forked`, `NotHolder` | 107017 `ACL_ERROR_RT_INVALID_HANDLE` | `ascend.handle.valid` |
//! | `UnknownPointer` | 107000 `ACL_ERROR_RT_PARAM_INVALID` | `ascend.mem.known-device-pointer` |
//! | `InvalidArgument`, `Overlap` | 107000 `ACL_ERROR_RT_PARAM_INVALID` | none |
//! | `Timeout` | 107019 `ACL_ERROR_RT_WAIT_TIMEOUT` | `ascend.notify.wait-timeout` |
//! | `LimitExceeded` | 207012 `ACL_ERROR_RT_OVER_LIMIT` | none |
//! | configuration, state directory, I/O, system call, corrupt state | 507899 `ACL_ERROR_RT_DRV_INTERNAL_ERROR` | none |
//!
//! The last row treats the state directory as the emulated driver: its failures are
//! driver errors without a mapping of their own.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use devipc_ascend_sys::codes::{
    ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_RT_OVER_LIMIT,
    ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_SYS_DMA,
};
use devipc_ascend_sys::types::aclError;

use super::rules;
use crate::error::EmuError;
use crate::local;

/// Result alias of the surface's safe layer.
pub type AclResult<T> = Result<T, AclFailure>;

/// A failed ACL call: the code returned to C, the rule enforced (if any), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFailure {
    /// The `aclError` returned.
    pub code: aclError,
    /// The rule id, when the failure enforces one of [`rules::ALL`].
    pub rule: Option<&'static str>,
    /// What went wrong, for humans.
    pub message: String,
}

impl AclFailure {
    /// A violation of `rule`, with the rule's code.
    pub fn rule(rule: &'static str, message: impl Into<String>) -> AclFailure {
        AclFailure {
            code: rules::code_of(rule),
            rule: Some(rule),
            message: message.into(),
        }
    }

    /// A failure with an explicit code and no rule.
    pub fn code(code: aclError, message: impl Into<String>) -> AclFailure {
        AclFailure {
            code,
            rule: None,
            message: message.into(),
        }
    }

    /// A NULL pointer argument (`ascend.param.null-pointer`).
    pub fn null(what: &str) -> AclFailure {
        AclFailure::rule(rules::PARAM_NULL_POINTER, format!("{what} is NULL"))
    }

    /// Stores this failure as the calling thread's last error, the message prefixed by
    /// the function name and followed by the code's name.
    pub fn record(&self, function: &str) {
        let name = devipc_ascend_sys::error_name(self.code).unwrap_or("unknown code");
        let message = format!("{function}: {} ({name} {})", self.message, self.code);
        match self.rule {
            Some(rule) => local::set_rule_error(self.code, rule, message),
            None => local::set_last_error(self.code, message),
        }
    }
}

/// Returns `Err` with `rule`'s code when `violated` and the rule is enforced (see
/// [`rules::enforced`]); `message` is only built when needed.
pub fn check(
    violated: bool,
    rule: &'static str,
    message: impl FnOnce() -> String,
) -> AclResult<()> {
    if violated && rules::enforced(rule) {
        Err(AclFailure::rule(rule, message()))
    } else {
        Ok(())
    }
}

impl From<EmuError> for AclFailure {
    fn from(e: EmuError) -> AclFailure {
        let message = e.to_string();
        let with_rule = |rule| AclFailure::rule(rule, message.clone());
        match e {
            EmuError::OutOfMemory { .. } | EmuError::HostOutOfMemory { .. } => {
                with_rule(rules::MEM_DEVICE_LIMIT)
            }
            EmuError::InvalidDevice { .. } => with_rule(rules::DEVICE_ID_RANGE),
            EmuError::NoSuchObject { .. }
            | EmuError::BadHandle { .. }
            | EmuError::WrongKind { .. }
            | EmuError::UnknownHandle { .. }
            | EmuError::Forked { .. }
            | EmuError::NotHolder { .. } => with_rule(rules::HANDLE_VALID),
            EmuError::UnknownPointer { .. } => with_rule(rules::MEM_KNOWN_POINTER),
            EmuError::Timeout(_) => with_rule(rules::NOTIFY_WAIT_TIMEOUT),
            EmuError::InvalidArgument(_) | EmuError::Overlap { .. } => {
                AclFailure::code(ACL_ERROR_RT_PARAM_INVALID, message)
            }
            EmuError::LimitExceeded { .. } => AclFailure::code(ACL_ERROR_RT_OVER_LIMIT, message),
            // A device access to pages its owner released (rules::KEY_FREE_WHILE_IMPORTED).
            EmuError::Revoked { .. } => AclFailure::code(ACL_ERROR_RT_SYS_DMA, message),
            _ => AclFailure::code(ACL_ERROR_RT_DRV_INTERNAL_ERROR, message),
        }
    }
}

/// The failure reported for a panic caught at the C boundary (a bug in the emulator),
/// given the panic's message.
pub fn internal_panic(what: String) -> AclFailure {
    AclFailure::code(
        ACL_ERROR_RT_INTERNAL_ERROR,
        format!("internal emulator error (panic: {what})"),
    )
}

thread_local! {
    /// The string the latest `aclGetRecentErrMsg` on this thread returned.
    static RECENT: RefCell<CString> = RefCell::new(CString::default());
}

/// `aclGetRecentErrMsg`: takes (gets and clears) the thread's last error and returns its
/// message as a C string; `""` when there is none. The pointer stays valid until the next
/// call on this thread (as documented by the vendor) or the thread's exit; never NULL.
pub fn take_recent_message() -> *const c_char {
    let text = local::take_last_error()
        .map(|e| e.display())
        .unwrap_or_default();
    let c = CString::new(text.replace('\0', "?")).unwrap_or_default();
    RECENT.with(|slot| {
        let mut slot = slot.borrow_mut();
        *slot = c;
        slot.as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ObjectId;
    use devipc_ascend_sys::codes::{
        ACL_ERROR_RT_INVALID_DEVICEID, ACL_ERROR_RT_INVALID_HANDLE, ACL_ERROR_RT_MEMORY_ALLOCATION,
        ACL_ERROR_RT_WAIT_TIMEOUT,
    };

    #[test]
    fn infrastructure_errors_map_to_vendor_codes() {
        let oom = AclFailure::from(EmuError::OutOfMemory {
            device: 0,
            requested: 1,
            used: 2,
            limit: 2,
        });
        assert_eq!(oom.code, ACL_ERROR_RT_MEMORY_ALLOCATION);
        assert_eq!(oom.rule, Some(rules::MEM_DEVICE_LIMIT));
        let dev = AclFailure::from(EmuError::InvalidDevice {
            device: 9,
            count: 2,
        });
        assert_eq!(dev.code, ACL_ERROR_RT_INVALID_DEVICEID);
        let gone = AclFailure::from(EmuError::NoSuchObject {
            id: ObjectId::new(1, 1).unwrap(),
            foreign: false,
        });
        assert_eq!(gone.code, ACL_ERROR_RT_INVALID_HANDLE);
        let t = AclFailure::from(EmuError::Timeout(std::time::Duration::from_secs(1)));
        assert_eq!(t.code, ACL_ERROR_RT_WAIT_TIMEOUT);
        let io = AclFailure::from(EmuError::Unavailable { reason: "x".into() });
        assert_eq!((io.code, io.rule), (ACL_ERROR_RT_DRV_INTERNAL_ERROR, None));
    }

    #[test]
    fn recent_message_is_taken_once() {
        AclFailure::rule(rules::KEY_MIN_LEN, "len 10 < 65").record("aclrtIpcMemGetExportKey");
        let p = take_recent_message();
        assert!(!p.is_null());
        let text = local_text(p);
        assert_eq!(
            text,
            "aclrtIpcMemGetExportKey: len 10 < 65 (ACL_ERROR_RT_PARAM_INVALID 107000) \
             [rule ascend.ipc-key.min-len-65]"
        );
        assert_eq!(local_text(take_recent_message()), "");
        let panic = internal_panic("boom".into());
        assert!(panic.message.contains("boom"));
    }

    #[allow(unsafe_code)]
    fn local_text(p: *const c_char) -> String {
        // SAFETY: `p` comes from `take_recent_message` on this thread and is read before
        // the next call.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    }
}
