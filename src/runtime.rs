//! [`Runtime`]: a started backend, shared by every buffer and signal made from it.
//!
//! The constructors pick the backend (`open`, `emulated`, `from_env`); the RAII types
//! built on a runtime ([`SharedBuffer`](crate::SharedBuffer),
//! [`ImportedBuffer`](crate::ImportedBuffer), [`Signal`](crate::Signal)) each hold a clone
//! of it, so the backend lives as long as anything made from it.

use std::sync::Arc;

use devipc_core::{
    BackendAttempt, BackendInfo, BackendKind, DeviceIpc, Error, ProcessId, Result, TokenOrigin,
};

use crate::backend::Backend;
use crate::import_cache::ImportCache;
use crate::selection::{BACKEND_ENV, BackendChoice};

/// A started backend. Cheap to clone; clones share the backend.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

/// What every clone of a [`Runtime`] shares.
#[derive(Debug)]
pub(crate) struct RuntimeInner {
    pub(crate) backend: Backend,
    /// This process as tokens name it (the backend's process id; Ascend: bare tgid).
    pub(crate) origin: TokenOrigin,
    /// Live imports of this vendor runtime in this process, shared between importers of
    /// the same handle and between runtimes of one backend (DESIGN 5.2).
    pub(crate) imports: Arc<ImportCache>,
}

impl Runtime {
    /// Starts the vendor runtime of `kind` (discovers and loads its library).
    ///
    /// Fails with [`Error::Unsupported`] when `kind` was not compiled in, and with the
    /// backend's own error (e.g. [`Error::LibraryNotFound`]) when it cannot start.
    pub fn open(kind: BackendKind) -> Result<Runtime> {
        let backend = match kind {
            #[cfg(feature = "ascend")]
            BackendKind::Ascend => Backend::from(devipc_ascend::AscendBackend::open()?),
            #[cfg(feature = "hip")]
            BackendKind::Hip => Backend::from(devipc_hip::HipBackend::open()?),
            #[allow(
                unreachable_patterns,
                reason = "reachable when a backend feature is off"
            )]
            other => return Err(not_compiled(other)),
        };
        Ok(Runtime::from_backend(backend))
    }

    /// Starts the devipc emulator speaking `kind`'s ABI: host shared memory, no device.
    ///
    /// Needs the `emulator` feature (on by default). The emulator's state directory and
    /// device count come from `DEVIPC_EMU_*` (see the README).
    pub fn emulated(kind: BackendKind) -> Result<Runtime> {
        if !Backend::is_compiled(kind) {
            return Err(not_compiled(kind));
        }
        cfg_if::cfg_if! {
            if #[cfg(feature = "emulator")] {
                let backend = match kind {
                    #[cfg(feature = "ascend")]
                    BackendKind::Ascend => Backend::from(devipc_ascend::AscendBackend::emulated()?),
                    #[cfg(feature = "hip")]
                    BackendKind::Hip => Backend::from(devipc_hip::HipBackend::emulated()?),
                    #[allow(unreachable_patterns, reason = "reachable when a backend feature is off")]
                    other => return Err(not_compiled(other)),
                };
                Ok(Runtime::from_backend(backend))
            } else {
                Err(Error::unsupported(
                    kind,
                    "the emulated runtime: devipc was compiled without the `emulator` feature",
                ))
            }
        }
    }

    /// Starts what `DEVIPC_BACKEND` asks for (`ascend|hip|emulated-ascend|emulated-hip|auto`;
    /// unset means `auto`).
    pub fn from_env() -> Result<Runtime> {
        Runtime::from_env_or(BackendChoice::Auto)
    }

    /// Starts what `DEVIPC_BACKEND` asks for, or `default` when it is unset (demos and
    /// tests pass `BackendChoice::Emulated(..)` to run without a device by default).
    pub fn from_env_or(default: BackendChoice) -> Result<Runtime> {
        let choice = match std::env::var(BACKEND_ENV) {
            Ok(value) => value.parse()?,
            Err(std::env::VarError::NotPresent) => default,
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(Error::invalid_argument(format!(
                    "{BACKEND_ENV}={v:?} is not UTF-8"
                )));
            }
        };
        Runtime::from_choice(choice)
    }

    /// Starts the backend a [`BackendChoice`] names. `Auto` tries every compiled-in
    /// vendor runtime in [`BackendChoice::auto_order`] and returns the first that starts;
    /// when none does, [`Error::NoBackendStarted`] keeps every backend's own error (an AMD
    /// user with ROCm but no GPU sees HIP's no-device error, not only Ascend's missing
    /// library).
    pub fn from_choice(choice: BackendChoice) -> Result<Runtime> {
        match choice {
            BackendChoice::Real(kind) => Runtime::open(kind),
            BackendChoice::Emulated(kind) => Runtime::emulated(kind),
            BackendChoice::Auto => {
                let mut attempts = Vec::new();
                for &backend in BackendChoice::auto_order() {
                    match Runtime::open(backend) {
                        Ok(rt) => return Ok(rt),
                        Err(e) => attempts.push(BackendAttempt {
                            backend,
                            error: Box::new(e),
                        }),
                    }
                }
                Err(Error::NoBackendStarted { attempts })
            }
        }
    }

    /// Wraps an already started backend.
    ///
    /// The process id tokens are compared against is the backend's
    /// [`process_id`](DeviceIpc::process_id); if the backend cannot tell, `getpid()`.
    pub fn from_backend(backend: Backend) -> Runtime {
        let pid = backend
            .process_id()
            .unwrap_or_else(|_| ProcessId::current());
        Runtime {
            inner: Arc::new(RuntimeInner {
                origin: TokenOrigin::current(pid),
                imports: ImportCache::for_backend(&backend),
                backend,
            }),
        }
    }

    /// The raw backend, for calls the safe API does not wrap.
    pub fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// Kind, library source, version and capabilities of the backend.
    pub fn info(&self) -> &BackendInfo {
        self.inner.backend.info()
    }

    /// The id peers must [`grant`](crate::SharedBuffer::grant) so this process may import
    /// (Ascend: the bare tgid, the host pid even inside a container; HIP: `getpid`).
    pub fn process_id(&self) -> ProcessId {
        self.inner.origin.pid
    }

    /// Number of devices visible to this process.
    pub fn device_count(&self) -> Result<u32> {
        self.inner.backend.device_count()
    }
}

impl RuntimeInner {
    /// Refuses a token produced on another booted host: device memory and signals are
    /// shared between processes of one node only, and the vendor would fail on it with a
    /// less helpful error (or, worse, name an unrelated object).
    pub(crate) fn check_same_host(&self, origin: TokenOrigin) -> Result<()> {
        if self.origin.host.other_host(&origin.host) {
            return Err(Error::invalid_argument(
                "the token was produced on another host (its boot id differs): devipc shares \
                 device memory and signals between processes of one node only",
            ));
        }
        Ok(())
    }
}

/// The error for a backend kind this build left out.
fn not_compiled(kind: BackendKind) -> Error {
    Error::unsupported(
        kind,
        format!(
            "this build: devipc was compiled without the `{kind}` feature (enable it in Cargo.toml)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use serial_test::serial;

    use super::*;
    use crate::probe::ProbeBackend;

    #[test]
    fn a_kind_left_out_of_the_build_is_unsupported_and_names_the_feature() {
        for kind in BackendKind::ALL {
            if Backend::is_compiled(kind) {
                continue;
            }
            for result in [Runtime::open(kind), Runtime::emulated(kind)] {
                let err = result.unwrap_err();
                assert!(matches!(err, Error::Unsupported { backend, .. } if backend == kind));
                assert!(
                    err.to_string().contains(&format!("`{kind}` feature")),
                    "{err}"
                );
            }
        }
    }

    /// No machine here has a device: every compiled-in real backend fails to start with a
    /// typed error (no library, no device, or not implemented yet), never a panic.
    #[test]
    fn real_backends_fail_to_start_with_a_typed_error_without_a_device() {
        for &kind in Backend::COMPILED {
            match Runtime::open(kind) {
                Err(Error::LibraryNotFound { backend, tried }) => {
                    assert_eq!(backend, kind);
                    assert!(!tried.is_empty());
                }
                Err(Error::Vendor { backend, name, .. }) => {
                    assert_eq!(backend, kind);
                    assert!(
                        name.contains("NoDevice") || name.contains("NO_DEVICE"),
                        "{name}"
                    );
                }
                Err(Error::Unsupported { backend, .. }) => assert_eq!(backend, kind),
                other => panic!("{kind}: expected a typed start-up error, got {other:?}"),
            }
        }
    }

    #[test]
    #[serial(devipc_backend_env)]
    fn from_env_rejects_a_bad_choice_and_reports_auto_failures() {
        // SAFETY: env mutation is serialised with every test that touches DEVIPC_BACKEND
        // (`serial`), and no other thread of this test reads the environment meanwhile.
        unsafe { std::env::set_var(BACKEND_ENV, "cuda") };
        let err = Runtime::from_env().unwrap_err();
        assert!(err.to_string().contains(BackendChoice::ACCEPTED), "{err}");
        // SAFETY: as above.
        unsafe { std::env::remove_var(BACKEND_ENV) };
        // `auto` reports every compiled-in backend's own start-up error, in order.
        let auto = Runtime::from_env().unwrap_err();
        let Error::NoBackendStarted { attempts } = &auto else {
            panic!("expected NoBackendStarted, got {auto:?}");
        };
        let tried: Vec<BackendKind> = attempts.iter().map(|a| a.backend).collect();
        assert_eq!(tried, BackendChoice::auto_order());
        let text = auto.to_string();
        for a in attempts {
            let alone = Runtime::open(a.backend).unwrap_err().to_string();
            assert_eq!(a.error.to_string(), alone);
            assert!(
                text.contains(alone.lines().next().unwrap()),
                "{alone} missing from {text}"
            );
        }
    }

    #[test]
    fn runtime_clones_share_the_backend() {
        let rt = Runtime::from_backend(Backend::from(ProbeBackend::new(BackendKind::Ascend)));
        let clone = rt.clone();
        assert!(std::ptr::eq(rt.backend(), clone.backend()));
        assert_eq!(clone.info().kind, BackendKind::Ascend);
    }
}
