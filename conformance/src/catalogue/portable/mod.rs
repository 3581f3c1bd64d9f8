//! Portable guarantees: what devipc promises on every backend (DESIGN section 5), checked
//! through the facade (`Runtime`, `SharedBuffer`, `ImportedBuffer`, `Signal`) exactly as
//! a framework uses it, with peers running the facade shell.
//!
//! Two guarantees are about vendor calls that must not happen; those scenarios run the
//! facade on a counting vendor table ([`crate::counting`]) and compare call counts.
//!
//! The rules about memory devipc allocates are [memory rules](crate::rule::Rule::memory):
//! they run once more on the allocation variants (`emulated-hip-vmm`: every buffer is
//! `hip-vmm-fd` memory), with the same scenario. So a scenario allocates with
//! [`Ctx::allocate`] (its facade peers' `alloc` follows the target by itself), shows each
//! token it shares to [`Ctx::shares`], and imports with [`Import::imported`] (a refused
//! `pidfd_getfd` is a skip). The framework-memory rules (`export_external`) stay on the
//! default targets: their memory is `hipMalloc`'s, whatever the variant.
//!
//! One file per topic, each with its rules and scenarios: `memory.rs` (memory devipc
//! allocates: sharing, the same-process shortcut, the import cache, sub-ranges, lifetime,
//! other devices), `grant.rs` (who may import), `external.rs` (framework memory,
//! `export_external`), `signal.rs` (signals), `generation.rs` (signals with
//! generations), `transfer.rs` (copies through imports), `error.rs` (typed
//! errors). [`RULES`] lists
//! them in report order.
//!
//! [`Ctx::allocate`]: crate::ctx::Ctx::allocate
//! [`Ctx::shares`]: crate::ctx::Ctx::shares
//! [`Import::imported`]: crate::catalogue::Import::imported

mod error;
mod external;
mod generation;
mod grant;
mod memory;
mod signal;
mod transfer;

use devipc::{Error, ExportOptions, MemToken, Runtime, Stream};

use crate::catalogue::{Step, pattern};
use crate::ctx::Ctx;
use crate::rule::{Rule, Stop};
use crate::shell::facade::FacadePeer;
use crate::shell::facade::error_kind;

const SIZE: usize = 1 << 20;
const CHECK: usize = 256;

/// Every portable rule, in report order.
pub static RULES: &[Rule] = &[
    memory::CROSS_PROCESS_BYTES,
    memory::SAME_PROCESS_SHORTCUT,
    signal::SAME_PROCESS_IMPORT,
    memory::CACHE_REFCOUNTED,
    memory::FREE_WAITS_FOR_IMPORTERS,
    transfer::CLOSE_WAITS_FOR_COPIES,
    external::EXTERNAL_CLOSE_WAITS_FOR_IMPORTERS,
    memory::SUB_RANGE_OFFSET,
    grant::TRUSTLIST,
    grant::ANY_PROCESS,
    external::EXTERNAL_MEMORY,
    memory::CROSS_DEVICE,
    signal::BINARY_SEMAPHORE,
    signal::WAIT_TIMEOUT,
    generation::ORDERS_STREAMS,
    generation::EACH_OWN,
    generation::BACK_PRESSURE,
    error::WRONG_BACKEND,
    error::CORRUPT_TOKEN,
    error::BAD_DEVICE,
    error::DOUBLE_CLOSE,
];

/// A facade peer (`exporter`) that allocated [`SIZE`] bytes on device 0, wrote
/// `pattern(seed, fill)` at its start, exported the whole buffer with the default options
/// and granted `rt`'s process: the peer, its buffer's id and the token (shown to `ctx`).
fn peer_export(
    ctx: &mut Ctx,
    rt: &Runtime,
    seed: u8,
    fill: usize,
) -> Result<(FacadePeer, u64, MemToken), Stop> {
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate on device 0")?;
    peer.write(id, 0, &pattern(seed, fill)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::default())
        .step("peer export")?;
    ctx.shares(&token)?;
    peer.grant(&token, rt.process_id()).step("peer grant")?;
    Ok((peer, id, token))
}

/// Fails unless `result` is an error of variant `kind`; returns its message.
fn expect_error<T: std::fmt::Debug>(
    what: &str,
    kind: &str,
    result: Result<T, Error>,
) -> Result<String, Stop> {
    match result {
        Err(e) if error_kind(&e) == kind => Ok(format!("{what}: {kind}")),
        Err(e) => Err(Stop::fail(format!(
            "{what}: expected Error::{kind}, got Error::{}: {e}",
            error_kind(&e)
        ))),
        Ok(v) => Err(Stop::fail(format!(
            "{what}: succeeded ({v:?}), expected Error::{kind}"
        ))),
    }
}

/// Holds (or releases) `stream` on the emulator (`devipc::testing`); `false` on a real
/// runtime (no hook).
fn hold(ctx: &Ctx, stream: &Stream, on: bool) -> Result<bool, Stop> {
    if !ctx.target.emulated() {
        return Ok(false);
    }
    if on {
        devipc::testing::hold_stream(stream)
    } else {
        devipc::testing::release_stream(stream)
    }
    .map(|()| true)
    .step("holding the stream")
}
