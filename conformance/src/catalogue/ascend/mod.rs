//! Ascend vendor rules: what the CANN runtime documents for VMM shareable handles, IPC
//! memory keys, notify IPC and devices (api-facts C.4-C.6, A.6-A.11), checked through
//! the raw `AclApi` table in this process and in peers.
//!
//! Where the vendor documents the error code, the rule expects it; where it does not
//! (api-facts D.4: trustlists, same-process import, one-to-one handles), the rule
//! expects a refusal with any code and reports the one it got. Rules whose violation is
//! undefined on real hardware (closing a key before importers, importing on another
//! device without peer access) are emulator-only, and say so.
//!
//! One file per topic, each with its table and scenarios; [`TABLES`] lists them in report
//! order: `vmm.rs` (shareable handles), `ipc_key.rs` (IPC memory keys), `device.rs`
//! (device ids and contexts), `identity.rs` (user, logical and physical ids under
//! `ASCEND_RT_VISIBLE_DEVICES`, issue 16), `notify.rs` (notify IPC), `fidelity.rs` (what the vendor's
//! own code does, issue 11). The helpers shared by the scenarios (and by
//! [`super::ascend_args`]) are here.

mod batch;
mod device;
mod event_sync;
mod fidelity;
mod identity;
mod ipc_key;
mod notify;
mod vmm;

pub(super) use ipc_key::key_cross_device;

use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use super::{Step, pattern};
use crate::rule::{Applies, Need, Rule, Stop};
use crate::shell::acl::{Acl, AclCommand, Vmm};
use crate::shell::{Exec, Pids, VendorClient};

const A: Applies = Applies::Ascend;
/// Bytes checked in transfers.
const CHECK: usize = 256;
/// Size of `aclrtMalloc` blocks exported by key: one 2 MiB huge page, so the exported
/// range is page-table aligned whatever page size the runtime picks (api-facts C.4 FAQ).
const KEY_BLOCK: usize = 2 << 20;
/// `aclrtWaitAndResetNotify` timeout for waits that must succeed: long in either unit the
/// vendor's documents disagree on (seconds per RT-DOC 08, milliseconds per the header,
/// api-facts D.3); the rule's deadline bounds it anyway. Waits that must time out use 1.
const LONG_WAIT: u32 = 10_000;
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];
const CROSS_DEVICE_UNDOCUMENTED: &str = "the vendor requires peer access for another device \
    but does not document which call fails without it, so only the emulator's refusal is checked";

/// Every Ascend vendor rule, table by table in report order.
pub static TABLES: &[&[Rule]] = &[
    vmm::RULES,
    ipc_key::RULES,
    device::RULES,
    identity::RULES,
    notify::RULES,
    event_sync::RULES,
    fidelity::RULES,
    batch::RULES,
];

/// A trustlist of one pid.
pub(super) fn trust(pid: i32) -> Pids {
    Pids::List(vec![pid])
}

/// An allocation on device 0 of the local shell, filled with pattern 1 and exported.
fn exported<E: Exec<AclCommand>>(a: &mut Acl<E>, flags: u64) -> Result<(Vmm, u64), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    a.write(vmm.va, &pattern(1, CHECK)).step("filling it")?;
    let sh = a.vmm_export(vmm.phys, flags).step("exporting it")?;
    Ok((vmm, sh))
}

/// A peer importing shareable handle `sh` on `dev`, mapping it: (phys, va).
fn import_map<E: Exec<AclCommand>>(
    b: &mut Acl<E>,
    sh: u64,
    dev: u32,
    size: usize,
) -> Result<(u64, u64), Stop> {
    let phys = b.vmm_import(sh, dev as i32).step("importing the handle")?;
    let va = b.map(phys, size, dev).step("mapping the import")?;
    Ok((phys, va))
}

fn unmap_free<E: Exec<AclCommand>>(b: &mut Acl<E>, phys: u64, va: u64) -> Result<(), Stop> {
    b.unmap(va).step("unmapping the import")?;
    b.phys_free(phys).step("freeing the import")
}

/// A local `aclrtMalloc` block filled with pattern 1, exported by key with `flags`.
pub(super) fn key_exported<E: Exec<AclCommand>>(
    a: &mut Acl<E>,
    flags: u64,
) -> Result<(u64, String), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    a.write(p, &pattern(1, CHECK)).step("filling it")?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, flags)
        .step("aclrtIpcMemGetExportKey")?;
    Ok((p, key))
}

pub(super) fn key_release<E: Exec<AclCommand>>(
    a: &mut Acl<E>,
    p: u64,
    key: &str,
) -> Result<(), Stop> {
    a.key_close(key).step("the exporter's aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")
}

/// The peer's bare tgid after `aclrtSetDevice(dev)`.
pub(super) fn peer_on<E: Exec<AclCommand>>(b: &mut Acl<E>, dev: u32) -> Result<i32, Stop> {
    b.set_device(dev).step("peer aclrtSetDevice")?;
    b.pid().step("peer aclrtDeviceGetBareTgid")
}

/// A notify created and exported locally with `flags`.
fn notify_exported<E: Exec<AclCommand>>(a: &mut Acl<E>, flags: u64) -> Result<(u64, String), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let key = a
        .notify_export(n, ACL_IPC_KEY_LEN, flags)
        .step("aclrtNotifyGetExportKey")?;
    Ok((n, key))
}
