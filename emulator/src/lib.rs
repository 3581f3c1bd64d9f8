//! The devipc emulator: the ACL and HIP C ABIs over host shared memory.
//!
//! No machine in CI has an Ascend NPU or an AMD GPU. This crate implements the subset of
//! the vendor C APIs that devipc and its conformance suite call, across *real* processes,
//! enforcing the vendors' documented IPC rules with their numeric error codes, so every
//! devipc path runs without an accelerator. It sits below the backends' fn tables
//! (`devipc-ascend-sys::AclApi`, `devipc-hip-sys::HipApi`), which it fills in-process
//! (feature `emulator`) or, through `emulator/cdylib`, as a shared library exporting the
//! vendor symbol names.
//!
//! # Layers
//!
//! ```text
//! acl/, hip/     vendor surfaces: C types, rules (with rule ids), error codes   (phase 2)
//! rules          the shape of a rule (both surfaces), DEVIPC_EMU_BREAK_RULE
//! panic_boundary no panic unwinds into C: it becomes the surface's internal error
//! ───────────────────────────────────────────────────────────────────────────────────
//! stream_queue   ordered per-stream work queues whose waits block only their stream
//! event_words    an event's recorded / completed words (local or shared)
//! machine        the physical devices, their identities, a process's view of them
//! local          this process: address ranges, opaque handle tables, last error
//! handle         object id <-> shareable u64 / 65-byte key / 64-byte handle
//! state          shared across processes: state dir, registry, segments, futex, gc
//! config         DEVIPC_EMU_* from the environment, once per process
//! ```
//! The infrastructure is vendor-agnostic; vendor rules (which flag means what, which
//! code a violation returns, whether same-process import is allowed) live only in the
//! surfaces. All `unsafe` system calls live in `devipc-shm`'s `os` module (shared with the
//! HIP backend); this crate denies `unsafe_code`, and the surfaces allow it only for
//! their `extern "C"` entry points.
//!
//! # State directory
//!
//! Default `/dev/shm/devipc-emu-$UID`, override `DEVIPC_EMU_DIR` ([`config`]; empty is an
//! error); created 0700 and refused if it is a symlink, not a directory, owned by another
//! uid or group/other accessible, or if a component on the way from `/` is owned by
//! another user or writable by others without being sticky ([`state::dir`]).
//!
//! ```text
//! ledger             salt, id counter, bytes in use per device   (the only fixed file)
//! <id>.lock          empty; its flock is the object lock
//! <id>.meta          ObjectMeta as text (kind, device, size, exporter, flags, trustlist,
//!                    holders); replaced atomically by write-tmp + rename
//! <id>.meta.tmp      transient, during an update
//! <id>.seg           data: device memory (charged) or one page of sync words
//! ```
//!
//! # Object ids and handles
//!
//! [`ObjectId`] = `salt:24 | counter:40`: the counter comes from the ledger under its
//! lock, so ids are never reused; the salt is random per state directory, so an id from
//! another directory is recognised as foreign. Handles carry the id ([`handle`]): the
//! Ascend shareable handle *is* the raw id; Ascend keys are
//! `devipc-emu:<vendor>:<kind>:<16 hex>` in 65 bytes; HIP (and ACL event) 64-byte handles
//! hold magic, vendor, kind, id, four payload words and a checksum. Resolving a handle is
//! opening `<id>.lock` and `<id>.meta` by name: O(1), no scan.
//!
//! # Leases (holders)
//!
//! An object lives while it has holders: (pid, process start time, count). The creator
//! holds it once; every import adds one; every release removes one; the operation that
//! removes the last frees it (unlinks its files, returns its bytes to the device's
//! accounting). A holder whose process died (pid gone, zombie, or pid reused: the start
//! time differs) is reclaimed the next time anyone touches the object, and by [`gc`] (the
//! only directory scan) for untouched objects. Existing mappings outlive the unlink, so a
//! late reader sees stale bytes, never a fault.
//!
//! # Locking order
//!
//! 1. object lock (`<id>.lock`, exclusive, for every read-modify-write of an object);
//! 2. ledger lock (`ledger`, exclusive, for creating and freeing objects and for
//!    accounting), only ever taken *after* an object lock or alone;
//!
//! never two object locks at once: an [`Registry::update`] closure must not call the
//! registry (finish one object's update, then start the next). gc's phase 2 holds the
//! ledger lock and only *tries* object locks. Locks are `flock`s on files opened per
//! critical section, so they exclude threads of one process, die with their process, and
//! do not leak into `fork`ed children. The process-local tables of [`local`] have their
//! own short mutexes: never call the registry while inside a [`local::HandleTable::with`]
//! or [`local::RangeMap::update`] closure (copy the value out first).
//!
//! # The futex word
//!
//! `Notify` and `Event` objects have a one-page segment of 32-bit words. Every process maps
//! it `MAP_SHARED`, and [`state::futex`] waits and wakes with non-private `FUTEX_WAIT` /
//! `FUTEX_WAKE` (keyed by file + offset, so it works across processes). Word 0 of a notify
//! is a [`BinarySemaphore`]: record = store 1 + wake all; wait-and-reset = wait until
//! non-zero, then CAS it to 0 (+ wake), with an optional timeout. No lock is held while
//! waiting.
//!
//! # Conventions for the surfaces
//!
//! - Errors: a surface keeps its own error type carrying the vendor code, with
//!   `From<EmuError>` (mapping e.g. `OutOfMemory`, `NoSuchObject`, `BadHandle`,
//!   `WrongKind`, `InvalidDevice` to vendor codes). [`Registry::update`] is generic over
//!   any `E: From<EmuError>`, so a rule check inside the closure returns the vendor code
//!   directly, atomically with the change it guards. At the C boundary, record the
//!   failure with [`local::set_rule_error`] (message names the rule id) or
//!   [`local::set_last_error`].
//! - Rules: each surface lists its rules as [`rules::RuleInfo`] values (one shape for both
//!   vendors). Check [`rules::enforced`]`(rule_id)` right before returning a rule's error,
//!   so `DEVIPC_EMU_BREAK_RULE` can disable exactly that rule (if it is breakable).
//! - Pids: [`state::ProcessIdentity::current`]`()?.pid` is what `aclrtDeviceGetBareTgid`
//!   and `getpid` report and what trustlists hold. Processes sharing a state directory
//!   must share a pid namespace.
//! - All processes sharing a state directory should use the same `DEVIPC_EMU_DEVICES`
//!   and `DEVIPC_EMU_MEM_LIMIT`: the usage is shared, but each process checks its own
//!   configured limit against it.
//! - Process-local objects (`aclrtDrvMemHandle`, `aclrtNotify`, `hipEvent_t`) are
//!   [`local::HandleTable`] values; mapped address ranges go into a [`local::RangeMap`]
//!   so interior pointers resolve and unknown pointers fail.
//!
//! # Using it from a surface (sketch)
//!
//! ```no_run
//! use devipc_emulator::state::{NewObject, ObjectFlags, ObjectKind, ProcessIdentity, Vendor};
//! use devipc_emulator::{EmuError, State};
//!
//! # fn main() -> Result<(), EmuError> {
//! let state = State::global()?;
//! let reg = state.registry();
//! // Exporter: allocate 2 MiB on device 0 (charged to its limit), map it, export it.
//! let created = reg.create(NewObject::memory(Vendor::Acl, 0, 2 << 20))?;
//! let mapping = created.segment.as_ref().expect("memory has a segment").map()?;
//! let device_ptr = mapping.addr();
//! let id = created.meta.id();
//! reg.update(id, |m| {
//!     m.flags.insert(ObjectFlags::EXPORTED);
//!     m.trust(&[4242])
//! })?;
//! let shareable_handle: u64 = id.raw();
//! # let _ = (device_ptr, shareable_handle);
//!
//! // Importer (another process): resolve, check rules, become a holder, map.
//! let me = devipc_emulator::state::process::current()?;
//! let id = reg.resolve(shareable_handle)?;
//! reg.update(id, |m| {
//!     m.expect(Vendor::Acl, ObjectKind::Memory)?;
//!     if m.info().exporter.pid == me.pid && state.config().enforces("ascend.vmm.same-process-import-rejected") {
//!         return Err(EmuError::InvalidArgument("same-process import".into()));
//!     }
//!     if !m.is_trusted(me.pid) {
//!         return Err(EmuError::InvalidArgument("not on the trustlist".into()));
//!     }
//!     m.add_holder(me).map(drop)
//! })?;
//! let imported = reg.open_segment(id)?.map()?;
//! // ... later, in each process: drop the mapping, then
//! drop(imported);
//! reg.release(id, me)?;
//!
//! // A notify: create (one page of words), export as a 65-byte key, record / wait.
//! let notify = reg.create(NewObject::notify(Vendor::Acl, 0))?;
//! let key = devipc_emulator::handle::encode_key(Vendor::Acl, ObjectKind::Notify, notify.meta.id());
//! let words = notify.segment.as_ref().expect("notify has words").map()?;
//! let sem = devipc_emulator::BinarySemaphore::new(words.word(0)?);
//! sem.record()?; // aclrtRecordNotify, in any process that mapped it
//! sem.wait_and_reset(Some(std::time::Duration::from_secs(5)))?; // aclrtWaitAndResetNotify
//! # let _ = key;
//! # Ok(()) }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]

pub mod acl;
pub mod config;
pub mod error;
pub mod event_words;
pub mod handle;
pub mod hip;
pub mod local;
pub mod machine;
mod panic_boundary;
pub mod rules;
pub mod state;
pub mod stream_queue;

pub use acl::acl_api;
pub use config::{Config, HipVersion, PeerMatrix};
pub use error::{EmuError, Result};
pub use hip::hip_api;
pub use state::{BinarySemaphore, GcReport, ObjectId, Registry, State};

/// Starts the process-wide emulator (its `DEVIPC_EMU_*` configuration and state
/// directory) for a devipc backend, or says why it cannot as devipc's own error: a
/// malformed variable or a refused or unusable state directory is
/// [`devipc_core::Error::Config`], naming the setting to fix. (Through the vendor C ABI the
/// same failure can only be a vendor code, e.g. `aclInit`'s
/// `ACL_ERROR_RT_DRV_INTERNAL_ERROR`; the backends call this first.)
pub fn start() -> devipc_core::Result<&'static State> {
    use devipc_core::Error;
    let config = Config::global().map_err(|e| match e {
        EmuError::Config { var, value, reason } => {
            Error::config(format!("{var}={value:?}"), reason)
        }
        other => Error::config(
            "the emulator configuration (DEVIPC_EMU_*)",
            other.to_string(),
        ),
    })?;
    State::global_or_cause().map_err(|e| {
        let what = format!(
            "the emulator state directory {} ({})",
            config.dir.display(),
            config::ENV_DIR
        );
        match e {
            EmuError::StateDir { problem, .. } => Error::config(
                what,
                format!(
                    "{problem}, or set {} to a directory of your own",
                    config::ENV_DIR
                ),
            ),
            other => Error::config(what, other.to_string()),
        }
    })
}

/// Runs garbage collection on the process-wide state directory ([`State::global`]): reclaims
/// holders whose process died, frees objects no live process holds, removes leftovers of
/// killed processes and repairs the per-device memory accounting. See [`state::gc`].
pub fn gc() -> Result<GcReport> {
    State::global()?.gc()
}
