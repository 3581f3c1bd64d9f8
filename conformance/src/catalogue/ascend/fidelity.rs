//! Ascend rules taken from the vendor's own code rather than its documents (issue 11):
//! what the runtime and torch_npu actually do with VMM reservations and copies, key
//! closes, notify import flags and devices, and IPC events; and (issue 25) the event
//! creation flags the runtime refuses and an IPC event exported with a record pending.

use std::time::Duration;

use devipc_ascend_sys::codes::ACL_ERROR_RT_PARAM_INVALID;
use devipc_ascend_sys::consts::{
    ACL_EVENT_DEVICE_USE_ONLY, ACL_EVENT_EXTERNAL, ACL_EVENT_IPC, ACL_EVENT_SYNC,
    ACL_EVENT_TIME_LINE, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};

use super::{A, CHECK, LONG_WAIT, exported, key_exported, key_release, notify_exported, peer_on};
use crate::catalogue::{Step, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::VendorClient;

/// How long the opener of an IPC event exported with a pending record polls for its
/// completion once the creator's stream ran the record.
const PENDING_LIMIT: Duration = Duration::from_secs(5);

/// The rules of fidelity to the vendor's own code.
pub(super) static RULES: &[Rule] = &[
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
        "ascend.notify.import-flags-0-to-3",
        A,
        "aclrtNotifyImportByKey with the documented ENABLE_PEER_ACCESS flag 0x02 imports (the \
         ACL wrapper of current CANN passes the flags on; older ones refused flags above 1), \
         flags above 3 are refused, and flags 0 import",
        "CANN RT-DOC aclrtNotifyImportByKey (ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS \
         0x02); runtime notify.cpp aclrtNotifyImportByKeyImpl (no flag check before \
         rtsNotifyImportByKey), api_impl IpcOpenNotify (RT_NOTIFY_FLAG_DOWNLOAD_TO_DEV 0x1, \
         RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS 0x2)",
        Expect::Refused,
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
        "ascend.event.create-ex-flags-valid",
        A,
        "aclrtCreateEventExWithFlag fails with ACL_ERROR_RT_PARAM_INVALID for ACL_EVENT_IPC \
         combined with ACL_EVENT_SYNC, for ACL_EVENT_DEVICE_USE_ONLY (0x10), \
         ACL_EVENT_EXTERNAL (0x20) and an unknown bit (0x80); ACL_EVENT_IPC alone and \
         ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE create events",
        "CANN RT-DOC 07 aclrtCreateEventExWithFlag (ACL_EVENT_IPC is not OR-ed with other \
         flags); runtime api_error.cc ApiErrorDecorator::EventCreateEx (IPC, EXTERNAL, MC2 \
         alone; flag within DDSYNC_NS | STREAM_MARK | DDSYNC | TIME_LINE | IPC, \
         RT_ERROR_INVALID_VALUE otherwise)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        event_create_ex_flags,
    ),
    vendor(
        "ascend.event.create-flags-valid",
        A,
        "aclrtCreateEventWithFlag (which torch_npu probes for) creates local events: \
         ACL_EVENT_SYNC and ACL_EVENT_EXTERNAL alone succeed; ACL_EVENT_IPC, ACL_EVENT_EXTERNAL \
         combined with ACL_EVENT_SYNC and an unknown bit (0x80) fail with \
         ACL_ERROR_RT_PARAM_INVALID",
        "CANN RT-DOC aclrtCreateEventWithFlag; runtime api_error.cc \
         ApiErrorDecorator::EventCreate (flag within RT_EVENT_FLAG_MAX, which has no IPC bit; \
         EXTERNAL alone; RT_ERROR_INVALID_VALUE otherwise)",
        Expect::Code("ACL_ERROR_RT_PARAM_INVALID", ACL_ERROR_RT_PARAM_INVALID),
        &[],
        event_create_with_flag,
    ),
    vendor(
        "ascend.event.export-keeps-pending-record",
        A,
        "an ACL_EVENT_IPC event recorded on a stream that is still blocked (on a notify wait), \
         then exported (torch_npu's order): the opener's stream wait on it ends, and the event \
         reads complete there, once the creator's stream runs the record",
        "CANN RT-DOC 07 aclrtIpcGetEventHandle (the processes that open the handle share the \
         event); torch_npu NPUIPCTypes.cpp (records the IPC event, then sends its handle)",
        Expect::Behaviour,
        &[],
        event_export_pending_record,
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
    let peer = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS)
        .step("import with ENABLE_PEER_ACCESS (0x02)")
        .and_then(|nb| b.notify_destroy(nb).step("importer destroy"));
    let result = b.notify_import(&key, 4);
    if let Ok(nb) = result {
        let _ = b.notify_destroy(nb);
    }
    let seen = ctx.refused("import with flags 0x04", result);
    let plain = b
        .notify_import(&key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)
        .step("import with flags 0")
        .and_then(|nb| b.notify_destroy(nb).step("importer destroy"));
    b.0.finish()?;
    a.notify_destroy(n).step("exporter destroy")?;
    peer?;
    let seen = seen?;
    plain?;
    Ok(format!(
        "ENABLE_PEER_ACCESS (0x02) imports; {seen}; flags 0 import"
    ))
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

fn event_create_ex_flags(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let mut seen = Vec::new();
    for (what, flag) in [
        (
            "ACL_EVENT_IPC | ACL_EVENT_SYNC",
            ACL_EVENT_IPC | ACL_EVENT_SYNC,
        ),
        ("ACL_EVENT_DEVICE_USE_ONLY", ACL_EVENT_DEVICE_USE_ONLY),
        ("ACL_EVENT_EXTERNAL", ACL_EVENT_EXTERNAL),
        ("the unknown bit 0x80", 0x80),
    ] {
        let result = a.event_create(flag);
        if let Ok(e) = result {
            let _ = a.event_destroy(e);
        }
        seen.push(ctx.refused(&format!("aclrtCreateEventExWithFlag({what})"), result));
    }
    let good = [ACL_EVENT_IPC, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE]
        .into_iter()
        .try_for_each(|flag| {
            let e = a
                .event_create(flag)
                .step(&format!("aclrtCreateEventExWithFlag({flag:#x})"))?;
            a.event_destroy(e).step("aclrtDestroyEvent")
        });
    let seen = seen.into_iter().collect::<Result<Vec<_>, _>>()?;
    good?;
    Ok(format!(
        "{}; ACL_EVENT_IPC alone and SYNC | TIME_LINE create",
        seen.join("; ")
    ))
}

fn event_create_with_flag(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let good = [ACL_EVENT_SYNC, ACL_EVENT_EXTERNAL]
        .into_iter()
        .try_for_each(|flag| {
            let e = a
                .event_create_with_flag(flag)
                .step(&format!("aclrtCreateEventWithFlag({flag:#x})"))?;
            a.event_destroy(e).step("aclrtDestroyEvent")
        });
    good?;
    let mut seen = Vec::new();
    for (what, flag) in [
        ("ACL_EVENT_IPC", ACL_EVENT_IPC),
        (
            "ACL_EVENT_EXTERNAL | ACL_EVENT_SYNC",
            ACL_EVENT_EXTERNAL | ACL_EVENT_SYNC,
        ),
        ("the unknown bit 0x80", 0x80),
    ] {
        let result = a.event_create_with_flag(flag);
        if let Ok(e) = result {
            let _ = a.event_destroy(e);
        }
        seen.push(ctx.refused(&format!("aclrtCreateEventWithFlag({what})"), result));
    }
    let seen = seen.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(format!(
        "ACL_EVENT_SYNC and ACL_EVENT_EXTERNAL create; {}",
        seen.join("; ")
    ))
}

fn event_export_pending_record(ctx: &mut Ctx) -> Verdict {
    let mut a = ctx.acl()?;
    let mut b = ctx.acl_peer("opener")?;
    a.set_device(0).step("aclrtSetDevice(0)")?;
    let s = a.stream_create().step("aclrtCreateStream")?;
    let n = a.notify_create().step("aclrtCreateNotify")?;
    a.notify_wait_on(n, LONG_WAIT, s)
        .step("aclrtWaitAndResetNotify on the creator's stream (blocks it)")?;
    let e = a
        .event_create(ACL_EVENT_IPC)
        .step("aclrtCreateEventExWithFlag(ACL_EVENT_IPC)")?;
    // Recorded behind the notify wait, so still pending when the handle is taken.
    let flow = a
        .event_record_on(e, s)
        .step("aclrtRecordEvent on the blocked stream")
        .and_then(|()| a.event_handle(e).step("aclrtIpcGetEventHandle"))
        .and_then(|handle| {
            peer_on(&mut b, 0)?;
            let eb = b.event_open(&handle).step("aclrtIpcOpenEventHandle")?;
            let bs = b.stream_create().step("the opener's aclrtCreateStream")?;
            b.event_wait_on(eb, bs)
                .step("the opener's aclrtStreamWaitEvent")?;
            // Release the creator's stream: it runs the record.
            a.notify_record(n).step("aclrtRecordNotify")?;
            a.stream_sync(s)
                .step("the creator's aclrtSynchronizeStream")?;
            let seen = b
                .event_query_until(eb, PENDING_LIMIT)
                .step("the opener's aclrtQueryEventStatus");
            if !matches!(seen, Ok(true)) {
                // A later record completes the opener's wait, so its stream can end.
                let _ = a.event_record(e);
            }
            b.stream_sync(bs)
                .step("the opener's aclrtSynchronizeStream")?;
            b.stream_destroy(bs)
                .step("the opener's aclrtDestroyStream")?;
            b.event_destroy(eb).step("the opener's aclrtDestroyEvent")?;
            seen
        });
    b.0.finish()?;
    a.event_destroy(e).step("the creator's aclrtDestroyEvent")?;
    a.stream_destroy(s).step("aclrtDestroyStream")?;
    a.notify_destroy(n).step("aclrtDestroyNotify")?;
    if !flow? {
        return Err(Stop::fail(format!(
            "the record pending at the export completed on the creator's stream, but the \
             opener's event was not complete within {PENDING_LIMIT:?} (its stream wait would \
             never end)"
        )));
    }
    Ok("the record pending at the export completed for the opener, whose stream wait ended".into())
}
