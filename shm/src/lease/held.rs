//! devipc's use of leases, with devipc errors: leases live in the
//! [runtime directory](crate::private_dir::runtime_dir), and the holder is always the
//! calling process.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devipc_core::{Error, Result};

use super::{Binding, Lease};
use crate::private_dir::{RUNTIME_DIR_ENV, runtime_dir, runtime_dir_for_devipc};
use crate::process::ProcessIdentity;

fn io_error(what: &str, e: io::Error) -> Error {
    Error::io(format!("{what} (a devipc lease in {RUNTIME_DIR_ENV})"), e)
}

/// A new lease in the runtime directory, for an export.
pub fn create() -> Result<Arc<Lease>> {
    create_bound(0)
}

/// A new lease bound to `generation` (see [`hold_checked`]).
pub fn create_bound(generation: u64) -> Result<Arc<Lease>> {
    create_tagged(generation, 0)
}

/// A new lease bound to `generation` and `tag` (see [`hold_for`]).
pub fn create_tagged(generation: u64, tag: u64) -> Result<Arc<Lease>> {
    let dir = runtime_dir_for_devipc()?;
    Lease::create_tagged(&dir, generation, tag)
        .map(Arc::new)
        .map_err(|e| io_error("creating a lease", e))
}

/// The error for a token whose object its exporter freed.
fn freed() -> Error {
    Error::invalid_argument(format!(
        "the exporter already freed this memory: its tokens cannot be imported any more \
         (or the exporter runs with another {RUNTIME_DIR_ENV})"
    ))
}

/// Adds the calling process's hold on the exporter's lease `name` (from a token).
pub fn hold(name: &[u8]) -> Result<Arc<Lease>> {
    hold_checked(name, None)
}

/// As [`hold`], and refuses (as an invalid token) a `generation` the lease is not
/// bound to: a token relabelled with another object's generation.
pub fn hold_checked(name: &[u8], generation: Option<u64>) -> Result<Arc<Lease>> {
    hold_for(
        name,
        &Binding {
            generation,
            ..Binding::default()
        },
    )
}

/// As [`hold`], and refuses (as an invalid token) a lease the exporter did not bind to
/// what the token claims ([`Binding`]).
pub fn hold_for(name: &[u8], expect: &Binding) -> Result<Arc<Lease>> {
    let dir = runtime_dir_for_devipc()?;
    let lease = Lease::open(&dir, name).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => freed(),
        io::ErrorKind::InvalidInput => Error::invalid_token("malformed lease name in the token"),
        _ => io_error("opening a lease", e),
    })?;
    let me = ProcessIdentity::current().map_err(|e| io_error("reading /proc/self/stat", e))?;
    lease.acquire_for(me, expect).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => freed(),
        io::ErrorKind::InvalidData => Error::invalid_token(e.to_string()),
        _ => io_error("holding a lease", e),
    })?;
    Ok(Arc::new(lease))
}

/// Drops the calling process's hold (after its mapping is closed). Failures are
/// logged (`log::warn!`), not returned: the mapping is gone either way, and a dead
/// process's holds are reclaimed by the exporter anyway.
pub fn drop_hold(lease: &Lease) {
    match ProcessIdentity::current() {
        Ok(me) => lease.release(me),
        Err(e) => log::warn!("devipc: releasing a lease hold failed: {e}"),
    }
}

/// The exporter's own lease `name`, reopened.
pub fn reopen(name: &[u8]) -> Result<Lease> {
    let dir = runtime_dir_for_devipc()?;
    Lease::open(&dir, name).map_err(|e| io_error("reopening a lease", e))
}

/// [`drop_hold`] on the lease `name`; a lease that is gone has no hold to drop.
pub fn drop_hold_by_name(name: &[u8]) {
    match runtime_dir()
        .map_err(io::Error::other)
        .and_then(|dir| Lease::open(&dir, name))
    {
        Ok(lease) => drop_hold(&lease),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("devipc: releasing a lease hold failed: {e}"),
    }
}

/// As [`Lease::release_if_unheld`], with devipc errors: `Ok(None)` while someone holds
/// it, else the result of `release` (the lease is removed when it succeeded).
pub fn release_if_unheld<T>(
    lease: &Lease,
    release: impl FnOnce() -> Result<T>,
) -> Result<Option<T>> {
    let mut result = None;
    lease
        .release_if_unheld(|| {
            let r = release();
            let ok = r.is_ok();
            result = Some(r);
            ok
        })
        .map_err(|e| io_error("checking a lease", e))?;
    result.transpose()
}

/// How often one process sweeps the runtime directory for orphaned lease tables.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// [`super::sweep_orphans`] on the runtime directory, at most once per
/// [`SWEEP_INTERVAL`] per process (backends call it when they open). Returns how many
/// tables it removed (0 when skipped); failures are logged (`log::warn!`; a sweep is a
/// best-effort cleanup).
pub fn sweep_orphans_now_and_then() -> usize {
    static LAST: devipc_core::PerProcess<Option<(std::path::PathBuf, Instant)>> =
        devipc_core::PerProcess::new(devipc_core::fork::forget_inherited);
    let Ok(dir) = runtime_dir() else { return 0 };
    {
        let mut last = LAST.lock();
        if let Some((d, at)) = last.as_ref()
            && *d == dir
            && at.elapsed() < SWEEP_INTERVAL
        {
            return 0;
        }
        *last = Some((dir.clone(), Instant::now()));
    }
    match super::sweep_orphans(&dir) {
        Ok(n) => n,
        Err(e) => {
            log::warn!(
                "devipc: sweeping orphaned leases in {} failed: {e}",
                dir.display()
            );
            0
        }
    }
}
