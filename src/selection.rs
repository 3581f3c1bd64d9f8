//! Which backend a [`Runtime`] starts: the constructors that choose and start one, and
//! [`BackendChoice`], the request `DEVIPC_BACKEND` spells, with the `auto` default.
//!
//! [`Runtime::from_env`] reads the request, [`Runtime::from_choice`] follows it (`auto`
//! tries the compiled-in backends in order), and [`Backend::open`] /
//! [`Backend::emulated`], the one place that names each backend's constructor, start the
//! vendor runtime or the emulator. The runtime they start and the backend enum are in
//! `runtime.rs`.

use std::fmt;
use std::str::FromStr;

use devipc_core::{BackendAttempt, BackendKind, Error, Result};

use crate::raw::Backend;
use crate::runtime::Runtime;

impl Runtime {
    /// Starts the vendor runtime of `kind` (discovers and loads its library).
    ///
    /// Fails with [`Error::Unsupported`] when `kind` was not compiled in, and with the
    /// backend's own error (e.g. [`Error::LibraryNotFound`]) when it cannot start.
    pub fn open(kind: BackendKind) -> Result<Runtime> {
        Ok(Runtime::from_backend(Backend::open(kind)?))
    }

    /// Starts the devipc emulator speaking `kind`'s ABI: host shared memory, no device.
    ///
    /// Needs the `emulator` feature (on by default). The emulator's state directory and
    /// device count come from `DEVIPC_EMU_*` (see the README).
    pub fn emulated(kind: BackendKind) -> Result<Runtime> {
        Ok(Runtime::from_backend(Backend::emulated(kind)?))
    }

    /// Starts what `DEVIPC_BACKEND` asks for (`ascend|hip|emulated-ascend|emulated-hip|auto`;
    /// unset means `auto`).
    pub fn from_env() -> Result<Runtime> {
        Runtime::from_env_or(BackendChoice::Auto)
    }

    /// Starts what `DEVIPC_BACKEND` asks for, or `default` when it is unset (demos and
    /// tests pass [`BackendChoice::emulated_default`] to run without a device by default).
    pub fn from_env_or(default: BackendChoice) -> Result<Runtime> {
        let choice = match std::env::var(BackendChoice::ENV_VAR) {
            Ok(value) => value.parse()?,
            Err(std::env::VarError::NotPresent) => default,
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(Error::invalid_argument(format!(
                    "{}={v:?} is not UTF-8",
                    BackendChoice::ENV_VAR
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
}

impl Backend {
    /// Starts the vendor runtime of `kind` (discovers and loads its library): the one place
    /// that names each backend's constructor.
    ///
    /// Fails with [`Error::Unsupported`] when `kind` was not compiled in, and with the
    /// backend's own error (e.g. [`Error::LibraryNotFound`]) when it cannot start.
    pub fn open(kind: BackendKind) -> Result<Backend> {
        match kind {
            #[cfg(feature = "ascend")]
            BackendKind::Ascend => Ok(Backend::from(devipc_ascend::AscendBackend::open()?)),
            #[cfg(feature = "hip")]
            BackendKind::Hip => Ok(Backend::from(devipc_hip::HipBackend::open()?)),
            #[allow(
                unreachable_patterns,
                reason = "reachable when a backend feature is off"
            )]
            other => Err(not_compiled(other)),
        }
    }

    /// Starts the devipc emulator speaking `kind`'s ABI (feature `emulator`): host shared
    /// memory, no device.
    pub fn emulated(kind: BackendKind) -> Result<Backend> {
        if !Backend::is_compiled(kind) {
            return Err(not_compiled(kind));
        }
        cfg_if::cfg_if! {
            if #[cfg(feature = "emulator")] {
                match kind {
                    #[cfg(feature = "ascend")]
                    BackendKind::Ascend => Ok(Backend::from(devipc_ascend::AscendBackend::emulated()?)),
                    #[cfg(feature = "hip")]
                    BackendKind::Hip => Ok(Backend::from(devipc_hip::HipBackend::emulated()?)),
                    #[allow(unreachable_patterns, reason = "reachable when a backend feature is off")]
                    other => Err(not_compiled(other)),
                }
            } else {
                Err(Error::unsupported(
                    kind,
                    "the emulated runtime: devipc was compiled without the `emulator` feature",
                ))
            }
        }
    }

    /// The backend kinds compiled into this build, in a stable order.
    pub const COMPILED: &'static [BackendKind] = &[
        #[cfg(feature = "ascend")]
        BackendKind::Ascend,
        #[cfg(feature = "hip")]
        BackendKind::Hip,
    ];

    /// Whether `kind` was compiled in.
    pub fn is_compiled(kind: BackendKind) -> bool {
        Backend::COMPILED.contains(&kind)
    }
}

/// [`Error::Unsupported`] for a backend kind this build lacks.
fn not_compiled(kind: BackendKind) -> Error {
    Error::unsupported(
        kind,
        format!(
            "this build: devipc was compiled without the `{kind}` feature (enable it in Cargo.toml)"
        ),
    )
}

/// A backend request, as written in `DEVIPC_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The vendor runtime of this kind, discovered and loaded.
    Real(BackendKind),
    /// The devipc emulator speaking this vendor's ABI (host shared memory, no device).
    Emulated(BackendKind),
    /// The first compiled-in vendor runtime that starts.
    Auto,
}

impl BackendChoice {
    /// The environment variable [`Runtime::from_env`](crate::Runtime::from_env) and
    /// [`Runtime::from_env_or`](crate::Runtime::from_env_or) read: `DEVIPC_BACKEND`.
    pub const ENV_VAR: &'static str = "DEVIPC_BACKEND";

    /// Every spelling [`ENV_VAR`](Self::ENV_VAR) accepts.
    pub const ACCEPTED: &'static str = "ascend|hip|emulated-ascend|emulated-hip|auto";

    /// The emulator speaking the ABI of the backend this build prefers (Ascend when both
    /// are compiled in, its trustlists making the stricter default; else the one compiled
    /// in): what demos and tests run on without a device, as
    /// `Runtime::from_env_or(BackendChoice::emulated_default())`.
    pub const fn emulated_default() -> BackendChoice {
        BackendChoice::Emulated(DEFAULT_KIND)
    }

    /// The order `auto` tries real runtimes in: the compiled-in backends.
    pub fn auto_order() -> &'static [BackendKind] {
        Backend::COMPILED
    }
}

impl FromStr for BackendChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim().to_ascii_lowercase();
        if s == "auto" {
            return Ok(BackendChoice::Auto);
        }
        let (emulated, kind) = match s.strip_prefix("emulated-") {
            Some(rest) => (true, rest),
            None => (false, s.as_str()),
        };
        let kind: BackendKind = kind.parse().map_err(|_| {
            Error::invalid_argument(format!(
                "{}=`{s}` is not one of {}",
                BackendChoice::ENV_VAR,
                BackendChoice::ACCEPTED
            ))
        })?;
        Ok(if emulated {
            BackendChoice::Emulated(kind)
        } else {
            BackendChoice::Real(kind)
        })
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendChoice::Real(k) => write!(f, "{k}"),
            BackendChoice::Emulated(k) => write!(f, "emulated-{k}"),
            BackendChoice::Auto => f.write_str("auto"),
        }
    }
}

cfg_if::cfg_if! {
    if #[cfg(all(feature = "ascend", not(feature = "hip")))] {
        /// The backend `auto` and the demos prefer in this build (the only one compiled in).
        const DEFAULT_KIND: BackendKind = BackendKind::Ascend;
    } else if #[cfg(all(feature = "hip", not(feature = "ascend")))] {
        /// The backend `auto` and the demos prefer in this build (the only one compiled in).
        const DEFAULT_KIND: BackendKind = BackendKind::Hip;
    } else {
        /// The backend `auto` and the demos prefer in this build. With both compiled in,
        /// Ascend comes first: its trustlists make the stricter default.
        const DEFAULT_KIND: BackendKind = BackendKind::Ascend;
    }
}

#[cfg(test)]
mod tests {
    use serial_test::serial;

    use super::*;

    #[test]
    fn parses_every_accepted_spelling() {
        assert_eq!(
            "ascend".parse::<BackendChoice>().unwrap(),
            BackendChoice::Real(BackendKind::Ascend)
        );
        assert_eq!(
            " HIP ".parse::<BackendChoice>().unwrap(),
            BackendChoice::Real(BackendKind::Hip)
        );
        assert_eq!(
            "emulated-ascend".parse::<BackendChoice>().unwrap(),
            BackendChoice::Emulated(BackendKind::Ascend)
        );
        assert_eq!(
            "emulated-hip".parse::<BackendChoice>().unwrap(),
            BackendChoice::Emulated(BackendKind::Hip)
        );
        assert_eq!(
            "auto".parse::<BackendChoice>().unwrap(),
            BackendChoice::Auto
        );
        for spelling in BackendChoice::ACCEPTED.split('|') {
            let choice: BackendChoice = spelling.parse().unwrap();
            assert_eq!(choice.to_string(), spelling);
        }
    }

    #[test]
    fn rejects_unknown_backends_with_the_accepted_list() {
        for bad in ["cuda", "emulated-", "emulated-cuda", ""] {
            let err = bad.parse::<BackendChoice>().unwrap_err().to_string();
            assert!(err.contains(BackendChoice::ACCEPTED), "{err}");
        }
    }

    #[test]
    fn default_kind_is_compiled_in() {
        assert!(Backend::is_compiled(DEFAULT_KIND));
        assert_eq!(BackendChoice::auto_order().first(), Some(&DEFAULT_KIND));
        assert_eq!(
            BackendChoice::emulated_default(),
            BackendChoice::Emulated(DEFAULT_KIND)
        );
    }

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
        unsafe { std::env::set_var(BackendChoice::ENV_VAR, "cuda") };
        let err = Runtime::from_env().unwrap_err();
        assert!(err.to_string().contains(BackendChoice::ACCEPTED), "{err}");
        // SAFETY: as above.
        unsafe { std::env::remove_var(BackendChoice::ENV_VAR) };
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
    fn compiled_kinds_follow_the_features() {
        assert_eq!(
            Backend::is_compiled(BackendKind::Ascend),
            cfg!(feature = "ascend")
        );
        assert_eq!(
            Backend::is_compiled(BackendKind::Hip),
            cfg!(feature = "hip")
        );
        assert!(!Backend::COMPILED.is_empty());
    }
}
