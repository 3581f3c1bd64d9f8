//! The ACL rules of the signals between processes (IPC notifies and IPC events) and of the
//! stream waits on them.

use devipc_ascend_sys::codes::{
    ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_WAIT_TIMEOUT, ACL_SUCCESS,
};

use super::{Basis, RuleInfo, WHY_DRIVER, WHY_RT_PARAM};

// ---- notify ---------------------------------------------------------------------

/// Notify key buffers hold at least 65 bytes.
pub const NOTIFY_MIN_LEN: &str = "ascend.notify.min-len-65";
/// Notify flags are 0 or 0x02.
pub const NOTIFY_FLAGS: &str = "ascend.notify.flags-valid";
/// aclrtNotifySetImportPid needs pids.
pub const NOTIFY_SET_PID_ARGS: &str = "ascend.notify.set-pid-needs-pids";
/// Import needs the trustlist unless pid validation is off.
pub const NOTIFY_TRUSTLIST: &str = "ascend.notify.trustlist-required";
/// A notify is a binary semaphore.
pub const NOTIFY_BINARY_SEMAPHORE: &str = "ascend.notify.binary-semaphore";
/// A wait that expires returns 107019.
pub const NOTIFY_WAIT_TIMEOUT: &str = "ascend.notify.wait-timeout";
/// A notify is freed when all processes destroyed it.
pub const NOTIFY_FREED_WHEN_ALL_DESTROYED: &str = "ascend.notify.freed-when-all-destroyed";
/// Notify import flags are at most 3 (DOWNLOAD_TO_DEV 0x1 | ENABLE_PEER_ACCESS 0x2).
pub const NOTIFY_IMPORT_FLAGS: &str = "ascend.notify.import-flags-0-to-3";
/// An IPC notify is waited on from the device that created it.
pub const NOTIFY_WAIT_ON_CREATING_DEVICE: &str = "ascend.notify.wait-on-creating-device";

// ---- events ---------------------------------------------------------------------

/// Only events created with ACL_EVENT_IPC have an IPC handle.
pub const EVENT_IPC_FLAG: &str = "ascend.event.ipc-handle-needs-ipc-flag";
/// aclrtCreateEventExWithFlag's flag: a non-empty combination of SYNC, CAPTURE, 0x04 and
/// TIME_LINE, or ACL_EVENT_IPC alone.
pub const EVENT_CREATE_EX_FLAGS: &str = "ascend.event.create-ex-flags-valid";
/// aclrtCreateEventWithFlag's flag: a non-empty combination of SYNC, CAPTURE, 0x04,
/// TIME_LINE and DEVICE_USE_ONLY, or ACL_EVENT_EXTERNAL alone (never ACL_EVENT_IPC).
pub const EVENT_CREATE_FLAGS: &str = "ascend.event.create-flags-valid";
/// A record pending when its IPC event is exported completes for the event's openers.
pub const EVENT_EXPORT_PENDING_RECORD: &str = "ascend.event.export-keeps-pending-record";
/// aclrtSynchronizeEventWithTimeout gives up at its timeout (ms) with 507047.
pub const EVENT_SYNC_TIMEOUT: &str = "ascend.event.sync-with-timeout";
/// aclrtSynchronizeEventWithTimeout's timeout is -1 or positive.
pub const EVENT_SYNC_TIMEOUT_VALID: &str = "ascend.event.sync-timeout-valid";
/// An event recorded after stream work that failed reports the failure when synchronised
/// or queried.
pub const EVENT_SYNC_REPORTS_STREAM_FAILURE: &str = "ascend.event.sync-reports-stream-failure";

// ---- streams --------------------------------------------------------------------

/// Waits are stream tasks: they block their stream, not the caller.
pub const STREAM_ASYNC_WAITS: &str = "ascend.stream.waits-block-only-their-stream";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: NOTIFY_MIN_LEN,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen("the documented code of the same check for IPC memory keys"),
        breakable: false,
        summary: "aclrtNotifyGetExportKey's key buffer len must be at least 65",
        when_broken: None,
        source: "api-facts C.6 (RT-DOC 08)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "notify export flags are 0 or DISABLE_PID_VALIDATION 0x02; the memory flag 0x1 is \
                  not a notify flag, for export nor (past the ACL wrapper's check, see \
                  ascend.notify.import-flags-0-to-3) for import",
        when_broken: None,
        source: "api-facts A.8, C.6",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_SET_PID_ARGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtNotifySetImportPid rejects a NULL pid array and num 0",
        when_broken: None,
        source: "api-facts C.6 (RT-SRC notify.cpp, api_error.cc)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_TRUSTLIST,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "aclrtNotifyImportByKey needs the importer's pid on the trustlist unless exported \
                  with DISABLE_PID_VALIDATION (0x02)",
        when_broken: None,
        source: "api-facts A.8, C.6",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_BINARY_SEMAPHORE,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "aclrtRecordNotify sets the notify; aclrtWaitAndResetNotify waits until it is set \
                  and resets it, so each record releases one wait and records do not accumulate",
        when_broken: None,
        source: "api-facts A.8, C.6 (RT-DOC 08)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_WAIT_TIMEOUT,
        code: ACL_ERROR_RT_WAIT_TIMEOUT,
        basis: Basis::Chosen(
            "the runtime's wait-timeout code; on a device the expiry surfaces at \
                              stream synchronisation. The unit is seconds as in RT-DOC 08 and the \
                              runtime's log (timeout=%us); the header comment says ms",
        ),
        breakable: false,
        summary: "aclrtWaitAndResetNotify with timeout > 0 (seconds) fails when no record arrives \
                  in time; 0 waits forever",
        when_broken: None,
        source: "api-facts A.8 (RT-DOC 08)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_FREED_WHEN_ALL_DESTROYED,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: false,
        summary: "a notify lives until every process that created or imported it called \
                  aclrtDestroyNotify",
        when_broken: None,
        source: "api-facts C.6 (RT-DOC 08)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_IMPORT_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "aclrtNotifyImportByKey takes flags 0 to 3 (the runtime's DOWNLOAD_TO_DEV 0x1 \
                  and the documented ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS 0x02); larger \
                  flags are refused. The ACL wrapper no longer refuses flags above 1 (older CANN \
                  did, with ACL_ERROR_INVALID_PARAM)",
        when_broken: None,
        source: "RT-DOC aclrtNotifyImportByKey (flags DEFAULT 0x0, ENABLE_PEER_ACCESS 0x02); \
                 hicann/runtime src/acl/aclrt_impl/notify.cpp aclrtNotifyImportByKeyImpl (flags \
                 passed to rtsNotifyImportByKey unchecked), runtime api_impl IpcOpenNotify (bits \
                 RT_NOTIFY_FLAG_DOWNLOAD_TO_DEV 0x1 and RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS \
                 0x2)",
        since: None,
    },
    RuleInfo {
        id: NOTIFY_WAIT_ON_CREATING_DEVICE,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtWaitAndResetNotify on an IPC notify (exported, or imported by key) fails \
                  with ACL_ERROR_RT_PARAM_INVALID unless the calling thread's current device is \
                  the device the notify was created on; records may come from any device",
        when_broken: None,
        source: "RT-SRC notify.cc Notify::CheckIpcNotifyDevId and api_impl NotifyWait \
                 (RT_ERROR_INVALID_VALUE, EE1012: 'the corresponding Notify Wait must be delivered \
                 on the device that creates the IPC Notify')",
        since: None,
    },
    RuleInfo {
        id: EVENT_IPC_FLAG,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtIpcGetEventHandle fails with ACL_ERROR_RT_PARAM_INVALID unless the event \
                  was created by aclrtCreateEventExWithFlag with exactly ACL_EVENT_IPC",
        when_broken: None,
        source: "RT-DOC 07 aclrtIpcGetEventHandle (only events of aclrtCreateEventExWithFlag with \
                 ACL_EVENT_IPC); RT-SRC api_error.cc ApiErrorDecorator::IpcGetEventHandle (flag != \
                 RT_EVENT_IPC -> RT_ERROR_INVALID_VALUE, 'Only IPC events are supported')",
        since: None,
    },
    RuleInfo {
        id: EVENT_CREATE_EX_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtCreateEventExWithFlag fails with ACL_ERROR_RT_PARAM_INVALID unless flag is \
                  a non-empty combination of ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS, \
                  0x04 and ACL_EVENT_TIME_LINE, or ACL_EVENT_IPC alone: IPC combined with \
                  another flag, ACL_EVENT_DEVICE_USE_ONLY (0x10), ACL_EVENT_EXTERNAL (0x20), 0 \
                  and unknown bits are refused",
        when_broken: None,
        source: "RT-DOC 07 aclrtCreateEventExWithFlag (ACL_EVENT_IPC cannot be OR-ed with other \
                 flags; SYNC, CAPTURE_STREAM_PROGRESS, TIME_LINE, IPC listed); RT-SRC \
                 api_error.cc ApiErrorDecorator::EventCreateEx (MC2, EXTERNAL, IPC 'do not \
                 support OR operations with other flags'; flag in (0, DDSYNC_NS | STREAM_MARK | \
                 DDSYNC | TIME_LINE | IPC] -> RT_ERROR_INVALID_VALUE) and its unit test \
                 create_external_event (rtEventCreateExWithFlag(RT_EVENT_EXTERNAL) -> \
                 ACL_ERROR_RT_PARAM_INVALID); the ACL wrapper aclrtCreateEventExWithFlagImpl \
                 checks no flag itself",
        since: None,
    },
    RuleInfo {
        id: EVENT_CREATE_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtCreateEventWithFlag creates a local event; it fails with \
                  ACL_ERROR_RT_PARAM_INVALID unless flag is a non-empty combination of \
                  ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS, 0x04, ACL_EVENT_TIME_LINE \
                  and ACL_EVENT_DEVICE_USE_ONLY, or ACL_EVENT_EXTERNAL alone: ACL_EVENT_IPC \
                  (only aclrtCreateEventExWithFlag makes IPC events), 0 and unknown bits are \
                  refused",
        when_broken: None,
        source: "RT-DOC aclrtCreateEventWithFlag (TIME_LINE, SYNC, CAPTURE_STREAM_PROGRESS, \
                 EXTERNAL alone, DEVICE_USE_ONLY); RT-SRC api_error.cc \
                 ApiErrorDecorator::EventCreate (flag in (0, RT_EVENT_FLAG_MAX], which has no \
                 IPC bit; EXTERNAL not OR-ed -> RT_ERROR_INVALID_VALUE); torch_npu \
                 AclInterface.cpp probes for aclrtCreateEventWithFlag",
        since: None,
    },
    RuleInfo {
        id: EVENT_EXPORT_PENDING_RECORD,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "an ACL_EVENT_IPC event exported (aclrtIpcGetEventHandle) while a record on it \
                  is still pending on a stream: the record is the event's latest for the \
                  processes that open it, and its completion releases their stream waits",
        when_broken: None,
        source: "RT-DOC 07 aclrtIpcGetEventHandle (one event shared by the processes that open \
                 it); torch_npu NPUIPCTypes.cpp (records the ACL_EVENT_IPC event on the current \
                 stream, then sends its handle: field-notes-2026-11-28 section 0)",
        since: None,
    },
    RuleInfo {
        id: EVENT_SYNC_TIMEOUT,
        code: ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtSynchronizeEventWithTimeout blocks until the event's latest record \
                  completed, at most timeout milliseconds (-1: forever, as \
                  aclrtSynchronizeEvent); at the timeout it fails with \
                  ACL_ERROR_RT_EVENT_SYNC_TIMEOUT (507047)",
        when_broken: None,
        source: "RT-DOC aclrtSynchronizeEventWithTimeout (hicann/runtime \
                 docs/api_docs/aclrtSynchronizeEventWithTimeout.md: -1 forever, > 0 ms); \
                 hicann/runtime src/acl/aclrt_impl/event.cpp \
                 aclrtSynchronizeEventWithTimeoutImpl (passes ACL_ERROR_RT_EVENT_SYNC_TIMEOUT \
                 through) and src/runtime event.cc Event::Synchronize (RT_ERROR_EVENT_SYNC_TIMEOUT \
                 once the time spent reaches timeout)",
        since: None,
    },
    RuleInfo {
        id: EVENT_SYNC_TIMEOUT_VALID,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtSynchronizeEventWithTimeout refuses timeout 0 and timeouts below -1 with \
                  ACL_ERROR_RT_PARAM_INVALID",
        when_broken: None,
        source: "hicann/runtime src/acl/aclrt_impl/event.cpp \
                 aclrtSynchronizeEventWithTimeoutImpl (timeout >= -1, else \
                 ACL_ERROR_RT_PARAM_INVALID) and src/runtime/core/src/api_impl/api_error.cc \
                 ApiErrorDecorator::EventSynchronize ((timeout < -1) || (timeout == 0) -> \
                 RT_ERROR_INVALID_VALUE)",
        since: None,
    },
    RuleInfo {
        id: EVENT_SYNC_REPORTS_STREAM_FAILURE,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "an event recorded on a stream after work that failed (a notify wait that \
                  expired, a copy whose memory went away) reports that failure's code from \
                  aclrtSynchronizeEvent, aclrtSynchronizeEventWithTimeout and \
                  aclrtQueryEventStatus once the record completed, without collecting it: the \
                  stream's next aclrtSynchronizeStream still reports it (the emulator keeps \
                  the failure per stream until a synchronisation of the stream collects it; \
                  the runtime keeps it per context)",
        when_broken: None,
        source: "hicann/runtime src/runtime/core/src/api_impl/api_impl.cc \
                 ApiImpl::EventSynchronize and ApiImpl::EventQueryStatus (both return \
                 Context::CheckStatus() first: the context's failureError_ in \
                 STOP_ON_FAILURE mode, src/runtime/core/src/context/context.cc); CANN \
                 programming guide 'Obtaining Runtime Error Codes' (an asynchronous task \
                 error is returned by a later synchronising call)",
        since: None,
    },
    RuleInfo {
        id: STREAM_ASYNC_WAITS,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "aclrtWaitAndResetNotify and aclrtStreamWaitEvent enqueue a wait on the stream \
                  and return at once; the wait blocks only that stream (the caller and other \
                  streams go on), and an expired notify wait fails the stream's work, reported by \
                  the next aclrtSynchronizeStream",
        when_broken: None,
        source: "RT-DOC 08 aclrtWaitAndResetNotify ('blocks the stream; asynchronous interface'), \
                 RT-DOC 07 aclrtStreamWaitEvent; api-facts A.8",
        since: None,
    },
];
