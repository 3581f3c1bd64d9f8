//! Ascend IPC key ranges and copies: an exported range lies inside its `aclrtMalloc`
//! block and starts page-aligned, and memory imported on another device takes only
//! asynchronous device-to-device copies.

use devipc_ascend_sys::consts::ACL_IPC_KEY_LEN;

use super::{A, BLOCK, TWO_DEVICES};
use crate::catalogue::ascend::key_cross_device;
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Verdict};
use crate::shell::VendorClient;

/// The IPC key argument rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.ipc-key.exports-malloc-memory",
        A,
        "aclrtIpcMemGetExportKey of a range running past its aclrtMalloc block is refused; of \
         the block it succeeds",
        "CANN RT-DOC 11-07 (keys export aclrtMalloc memory); api-facts A.7, C.4",
        Expect::Refused,
        &[Need::EmulatorOnly(
            "api-facts C.4 leaves partial and interior ranges UNVERIFIED (D.5), so a range \
             beyond the block is not provoked on a device",
        )],
        key_malloc_only,
    ),
    vendor(
        "ascend.ipc-key.page-aligned",
        A,
        "aclrtIpcMemGetExportKey of a range starting one byte into a block (not page aligned) \
         is refused; from the block's base it succeeds",
        "CANN RT-DOC FAQ (IPC memory sharing needs page-table aligned ranges: export of an \
         unaligned range fails); api-facts C.4",
        Expect::Refused,
        &[],
        key_page_aligned,
    ),
    vendor(
        "ascend.ipc-key.cross-device-copy-restricted",
        A,
        "memory imported by key on another device than its owner's (so the mapping is on \
         device 1) takes no synchronous aclrtMemcpy: a read from it is refused, while an \
         asynchronous device-to-device copy of it succeeds and carries the owner's bytes",
        "CANN RT-DOC 11-07 (imported memory across devices: no host copies, no \
         ACL_MEMCPY_DEFAULT, only asynchronous device to device); api-facts C.4",
        Expect::Refused,
        TWO_DEVICES,
        // The same scenario as ascend.ipc-key.cross-device-import-with-peer-access, which
        // checks this refusal by its id.
        key_cross_device,
    ),
];

fn key_malloc_only(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let past = a.key_export(p, 2 * BLOCK, ACL_IPC_KEY_LEN, 0);
    if let Ok(k) = &past {
        let _ = a.key_close(k);
    }
    let seen = ctx.refused("export of twice the block", past)?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export of the block")?;
    a.key_close(&key).step("aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; the block exports"))
}

fn key_page_aligned(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(BLOCK).step("aclrtMalloc")?;
    let unaligned = a.key_export(p + 1, BLOCK - 1, ACL_IPC_KEY_LEN, 0);
    if let Ok(k) = &unaligned {
        let _ = a.key_close(k);
    }
    let seen = ctx.refused("export from base + 1", unaligned)?;
    let key = a
        .key_export(p, BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export from the base")?;
    a.key_close(&key).step("aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")?;
    Ok(format!("{seen}; the aligned base exports"))
}
