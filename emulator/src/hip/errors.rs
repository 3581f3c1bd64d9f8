//! `hipError_t` results: the surface's error type, the entry-point wrapper that records
//! the per-thread last error, and the texts of `hipGetErrorName` / `hipGetErrorString`.
//!
//! Every entry point runs its safe logic through `call`, which turns a `Failure` into
//! its code, catches panics (nothing unwinds across the C boundary) and records the
//! failure on the calling thread: in this module's slot ([`last_error`],
//! [`last_error_message`]) and, mirrored, in [`crate::local`]'s per-thread last error, so
//! emulator-aware code can read the rule id as data ([`crate::local::LastError::rule`]).
//!
//! # How the violated rule reaches the caller
//!
//! Real HIP has no call returning a message for the last failure, so:
//!
//! - `hipGetErrorName(code)` returns the canonical name as the emulated version spells
//!   it: a static string (`hipErrorUnknown` for codes that version does not know).
//! - `hipGetErrorString(code)` returns, when the most recent HIP call on this thread
//!   failed with exactly `code`, the detailed text
//!   `"<description>: <api>: <what went wrong> [rule <id>]"`; otherwise the static
//!   description (ROCm 5.x returns the name again, as the real 5.2 runtime does; 6.x and
//!   later a CUDA-style description). The detailed strings are interned and never freed
//!   (at most [`MAX_INTERNED`] distinct texts per process, then the plain description),
//!   so every pointer returned stays valid for the life of the process, as the C
//!   contract of a static string requires. devipc's checked-call helper calls
//!   `hipGetErrorString` right after a failure, so its `Error::Vendor` message names
//!   the rule.
//! - [`last_error_message`] returns the same detail as a `String`; emulator only: devipc
//!   reads it only when its table is the emulator's (`LibrarySource::Emulated`).
//!
//! `hipErrorNotReady` from `hipEventQuery` is a status, not a failure: it is not
//! recorded. A successful call (or a `hipErrorNotReady` status) ends the "most recent
//! call failed" window but leaves the last failure readable by [`last_error_message`].
// Matching on the vendor's constants keeps their C names.
#![allow(non_upper_case_globals)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use devipc_hip_sys::*;

use crate::config::HipVersion;
use crate::error::EmuError;
use crate::local::{self, LastError};

/// Why an entry point fails: the code returned to C, the rule (if a vendor rule was
/// enforced) and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The `hipError_t` to return.
    pub code: hipError_t,
    /// The rule id, when a rule of [`super::rules`] refused the call.
    pub rule: Option<&'static str>,
    /// What went wrong.
    pub message: String,
    /// `false` for statuses that are not failures (`hipErrorNotReady` of a query).
    pub record: bool,
}

/// Result of the surface's safe logic.
pub(crate) type HipResult<T> = Result<T, Failure>;

impl Failure {
    /// A plain failure.
    pub fn new(code: hipError_t, message: impl Into<String>) -> Failure {
        Failure {
            code,
            rule: None,
            message: message.into(),
            record: true,
        }
    }

    /// A failure caused by enforcing `rule`.
    pub fn rule(code: hipError_t, rule: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            rule: Some(rule),
            ..Failure::new(code, message)
        }
    }

    /// A non-success status that is not an error (not recorded as the last error).
    pub fn status(code: hipError_t) -> Failure {
        Failure {
            record: false,
            ..Failure::new(code, "")
        }
    }

    /// `hipErrorInvalidValue`.
    pub fn invalid_value(message: impl Into<String>) -> Failure {
        Failure::new(hipErrorInvalidValue, message)
    }

    /// `hipErrorInvalidHandle`.
    pub fn invalid_handle(message: impl Into<String>) -> Failure {
        Failure::new(hipErrorInvalidHandle, message)
    }
}

/// Why an open of an IPC handle (memory or event) was refused inside the object's registry
/// update: a rule of the surface decided there, or the registry failed.
pub(crate) enum Refusal {
    /// The surface refused (a rule, or a check without one).
    Hip(Failure),
    /// The registry failed.
    Emu(EmuError),
}

impl From<EmuError> for Refusal {
    fn from(e: EmuError) -> Self {
        Refusal::Emu(e)
    }
}

impl Refusal {
    /// The failure to return: the surface's as it is; a registry error saying the handle
    /// names no object of its kind (gone, of another kind, garbage) as `unopenable` makes
    /// it; any other registry error by its code.
    pub fn into_failure(self, unopenable: impl FnOnce(EmuError) -> Failure) -> Failure {
        match self {
            Refusal::Hip(f) => f,
            Refusal::Emu(
                e @ (EmuError::NoSuchObject { .. }
                | EmuError::WrongKind { .. }
                | EmuError::BadHandle { .. }),
            ) => unopenable(e),
            Refusal::Emu(e) => e.into(),
        }
    }
}

/// The refusal of an IPC handle that names no `what` that can be opened: `rule`'s
/// `hipErrorInvalidValue`, or, with the rule switched off, what the runtime does without
/// the check (`broken`, given the message).
pub(crate) fn unopenable_handle(
    rule: &'static str,
    what: &str,
    why: impl std::fmt::Display,
    broken: impl FnOnce(String) -> Failure,
) -> Failure {
    let message = format!("the handle names no {what} that can be opened: {why}");
    if super::rules::enforced(rule) {
        Failure::rule(hipErrorInvalidValue, rule, message)
    } else {
        broken(message)
    }
}

/// The `hipError_t` an infrastructure error maps to when no rule decides otherwise.
pub(crate) fn code_of(e: &EmuError) -> hipError_t {
    match e {
        EmuError::OutOfMemory { .. } | EmuError::HostOutOfMemory { .. } => hipErrorOutOfMemory,
        EmuError::LimitExceeded { .. } => hipErrorOutOfMemory,
        EmuError::InvalidDevice { .. } => hipErrorInvalidDevice,
        EmuError::NoSuchObject { .. }
        | EmuError::BadHandle { .. }
        | EmuError::WrongKind { .. }
        | EmuError::NotHolder { .. }
        | EmuError::InvalidArgument(_)
        | EmuError::UnknownPointer { .. }
        | EmuError::Overlap { .. } => hipErrorInvalidValue,
        // A handle of the parent in a forked child is as invalid as a destroyed one.
        EmuError::UnknownHandle { .. } | EmuError::Forked { .. } => hipErrorInvalidHandle,
        // What a GPU reports after touching freed memory.
        EmuError::Revoked { .. } => hipErrorIllegalAddress,
        EmuError::Config { .. } | EmuError::StateDir { .. } | EmuError::Unavailable { .. } => {
            hipErrorNotInitialized
        }
        EmuError::Io { .. } | EmuError::Sys { .. } => hipErrorOperatingSystem,
        _ => hipErrorUnknown,
    }
}

impl From<EmuError> for Failure {
    fn from(e: EmuError) -> Failure {
        Failure::new(code_of(&e), e.to_string())
    }
}

/// Runs an entry point's logic: `hipSuccess` or the failure's code, recorded on this
/// thread; a panic becomes `hipErrorUnknown` instead of unwinding into C.
pub(crate) fn call(api: &'static str, f: impl FnOnce() -> HipResult<()>) -> hipError_t {
    let outcome = crate::panic_boundary::catch(f, |what| {
        Failure::new(hipErrorUnknown, format!("internal emulator error: {what}"))
    });
    match outcome {
        Ok(()) => {
            note_outcome(None);
            hipSuccess
        }
        Err(f) if !f.record => {
            note_outcome(None);
            f.code
        }
        Err(f) => {
            let message = format!("{api}: {}", f.message);
            match f.rule {
                Some(rule) => local::set_rule_error(f.code, rule, message.clone()),
                None => local::set_last_error(f.code, message.clone()),
            }
            note_outcome(Some(LastError {
                code: f.code,
                rule: f.rule,
                message,
            }));
            f.code
        }
    }
}

#[derive(Default)]
struct Slot {
    /// The latest failure of a HIP call on this thread.
    last: Option<LastError>,
    /// Whether the most recent HIP call on this thread is that failure.
    most_recent_failed: bool,
}

thread_local! {
    static SLOT: RefCell<Slot> = RefCell::new(Slot::default());
}

fn note_outcome(failure: Option<LastError>) {
    // `try_with`: during thread teardown there is nothing left to record into.
    let _ = SLOT.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.most_recent_failed = failure.is_some();
        if failure.is_some() {
            slot.last = failure;
        }
    });
}

/// The latest failure of a HIP call on this thread (code, rule id, message), if any.
///
/// Emulator only: real HIP has no such call. devipc reads it only when its `HipApi` is
/// the emulator's.
pub fn last_error() -> Option<LastError> {
    SLOT.try_with(|slot| slot.borrow().last.clone())
        .ok()
        .flatten()
}

/// The message of the latest failure of a HIP call on this thread, naming the violated
/// rule when there is one (`"hipIpcOpenMemHandle: ... [rule hip.mem.open-in-exporter-rejected]"`),
/// or `""` when no HIP call failed on this thread.
///
/// Emulator only: real HIP has no such call. devipc reads it only when its `HipApi` is
/// the emulator's; everywhere else the same text comes through `hipGetErrorString`
/// right after the failure (see the module docs).
pub fn last_error_message() -> String {
    last_error().map(|e| e.display()).unwrap_or_default()
}

/// The failure to describe in `hipGetErrorString(code)`: the latest one on this thread,
/// if the most recent call failed with exactly `code`.
fn detail_for(code: hipError_t) -> Option<LastError> {
    SLOT.try_with(|slot| {
        let slot = slot.borrow();
        slot.last
            .as_ref()
            .filter(|e| slot.most_recent_failed && e.code == code)
            .cloned()
    })
    .ok()
    .flatten()
}

// ---------------------------------------------------------------------------------------
// Names and descriptions.

/// The `hipError_t` the enum ends with in ROCm 5.x and 6.x, named `hipErrorTbd` there; HIP
/// 7 reuses 1054 for `hipErrorInvalidClusterSize`.
const HIP_ERROR_TBD: hipError_t = 1054;

/// Whether the emulated runtime version defines `code` (api-facts B.5: 911/912 came after
/// 6.2, 914-916 and `hipErrorInvalidClusterSize` with HIP 7).
fn defined_in(code: hipError_t, version: HipVersion) -> bool {
    match code {
        hipErrorInvalidChannelDescriptor | hipErrorInvalidTexture => version.at_least(6, 3),
        hipErrorInvalidResourceType
        | hipErrorInvalidResourceConfiguration
        | hipErrorStreamDetached => version.at_least(7, 0),
        HIP_ERROR_TBD => true,
        other => error_name(other).is_some(),
    }
}

/// The canonical names as C strings, built once from `devipc_hip_sys::ERRORS`; kept for
/// the life of the process.
fn c_names() -> &'static BTreeMap<hipError_t, CString> {
    static NAMES: OnceLock<BTreeMap<hipError_t, CString>> = OnceLock::new();
    NAMES.get_or_init(|| {
        ERRORS
            .iter()
            .filter_map(|&(code, name)| CString::new(name).ok().map(|c| (code, c)))
            .collect()
    })
}

/// `hipGetErrorName(code)` for the emulated `version`: the canonical name, or
/// `hipErrorUnknown` for a code that version does not define. Static.
pub(crate) fn error_name_c(code: hipError_t, version: HipVersion) -> &'static CStr {
    if code == HIP_ERROR_TBD && !version.at_least(7, 0) {
        return c"hipErrorTbd";
    }
    if !defined_in(code, version) {
        return c"hipErrorUnknown";
    }
    c_names()
        .get(&code)
        .map(CString::as_c_str)
        .unwrap_or(c"hipErrorUnknown")
}

/// The CUDA-style description a ROCm 6.x runtime returns from `hipGetErrorString`
/// (wording after CLR `hip_error.cpp`; not verified character by character).
fn description(code: hipError_t) -> &'static CStr {
    match code {
        hipSuccess => c"no error",
        hipErrorInvalidValue => c"invalid argument",
        hipErrorOutOfMemory => c"out of memory",
        hipErrorNotInitialized => c"initialization error",
        hipErrorDeinitialized => c"driver shutting down",
        hipErrorProfilerDisabled => c"profiler disabled while using external profiling tool",
        hipErrorProfilerNotInitialized => c"profiler is not initialized",
        hipErrorProfilerAlreadyStarted => c"profiler already started",
        hipErrorProfilerAlreadyStopped => c"profiler already stopped",
        hipErrorInvalidConfiguration => c"invalid configuration argument",
        hipErrorInvalidPitchValue => c"invalid pitch argument",
        hipErrorInvalidSymbol => c"invalid device symbol",
        hipErrorInvalidDevicePointer => c"invalid device pointer",
        hipErrorInvalidMemcpyDirection => c"invalid copy direction for memcpy",
        hipErrorInsufficientDriver => c"driver version is insufficient for runtime version",
        hipErrorMissingConfiguration => c"__global__ function call is not configured",
        hipErrorPriorLaunchFailure => c"unspecified launch failure in prior launch",
        hipErrorInvalidDeviceFunction => c"invalid device function",
        hipErrorNoDevice => c"no ROCm-capable device is detected",
        hipErrorInvalidDevice => c"invalid device ordinal",
        hipErrorInvalidImage => c"device kernel image is invalid",
        hipErrorInvalidContext => c"invalid device context",
        hipErrorContextAlreadyCurrent => c"context is already current context",
        hipErrorMapFailed => c"mapping of buffer object failed",
        hipErrorUnmapFailed => c"unmapping of buffer object failed",
        hipErrorArrayIsMapped => c"array is mapped",
        hipErrorAlreadyMapped => c"resource already mapped",
        hipErrorNoBinaryForGpu => c"no kernel image is available for execution on the device",
        hipErrorAlreadyAcquired => c"resource already acquired",
        hipErrorNotMapped => c"resource not mapped",
        hipErrorNotMappedAsArray => c"resource not mapped as array",
        hipErrorNotMappedAsPointer => c"resource not mapped as pointer",
        hipErrorECCNotCorrectable => c"uncorrectable ECC error encountered",
        hipErrorUnsupportedLimit => c"limit is not supported on this architecture",
        hipErrorContextAlreadyInUse => {
            c"exclusive-thread device already in use by a different thread"
        }
        hipErrorPeerAccessUnsupported => c"peer access is not supported between these two devices",
        hipErrorInvalidKernelFile => c"invalid kernel file",
        hipErrorInvalidGraphicsContext => c"invalid OpenGL or DirectX context",
        hipErrorInvalidSource => c"device kernel image is invalid",
        hipErrorFileNotFound => c"file not found",
        hipErrorSharedObjectSymbolNotFound => c"shared object symbol not found",
        hipErrorSharedObjectInitFailed => c"shared object initialization failed",
        hipErrorOperatingSystem => c"OS call failed or operation not supported on this OS",
        hipErrorInvalidHandle => c"invalid resource handle",
        hipErrorIllegalState => c"the operation cannot be performed in the present state",
        hipErrorNotFound => c"named symbol not found",
        hipErrorNotReady => c"device not ready",
        hipErrorIllegalAddress => c"an illegal memory access was encountered",
        hipErrorLaunchOutOfResources => c"too many resources requested for launch",
        hipErrorLaunchTimeOut => c"the launch timed out and was terminated",
        hipErrorPeerAccessAlreadyEnabled => c"peer access is already enabled",
        hipErrorPeerAccessNotEnabled => c"peer access has not been enabled",
        hipErrorSetOnActiveProcess => c"cannot set while device is active in this process",
        hipErrorContextIsDestroyed => c"context is destroyed",
        hipErrorAssert => c"device-side assert triggered",
        hipErrorHostMemoryAlreadyRegistered => {
            c"part or all of the requested memory range is already mapped"
        }
        hipErrorHostMemoryNotRegistered => {
            c"pointer does not correspond to a registered memory region"
        }
        hipErrorLaunchFailure => c"unspecified launch failure",
        hipErrorCooperativeLaunchTooLarge => c"too many blocks in cooperative launch",
        hipErrorNotSupported => c"operation not supported",
        hipErrorStreamCaptureUnsupported => c"operation not permitted when stream is capturing",
        hipErrorStreamCaptureInvalidated => {
            c"operation failed due to a previous error during capture"
        }
        hipErrorStreamCaptureMerge => c"operation would result in a merge of separate capture sequences",
        hipErrorStreamCaptureUnmatched => c"capture was not ended in the same stream as it began",
        hipErrorStreamCaptureUnjoined => c"capturing stream has unjoined work",
        hipErrorStreamCaptureIsolation => {
            c"dependency created on uncaptured work in another stream"
        }
        hipErrorStreamCaptureImplicit => {
            c"operation would make the legacy stream depend on a capturing blocking stream"
        }
        hipErrorCapturedEvent => c"operation not permitted on an event last recorded in a capturing stream",
        hipErrorStreamCaptureWrongThread => {
            c"attempt to terminate a thread-local capture sequence from another thread"
        }
        hipErrorGraphExecUpdateFailure => c"the graph update was not performed because it included changes which violated constraints specific to instantiated graph update",
        hipErrorRuntimeMemory => c"runtime memory call returned error",
        hipErrorRuntimeOther => c"runtime call other than memory returned error",
        _ => c"unknown error",
    }
}

/// `hipGetErrorString(code)` without a recent failure: ROCm 5.x returns the name again
/// (observed on 5.2); from 6.0 a description. The exact release of the switch is
/// UNVERIFIED; the emulator uses 6.0.
pub(crate) fn static_error_string(code: hipError_t, version: HipVersion) -> &'static CStr {
    if !version.at_least(6, 0) {
        return error_name_c(code, version);
    }
    if !defined_in(code, version) {
        return c"unknown error";
    }
    description(code)
}

/// Most distinct detailed messages interned per process (then the static text is used).
pub const MAX_INTERNED: usize = 4096;

/// A process-lifetime copy of `text` (deduplicated), or `None` once [`MAX_INTERNED`]
/// distinct texts exist.
fn intern(text: String) -> Option<&'static CStr> {
    // Per process (fork-safe); a child keeps what its parent interned when it can.
    static INTERNED: devipc_core::PerProcess<HashMap<String, &'static CStr>> =
        devipc_core::PerProcess::new(|inherited| inherited.unwrap_or_default());
    let mut map = INTERNED.lock();
    if let Some(s) = map.get(&text) {
        return Some(s);
    }
    if map.len() >= MAX_INTERNED {
        return None;
    }
    let c = CString::new(text.replace('\0', "?")).ok()?;
    let leaked: &'static CStr = Box::leak(c.into_boxed_c_str());
    map.insert(text, leaked);
    Some(leaked)
}

/// `hipGetErrorString(code)` on this thread (see the module docs).
pub(crate) fn error_string_c(code: hipError_t, version: HipVersion) -> &'static CStr {
    let base = static_error_string(code, version);
    match detail_for(code) {
        Some(e) => intern(format!("{}: {}", base.to_string_lossy(), e.display())).unwrap_or(base),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> HipVersion {
        HipVersion::parse(text).unwrap()
    }

    #[test]
    fn names_follow_the_emulated_version() {
        for &(code, name) in ERRORS {
            let want = match code {
                911 | 912 | 914 | 915 | 916 => "hipErrorUnknown",
                1054 => "hipErrorTbd",
                _ => name,
            };
            assert_eq!(
                error_name_c(code, v("6.2")).to_str().unwrap(),
                want,
                "{code}"
            );
            assert_eq!(
                error_name_c(code, v("5.2")).to_str().unwrap(),
                want,
                "{code}"
            );
            assert_eq!(
                error_name_c(code, v("7.1")).to_str().unwrap(),
                name,
                "{code}"
            );
        }
        assert_eq!(
            error_name_c(911, v("6.3")),
            c"hipErrorInvalidChannelDescriptor"
        );
        for bad in [-1, 10, 711, 913, 1055, i32::MIN, i32::MAX] {
            assert_eq!(error_name_c(bad, v("6.2")), c"hipErrorUnknown", "{bad}");
        }
    }

    #[test]
    fn strings_are_names_on_5x_and_descriptions_on_6x() {
        assert_eq!(
            static_error_string(201, v("5.2")),
            c"hipErrorInvalidContext"
        );
        assert_eq!(
            static_error_string(201, v("6.2")),
            c"invalid device context"
        );
        assert_eq!(static_error_string(0, v("6.2")), c"no error");
        assert_eq!(static_error_string(12345, v("6.2")), c"unknown error");
        assert_eq!(static_error_string(12345, v("5.2")), c"hipErrorUnknown");
        for &(code, _) in ERRORS {
            assert!(!static_error_string(code, v("7.0")).is_empty());
        }
    }

    #[test]
    fn string_carries_the_rule_only_right_after_that_failure() {
        let code = call("hipTest", || {
            Err(Failure::rule(
                hipErrorInvalidContext,
                "hip.test.rule",
                "opened in the exporter",
            ))
        });
        assert_eq!(code, hipErrorInvalidContext);
        let s = error_string_c(code, v("6.2")).to_str().unwrap();
        assert_eq!(
            s,
            "invalid device context: hipTest: opened in the exporter [rule hip.test.rule]"
        );
        // Interned: the same text is the same pointer.
        assert_eq!(error_string_c(code, v("6.2")).as_ptr(), s.as_ptr().cast());
        // Another code gets the static text.
        assert_eq!(error_string_c(1, v("6.2")), c"invalid argument");
        assert_eq!(
            last_error_message(),
            "hipTest: opened in the exporter [rule hip.test.rule]"
        );
        assert_eq!(local::last_error().unwrap().rule, Some("hip.test.rule"));
        // A successful call ends the window; the message stays readable.
        assert_eq!(call("hipTest", || Ok(())), hipSuccess);
        assert_eq!(error_string_c(code, v("6.2")), c"invalid device context");
        assert!(last_error_message().contains("hip.test.rule"));
        // Statuses are not failures.
        assert_eq!(
            call("hipTest", || Err(Failure::status(hipErrorNotReady))),
            hipErrorNotReady
        );
        assert_eq!(last_error().unwrap().code, hipErrorInvalidContext);
    }

    #[test]
    fn panics_become_unknown_errors() {
        let code = call("hipTest", || panic!("boom"));
        assert_eq!(code, hipErrorUnknown);
        assert!(
            last_error_message().contains("boom"),
            "{}",
            last_error_message()
        );
    }

    #[test]
    fn infrastructure_errors_map_to_hip_codes() {
        assert_eq!(
            code_of(&EmuError::OutOfMemory {
                device: 0,
                requested: 1,
                used: 1,
                limit: 1
            }),
            hipErrorOutOfMemory
        );
        assert_eq!(
            code_of(&EmuError::InvalidDevice {
                device: 9,
                count: 2
            }),
            hipErrorInvalidDevice
        );
        assert_eq!(
            code_of(&EmuError::UnknownHandle {
                what: "event",
                value: 16
            }),
            hipErrorInvalidHandle
        );
        assert_eq!(
            code_of(&EmuError::Unavailable { reason: "x".into() }),
            hipErrorNotInitialized
        );
    }
}
