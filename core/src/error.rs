//! The one error type of devipc.
//!
//! Every layer returns [`Error`]: discovery and loading (`LibraryNotFound`,
//! `MissingSymbol`), vendor calls (`Vendor`, built by each backend's checked-call helper at
//! the moment of failure, because the library may be gone when the error is printed),
//! token parsing (`InvalidToken`) and argument validation. Messages say what happened and
//! what to do about it.
//!
//! Each variant has a row in the table of kinds (`error/kinds.rs`, one [`ErrorKind`] per
//! variant): its stable name ([`Error::kind`]), its stable numeric code
//! ([`Error::kind_code`], for the C ABI) and its Python exception class.

mod kinds;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend_kind::BackendKind;
use crate::ids::DeviceId;

pub use kinds::{ErrorKind, RETIRED_CODES};

/// Result alias used across devipc.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One place discovery looked for a vendor library, and why it was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// The path or bare library name handed to the dynamic loader.
    pub path: PathBuf,
    /// Where the candidate came from, e.g. `DEVIPC_HIP_LIB` or `$ROCM_PATH/lib`.
    pub origin: String,
    /// The loader's error message (`dlerror`), or why the candidate was skipped.
    pub error: String,
}

impl fmt::Display for LoadAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (from {}): {}",
            self.path.display(),
            self.origin,
            self.error
        )
    }
}

/// Formats the list of attempts, one per line, for [`Error::LibraryNotFound`].
fn list_attempts(tried: &[LoadAttempt]) -> String {
    if tried.is_empty() {
        return " (no candidate paths)".to_owned();
    }
    tried.iter().map(|a| format!("\n  - {a}")).collect()
}

/// What to check when a runtime loads but sees no device: the first error a user of a
/// machine with the vendor's library but no usable device meets. Empty for other codes.
fn vendor_hint(backend: BackendKind, name: &str) -> &'static str {
    match (backend, name) {
        (BackendKind::Hip, "hipErrorNoDevice") => {
            ". No AMD GPU is visible to this process. Check that /dev/kfd and \
             /dev/dri/renderD* exist and that you may open them (membership of the `render` \
             and `video` groups, or the container's --device flags), that \
             HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES do not hide \
             every device, and that `rocminfo` lists a GPU agent (gfx...). Without a GPU, \
             DEVIPC_BACKEND=emulated-hip runs on the devipc emulator"
        }
        (BackendKind::Ascend, "ACL_ERROR_RT_NO_DEVICE") => {
            ". No Ascend NPU is visible to this process. Check that /dev/davinci* and \
             /dev/davinci_manager exist and that you may open them (the HwHiAiUser group, or \
             the container's --device flags), that ASCEND_RT_VISIBLE_DEVICES does not hide \
             every device, and that `npu-smi info` lists the NPUs. Without an NPU, \
             DEVIPC_BACKEND=emulated-ascend runs on the devipc emulator"
        }
        _ => "",
    }
}

/// Formats the visibility variables of [`Error::DeviceNotVisible`].
fn visibility_note(visibility: &[String]) -> String {
    if visibility.is_empty() {
        " (no visibility variable is set here)".to_owned()
    } else {
        format!(" (here: {})", visibility.join(" "))
    }
}

/// Formats the attempts of [`Error::NoBackendStarted`], one backend per line.
fn list_backend_attempts(attempts: &[BackendAttempt]) -> String {
    if attempts.is_empty() {
        return ": no backend is compiled in".to_owned();
    }
    let names: Vec<&str> = attempts.iter().map(|a| a.backend.name()).collect();
    let mut text = format!(
        " (tried {}); set DEVIPC_BACKEND to choose one, or to emulated-{} to run on the \
         devipc emulator without a device:",
        names.join(", then "),
        names[0]
    );
    for a in attempts {
        let error = a.error.to_string().replace('\n', "\n    ");
        text.push_str(&format!("\n  - {}: {error}", a.backend));
    }
    text
}

/// One backend [`Error::NoBackendStarted`] tried, and why it did not start.
#[derive(Debug)]
pub struct BackendAttempt {
    /// The backend tried.
    pub backend: BackendKind,
    /// Why it did not start (e.g. [`Error::LibraryNotFound`], or a no-device
    /// [`Error::Vendor`]).
    pub error: Box<Error>,
}

/// Formats the optional runtime message of a vendor error.
fn vendor_message(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

/// Every failure devipc reports.
///
/// Non-exhaustive: new variants may be added in minor releases.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No candidate path held a loadable vendor library.
    #[error(
        "{backend} runtime library not found; install the vendor runtime or point {env} at it. Tried:{}",
        list_attempts(tried),
        env = backend.library_env_var()
    )]
    LibraryNotFound {
        /// The backend whose library was searched for.
        backend: BackendKind,
        /// Every candidate, in discovery order, with its loader error.
        tried: Vec<LoadAttempt>,
    },

    /// The library loaded but lacks a symbol devipc requires.
    #[error(
        "symbol `{symbol}` is missing from {library}; this runtime is too old or not the vendor's library"
    )]
    MissingSymbol {
        /// Path of the library that was loaded.
        library: PathBuf,
        /// The missing symbol.
        symbol: &'static str,
    },

    /// A vendor call returned an error code. For codes that mean "no device", the
    /// message ends with what to check (device nodes, groups, visibility variables).
    #[error(
        "{backend}: {api} failed with {name} ({code}){}{}",
        vendor_message(message),
        vendor_hint(*backend, name)
    )]
    Vendor {
        /// The backend that made the call.
        backend: BackendKind,
        /// The vendor function, e.g. `hipIpcOpenMemHandle`.
        api: &'static str,
        /// The raw status code (`aclError` or `hipError_t`).
        code: i32,
        /// The code's symbolic name, e.g. `hipErrorInvalidContext`.
        name: String,
        /// The runtime's own message (`aclGetRecentErrMsg`, `hipGetErrorString`).
        message: String,
    },

    /// No backend could start: every backend `DEVIPC_BACKEND=auto` tried failed, each
    /// for its own reason (all are kept, in the order tried).
    #[error("no devipc backend started{}", list_backend_attempts(attempts))]
    NoBackendStarted {
        /// Each backend tried, with its error.
        attempts: Vec<BackendAttempt>,
    },

    /// devipc's own configuration is unusable: an environment variable it reads, or a
    /// directory of its own (the emulator's state directory, the runtime directory) it
    /// refuses. Not a vendor failure: fix the setting named.
    #[error("devipc configuration: {what}: {problem}")]
    Config {
        /// The setting, e.g. `the emulator state directory /dev/shm/x (DEVIPC_EMU_DIR)`.
        what: String,
        /// What is wrong with it and how to fix it.
        problem: String,
    },

    /// A byte or text string is not a valid devipc token.
    #[error("invalid devipc token: {reason}")]
    InvalidToken {
        /// What is wrong with it.
        reason: String,
    },

    /// A token or handle belongs to another backend than the one asked to use it.
    #[error("backend mismatch: expected {expected}, found {found}")]
    BackendMismatch {
        /// What the receiver is.
        expected: String,
        /// What the token or handle says.
        found: String,
    },

    /// The backend or this runtime version cannot do what was asked.
    #[error("{backend} does not support {what}")]
    Unsupported {
        /// The backend that was asked.
        backend: BackendKind,
        /// What was asked of it.
        what: String,
    },

    /// A device id outside `0..count`.
    #[error(
        "invalid device {device}: this backend has {count} device(s), valid ids are 0..{count}"
    )]
    InvalidDevice {
        /// The rejected id.
        device: DeviceId,
        /// How many devices the backend reports.
        count: u32,
    },

    /// A token's device is not among the devices this process sees: its physical
    /// identity matches none of them (another visibility mask, or another machine).
    #[error(
        "the token's device ({device}) is not visible to this process{}; import it with an \
         explicit device index to reach it across devices, or make the device visible",
        visibility_note(visibility)
    )]
    DeviceNotVisible {
        /// The physical identity the token names.
        device: crate::physical::PhysicalDevice,
        /// The visibility variables in force here, as `NAME=value` (empty: none set).
        visibility: Vec<String>,
    },

    /// An argument is out of range or inconsistent.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What is wrong.
        what: String,
    },

    /// A handle that is unknown to this backend: already closed or freed, or from another
    /// backend instance.
    #[error(
        "unknown or already released {kind} handle {id}: it was closed or freed before, or belongs to another runtime"
    )]
    UnknownHandle {
        /// Which kind of handle, e.g. `allocation`, `mapping`, `signal`.
        kind: &'static str,
        /// The backend-internal id.
        id: u64,
    },

    /// An object made by one process was used in a child it `fork`ed (see
    /// [`fork`](crate::fork)): the child must open its own runtime.
    #[error(
        "{what} was made by process {creator} and inherited by its forked child {current}, \
         which cannot use it (vendor runtimes refuse a context inherited across fork, and \
         devipc's leases and tokens name the parent): open a new Runtime in the child, or \
         start children with the 'spawn' or 'forkserver' method"
    )]
    InheritedAcrossFork {
        /// What was used, e.g. `this Runtime`.
        what: &'static str,
        /// The pid of the process that made it.
        creator: u32,
        /// The pid of the child that tried to use it.
        current: u32,
    },

    /// A blocking operation did not complete in time.
    ///
    /// `after` is the time devipc actually waited, measured (see [`Error::timed_out`]),
    /// not the limit asked for: a backend whose vendor counts coarser units, or a loaded
    /// machine, shows here. Where the limit matters, `what` names it.
    #[error("{what} timed out after {after:.3?}")]
    Timeout {
        /// What was waited for (and, where useful, the limit asked for).
        what: String,
        /// How long devipc actually waited, measured.
        after: Duration,
    },

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What devipc was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A copy of a batch was refused when it was enqueued: `index` is the first failing
    /// descriptor of the `count` given (the copies before it were enqueued), `source`
    /// why. A single copy is a batch of one.
    #[error("copy {index} of {count} failed: {source}")]
    Copy {
        /// The index of the first failing descriptor.
        index: usize,
        /// How many descriptors the batch had.
        count: usize,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidToken`].
    pub fn invalid_token(reason: impl Into<String>) -> Self {
        Error::InvalidToken {
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid_argument(what: impl Into<String>) -> Self {
        Error::InvalidArgument { what: what.into() }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(backend: BackendKind, what: impl Into<String>) -> Self {
        Error::Unsupported {
            backend,
            what: what.into(),
        }
    }

    /// [`Error::Timeout`] for a wait that began at `started`: `after` is the time
    /// measured since then, so the message states what was actually waited.
    pub fn timed_out(what: impl Into<String>, started: std::time::Instant) -> Self {
        Error::Timeout {
            what: what.into(),
            after: started.elapsed(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// [`Error::Copy`] for descriptor `index` of `count`.
    pub fn copy_failed(index: usize, count: usize, source: Error) -> Self {
        Error::Copy {
            index,
            count,
            source: Box::new(source),
        }
    }

    /// Shorthand for [`Error::Config`].
    pub fn config(what: impl Into<String>, problem: impl Into<String>) -> Self {
        Error::Config {
            what: what.into(),
            problem: problem.into(),
        }
    }

    /// A stable name of the variant, for reports and logs: `library_not_found`,
    /// `missing_symbol`, `vendor`, `no_backend_started`, `config`, `invalid_token`,
    /// `backend_mismatch`, `unsupported`, `invalid_device`, `device_not_visible`,
    /// `invalid_argument`, `unknown_handle`, `inherited_across_fork`, `timeout`, `io`, `copy`
    /// (the [`ErrorKind::name`] of [`Error::error_kind`], from the table of kinds).
    pub fn kind(&self) -> &'static str {
        self.error_kind().name()
    }

    /// The stable numeric code of the variant ([`ErrorKind::code`]): what the C ABI
    /// returns. Not the vendor's status code, which is [`Error::vendor_code`].
    pub fn kind_code(&self) -> u32 {
        self.error_kind().code()
    }

    /// The vendor status code, when this is a [`Error::Vendor`].
    pub fn vendor_code(&self) -> Option<i32> {
        match self {
            Error::Vendor { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The vendor symbolic name, when this is a [`Error::Vendor`].
    pub fn vendor_name(&self) -> Option<&str> {
        match self {
            Error::Vendor { name, .. } => Some(name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_states_the_time_measured_not_the_limit() {
        let started = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let e = Error::timed_out("waiting for signal 3 (limit 10ms)", started);
        let Error::Timeout { after, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(*after >= Duration::from_millis(30), "{after:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("waiting for signal 3 (limit 10ms) timed out after "),
            "{text}"
        );
        assert!(!text.ends_with("after 10ms"), "{text}");
    }

    #[test]
    fn library_not_found_lists_every_attempt_and_the_override() {
        let e = Error::LibraryNotFound {
            backend: BackendKind::Hip,
            tried: vec![
                LoadAttempt {
                    path: "/opt/rocm/lib/libamdhip64.so".into(),
                    origin: "/opt/rocm/lib".into(),
                    error: "no such file".into(),
                },
                LoadAttempt {
                    path: "libamdhip64.so.5".into(),
                    origin: "loader path".into(),
                    error: "cannot open shared object file".into(),
                },
            ],
        };
        let text = e.to_string();
        assert!(text.contains("DEVIPC_HIP_LIB"), "{text}");
        assert!(text.contains("/opt/rocm/lib/libamdhip64.so"), "{text}");
        assert!(text.contains("libamdhip64.so.5"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn vendor_error_names_api_code_name_and_message() {
        let e = Error::Vendor {
            backend: BackendKind::Ascend,
            api: "aclrtIpcMemImportByKey",
            code: 507899,
            name: "ACL_ERROR_RT_DRV_INTERNAL_ERROR".into(),
            message: "pid not in trustlist".into(),
        };
        assert_eq!(
            e.to_string(),
            "ascend: aclrtIpcMemImportByKey failed with ACL_ERROR_RT_DRV_INTERNAL_ERROR (507899): pid not in trustlist"
        );
        assert_eq!(e.vendor_code(), Some(507899));
        assert_eq!(e.kind(), "vendor");
        assert_eq!(e.vendor_name(), Some("ACL_ERROR_RT_DRV_INTERNAL_ERROR"));
        assert_eq!(Error::invalid_token("x").vendor_code(), None);
    }

    fn no_device(backend: BackendKind, api: &'static str, code: i32, name: &str) -> Error {
        Error::Vendor {
            backend,
            api,
            code,
            name: name.into(),
            message: "no ROCm-capable device is detected".into(),
        }
    }

    #[test]
    fn no_device_errors_say_what_to_check() {
        let hip = no_device(
            BackendKind::Hip,
            "hipGetDeviceCount",
            100,
            "hipErrorNoDevice",
        )
        .to_string();
        for needle in [
            "hipGetDeviceCount failed with hipErrorNoDevice (100): no ROCm-capable device",
            "/dev/kfd",
            "`render`",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "rocminfo",
            "DEVIPC_BACKEND=emulated-hip",
        ] {
            assert!(hip.contains(needle), "{needle:?} missing: {hip}");
        }
        let acl = no_device(
            BackendKind::Ascend,
            "aclrtGetDeviceCount",
            207004,
            "ACL_ERROR_RT_NO_DEVICE",
        )
        .to_string();
        for needle in ["/dev/davinci", "ASCEND_RT_VISIBLE_DEVICES", "npu-smi"] {
            assert!(acl.contains(needle), "{needle:?} missing: {acl}");
        }
        // Other codes get no hint.
        let other = no_device(BackendKind::Hip, "hipMalloc", 2, "hipErrorOutOfMemory");
        assert!(!other.to_string().contains("/dev/kfd"), "{other}");
    }

    #[test]
    fn no_backend_started_keeps_every_backends_cause() {
        let e = Error::NoBackendStarted {
            attempts: vec![
                BackendAttempt {
                    backend: BackendKind::Ascend,
                    error: Box::new(Error::LibraryNotFound {
                        backend: BackendKind::Ascend,
                        tried: vec![LoadAttempt {
                            path: "libascendcl.so".into(),
                            origin: "loader path".into(),
                            error: "cannot open shared object file".into(),
                        }],
                    }),
                },
                BackendAttempt {
                    backend: BackendKind::Hip,
                    error: Box::new(no_device(
                        BackendKind::Hip,
                        "hipGetDeviceCount",
                        100,
                        "hipErrorNoDevice",
                    )),
                },
            ],
        };
        assert_eq!(e.kind(), "no_backend_started");
        let text = e.to_string();
        assert!(
            text.starts_with("no devipc backend started (tried ascend, then hip)"),
            "{text}"
        );
        let ascend = text
            .find("\n  - ascend: ascend runtime library not found")
            .expect(&text);
        let hip = text
            .find("\n  - hip: hip: hipGetDeviceCount failed with hipErrorNoDevice")
            .expect(&text);
        assert!(ascend < hip, "{text}");
        // The nested list of load attempts stays indented under its backend.
        assert!(text.contains("\n      - libascendcl.so"), "{text}");
        assert!(text.contains("/dev/kfd"), "{text}");
        assert!(
            Error::NoBackendStarted { attempts: vec![] }
                .to_string()
                .contains("no backend is compiled in")
        );
    }

    #[test]
    fn config_errors_name_the_setting() {
        let e = Error::config(
            "the emulator state directory /dev/shm/x (DEVIPC_EMU_DIR)",
            "its mode 0755 gives group/others access; run chmod 700 on it",
        );
        assert_eq!(e.kind(), "config");
        assert_eq!(
            e.to_string(),
            "devipc configuration: the emulator state directory /dev/shm/x (DEVIPC_EMU_DIR): \
             its mode 0755 gives group/others access; run chmod 700 on it"
        );
    }
}
