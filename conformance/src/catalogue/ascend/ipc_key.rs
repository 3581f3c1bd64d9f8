//! Ascend IPC memory key rules (api-facts A.7, C.4): `aclrtIpcMemGetExportKey`, its
//! trustlist, imports by key and the documented close/free order.

use devipc_ascend_sys::codes::ACL_ERROR_RT_PARAM_INVALID;
use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};

use super::{
    A, CHECK, CROSS_DEVICE_UNDOCUMENTED, KEY_BLOCK, TWO_DEVICES, key_exported, key_release,
    peer_on, trust,
};
use crate::catalogue::{Step, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::acl::{Acl, AclCommand};
use crate::shell::{Exec, Pids, VendorClient};

/// The IPC memory key rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "ascend.ipc-key.export-import-shares-memory",
        A,
        "aclrtMalloc memory exported by key and imported by a trusted process maps the same \
         bytes; importers close first, then the exporter closes and frees",
        "CANN RT-DOC 11-07 IPC memory sharing (documented flow); api-facts C.4",
        Expect::Behaviour,
        &[],
        key_shares_memory,
    ),
    vendor(
        "ascend.ipc-key.min-len-65",
        A,
        "aclrtIpcMemGetExportKey needs a key buffer of at least 65 bytes: len 64 fails with \
         ACL_ERROR_RT_PARAM_INVALID, len 65 succeeds",
        "CANN RT-DOC 11-07; api-facts A.7, C.4 (RT-SRC api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        key_min_len,
    ),
    vendor(
        "ascend.ipc-key.size-nonzero",
        A,
        "aclrtIpcMemGetExportKey with size 0 fails with ACL_ERROR_RT_PARAM_INVALID",
        "api-facts C.4 (RT-SRC api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        key_size_nonzero,
    ),
    vendor(
        "ascend.ipc-key.flags-valid",
        A,
        "IPC key export and import flags above 1 fail with ACL_ERROR_RT_PARAM_INVALID",
        "api-facts C.4 (RT-SRC api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        key_flags,
    ),
    vendor(
        "ascend.ipc-key.set-pid-needs-pids",
        A,
        "aclrtIpcMemSetImportPid rejects a NULL pid array and num 0 with \
         ACL_ERROR_RT_PARAM_INVALID",
        "api-facts C.4 (RT-SRC api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        key_set_pid_args,
    ),
    vendor(
        "ascend.ipc-key.trustlist-required",
        A,
        "with DEFAULT flags only processes set by aclrtIpcMemSetImportPid may import a key; after \
         the exporter adds the importer, its import succeeds",
        "CANN RT-DOC 11-07; api-facts A.7, C.4",
        Expect::Refused,
        &[],
        key_trustlist,
    ),
    vendor(
        "ascend.ipc-key.disable-pid-validation",
        A,
        "a key exported with ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION is importable by \
         any process without a trustlist",
        "CANN RT-DOC 11-07; api-facts A.7, C.4",
        Expect::Behaviour,
        &[],
        key_disable_pid_validation,
    ),
    vendor(
        "ascend.ipc-key.repeat-import-allowed",
        A,
        "a process may import one key repeatedly: each import maps the memory again and needs \
         its own aclrtIpcMemClose",
        "api-facts C.4 (RT-SRC api_impl_standard_soc.cc)",
        Expect::Behaviour,
        &[],
        key_repeat_import,
    ),
    vendor(
        "ascend.ipc-key.importers-close-first",
        A,
        "importers close the key before the exporter: an exporter's aclrtIpcMemClose while an \
         importer still maps its import is undefined; the emulator lets the close succeed, \
         fails the importer's later copies of the import and records the violation; in the \
         documented order nothing is recorded",
        "CANN RT-DOC 11-07 (importers close before the exporter, 'otherwise exceptions may \
         occur'); api-facts C.4",
        Expect::Behaviour,
        &[Need::EmulatorOnly(
            "on a real runtime an early exporter close is undefined ('exceptions may occur', \
             RT-DOC 11-07), so the suite does not provoke it; the documented order is checked \
             by ascend.ipc-key.export-import-shares-memory",
        )],
        key_importers_close_first,
    ),
    vendor(
        "ascend.ipc-key.free-while-imported",
        A,
        "the exporter's aclrtFree of a block another process still maps through a key frees \
         it under the importer: undefined; the emulator fails the importer's copies and \
         records the violation; freeing after the importers closed records nothing",
        "CANN RT-DOC 11-07 (importers close, then the exporter closes and frees); api-facts C.4",
        Expect::Behaviour,
        &[Need::EmulatorOnly(
            "a free under an importer is undefined on a real runtime, so the suite does not \
             provoke it",
        )],
        key_free_while_imported,
    ),
    vendor(
        "ascend.ipc-key.cross-device-import-with-peer-access",
        A,
        "aclrtIpcMemImportByKey with ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS imports a key \
         on another device than the owner's: the mapping is on device 1 (a synchronous copy \
         of it is refused, as only across devices), and an asynchronous device-to-device copy \
         (the only copy allowed there) brings its bytes to the importer's own memory",
        "CANN RT-DOC 11-07; api-facts C.4",
        Expect::Behaviour,
        TWO_DEVICES,
        key_cross_device,
    )
    .catching(&["ascend.ipc-key.cross-device-copy-restricted"]),
    vendor(
        "ascend.ipc-key.cross-device-needs-peer-access",
        A,
        "importing a key on another device without ENABLE_PEER_ACCESS or peer access is refused",
        "CANN RT-DOC 11-07; api-facts C.4",
        Expect::Refused,
        &[
            Need::Devices(2),
            Need::EmulatorOnly(CROSS_DEVICE_UNDOCUMENTED),
        ],
        key_cross_device_without_peer,
    ),
];

fn key_shares_memory(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.key_set_pid(&key, &trust(pid))
        .step("aclrtIpcMemSetImportPid")?;
    let va = b
        .key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
        .step("aclrtIpcMemImportByKey")?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    b.write(va + 128, &pattern(2, 64)).step("importer write")?;
    same_bytes(
        "exporter reads the importer's bytes",
        &a.read(p + 128, 64).step("exporter read")?,
        &pattern(2, 64),
    )?;
    b.key_close(&key).step("the importer's aclrtIpcMemClose")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok("bytes shared both ways by key; importer closed, then exporter closed and freed".into())
}

fn key_min_len(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    let seen = ctx.refused(
        "key buffer of 64 bytes",
        a.key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN - 1, 0),
    )?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export with a 65-byte buffer")?;
    key_release(&mut a, p, &key)?;
    Ok(format!("{seen}; 65 bytes succeed"))
}

fn key_size_nonzero(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    let seen = ctx.refused("export of 0 bytes", a.key_export(p, 0, ACL_IPC_KEY_LEN, 0))?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export of the block")?;
    key_release(&mut a, p, &key)?;
    Ok(format!("{seen}; the block's size succeeds"))
}

fn key_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    let export = ctx.refused(
        "export flags 2",
        a.key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, 2),
    )?;
    let key = a
        .key_export(
            p,
            KEY_BLOCK,
            ACL_IPC_KEY_LEN,
            ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
        )
        .step("export")?;
    let pid = peer_on(&mut b, 0)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let result = b.key_import(&key, 2);
    if result.is_ok() {
        let _ = b.key_close(&key);
    }
    let import = ctx.refused("import flags 2", result)?;
    b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
        .step("import flags 0")?;
    b.key_close(&key).step("importer close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!("{export}; {import}; flags 0 succeed on both sides"))
}

fn key_set_pid_args(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let null = ctx.refused("NULL pid array", a.key_set_pid(&key, &Pids::Null))?;
    let empty = ctx.refused("num 0", a.key_set_pid(&key, &Pids::List(Vec::new())))?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    a.key_set_pid(&key, &trust(me))
        .step("aclrtIpcMemSetImportPid with one pid")?;
    key_release(&mut a, p, &key)?;
    Ok(format!("{null}; {empty}; one pid succeeds"))
}

fn key_trustlist(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    let result = b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
    if result.is_ok() {
        let _ = b.key_close(&key);
    }
    let seen = ctx.refused("import without the trustlist", result)?;
    a.key_set_pid(&key, &trust(pid))
        .step("aclrtIpcMemSetImportPid")?;
    let va = b
        .key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
        .step("granted import")?;
    same_bytes(
        "granted importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    b.key_close(&key).step("importer close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!("{seen}; after the grant the import succeeds"))
}

fn key_disable_pid_validation(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let va = b
        .key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
        .step("ungranted import")?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    b.key_close(&key).step("importer close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok("an ungranted process imported the key".into())
}

fn key_repeat_import(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let first = b.key_import(&key, 0).step("first import")?;
    let second = b
        .key_import(&key, 0)
        .step("second import of the same key")?;
    for (n, va) in [(1, first), (2, second)] {
        same_bytes(
            &format!("import {n} reads"),
            &b.read(va, CHECK).step("read")?,
            &pattern(1, CHECK),
        )?;
    }
    b.key_close(&key).step("first close")?;
    b.key_close(&key).step("second close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!(
        "two imports ({first:#x}, {second:#x}) read the memory; two closes released them"
    ))
}

/// The positive control of the key violation rules: export, import, read, then the
/// documented order (RT-DOC 11-07: the importer closes, then the exporter closes and
/// frees) records no violation. Returns the importer's pid (granted, on device 0).
fn documented_order_records_nothing<E: Exec<AclCommand>, F: Exec<AclCommand>>(
    ctx: &Ctx,
    a: &mut Acl<E>,
    b: &mut Acl<F>,
) -> Result<i32, Stop> {
    let (p, key) = key_exported(a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(b, 0)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let va = b.key_import(&key, 0).step("import")?;
    b.read(va, CHECK).step("importer read")?;
    b.key_close(&key).step("importer close")?;
    key_release(a, p, &key)?;
    let recorded = ctx.take_violations();
    if !recorded.is_empty() {
        return Err(Stop::fail(format!(
            "the documented order (importer closes, exporter closes and frees) recorded \
             violations: {recorded:?}"
        )));
    }
    Ok(pid)
}

fn key_importers_close_first(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let pid = documented_order_records_nothing(ctx, &mut a, &mut b)?;
    // The exporter closes first.
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let va = b.key_import(&key, 0).step("import")?;
    a.key_close(&key)
        .step("exporter close while the importer maps the key")?;
    let read = b.read(va, CHECK);
    let recorded = ctx.take_violations();
    b.key_close(&key)
        .step("importer close after the exporter's")?;
    b.0.finish()?;
    a.free(p).step("aclrtFree")?;
    let seen = ctx.violation_seen(
        "the importer's read after the exporter destroyed the key",
        read,
        None,
        &recorded,
    )?;
    Ok(format!(
        "in the documented order nothing is recorded; {seen}"
    ))
}

fn key_free_while_imported(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let pid = documented_order_records_nothing(ctx, &mut a, &mut b)?;
    // The exporter frees the block while the importer maps it.
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let va = b.key_import(&key, 0).step("import")?;
    a.free(p)
        .step("aclrtFree while the importer maps the block")?;
    let read = b.read(va, CHECK);
    let recorded = ctx.take_violations();
    b.key_close(&key).step("importer close after the free")?;
    b.0.finish()?;
    a.key_close(&key).step("the exporter's aclrtIpcMemClose")?;
    let seen = ctx.violation_seen(
        "the importer's read after the exporter freed the block",
        read,
        None,
        &recorded,
    )?;
    Ok(format!(
        "a free after the importer closed records nothing; {seen}"
    ))
}

pub(in crate::catalogue) fn key_cross_device(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let va = b
        .key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
        .step("import on device 1 with ENABLE_PEER_ACCESS")?;
    // Which device the mapping is on: the copy restriction applies only to an import on
    // another device than the owner's (RT-DOC 11-07), so a refused synchronous copy shows
    // the mapping is on device 1.
    let on_device_1 = ctx.refused_as(
        "synchronous read of the import",
        "ascend.ipc-key.cross-device-copy-restricted",
        b.read(va, CHECK),
    )?;
    // Host copies of a cross-device key import are not allowed (RT-DOC 11-07): the bytes
    // go to device-1 memory by an asynchronous device-to-device copy, and from there to
    // the host.
    let local = b.malloc(CHECK).step("aclrtMalloc on device 1")?;
    let copied = b
        .copy_async_d2d(local, va, CHECK)
        .step("aclrtMemcpyAsync device to device from the import");
    let got = copied.and_then(|()| b.read(local, CHECK).step("read the local copy"));
    b.free(local).step("aclrtFree")?;
    same_bytes(
        "the import's bytes copied on device 1",
        &got?,
        &pattern(1, CHECK),
    )?;
    b.key_close(&key).step("importer close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!(
        "imported on device 1 at {va:#x} ({on_device_1}: the mapping is not on the owner's \
         device); its bytes copied device to device (aclrtMemcpyAsync) into device-1 memory \
         match the exporter's"
    ))
}

fn key_cross_device_without_peer(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.key_set_pid(&key, &trust(pid)).step("grant")?;
    let result = b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
    if result.is_ok() {
        let _ = b.key_close(&key);
    }
    let seen = ctx.refused("import on device 1 without peer access", result)?;
    b.key_import(&key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
        .step("import on device 1 with ENABLE_PEER_ACCESS")?;
    b.key_close(&key).step("importer close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    Ok(format!(
        "{seen}; with ENABLE_PEER_ACCESS the import succeeds"
    ))
}
