//! Ascend vendor rules for argument checks, init counting, VMM mappings, copies and
//! ownership: the emulator rules that only the emulator's unit tests checked before
//! (issue 11, mutation completeness). Each reuses the emulator's rule id, so on the
//! emulator a refusal must name it, and `DEVIPC_EMU_BREAK_RULE=<id>` makes it fail.
//!
//! Every "refused" rule makes the same call with the rule satisfied and requires it to
//! succeed (a positive control), so no rule passes merely because a call always fails.
//! Rules whose refusal the vendor does not document (or whose violation is undefined on
//! a device) are emulator-only and say why; on a real runtime they are skipped.
//!
//! One file per topic, each with its table and scenarios; [`TABLES`] lists them in report
//! order: `params.rs`, `init.rs`, `handle.rs`, `peer.rs`, `memory.rs` (memory and copies),
//! `vmm.rs` (VMM mappings and export arguments), `ownership.rs` (who sets a trustlist),
//! `ipc_key.rs`, `notify.rs`. The scenario helpers shared with the documented rules are
//! in [`super::ascend`].

mod handle;
mod init;
mod ipc_key;
mod memory;
mod notify;
mod ownership;
mod params;
mod peer;
mod vmm;

use devipc_ascend_sys::codes::ACL_ERROR_INVALID_PARAM;

use super::Step;
use crate::rule::{Applies, Expect, Need, Rule, Stop};
use crate::shell::Exec;
use crate::shell::acl::{Acl, AclCommand};

const A: Applies = Applies::Ascend;
/// Bytes checked in transfers.
const CHECK: usize = 256;
/// `aclrtMalloc` blocks: one 2 MiB huge page (see `KEY_BLOCK` in `ascend/mod.rs`).
const BLOCK: usize = 2 << 20;
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];
const INVALID_PARAM: Expect = Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM);

const UNDOCUMENTED_ENUMS: &str = "api-facts A.4/A.5 list the enumerations' values, but no \
    vendor document says that other values are refused, or with which code";
const UNDEFINED_HANDLES: &str = "real handles and pointers are the runtime's own objects; \
    passing a stale or made-up one is undefined behaviour there, not a documented refusal";

/// The Ascend argument, init, VMM-mapping, copy and ownership rules, table by table in
/// report order.
pub static TABLES: &[&[Rule]] = &[
    params::RULES,
    init::RULES,
    handle::RULES,
    peer::RULES,
    memory::RULES,
    vmm::RULES,
    ownership::RULES,
    ipc_key::RULES,
    notify::RULES,
];

/// A reservation of `size` bytes with physical memory of the same size mapped at its base
/// (access READWRITE, the default): (reservation, physical handle).
fn mapped<E: Exec<AclCommand>>(a: &mut Acl<E>, size: usize) -> Result<(u64, u64), Stop> {
    let phys = a.phys_alloc(0, size).step("aclrtMallocPhysical")?;
    let va = a.reserve(size, 0, 0).step("aclrtReserveMemAddress")?;
    a.map_at(va, size, 0, phys, 0).step("aclrtMapMem")?;
    Ok((va, phys))
}

fn unmapped<E: Exec<AclCommand>>(a: &mut Acl<E>, va: u64, phys: u64) -> Result<(), Stop> {
    a.unmap_only(va).step("aclrtUnmapMem")?;
    a.release(va).step("aclrtReleaseMemAddress")?;
    a.phys_free(phys).step("aclrtFreePhysical")
}
