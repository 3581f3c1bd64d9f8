//! Shared state across processes: the state directory and everything in it.
//!
//! [`State`] bundles the configuration with the [`Registry`] of the configured state
//! directory; the surfaces use [`State::global`] (one per process, from the environment),
//! tests use [`State::open`] with an explicit [`Config`]. The submodules each do one job:
//!
//! | module | job |
//! |---|---|
//! | [`dir`] | create / validate the private directory (0700, owner, no symlink) |
//! | [`layout`] | file names inside it |
//! | [`lock`] | RAII `flock` locks |
//! | [`process`] | pid + start-time identity, liveness |
//! | [`ids`] | object ids (salt + counter) |
//! | [`ledger`] | the id counter and per-device memory accounting |
//! | [`meta`] | an object's metadata and its text format |
//! | [`segment`] | `MAP_SHARED` data files, address reservations |
//! | [`registry`] | create / look up / lease / free objects |
//! | [`futex`] | cross-process wait/wake on shared words, binary semaphore |
//! | [`gc`] | the directory scan that reclaims what dead processes left |
//! | [`violations`] | records of vendor rules broken where hardware would fault or corrupt |

pub mod dir;
pub mod futex;
pub mod gc;
pub mod ids;
pub mod layout;
pub mod ledger;
pub mod lock;
pub mod meta;
pub mod process;
pub mod registry;
pub mod segment;
pub mod violations;

use std::sync::OnceLock;

pub use dir::EmuDir;
pub use futex::BinarySemaphore;
pub use gc::GcReport;
pub use ids::ObjectId;
pub use meta::{Holder, ObjectFlags, ObjectInfo, ObjectKind, ObjectMeta, Vendor};
pub use process::ProcessIdentity;
pub use registry::{Backing, Created, NewObject, Registry, Released};
pub use segment::{LivePin, Reservation, Segment, SharedMapping};
pub use violations::Violation;

use crate::config::Config;
use crate::error::EmuError;

/// The emulator state of one process: configuration plus the registry of its state
/// directory.
#[derive(Debug)]
pub struct State {
    config: Config,
    registry: Registry,
}

impl State {
    /// Opens (creating if needed) the state directory of `config`.
    pub fn open(config: Config) -> Result<State, EmuError> {
        let registry = Registry::open(&config)?;
        Ok(State { config, registry })
    }

    /// The process-wide state, from [`Config::global`], opened on first use (which also
    /// reclaims the objects of processes that died, [`gc::sweep_on_start`]). Later calls
    /// return the same state, or the same initialisation error (re-reported as
    /// [`EmuError::Unavailable`] with the original message; [`State::global_or_cause`]
    /// gives the original).
    pub fn global() -> Result<&'static State, EmuError> {
        State::global_or_cause().map_err(|cause| EmuError::Unavailable {
            reason: cause.to_string(),
        })
    }

    /// [`State::global`], failing with the original initialisation error (a bad
    /// `DEVIPC_EMU_*` value, an unusable state directory, ...).
    pub fn global_or_cause() -> Result<&'static State, &'static EmuError> {
        static GLOBAL: OnceLock<Result<State, EmuError>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let config = Config::global().map_err(|e| EmuError::Unavailable {
                    reason: e.to_string(),
                })?;
                let state = State::open(config.clone())?;
                // Reclaim what processes that died since the last sweep left behind, as a
                // driver does for an exited process (gc's module docs). Best effort: the
                // directory is usable even if the sweep fails, and the next start or an
                // allocation at the memory limit tries again.
                let _ = gc::sweep_on_start(&state.registry);
                Ok(state)
            })
            .as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The state directory.
    pub fn dir(&self) -> &EmuDir {
        self.registry.dir()
    }

    /// Runs [`gc::gc`] on this state directory.
    pub fn gc(&self) -> Result<GcReport, EmuError> {
        gc::gc(&self.registry)
    }
}
