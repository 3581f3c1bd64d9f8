//! Portable guarantee: an import lands on the exporter's physical device whatever device
//! visibility masks the processes run under (issue 16).
//!
//! Frameworks start each worker with its own mask (`HIP_VISIBLE_DEVICES`,
//! `ASCEND_RT_VISIBLE_DEVICES`), so the same device has different indices in producer and
//! consumer. The scenario runs the exporter under a mask that swaps this process's
//! devices 0 and 1, and checks that this process, a peer under this process's order and a
//! peer that sees only one of the two all place the token by its physical identity. The
//! masks are written relative to this process's own mask, so it also holds on a machine
//! where the runner itself runs masked.

use std::ffi::OsString;

use devipc::raw::visibility_env_vars;
use devipc::{BackendKind, DeviceId, ExportOptions};

use super::{Step, ensure, pattern, portable, same_bytes};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};

const SIZE: usize = 1 << 20;
const CHECK: usize = 256;

/// Every placement rule.
pub static RULES: &[Rule] = &[portable(
    "portable.import.exporters-physical-device",
    "a token names its device's physical identity (HIP: PCI bus id and UUID; Ascend: physical \
     chip id and UUID), so Runtime::local_device_of and import_on_exporter_device find the \
     exporter's device under another visibility mask: an exporter whose mask swaps devices 0 \
     and 1 exports from its device 0, which this process and a peer see as device 1 and \
     import there with the bytes; a peer that cannot see the device is told it is not visible",
    "issue 16; vllm-project/vime #418 (HIP handles resolved against the importer's device \
     order), sgl-project/sglang PR #14138 (no NPU UUID)",
    Expect::Behaviour,
    &[Need::Devices(2)],
    exporters_physical_device,
)];

/// The variable the scenario masks with: HIP's own (`HIP_VISIBLE_DEVICES`), or Ascend's.
fn mask_var(kind: BackendKind) -> &'static str {
    let vars = visibility_env_vars(kind);
    if kind == BackendKind::Hip {
        vars[1]
    } else {
        vars[0]
    }
}

/// How this process's devices 0 and 1 are written in a child's mask: the first two
/// entries of this process's own mask, or `0` and `1` when it has none.
fn own_first_two(var: &str) -> Result<(String, String), Stop> {
    match std::env::var(var) {
        Ok(mask) if !mask.trim().is_empty() => {
            let entries: Vec<&str> = mask.split(',').map(str::trim).collect();
            match entries[..] {
                [a, b, ..] => Ok((a.to_owned(), b.to_owned())),
                _ => Err(Stop::Skip(format!(
                    "{var}={mask} shows this process one device; the rule needs two"
                ))),
            }
        }
        _ => Ok(("0".to_owned(), "1".to_owned())),
    }
}

fn exporters_physical_device(ctx: &mut Ctx) -> Verdict {
    let rt = ctx.runtime()?;
    let kind = rt.info().kind;
    let var = mask_var(kind);
    let (first, second) = own_first_two(var)?;
    let masked = |mask: String| vec![(var.to_owned(), OsString::from(mask))];

    let here_1 = rt.physical_device(DeviceId(1)).step("physical_device(1)")?;
    if !here_1.is_known() {
        return Err(Stop::Skip(format!(
            "this {kind} runtime cannot name its devices (no identity calls), so tokens carry \
             no physical identity"
        )));
    }
    let mut exporter =
        ctx.facade_peer_with_env("exporter", &masked(format!("{second},{first}")))?;
    let id = exporter
        .alloc(0, SIZE)
        .step("exporter allocates on its device 0")?;
    exporter
        .write(id, 0, &pattern(3, CHECK))
        .step("exporter writes")?;
    let token = exporter
        .export(id, 0, SIZE, ExportOptions::default())
        .step("exporter exports")?;
    ctx.shares(&token)?;
    ensure(token.device() == DeviceId(0), || {
        format!("the token names the exporter's device {}", token.device())
    })?;
    ensure(
        token.physical_device().same_device(&here_1) == Some(true),
        || {
            format!(
                "the exporter's device 0 is {}, but this process's device 1 is {here_1}",
                token.physical_device()
            )
        },
    )?;
    exporter
        .grant(&token, rt.process_id())
        .step("exporter grants this process")?;

    // This process: the exporter's device 0 is device 1 here.
    let local = rt.local_device_of(&token).step("local_device_of")?;
    ensure(local == Some(DeviceId(1)), || {
        format!("local_device_of placed the exporter's device 0 on {local:?}, not device 1")
    })?;
    let view = rt
        .import_on_exporter_device(&token)
        .step("import_on_exporter_device")?;
    ensure(view.device() == DeviceId(1), || {
        format!("imported on {}, not device 1", view.device())
    })?;
    let mut got = vec![0u8; CHECK];
    view.read(0, &mut got).step("read")?;
    same_bytes("the placed import reads", &got, &pattern(3, CHECK))?;
    drop(view);

    // A peer in this process's order: also its device 1.
    let mut importer =
        ctx.facade_peer_with_env("importer", &masked(format!("{first},{second}")))?;
    let pid = importer.pid().step("importer pid")?;
    exporter
        .grant(&token, pid)
        .step("exporter grants the importer")?;
    let placed = importer.place(&token).step("importer places")?;
    let Some((imp, device)) = placed else {
        return Err(Stop::fail(
            "the importer sees both devices but was told it cannot",
        ));
    };
    ensure(device == 1, || {
        format!("the importer placed it on its device {device}, not 1")
    })?;
    same_bytes(
        "the importer reads",
        &importer.read(imp, 0, CHECK).step("importer read")?,
        &pattern(3, CHECK),
    )?;
    importer.drop_obj(imp).step("importer drop")?;
    importer.0.finish()?;

    // A peer that sees only this process's device 0.
    let mut blind = ctx.facade_peer_with_env("blind", &masked(first.clone()))?;
    let placed = blind.place(&token).step("blind peer places")?;
    ensure(placed.is_none(), || {
        format!("a peer that cannot see the device placed the token as {placed:?}")
    })?;
    blind.0.finish()?;

    exporter.drop_obj(id).step("exporter free")?;
    exporter.0.finish()?;
    Ok(format!(
        "exporter device 0 under {var}={second},{first} is {here_1}: placed on device 1 here \
         and in a peer, not visible under {var}={first}"
    ))
}
