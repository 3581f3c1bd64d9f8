//! Ascend vendor rules: what the CANN runtime documents for VMM shareable handles, IPC
//! memory keys, notify IPC and devices (api-facts C.4-C.6, A.6-A.11), checked through
//! the raw `AclApi` table in this process and in peers.
//!
//! Where the vendor documents the error code, the rule expects it; where it does not
//! (api-facts D.4: trustlists, same-process import, one-to-one handles), the rule
//! expects a refusal with any code and reports the one it got. Rules whose violation is
//! undefined on real hardware (closing a key before importers, importing on another
//! device without peer access) are emulator-only, and say so.

use devipc_ascend_sys::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_PARAM_INVALID,
};
use devipc_ascend_sys::consts::{
    ACL_EVENT_IPC, ACL_EVENT_SYNC, ACL_IPC_KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS, ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
    ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};
use std::time::{Duration, Instant};

use super::{Step, ensure, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Applies, Expect, Need, Rule, Stop, Verdict};
use crate::shell::acl::{Acl, Vmm};
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
/// Timeout of the wait that must expire (2 units: 2 s, or 2 ms on a runtime that counts
/// milliseconds), and how late past it the wait may return. The slack keeps the two
/// units' windows apart (2 ms..1.502 s and 2 s..3.5 s).
const WAIT_TIMEOUT: u32 = 2;
const WAIT_SLACK: Duration = Duration::from_millis(1500);
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];
const CROSS_DEVICE_UNDOCUMENTED: &str = "the vendor requires peer access for another device \
    but does not document which call fails without it, so only the emulator's refusal is checked";

/// Every Ascend vendor rule.
pub static RULES: &[Rule] = &[
    // ---- VMM shareable handles (api-facts A.6, C.5) ---------------------------------
    vendor(
        "ascend.vmm.export-import-shares-memory",
        A,
        "a physical allocation exported with aclrtMemExportToShareableHandle and imported by a \
         trusted process maps the same bytes in both, in both directions",
        "CANN RT-DOC 11-04 virtual memory management (documented flow); api-facts C.5",
        Expect::Behaviour,
        &[],
        vmm_shares_memory,
    ),
    vendor(
        "ascend.vmm.trustlist-required",
        A,
        "with DEFAULT flags only processes set by aclrtMemSetPidToShareableHandle may import; \
         after the exporter adds the importer, its import succeeds",
        "CANN RT-DOC 11-04; api-facts A.6, C.5",
        Expect::Refused,
        &[],
        vmm_trustlist,
    ),
    vendor(
        "ascend.vmm.disable-pid-validation",
        A,
        "a handle exported with ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION (0x1) is importable \
         by any process without a trustlist",
        "CANN RT-DOC 11-04; api-facts A.6 (ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)",
        Expect::Behaviour,
        &[],
        vmm_disable_pid_validation,
    ),
    vendor(
        "ascend.vmm.same-process-import-rejected",
        A,
        "aclrtMemImportFromShareableHandle in the process that exported the handle is refused \
         (only cross-process use is supported)",
        "CANN RT-DOC 11-04 virtual memory management; api-facts C.5",
        Expect::Refused,
        &[],
        vmm_same_process,
    ),
    vendor(
        "ascend.vmm.one-import-per-process",
        A,
        "a process imports a shareable handle once: a second import in the same process is \
         refused (no one-to-many mapping on the import side)",
        "CANN RT-DOC 11-04; api-facts C.5 (one-to-one mapping)",
        Expect::Refused,
        &[],
        vmm_double_import,
    ),
    vendor(
        "ascend.vmm.one-export-per-handle",
        A,
        "a physical handle is exported once: exporting the same handle again is refused",
        "CANN RT-DOC 11-04; api-facts C.5 (one-to-one mapping)",
        Expect::Refused,
        &[],
        vmm_double_export,
    ),
    vendor(
        "ascend.vmm.device-range-checked",
        A,
        "aclrtMemImportFromShareableHandle with a device id outside 0..count fails with \
         ACL_ERROR_RT_INVALID_DEVICEID",
        "api-facts A.6, A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)",
        Expect::Code(
            "ACL_ERROR_RT_INVALID_DEVICEID",
            ACL_ERROR_RT_INVALID_DEVICEID,
        ),
        &[],
        vmm_device_range,
    ),
    vendor(
        "ascend.vmm.lifetime-until-all-freed",
        A,
        "physical memory lives until every process that allocated or imported it called \
         aclrtFreePhysical: the importer keeps reading and writing after the exporter freed",
        "CANN RT-DOC 11-04 (memory is released when all processes freed it); api-facts C.5",
        Expect::Behaviour,
        &[],
        vmm_lifetime,
    ),
    vendor(
        "ascend.vmm.cross-device-import-with-peer-access",
        A,
        "with aclrtDeviceEnablePeerAccess to the exporter's device, a process imports and maps a \
         shareable handle on another device and sees the bytes",
        "CANN RT-DOC 11-04 (cross-device use needs peer access); api-facts C.5, A.10",
        Expect::Behaviour,
        TWO_DEVICES,
        vmm_cross_device,
    ),
    vendor(
        "ascend.vmm.cross-device-needs-peer-access",
        A,
        "importing a shareable handle on another device without peer access is refused",
        "CANN RT-DOC 11-04; api-facts C.5",
        Expect::Refused,
        &[
            Need::Devices(2),
            Need::EmulatorOnly(CROSS_DEVICE_UNDOCUMENTED),
        ],
        vmm_cross_device_without_peer,
    ),
    vendor(
        "ascend.vmm.set-pid-needs-pids",
        A,
        "aclrtMemSetPidToShareableHandle rejects a NULL pid array and a pid count of 0 with \
         ACL_ERROR_INVALID_PARAM",
        "api-facts A.6 (RT-SRC memory.cpp)",
        Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM),
        &[],
        vmm_set_pid_args,
    ),
    // ---- IPC memory keys (api-facts A.7, C.4) ----------------------------------------
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
    vendor(
        "ascend.context.set-device-required",
        A,
        "IPC key export from a thread without a device context (no aclrtSetDevice) fails with \
         ACL_ERROR_RT_CONTEXT_NULL",
        "api-facts C.4 (RT-SRC: RT_ERROR_CONTEXT_NULL -> 107002), A.11",
        Expect::Code("ACL_ERROR_RT_CONTEXT_NULL", ACL_ERROR_RT_CONTEXT_NULL),
        &[],
        context_required,
    ),
    vendor(
        "ascend.device.id-range-checked",
        A,
        "aclrtSetDevice with a device id outside 0..aclrtGetDeviceCount fails with \
         ACL_ERROR_RT_INVALID_DEVICEID",
        "api-facts A.11 (DRV_ERROR_INVALID_DEVICE -> 107001)",
        Expect::Code(
            "ACL_ERROR_RT_INVALID_DEVICEID",
            ACL_ERROR_RT_INVALID_DEVICEID,
        ),
        &[],
        device_range,
    ),
    // ---- notify IPC (api-facts A.8, C.6) ---------------------------------------------
    vendor(
        "ascend.notify.binary-semaphore",
        A,
        "across processes a notify is a binary semaphore: aclrtWaitAndResetNotify blocks until a \
         record, then resets; two records release one wait",
        "CANN RT-DOC 08 notify management (documented flow); api-facts A.8, C.6",
        Expect::Behaviour,
        &[],
        notify_binary_semaphore,
    ),
    vendor(
        "ascend.notify.wait-timeout",
        A,
        "aclrtWaitAndResetNotify with timeout 2 and no record fails, neither before the timeout \
         nor more than 1.5 s after it (2 s: the unit is seconds per RT-DOC 08; a real runtime \
         that counts milliseconds as the header says passes with 2 ms and is reported)",
        "CANN RT-DOC 08; api-facts A.8, D.3 (timeout unit: header ms, docs s)",
        Expect::Refused,
        &[],
        notify_wait_timeout,
    ),
    vendor(
        "ascend.stream.waits-block-only-their-stream",
        A,
        "aclrtWaitAndResetNotify is a stream task: two processes that each enqueue a wait on \
         their stream before recording the other's notify on another stream both complete \
         (each call returns at once; each synchronisation returns once the peer recorded)",
        "CANN RT-DOC 08 aclrtWaitAndResetNotify ('blocks the stream; asynchronous interface'); \
         api-facts A.8",
        Expect::Behaviour,
        &[],
        stream_waits_block_only_their_stream,
    ),
    vendor(
        "ascend.notify.min-len-65",
        A,
        "aclrtNotifyGetExportKey needs a key buffer of at least 65 bytes: len 64 is refused, 65 \
         succeeds",
        "CANN RT-DOC 08; api-facts C.6",
        Expect::Refused,
        &[],
        notify_min_len,
    ),
    vendor(
        "ascend.notify.set-pid-needs-pids",
        A,
        "aclrtNotifySetImportPid rejects a NULL pid array and num 0 with \
         ACL_ERROR_RT_PARAM_INVALID",
        "api-facts C.6 (RT-SRC notify.cpp, api_error.cc)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        notify_set_pid_args,
    ),
    vendor(
        "ascend.notify.trustlist-required",
        A,
        "with DEFAULT flags only processes set by aclrtNotifySetImportPid may import a notify; \
         after the exporter adds the importer, its import succeeds",
        "CANN RT-DOC 08; api-facts A.8, C.6",
        Expect::Refused,
        &[],
        notify_trustlist,
    ),
    vendor(
        "ascend.notify.disable-pid-validation",
        A,
        "a notify exported with ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION (0x02, not 0x1) \
         is importable by any process, and its record releases the exporter's wait",
        "CANN RT-DOC 08; api-facts A.8 (the 0x02 flag)",
        Expect::Behaviour,
        &[],
        notify_disable_pid_validation,
    ),
    vendor(
        "ascend.notify.freed-when-all-destroyed",
        A,
        "a notify lives until every process destroyed it: after the exporter destroyed its \
         handle, the importer still records on and destroys its own",
        "CANN RT-DOC 08 (every process destroys the notify); api-facts C.6",
        Expect::Behaviour,
        &[],
        notify_freed_when_all_destroyed,
    ),
    // ---- fidelity against the vendor's own code (issue 11) ---------------------------
    vendor(
        "ascend.vmm.copy-spans-contiguous-mappings",
        A,
        "one copy may cover two aclrtMapMem mappings that follow each other in one reservation \
         (reserved with the page-type flag 1, as torch_npu's expandable segments do): the bytes \
         written across the page boundary read back whole and per page",
        "CANN RT-DOC 11-04 (reserve + map give address-contiguous virtual memory; \
         aclrtReserveMemAddressImpl accepts flags 0 or 1); torch_npu NPUCachingAllocator.cpp \
         ExpandableSegment",
        Expect::Behaviour,
        &[],
        vmm_copy_spans_mappings,
    ),
    vendor(
        "ascend.vmm.reservation-one-device",
        A,
        "one reservation is not bound to physical memory of two devices: mapping device-1 memory \
         next to device-0 memory in the same reservation is refused",
        "CANN RT-DOC 11-04 aclrtMapMem (a reserved range cannot be bound to physical memory \
         allocated on two devices)",
        Expect::Refused,
        &[Need::Devices(2)],
        vmm_reservation_one_device,
    ),
    vendor(
        "ascend.vmm.reservation-not-mixed-local-and-imported",
        A,
        "one reservation is not bound both to an imported handle and to a handle of \
         aclrtMallocPhysical: mapping local memory next to an import is refused",
        "CANN RT-DOC 11-04 aclrtMapMem (a reserved range cannot be bound to handles of \
         aclrtMallocPhysical and aclrtMemImportFromShareableHandle at the same time)",
        Expect::Refused,
        &[],
        vmm_reservation_not_mixed,
    ),
    vendor(
        "ascend.ipc-key.close-unmaps-oldest-import",
        A,
        "after two imports of one key, the importer's first aclrtIpcMemClose unmaps the older \
         address: the newer one still reads the exporter's bytes",
        "CANN runtime api_impl_standard_soc.cc IpcCloseMemory (vaList.front()); api-facts C.4",
        Expect::Behaviour,
        &[],
        key_close_unmaps_oldest,
    ),
    vendor(
        "ascend.notify.import-flags-0-or-1",
        A,
        "aclrtNotifyImportByKey with the documented ENABLE_PEER_ACCESS flag 0x02 fails with \
         ACL_ERROR_INVALID_PARAM (the ACL wrapper takes only 0 or 1); flags 0 import",
        "CANN runtime notify.cpp aclrtNotifyImportByKeyImpl (flags > ACL_NOTIFY_DEVICE_USE_ONLY \
         -> ACL_ERROR_INVALID_PARAM)",
        Expect::Code("ACL_ERROR_INVALID_PARAM", ACL_ERROR_INVALID_PARAM),
        &[],
        notify_import_flags,
    ),
    vendor(
        "ascend.notify.wait-on-creating-device",
        A,
        "a notify imported on device 1 from a device-0 creator may be recorded there, but \
         waiting on it from device 1 fails with ACL_ERROR_RT_PARAM_INVALID; from device 0 the \
         wait succeeds",
        "CANN runtime notify.cc Notify::CheckIpcNotifyDevId in NotifyWait (RT_ERROR_INVALID_VALUE: \
         the wait must be delivered on the device that creates the IPC notify)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[Need::Devices(2)],
        notify_wait_on_creating_device,
    ),
    vendor(
        "ascend.event.ipc-handle-needs-ipc-flag",
        A,
        "aclrtIpcGetEventHandle of an event created without ACL_EVENT_IPC (here ACL_EVENT_SYNC) \
         fails with ACL_ERROR_RT_PARAM_INVALID; an ACL_EVENT_IPC event gives its handle",
        "CANN RT-DOC 07 aclrtIpcGetEventHandle; runtime api_error.cc \
         ApiErrorDecorator::IpcGetEventHandle ('Only IPC events are supported'); api-facts A.9",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        event_ipc_flag,
    ),
    vendor(
        "ascend.event.ipc-open-record-wait",
        A,
        "the documented IPC event flow: a process creates an ACL_EVENT_IPC event, gets its \
         handle and records it; another process opens the handle, makes a stream wait on it \
         and destroys its event, and the creator destroys its own",
        "CANN RT-DOC 07 aclrtIpcGetEventHandle / aclrtIpcOpenEventHandle (documented flow); \
         api-facts A.9, C.7",
        Expect::Behaviour,
        &[],
        event_ipc_flow,
    ),
];

// ---------------------------------------------------------------------------------------
// Helpers.

fn trust(pid: i32) -> Pids {
    Pids::List(vec![pid])
}

/// An allocation on device 0 of the local shell, filled with pattern 1 and exported.
fn exported<E: Exec>(a: &mut Acl<E>, flags: u64) -> Result<(Vmm, u64), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let vmm = a.vmm_alloc(0).step("allocating VMM memory")?;
    a.write(vmm.va, &pattern(1, CHECK)).step("filling it")?;
    let sh = a.vmm_export(vmm.phys, flags).step("exporting it")?;
    Ok((vmm, sh))
}

/// A peer importing shareable handle `sh` on `dev`, mapping it: (phys, va).
fn import_map<E: Exec>(b: &mut Acl<E>, sh: u64, dev: u32, size: usize) -> Result<(u64, u64), Stop> {
    let phys = b.vmm_import(sh, dev as i32).step("importing the handle")?;
    let va = b.map(phys, size, dev).step("mapping the import")?;
    Ok((phys, va))
}

fn unmap_free<E: Exec>(b: &mut Acl<E>, phys: u64, va: u64) -> Result<(), Stop> {
    b.unmap(va).step("unmapping the import")?;
    b.phys_free(phys).step("freeing the import")
}

/// A local `aclrtMalloc` block filled with pattern 1, exported by key with `flags`.
pub(super) fn key_exported<E: Exec>(a: &mut Acl<E>, flags: u64) -> Result<(u64, String), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    a.write(p, &pattern(1, CHECK)).step("filling it")?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, flags)
        .step("aclrtIpcMemGetExportKey")?;
    Ok((p, key))
}

pub(super) fn key_release<E: Exec>(a: &mut Acl<E>, p: u64, key: &str) -> Result<(), Stop> {
    a.key_close(key).step("the exporter's aclrtIpcMemClose")?;
    a.free(p).step("aclrtFree")
}

fn peer_on<E: Exec>(b: &mut Acl<E>, dev: u32) -> Result<i32, Stop> {
    b.set_device(dev).step("peer aclrtSetDevice")?;
    b.pid().step("peer aclrtDeviceGetBareTgid")
}

/// A notify created and exported locally with `flags`.
fn notify_exported<E: Exec>(a: &mut Acl<E>, flags: u64) -> Result<(u64, String), Stop> {
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let key = a
        .notify_export(n, ACL_IPC_KEY_LEN, flags)
        .step("aclrtNotifyGetExportKey")?;
    Ok((n, key))
}

// ---------------------------------------------------------------------------------------
// VMM.

fn vmm_shares_memory(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("aclrtMemSetPidToShareableHandle")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("importer read")?,
        &pattern(1, CHECK),
    )?;
    b.write(va + 128, &pattern(2, 64)).step("importer write")?;
    same_bytes(
        "exporter reads the importer's bytes",
        &a.read(vmm.va + 128, 64).step("exporter read")?,
        &pattern(2, 64),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("freeing the allocation")?;
    Ok(format!(
        "{} bytes shared both ways through shareable handle {sh:#x}",
        vmm.size
    ))
}

fn vmm_trustlist(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    let seen = ctx.refused("import without the trustlist", b.vmm_import(sh, 0))?;
    a.vmm_set_pid(sh, &trust(pid))
        .step("aclrtMemSetPidToShareableHandle")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "granted importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; after the grant the import succeeds"))
}

fn vmm_disable_pid_validation(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    same_bytes(
        "importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok("an ungranted process imported the 0x1-flagged handle".into())
}

fn vmm_same_process(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &Pids::List(vec![me, pid]))
        .step("trusting this process and the peer")?;
    let result = a.vmm_import(sh, 0);
    if let Ok(phys) = result {
        let _ = a.phys_free(phys);
    }
    let seen = ctx.refused("import in the exporting process", result)?;
    // Positive control: the same import from another process succeeds.
    let phys = b.vmm_import(sh, 0).step("the peer's import")?;
    b.phys_free(phys).step("the peer's free")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!(
        "{seen}; the same import in another process succeeds"
    ))
}

fn vmm_double_import(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let first = b.vmm_import(sh, 0).step("first import")?;
    let second = b.vmm_import(sh, 0);
    if let Ok(p) = second {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused("second import in the same process", second)?;
    b.phys_free(first).step("freeing the first import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(seen)
}

fn vmm_double_export(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let seen = ctx.refused(
        "second export of the same handle",
        a.vmm_export(vmm.phys, ACL_RT_VMM_EXPORT_FLAG_DEFAULT),
    )?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("first export gave {sh:#x}; {seen}"))
}

fn vmm_device_range(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let count = b.device_count().step("aclrtGetDeviceCount")?;
    let result = b.vmm_import(sh, count as i32);
    if let Ok(p) = result {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused(&format!("import on device {count} of {count}"), result)?;
    let phys = b.vmm_import(sh, 0).step("import on device 0")?;
    b.phys_free(phys).step("free the import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; on device 0 the import succeeds"))
}

fn vmm_lifetime(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let (phys, va) = import_map(&mut b, sh, 0, vmm.size)?;
    a.vmm_free(vmm)
        .step("the exporter's unmap and aclrtFreePhysical")?;
    same_bytes(
        "importer reads after the exporter freed",
        &b.read(va, CHECK).step("read after the exporter's free")?,
        &pattern(1, CHECK),
    )?;
    b.write(va, &pattern(3, CHECK))
        .step("write after the exporter's free")?;
    same_bytes(
        "importer reads back its write",
        &b.read(va, CHECK).step("read back")?,
        &pattern(3, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    Ok("the import stayed usable after the exporter freed its handle".into())
}

fn vmm_cross_device(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    b.enable_peer(0)
        .step("aclrtDeviceEnablePeerAccess(1 -> 0)")?;
    let (phys, va) = import_map(&mut b, sh, 1, vmm.size)?;
    same_bytes(
        "device-1 importer reads",
        &b.read(va, CHECK).step("read")?,
        &pattern(1, CHECK),
    )?;
    unmap_free(&mut b, phys, va)?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok("imported on device 1 from device 0 with peer access".into())
}

fn vmm_cross_device_without_peer(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 1)?;
    a.vmm_set_pid(sh, &trust(pid)).step("grant")?;
    let result = b.vmm_import(sh, 1);
    if let Ok(p) = result {
        let _ = b.phys_free(p);
    }
    let seen = ctx.refused("import on device 1 without peer access", result)?;
    b.enable_peer(0)
        .step("aclrtDeviceEnablePeerAccess(1 -> 0)")?;
    let phys = b
        .vmm_import(sh, 1)
        .step("import on device 1 with peer access")?;
    b.phys_free(phys).step("free the import")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{seen}; with peer access the import succeeds"))
}

fn vmm_set_pid_args(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DEFAULT)?;
    let null = ctx.refused("NULL pid array", a.vmm_set_pid(sh, &Pids::Null))?;
    let empty = ctx.refused("pidNum 0", a.vmm_set_pid(sh, &Pids::List(Vec::new())))?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    a.vmm_set_pid(sh, &trust(me))
        .step("aclrtMemSetPidToShareableHandle with one pid")?;
    a.vmm_free(vmm).step("free")?;
    Ok(format!("{null}; {empty}; one pid succeeds"))
}

// ---------------------------------------------------------------------------------------
// IPC keys.

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
fn documented_order_records_nothing<E: Exec, F: Exec>(
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

pub(super) fn key_cross_device(ctx: &mut Ctx) -> Verdict {
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

fn context_required(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let p = a.malloc(KEY_BLOCK).step("aclrtMalloc")?;
    let seen = ctx.refused(
        "export from a thread without a context",
        a.key_export_no_context(p, KEY_BLOCK),
    )?;
    let key = a
        .key_export(p, KEY_BLOCK, ACL_IPC_KEY_LEN, 0)
        .step("export from the thread that set the device")?;
    key_release(&mut a, p, &key)?;
    Ok(format!(
        "{seen}; from the thread with a context the export succeeds"
    ))
}

fn device_range(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let count = a.device_count().step("aclrtGetDeviceCount")?;
    let seen = ctx.refused(&format!("aclrtSetDevice({count})"), a.set_device(count))?;
    let last = count
        .checked_sub(1)
        .ok_or_else(|| Stop::fail("no device"))?;
    a.set_device(last)
        .step(&format!("aclrtSetDevice({last})"))?;
    Ok(format!("{seen}; aclrtSetDevice({last}) succeeds"))
}

// ---------------------------------------------------------------------------------------
// Notify.

fn notify_binary_semaphore(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("recorder")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.notify_set_pid(n, &trust(pid))
        .step("aclrtNotifySetImportPid")?;
    let nb = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("aclrtNotifyImportByKey")?;
    // Two records release one wait: the second wait times out.
    b.notify_record(nb).step("first record")?;
    b.notify_record(nb).step("second record")?;
    a.notify_wait(n, LONG_WAIT).step("wait after two records")?;
    let started = Instant::now();
    if a.notify_wait(n, 1).is_ok() {
        return Err(Stop::fail(
            "a second wait returned after two records: records accumulate, the notify is not \
             a binary semaphore",
        ));
    }
    let timed_out = started.elapsed();
    // A wait blocks until the peer records.
    b.0.send("sleep 300").step("queueing sleep")?;
    b.0.send(&format!("notify.record {nb}"))
        .step("queueing the record")?;
    let started = Instant::now();
    a.notify_wait(n, LONG_WAIT)
        .step("wait for the delayed record")?;
    let waited = started.elapsed();
    b.0.reply().step("peer sleep")?;
    b.0.reply().step("peer record")?;
    ensure(waited >= Duration::from_millis(200), || {
        format!("the wait returned after {waited:?}, before the peer's record")
    })?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!(
        "two records released one wait (the next timed out after {timed_out:.2?}); a wait \
         blocked {waited:.2?} until the peer's record"
    ))
}

fn notify_wait_timeout(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let started = Instant::now();
    let result = a.notify_wait(n, WAIT_TIMEOUT);
    let took = started.elapsed();
    let seen = ctx.refused(
        &format!("wait with timeout {WAIT_TIMEOUT} and no record"),
        result,
    )?;
    // Positive control: the same wait after a record succeeds.
    a.notify_record(n).step("aclrtRecordNotify")?;
    a.notify_wait(n, WAIT_TIMEOUT)
        .step("the same wait after a record")?;
    a.notify_destroy(n).step("destroy")?;
    // The wait returns neither before its timeout nor more than WAIT_SLACK after it. The
    // unit is seconds per RT-DOC 08 (what the emulator implements), milliseconds per the
    // header (api-facts D.3): a real runtime may show either, and the report says which.
    let within = |unit: Duration| {
        let limit = unit * WAIT_TIMEOUT;
        took >= limit && took <= limit + WAIT_SLACK
    };
    let unit = if within(Duration::from_secs(1)) {
        "seconds"
    } else if within(Duration::from_millis(1)) && !ctx.target.emulated() {
        "milliseconds"
    } else {
        let units = if ctx.target.emulated() {
            format!("{WAIT_TIMEOUT} s")
        } else {
            format!("{WAIT_TIMEOUT} s (RT-DOC 08) nor after {WAIT_TIMEOUT} ms (header)")
        };
        return Err(Stop::fail(format!(
            "the wait with timeout {WAIT_TIMEOUT} returned after {took:.2?}: not within \
             {WAIT_SLACK:?} after {units}"
        )));
    };
    Ok(format!(
        "{seen} after {took:.2?}: the timeout counted in {unit}, within {WAIT_SLACK:?}; after \
         a record the same wait succeeds"
    ))
}

/// How long the call that enqueues a wait may take (it only enqueues): generous, and far
/// below the wait's own timeout.
const ENQUEUE_LIMIT: Duration = Duration::from_secs(10);

fn stream_waits_block_only_their_stream(ctx: &mut Ctx) -> Verdict {
    // Both sides are peers, so a call that blocks (the wait on the caller) cannot hang the
    // rule: its reply is awaited for at most ENQUEUE_LIMIT.
    let mut a = ctx.acl_peer("a")?;
    let mut b = ctx.acl_peer("b")?;
    let flags = ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    let (na, key_a) = notify_exported(&mut a, flags)?;
    let (nb, key_b) = notify_exported(&mut b, flags)?;
    let na_in_b = b
        .notify_import(&key_a, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("B imports A's notify")?;
    let nb_in_a = a
        .notify_import(&key_b, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("A imports B's notify")?;
    let sa = a.stream_create().step("A's aclrtCreateStream")?;
    let sb = b.stream_create().step("B's aclrtCreateStream")?;
    // Each enqueues the wait for the other's signal first. Were the wait on the caller,
    // neither could go on to record the other's notify.
    let started = Instant::now();
    let blocked = |who: &str, e| {
        Stop::fail(format!(
            "{who}'s aclrtWaitAndResetNotify on its stream did not return within \
             {ENQUEUE_LIMIT:?} before any record ({e}): the wait blocks the caller, not the stream"
        ))
    };
    a.notify_wait_on_within(na, LONG_WAIT, sa, ENQUEUE_LIMIT)
        .map_err(|e| blocked("A", e))?;
    b.notify_wait_on_within(nb, LONG_WAIT, sb, ENQUEUE_LIMIT)
        .map_err(|e| blocked("B", e))?;
    let enqueued = started.elapsed();
    // Then each records the other's notify on its default stream, and synchronises.
    a.notify_record(nb_in_a).step("A records B's notify")?;
    b.notify_record(na_in_b).step("B records A's notify")?;
    a.stream_sync(sa)
        .step("A's aclrtSynchronizeStream of the waiting stream")?;
    b.stream_sync(sb)
        .step("B's aclrtSynchronizeStream of the waiting stream")?;
    a.stream_destroy(sa).step("A's aclrtDestroyStream")?;
    b.stream_destroy(sb).step("B's aclrtDestroyStream")?;
    a.notify_destroy(nb_in_a).step("A destroys B's notify")?;
    b.notify_destroy(na_in_b).step("B destroys A's notify")?;
    a.notify_destroy(na).step("A destroys its notify")?;
    b.notify_destroy(nb).step("B destroys its notify")?;
    a.0.finish()?;
    b.0.finish()?;
    Ok(format!(
        "both waits were enqueued before any record ({enqueued:.2?} for the two calls); each \
         process then recorded the other's notify and both waiting streams completed"
    ))
}

fn notify_min_len(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    let seen = ctx.refused(
        "key buffer of 64 bytes",
        a.notify_export(n, ACL_IPC_KEY_LEN - 1, 0),
    )?;
    a.notify_export(n, ACL_IPC_KEY_LEN, 0)
        .step("export with a 65-byte buffer")?;
    a.notify_destroy(n).step("destroy")?;
    Ok(format!("{seen}; 65 bytes succeed"))
}

fn notify_set_pid_args(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let (n, _key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let null = ctx.refused("NULL pid array", a.notify_set_pid(n, &Pids::Null))?;
    let empty = ctx.refused("num 0", a.notify_set_pid(n, &Pids::List(Vec::new())))?;
    let me = a.pid().step("aclrtDeviceGetBareTgid")?;
    a.notify_set_pid(n, &trust(me))
        .step("aclrtNotifySetImportPid with one pid")?;
    a.notify_destroy(n).step("destroy")?;
    Ok(format!("{null}; {empty}; one pid succeeds"))
}

fn notify_trustlist(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    let result = b.notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT);
    if let Ok(nb) = result {
        let _ = b.notify_destroy(nb);
    }
    let seen = ctx.refused("import without the trustlist", result)?;
    a.notify_set_pid(n, &trust(pid))
        .step("aclrtNotifySetImportPid")?;
    let nb = b.notify_import(&key, 0).step("granted import")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok(format!("{seen}; after the grant the import succeeds"))
}

fn notify_disable_pid_validation(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("recorder")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let nb = b.notify_import(&key, 0).step("ungranted import")?;
    b.notify_record(nb).step("record")?;
    a.notify_wait(n, LONG_WAIT)
        .step("wait for the importer's record")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    Ok("an ungranted process imported the 0x02-flagged notify and released a wait".into())
}

fn notify_freed_when_all_destroyed(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)?;
    let pid = peer_on(&mut b, 0)?;
    a.notify_set_pid(n, &trust(pid)).step("grant")?;
    let nb = b.notify_import(&key, 0).step("import")?;
    a.notify_destroy(n).step("exporter destroy")?;
    b.notify_record(nb)
        .step("importer record after the exporter destroyed")?;
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    Ok("the importer's handle stayed usable after the exporter destroyed its own".into())
}

// ---------------------------------------------------------------------------------------
// Fidelity against the vendor's own code (issue 11).

/// `aclrtReserveMemAddress` flag torch_npu's expandable segments pass (the page-type flag
/// the ACL wrapper keeps for compatibility).
const RESERVE_FLAG_PAGE_TYPE: u64 = 1;

fn vmm_copy_spans_mappings(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let g = a.granularity(0).step("granularity")?;
    let va = a
        .reserve(2 * g, 0, RESERVE_FLAG_PAGE_TYPE)
        .step("aclrtReserveMemAddress of two pages with flags 1")?;
    let mut phys = Vec::new();
    let mut mapped = Vec::new();
    let mut result = Ok(());
    for i in 0..2u64 {
        let step = a
            .phys_alloc(0, g)
            .step("aclrtMallocPhysical")
            .and_then(|p| {
                phys.push(p);
                let at = va + i * g as u64;
                a.map_rw_at(at, p, g, 0).step("aclrtMapMem")?;
                mapped.push(at);
                Ok(())
            });
        if step.is_err() {
            result = step;
            break;
        }
    }
    let across = va + g as u64 - (CHECK / 2) as u64;
    let checked = result.and_then(|()| {
        a.write(across, &pattern(5, CHECK))
            .step("one aclrtMemcpy over the boundary of the two mappings")?;
        same_bytes(
            "the span read back in one copy",
            &a.read(across, CHECK).step("one read over the boundary")?,
            &pattern(5, CHECK),
        )?;
        let first = a.read(across, CHECK / 2).step("read from the first page")?;
        let second = a
            .read(va + g as u64, CHECK / 2)
            .step("read from the second page")?;
        same_bytes(
            "the two pages hold their halves",
            &[first, second].concat(),
            &pattern(5, CHECK),
        )
    });
    for at in mapped {
        a.unmap_only(at).step("aclrtUnmapMem")?;
    }
    for p in phys {
        a.phys_free(p).step("aclrtFreePhysical")?;
    }
    a.release(va).step("aclrtReleaseMemAddress")?;
    checked?;
    Ok(format!(
        "{CHECK} bytes copied in one call across two {g}-byte mappings of one reservation"
    ))
}

fn vmm_reservation_one_device(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let g = a.granularity(0).step("granularity")?;
    let p0 = a.phys_alloc(0, g).step("aclrtMallocPhysical on device 0")?;
    let p1 = a.phys_alloc(1, g).step("aclrtMallocPhysical on device 1")?;
    let va = a.reserve(2 * g, 0, 0).step("aclrtReserveMemAddress")?;
    a.map_rw_at(va, p0, g, 0).step("mapping device-0 memory")?;
    let second = va + g as u64;
    let result = a.map_rw_at(second, p1, g, 1);
    if result.is_ok() {
        let _ = a.unmap_only(second);
    }
    let seen = ctx.refused(
        "mapping device-1 memory next to device-0 memory in one reservation",
        result,
    );
    a.unmap_only(va).step("aclrtUnmapMem")?;
    a.release(va).step("aclrtReleaseMemAddress")?;
    a.phys_free(p0).step("aclrtFreePhysical")?;
    a.phys_free(p1).step("aclrtFreePhysical")?;
    seen
}

fn vmm_reservation_not_mixed(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (vmm, sh) = exported(&mut a, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let imported = b.vmm_import(sh, 0).step("importing the handle")?;
    let local = b
        .phys_alloc(0, vmm.size)
        .step("the importer's own aclrtMallocPhysical")?;
    let va = b
        .reserve(2 * vmm.size, 0, 0)
        .step("aclrtReserveMemAddress")?;
    b.map_rw_at(va, imported, vmm.size, 0)
        .step("mapping the import")?;
    let second = va + vmm.size as u64;
    let result = b.map_rw_at(second, local, vmm.size, 0);
    if result.is_ok() {
        let _ = b.unmap_only(second);
    }
    let seen = ctx.refused(
        "mapping local memory next to an imported handle in one reservation",
        result,
    );
    b.unmap_only(va).step("aclrtUnmapMem")?;
    b.release(va).step("aclrtReleaseMemAddress")?;
    b.phys_free(imported).step("freeing the import")?;
    b.phys_free(local).step("freeing the local memory")?;
    b.0.finish()?;
    a.vmm_free(vmm).step("free")?;
    seen
}

fn key_close_unmaps_oldest(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (p, key) = key_exported(&mut a, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let older = b.key_import(&key, 0).step("first import")?;
    let newer = b.key_import(&key, 0).step("second import")?;
    b.key_close(&key).step("first close")?;
    // The newer import must still be mapped; the older one is not read (on a device,
    // touching an unmapped address may fault).
    let read = b
        .read(newer, CHECK)
        .step("reading the newer import after one close");
    b.key_close(&key).step("second close")?;
    b.0.finish()?;
    key_release(&mut a, p, &key)?;
    same_bytes("the newer import", &read?, &pattern(1, CHECK))?;
    Ok(format!(
        "imports at {older:#x} then {newer:#x}; after one close the newer still reads the bytes"
    ))
}

fn notify_import_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 0)?;
    let result = b.notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS);
    if let Ok(nb) = result {
        let _ = b.notify_destroy(nb);
    }
    let seen = ctx.refused("import with ENABLE_PEER_ACCESS (0x02)", result);
    let plain = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("import with flags 0")
        .and_then(|nb| b.notify_destroy(nb).step("importer destroy"));
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    let seen = seen?;
    plain?;
    Ok(format!("{seen}; flags 0 import"))
}

fn notify_wait_on_creating_device(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("importer")?;
    let (n, key) = notify_exported(&mut a, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION)?;
    peer_on(&mut b, 1)?;
    let nb = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("import on device 1")?;
    b.notify_record(nb).step("record from device 1")?;
    let seen = ctx.refused("wait from device 1", b.notify_wait(nb, 1));
    if seen.is_err() {
        // The wait may have consumed the record: do not wait for it on device 0.
        let _ = b.notify_destroy(nb);
        let _ = a.notify_destroy(n);
        return seen;
    }
    // The record from device 1 reached the creator on device 0.
    let creator = a
        .notify_wait(n, LONG_WAIT)
        .step("the creator's wait on device 0");
    let from_home = creator.and_then(|()| {
        a.notify_record(n).step("the creator's record")?;
        b.set_device(0).step("importer aclrtSetDevice(0)")?;
        b.notify_wait(nb, LONG_WAIT)
            .step("the importer's wait from device 0")
    });
    b.notify_destroy(nb).step("importer destroy")?;
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    let seen = seen?;
    from_home?;
    Ok(format!(
        "{seen}; the record from device 1 released the creator's wait, and the importer waited \
         from device 0"
    ))
}

fn event_ipc_flag(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let plain = a
        .event_create(ACL_EVENT_SYNC)
        .step("aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)")?;
    let seen = ctx.refused(
        "aclrtIpcGetEventHandle of an ACL_EVENT_SYNC event",
        a.event_handle(plain),
    );
    let ipc = a
        .event_create(ACL_EVENT_IPC)
        .step("aclrtCreateEventExWithFlag(ACL_EVENT_IPC)")
        .and_then(|e| {
            let h = a
                .event_handle(e)
                .step("aclrtIpcGetEventHandle of the IPC event");
            a.event_destroy(e).step("aclrtDestroyEvent")?;
            h
        });
    a.event_destroy(plain).step("aclrtDestroyEvent")?;
    let seen = seen?;
    ipc?;
    Ok(format!("{seen}; the ACL_EVENT_IPC event gave its handle"))
}

fn event_ipc_flow(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("opener")?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let e = a
        .event_create(ACL_EVENT_IPC)
        .step("aclrtCreateEventExWithFlag(ACL_EVENT_IPC)")?;
    let flow = a
        .event_handle(e)
        .step("aclrtIpcGetEventHandle")
        .and_then(|handle| {
            a.event_record(e).step("the creator's aclrtRecordEvent")?;
            peer_on(&mut b, 0)?;
            let eb = b.event_open(&handle).step("aclrtIpcOpenEventHandle")?;
            let waited = b.event_wait(eb).step("the opener's aclrtStreamWaitEvent");
            b.event_destroy(eb).step("the opener's aclrtDestroyEvent")?;
            waited
        });
    b.0.finish()?;
    a.event_destroy(e).step("the creator's aclrtDestroyEvent")?;
    flow?;
    Ok("the opener waited on the creator's recorded IPC event".into())
}
