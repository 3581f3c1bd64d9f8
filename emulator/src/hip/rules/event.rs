//! The HIP rules of events, interprocess events and their IPC handles, and of stream waits on
//! them.

use devipc_hip_sys::{
    hipErrorInvalidConfiguration, hipErrorInvalidContext, hipErrorInvalidValue, hipSuccess,
};

use super::{Basis, RuleInfo};

/// `hipEventInterprocess` requires `hipEventDisableTiming`.
pub const EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING: &str =
    "hip.event.interprocess-needs-disable-timing";
/// Event creation flags outside the runtime's known set are refused.
pub const EVENT_UNKNOWN_FLAGS_REJECTED: &str = "hip.event.unknown-flags-rejected";
/// At most one release-scope flag per event.
pub const EVENT_ONE_RELEASE_FLAG: &str = "hip.event.one-release-flag";
/// `hipIpcGetEventHandle` needs an event created with `hipEventInterprocess`.
pub const EVENT_EXPORT_NEEDS_INTERPROCESS: &str = "hip.event.export-needs-interprocess";
/// Opening an event handle in the process that exported it is refused.
pub const EVENT_OPEN_IN_EXPORTER_REJECTED: &str = "hip.event.open-in-exporter-rejected";
/// A zeroed, garbage or foreign `hipIpcEventHandle_t` is refused.
pub const EVENT_INVALID_HANDLE_REJECTED: &str = "hip.event.invalid-handle-rejected";
/// An event never recorded is complete: `hipEventQuery` succeeds and `hipEventSynchronize`
/// returns at once (so a HIP event alone is not a binary semaphore; DESIGN 5.5).
pub const EVENT_UNRECORDED_IS_COMPLETE: &str = "hip.event.unrecorded-is-complete";
/// `hipStreamWaitEvent`'s `flags` must be 0.
pub const STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO: &str = "hip.stream.wait-event-flags-must-be-zero";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipEventCreateWithFlags with hipEventInterprocess but without \
                  hipEventDisableTiming fails with hipErrorInvalidValue.",
        when_broken: Some("the interprocess event is created anyway"),
        source: "api-facts C.2; CLR hipamd/src/hip_event.cpp (ihipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_UNKNOWN_FLAGS_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "Event flags outside hipEventDefault | BlockingSync | DisableTiming | \
                  Interprocess | ReleaseToDevice | ReleaseToSystem (plus \
                  hipEventDisableSystemFence from 5.6) are hipErrorInvalidValue.",
        when_broken: Some("unknown bits are ignored"),
        source: "api-facts B.2, C.2; CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_ONE_RELEASE_FLAG,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "More than one release flag (hipEventReleaseToDevice, hipEventReleaseToSystem, \
                  and from 5.6 hipEventDisableSystemFence) is hipErrorInvalidValue.",
        when_broken: Some("several release flags are accepted"),
        source: "api-facts C.2; CLR hipamd/src/hip_event.cpp (hipEventCreateWithFlags)",
        since: None,
    },
    RuleInfo {
        id: EVENT_EXPORT_NEEDS_INTERPROCESS,
        code: hipErrorInvalidConfiguration,
        basis: Basis::Implementation,
        breakable: true,
        summary: "hipIpcGetEventHandle of an event created without hipEventInterprocess is \
                  hipErrorInvalidConfiguration.",
        when_broken: Some("the event is moved into shared memory and exported"),
        source: "api-facts C.2; CLR hipamd/src/hip_event.hpp, hip_event_ipc.cpp",
        since: None,
    },
    RuleInfo {
        id: EVENT_OPEN_IN_EXPORTER_REJECTED,
        code: hipErrorInvalidContext,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipIpcOpenEventHandle in the process that exported the event is \
                  hipErrorInvalidContext (documented and implemented in 5.2-era hipamd and 6.2).",
        when_broken: Some("the exporter gets a second event handle on the same shared event"),
        source: "api-facts C.2; CLR hipamd/src/hip_event_ipc.cpp (hipIpcOpenEventHandle)",
        since: None,
    },
    RuleInfo {
        id: EVENT_INVALID_HANDLE_REJECTED,
        code: hipErrorInvalidValue,
        basis: Basis::Implementation,
        breakable: true,
        summary: "An event handle whose shared memory cannot be mapped (zeroed, garbage, of \
                  another kind, or naming an event that no longer exists) is hipErrorInvalidValue.",
        when_broken: Some("hipErrorUnknown (the emulator has no later check to fall through to)"),
        source: "api-facts C.2; CLR hipamd/src/hip_event_ipc.cpp (shared memory open)",
        since: None,
    },
    RuleInfo {
        id: EVENT_UNRECORDED_IS_COMPLETE,
        code: hipSuccess,
        basis: Basis::Documented,
        breakable: true,
        summary: "An event that was never recorded is complete: hipEventQuery returns hipSuccess \
                  and hipEventSynchronize / hipStreamWaitEvent return at once. A HIP event alone \
                  is therefore not a binary semaphore; devipc's backend adds a sequence word \
                  (DESIGN 5.5).",
        when_broken: Some(
            "an unrecorded event counts as pending until its first record \
                           (hipEventQuery: hipErrorNotReady; hipEventSynchronize waits)",
        ),
        source: "DESIGN 5.5; HIP API reference (hipEventSynchronize, hipEventQuery)",
        since: None,
    },
    RuleInfo {
        id: STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
        code: hipErrorInvalidValue,
        basis: Basis::Documented,
        breakable: true,
        summary: "hipStreamWaitEvent accepts only flags == 0.",
        when_broken: Some("flags are ignored"),
        source: "api-facts B.3; HIP header doc (hipStreamWaitEvent)",
        since: None,
    },
];
