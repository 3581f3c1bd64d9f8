//! Devices, the per-thread current device ("context"), and peer access.
//!
//! Device ids from C are *user* ids ([`super::visibility`]: `ASCEND_RT_VISIBLE_DEVICES`
//! over the container view over the machine's physical devices); [`check_id`] translates
//! one to the physical id that everything inside the surface and in the state directory
//! uses, and [`get_device`] translates back. Per-device state here (use counts, context
//! generations, enabled peers) is kept by physical id.
//!
//! - `aclrtSetDevice(d)` makes `d` the calling thread's current device and counts one use
//!   of `d` by the process; `aclrtResetDevice(d)` uncounts one (a reset of a device the
//!   process does not use is a no-op). When a device's count drops to 0 its default
//!   context is gone: every thread that had it current has no context any more, and the
//!   streams created on it are destroyed (as the vendor's reset releases the context's
//!   streams). Memory and notifies are not released by a reset.
//! - Calls that work on "the current device" fail with `ACL_ERROR_RT_CONTEXT_NULL`
//!   (107002, rule `ascend.context.set-device-required`) on a thread without one:
//!   `aclrtGetDevice`, `aclrtMalloc`, `aclrtCreateStream`, `aclrtDeviceEnablePeerAccess`,
//!   `aclrtIpcMemGetExportKey` / `ImportByKey` / `Close` (as RT-SRC does, api-facts C.4),
//!   `aclrtCreateNotify` and `aclrtNotifyImportByKey`. The VMM calls name their device
//!   explicitly and need no context.
//! - Peer access is per process and one-directional: `aclrtDeviceEnablePeerAccess(p, 0)`
//!   on a thread whose current device is `d` enables `d -> p`; enabling it again is a
//!   no-op success. Which devices can peer at all is configured (`DEVIPC_EMU_PEERS`,
//!   default every pair): `aclrtDeviceCanAccessPeer` reports it (0 for a device and
//!   itself), and enabling peer access between devices that cannot peer fails with 207000
//!   (`ascend.peer.topology-respected`), so key imports with `ENABLE_PEER_ACCESS` and the
//!   cross-device imports that need enabled peer access fail there too.
//! - `aclrtResetDeviceForce(d)` drops every use of `d` at once, as the last reset would.
//!   `aclrtSynchronizeDevice(WithTimeout)` need a current device and wait for the tasks of
//!   the process's streams on it (see [`super::stream`]); a reset waits for them too before
//!   it releases the streams. `aclrtGetMemInfo` reports the current device's emulated HBM.
//! - `aclrtDeviceGetBareTgid` reports the pid of the process. The emulator runs all
//!   processes in one pid namespace and has no container distinction, so the bare tgid
//!   (the host pid the NPU driver sees) is `getpid()`; trustlists hold the same values.

use std::cell::Cell;
use std::collections::BTreeSet;

use crate::config::MAX_DEVICES;
use crate::local::{self, ForkGuard, ForkLocal, forget_inherited};

use super::errors::{AclFailure, AclResult, check};
use super::{process_state, rules, stream, visibility};

/// Per-device use counts of this process and the generation of each device's context.
struct Devices {
    uses: [u64; MAX_DEVICES as usize],
    generation: [u64; MAX_DEVICES as usize],
}

/// A forked child starts with no device in use ([`crate::local`]).
static DEVICES: ForkLocal<Devices> = ForkLocal::new(|_inherited| {
    // Plain counters: nothing to forget.
    Devices {
        uses: [0; MAX_DEVICES as usize],
        generation: [0; MAX_DEVICES as usize],
    }
});

/// Enabled peer access of this process: `(from, to)` device pairs.
static PEERS: ForkLocal<BTreeSet<(u32, u32)>> = ForkLocal::new(forget_inherited);

thread_local! {
    /// The thread's current device and the context generation it was set in, and the
    /// process that set it: the thread that forks keeps its thread-locals in the child,
    /// where no device is set yet.
    static CURRENT: Cell<Option<(u32, u64, u32)>> = const { Cell::new(None) };
}

fn devices() -> ForkGuard<'static, Devices> {
    DEVICES.lock()
}

fn peers() -> ForkGuard<'static, BTreeSet<(u32, u32)>> {
    PEERS.lock()
}

/// Checks a (user) device id from C against this process's devices and returns its
/// physical id (`ascend.device.id-range-checked`); `rule` lets a caller name a more
/// specific rule.
pub fn check_id_as(device: i32, rule: &'static str) -> AclResult<u32> {
    let view = visibility::view()?;
    view.physical_of_user(device).ok_or_else(|| {
        AclFailure::rule(
            rule,
            format!(
                "device id {device} is invalid: this process sees {} device(s) \
                 (DEVIPC_EMU_DEVICES, DEVIPC_EMU_ASCEND_PHY_IDS, ASCEND_RT_VISIBLE_DEVICES)",
                view.user_count()
            ),
        )
    })
}

/// This process's (user) id of physical device `p`, if it sees it.
pub fn user_id_of(p: u32) -> AclResult<Option<i32>> {
    Ok(visibility::view()?.user_of_physical(p).map(|u| u as i32))
}

/// [`check_id_as`] with the general rule.
pub fn check_id(device: i32) -> AclResult<u32> {
    check_id_as(device, rules::DEVICE_ID_RANGE)
}

/// `aclrtSetDevice`.
pub fn set_device(device: i32) -> AclResult<()> {
    let d = check_id(device)?;
    let mut devs = devices();
    devs.uses[d as usize] += 1;
    let generation = devs.generation[d as usize];
    drop(devs);
    CURRENT.with(|c| c.set(Some((d, generation, local::pid()))));
    Ok(())
}

/// `aclrtResetDevice`.
pub fn reset_device(device: i32) -> AclResult<()> {
    let d = check_id(device)?;
    let mut devs = devices();
    let uses = &mut devs.uses[d as usize];
    if *uses == 0 {
        return Ok(());
    }
    *uses -= 1;
    if *uses > 0 {
        return Ok(());
    }
    devs.generation[d as usize] += 1;
    drop(devs);
    stream::destroy_on_device(d);
    Ok(())
}

/// `aclrtResetDeviceForce`: releases every use of `deviceId` by this process at once (the
/// header: however often `aclrtSetDevice` was called, one forced reset resets), with the
/// same effect as the last `aclrtResetDevice`. A device the process does not use is a no-op.
pub fn reset_device_force(device: i32) -> AclResult<()> {
    let d = check_id(device)?;
    let mut devs = devices();
    if devs.uses[d as usize] == 0 {
        return Ok(());
    }
    devs.uses[d as usize] = 0;
    devs.generation[d as usize] += 1;
    drop(devs);
    stream::destroy_on_device(d);
    Ok(())
}

/// `aclrtSynchronizeDevice`: needs a current device; waits for the tasks of every stream
/// of this process on it and returns the first failure among them (see [`stream`]).
pub fn synchronize_device() -> AclResult<()> {
    let d = require_current("aclrtSynchronizeDevice")?;
    stream::synchronize_device(d, None)
}

/// `aclrtSynchronizeDeviceWithTimeout`: `timeout` in ms, -1 waits forever; below -1 is
/// `ACL_ERROR_RT_PARAM_INVALID` (RT-SRC `aclrtSynchronizeDeviceWithTimeoutImpl`). When the
/// tasks are not done in time: `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` (507046, as documented).
/// 0 is not documented (> 0 is a time, -1 forever); the emulator waits forever, as the
/// runtime's timeouts of 0 do elsewhere (`aclrtWaitAndResetNotify`).
pub fn synchronize_device_with_timeout(timeout: i32) -> AclResult<()> {
    if timeout < -1 {
        return Err(AclFailure::rule(
            rules::PARAM_RUNTIME_RANGE,
            format!("timeout {timeout} ms is not in [-1, INT_MAX]"),
        ));
    }
    let d = require_current("aclrtSynchronizeDeviceWithTimeout")?;
    let deadline = u64::try_from(timeout)
        .ok()
        .filter(|ms| *ms > 0)
        .and_then(|ms| std::time::Instant::now().checked_add(std::time::Duration::from_millis(ms)));
    stream::synchronize_device(d, deadline)
}

/// `aclrtGetMemInfo`: `(free, total)` bytes of memory kind `attr` on the current device.
/// The emulated devices have HBM only: the HBM kinds report the device's share of
/// `DEVIPC_EMU_MEM_LIMIT` (total) minus what all processes allocated on it (free); the
/// device-DDR kinds report 0 and 0. Other values are not memory-info kinds (107000).
pub fn mem_info(attr: i32) -> AclResult<(usize, usize)> {
    use devipc_ascend_sys::types::{
        ACL_DDR_MEM, ACL_DDR_MEM_HUGE, ACL_DDR_MEM_NORMAL, ACL_DDR_MEM_P2P_HUGE,
        ACL_DDR_MEM_P2P_NORMAL, ACL_HBM_MEM_P2P_HUGE1G,
    };
    let d = require_current("aclrtGetMemInfo")?;
    if !(ACL_DDR_MEM..=ACL_HBM_MEM_P2P_HUGE1G).contains(&attr) {
        return Err(AclFailure::rule(
            rules::PARAM_RUNTIME_RANGE,
            format!(
                "attr {attr} is not a memory-info kind (ACL_DDR_MEM .. ACL_HBM_MEM_P2P_HUGE1G)"
            ),
        ));
    }
    let ddr = [
        ACL_DDR_MEM,
        ACL_DDR_MEM_HUGE,
        ACL_DDR_MEM_NORMAL,
        ACL_DDR_MEM_P2P_HUGE,
        ACL_DDR_MEM_P2P_NORMAL,
    ];
    if ddr.contains(&attr) {
        return Ok((0, 0));
    }
    let reg = process_state::registry()?;
    let total = reg.mem_limit();
    let used = reg.used(d)?;
    let as_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok((as_usize(total.saturating_sub(used)), as_usize(total)))
}

/// The calling thread's current device, if it has one (whose context is still alive).
pub fn current() -> Option<u32> {
    current_device()
}

/// The calling thread's current device, if its context is still alive.
fn current_device() -> Option<u32> {
    let (d, generation, pid) = CURRENT.with(Cell::get)?;
    (pid == local::pid() && devices().generation[d as usize] == generation).then_some(d)
}

/// The calling thread's current device, or `ACL_ERROR_RT_CONTEXT_NULL`
/// (`ascend.context.set-device-required`; when that rule is switched off, device 0).
pub fn require_current(function_needs: &str) -> AclResult<u32> {
    if let Some(d) = current_device() {
        return Ok(d);
    }
    check(true, rules::CONTEXT_REQUIRED, || {
        format!("{function_needs} needs a current device: call aclrtSetDevice on this thread first")
    })?;
    // The rule is switched off: user device 0.
    check_id(0)
}

/// `aclrtGetDevice`: the user id of the thread's current device.
pub fn get_device() -> AclResult<i32> {
    let d = require_current("aclrtGetDevice")?;
    user_id_of(d)?.ok_or_else(|| visibility::no_such("physical", d as i32))
}

/// `aclrtDeviceCanAccessPeer`.
pub fn can_access_peer(device: i32, peer: i32) -> AclResult<i32> {
    let d = check_id(device)?;
    let p = check_id(peer)?;
    Ok(i32::from(
        process_state::state()?.config().peers.can_peer(d, p),
    ))
}

/// Refuses peer access `from -> to` between devices the configured topology does not
/// connect ([`rules::PEER_TOPOLOGY`]).
pub fn check_topology(from: u32, to: u32) -> AclResult<()> {
    let can = process_state::state()?.config().peers.can_peer(from, to);
    check(!can, rules::PEER_TOPOLOGY, || {
        format!(
            "physical devices {from} and {to} cannot access each other's memory (no P2P link; \
             DEVIPC_EMU_PEERS)"
        )
    })
}

/// `aclrtDeviceEnablePeerAccess`.
pub fn enable_peer_access(peer: i32, flags: u32) -> AclResult<()> {
    check(flags != 0, rules::PARAM_RESERVED_ZERO, || {
        format!("flags is reserved and must be 0, got {flags:#x}")
    })?;
    let d = require_current("aclrtDeviceEnablePeerAccess")?;
    let p = check_id(peer)?;
    if d == p {
        check(true, rules::PEER_DISTINCT, || {
            format!("peer device {p} is the current device")
        })?;
        return Ok(());
    }
    check_topology(d, p)?;
    enable_peer(d, p);
    Ok(())
}

/// Records peer access `from -> to` for this process (also done by
/// `aclrtIpcMemImportByKey` with `ENABLE_PEER_ACCESS`).
pub fn enable_peer(from: u32, to: u32) {
    peers().insert((from, to));
}

/// Whether this process enabled peer access `from -> to`.
pub fn peer_enabled(from: u32, to: u32) -> bool {
    peers().contains(&(from, to))
}

/// `aclrtDeviceGetBareTgid`: the pid (see the module docs).
pub fn bare_tgid() -> AclResult<i32> {
    Ok(process_state::me()?.pid)
}
