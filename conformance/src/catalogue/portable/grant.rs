//! Portable guarantees about who may import: the default export needs a grant where the
//! backend has access control, `ExportOptions::any_process()` does not.
use devipc::{DeviceId, ExportOptions};

use super::{CHECK, SIZE, expect_error};
use crate::catalogue::{Import, Step, pattern, portable, same_bytes};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};

pub(super) const TRUSTLIST: Rule = portable(
    "portable.grant.trustlist",
    "an export with the default options is importable only after grant where the backend has \
     access control (an ungranted import is a typed vendor error), and anywhere on a backend \
     without it (Capabilities::access_control = false)",
    "DESIGN 5.4; api-facts C.4-C.6 (Ascend trustlists), C.1 (HIP has none)",
    Expect::Behaviour,
    &[],
    grant_trustlist,
)
.catching(&["ascend.vmm.trustlist-required"])
.memory_rule();

pub(super) const ANY_PROCESS: Rule = portable(
    "portable.grant.any-process",
    "an export with ExportOptions::any_process() is importable by any process without grant",
    "DESIGN 5.4",
    Expect::Behaviour,
    &[],
    grant_any_process,
)
.memory_rule();

fn grant_trustlist(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let access_control = rt.info().capabilities.access_control;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::granted_only())
        .step("peer export")?;
    ctx.shares(&token)?;
    let first = rt.import(&token, DeviceId(0));
    let detail = if access_control {
        let seen = expect_error("ungranted import", "Vendor", first)?;
        peer.grant(&token, rt.process_id()).step("peer grant")?;
        let view = rt.import(&token, DeviceId(0)).imported("granted import")?;
        let mut got = vec![0u8; CHECK];
        view.read(0, &mut got).step("read")?;
        same_bytes("granted import reads", &got, &pattern(1, CHECK))?;
        format!("{seen}; granted import succeeds")
    } else {
        let view = first.imported("import (no access control on this backend)")?;
        peer.grant(&token, rt.process_id())
            .step("grant (a no-op without access control)")?;
        let mut got = vec![0u8; CHECK];
        view.read(0, &mut got).step("read")?;
        same_bytes("import reads", &got, &pattern(1, CHECK))?;
        "no access control (capabilities say so): import works without grant; grant is Ok"
            .to_owned()
    };
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok(detail)
}

fn grant_any_process(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let mut peer = ctx.facade_peer("exporter", false)?;
    let id = peer.alloc(0, SIZE).step("peer allocate")?;
    peer.write(id, 0, &pattern(1, CHECK)).step("peer write")?;
    let token = peer
        .export(id, 0, SIZE, ExportOptions::any_process())
        .step("peer export (any process)")?;
    ctx.shares(&token)?;
    let view = rt
        .import(&token, DeviceId(0))
        .imported("ungranted import")?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read")?;
    same_bytes("ungranted import reads", &got, &pattern(1, CHECK))?;
    drop(view);
    peer.drop_obj(id).step("peer free")?;
    peer.0.finish()?;
    Ok("imported without grant".into())
}
