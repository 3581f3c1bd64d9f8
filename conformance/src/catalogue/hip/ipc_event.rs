//! HIP IPC event rules (api-facts C.2): interprocess events, their handles, flags and
//! record/synchronise across processes.

use devipc_hip_sys::{
    hipErrorInvalidConfiguration, hipErrorInvalidContext, hipEventBlockingSync,
    hipEventDisableTiming, hipEventInterprocess, hipEventReleaseToDevice, hipEventReleaseToSystem,
};

use super::{H, INVALID_VALUE, IPC_EVENT, destroy_if_made};
use crate::catalogue::{Step, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};
use crate::shell::hex;

/// The IPC event rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.event.interprocess-needs-disable-timing",
        H,
        "hipEventCreateWithFlags(hipEventInterprocess) without hipEventDisableTiming is \
         hipErrorInvalidValue; with both flags it succeeds",
        "CLR hipamd/src/hip_event.cpp (ihipEventCreateWithFlags); api-facts C.2",
        INVALID_VALUE,
        &[],
        event_needs_disable_timing,
    ),
    vendor(
        "hip.event.export-needs-interprocess",
        H,
        "hipIpcGetEventHandle of an event created without hipEventInterprocess is \
         hipErrorInvalidConfiguration",
        "CLR hipamd/src/hip_event.hpp, hip_event_ipc.cpp; api-facts C.2",
        Expect::Code("hipErrorInvalidConfiguration", hipErrorInvalidConfiguration),
        &[],
        event_export_needs_interprocess,
    ),
    vendor(
        "hip.event.open-in-exporter-rejected",
        H,
        "hipIpcOpenEventHandle in the process that exported the event is hipErrorInvalidContext",
        "HIP header doc and CLR hip_event_ipc.cpp (5.2-era and 6.2); api-facts C.2",
        Expect::Code("hipErrorInvalidContext", hipErrorInvalidContext),
        &[],
        event_open_in_exporter,
    ),
    vendor(
        "hip.event.invalid-handle-rejected",
        H,
        "a zeroed hipIpcEventHandle_t (no shared memory behind it) is hipErrorInvalidValue",
        "CLR hipamd/src/hip_event_ipc.cpp; api-facts C.2",
        INVALID_VALUE,
        &[],
        event_invalid_handle,
    ),
    vendor(
        "hip.event.unrecorded-is-complete",
        H,
        "an event never recorded is complete: hipEventQuery succeeds and hipEventSynchronize \
         returns at once, in the exporter and in an importer",
        "HIP API reference (hipEventQuery, hipEventSynchronize); DESIGN 5.5",
        Expect::Behaviour,
        &[],
        event_unrecorded_complete,
    ),
    vendor(
        "hip.event.record-sync-across-processes",
        H,
        "an IPC event opened in another process can be recorded there and synchronized on and \
         queried in the exporter",
        "HIP header docs (hipIpcOpenEventHandle: record, synchronize, query work in either \
         process); api-facts C.2",
        Expect::Behaviour,
        &[],
        event_across_processes,
    ),
    vendor(
        "hip.event.unknown-flags-rejected",
        H,
        "event flags outside the runtime's known set are hipErrorInvalidValue",
        "CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags); api-facts B.2, C.2",
        INVALID_VALUE,
        &[],
        event_unknown_flags,
    ),
    vendor(
        "hip.event.one-release-flag",
        H,
        "hipEventReleaseToDevice together with hipEventReleaseToSystem is hipErrorInvalidValue",
        "CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags); api-facts C.2",
        INVALID_VALUE,
        &[],
        event_one_release_flag,
    ),
];

fn event_needs_disable_timing(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let bad = h.event_create(hipEventInterprocess);
    destroy_if_made(&mut h, &bad);
    let seen = ctx.refused("hipEventInterprocess alone", bad)?;
    let e = h
        .event_create(IPC_EVENT)
        .step("hipEventInterprocess | hipEventDisableTiming")?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok(format!("{seen}; with hipEventDisableTiming it succeeds"))
}

fn event_export_needs_interprocess(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let e = h
        .event_create(hipEventDisableTiming)
        .step("hipEventCreateWithFlags")?;
    let seen = ctx.refused("export of a non-interprocess event", h.event_handle(e))?;
    h.event_destroy(e).step("hipEventDestroy")?;
    let ipc = h.event_create(IPC_EVENT).step("hipEventCreateWithFlags")?;
    h.event_handle(ipc)
        .step("export of an interprocess event")?;
    h.event_destroy(ipc).step("hipEventDestroy")?;
    Ok(format!("{seen}; an interprocess event exports"))
}

fn event_open_in_exporter(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let e = h.event_create(IPC_EVENT).step("hipEventCreateWithFlags")?;
    let handle = h.event_handle(e).step("hipIpcGetEventHandle")?;
    let opened = h.event_open(&handle);
    destroy_if_made(&mut h, &opened);
    let seen = ctx.refused("open in the exporting process", opened)?;
    let mut p = ctx.hip_peer("importer")?;
    p.set_device(0).step("peer hipSetDevice")?;
    let pe = p.event_open(&handle).step("the peer's open")?;
    p.event_destroy(pe).step("the peer's hipEventDestroy")?;
    p.0.finish()?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok(format!("{seen}; the same open in another process succeeds"))
}

fn event_invalid_handle(ctx: &mut Ctx) -> Verdict {
    let mut x = ctx.hip()?;
    x.set_device(0).step("hipSetDevice")?;
    let e = x.event_create(IPC_EVENT).step("hipEventCreateWithFlags")?;
    let handle = x.event_handle(e).step("hipIpcGetEventHandle")?;
    let mut h = ctx.hip_peer("importer")?;
    h.set_device(0).step("peer hipSetDevice")?;
    let opened = h.event_open(&hex(&[0u8; 64]));
    destroy_if_made(&mut h, &opened);
    let seen = ctx.refused("open a zeroed event handle", opened)?;
    let pe = h.event_open(&handle).step("open a real event handle")?;
    h.event_destroy(pe).step("hipEventDestroy")?;
    h.0.finish()?;
    x.event_destroy(e).step("hipEventDestroy")?;
    Ok(format!("{seen}; a real handle opens"))
}

fn event_unrecorded_complete(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("importer")?;
    h.set_device(0).step("hipSetDevice")?;
    let e = h.event_create(IPC_EVENT).step("hipEventCreateWithFlags")?;
    h.event_query(e).step("hipEventQuery of a fresh event")?;
    h.event_sync(e)
        .step("hipEventSynchronize of a fresh event")?;
    let handle = h.event_handle(e).step("hipIpcGetEventHandle")?;
    p.set_device(0).step("peer hipSetDevice")?;
    let pe = p.event_open(&handle).step("hipIpcOpenEventHandle")?;
    p.event_query(pe).step("importer hipEventQuery")?;
    p.event_sync(pe).step("importer hipEventSynchronize")?;
    p.event_destroy(pe).step("importer hipEventDestroy")?;
    p.0.finish()?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok("query and synchronize of a never-recorded event succeed in both processes".into())
}

fn event_across_processes(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let mut p = ctx.hip_peer("recorder")?;
    h.set_device(0).step("hipSetDevice")?;
    let e = h.event_create(IPC_EVENT).step("hipEventCreateWithFlags")?;
    let handle = h.event_handle(e).step("hipIpcGetEventHandle")?;
    p.set_device(0).step("peer hipSetDevice")?;
    let pe = p.event_open(&handle).step("hipIpcOpenEventHandle")?;
    p.event_record(pe).step("importer hipEventRecord")?;
    p.event_sync(pe).step("importer hipEventSynchronize")?;
    h.event_sync(e).step("exporter hipEventSynchronize")?;
    h.event_query(e).step("exporter hipEventQuery")?;
    p.event_destroy(pe).step("importer hipEventDestroy")?;
    p.0.finish()?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok("recorded in the importer, synchronized and queried in the exporter".into())
}

fn event_unknown_flags(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let made = h.event_create(0x100);
    destroy_if_made(&mut h, &made);
    let seen = ctx.refused("flags 0x100", made)?;
    let known = hipEventBlockingSync | hipEventDisableTiming;
    let e = h
        .event_create(known)
        .step("hipEventBlockingSync | hipEventDisableTiming")?;
    h.event_destroy(e).step("hipEventDestroy")?;
    Ok(format!("{seen}; known flags succeed"))
}

fn event_one_release_flag(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice")?;
    let made = h.event_create(hipEventReleaseToDevice | hipEventReleaseToSystem);
    destroy_if_made(&mut h, &made);
    let seen = ctx.refused("two release flags", made)?;
    for (name, flag) in [
        ("hipEventReleaseToDevice", hipEventReleaseToDevice),
        ("hipEventReleaseToSystem", hipEventReleaseToSystem),
    ] {
        let e = h.event_create(flag).step(name)?;
        h.event_destroy(e).step("hipEventDestroy")?;
    }
    Ok(format!("{seen}; each release flag alone succeeds"))
}
