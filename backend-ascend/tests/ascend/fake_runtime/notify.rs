//! Signals on ACL notifies: the export and import flags, the wait timeout in seconds,
//! only the exporter grants, and the peer-access fallback for a runtime that rejects the
//! notify peer flag.

use devipc_core::token::SignalTokenParts;
use devipc_core::{
    DeviceId, DeviceIpc, Error, ExportOptions, Mechanism, ProcessId, RawStream, SignalToken,
    TokenOrigin,
};
use serial_test::serial;
use std::time::Duration;

use super::*;

#[test]
#[serial]
fn notify_export_grant_import_and_wait_use_the_notify_flags_and_seconds() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(0)).unwrap();
    let t = b.export_signal(&s, ExportOptions::any_process()).unwrap();
    assert_eq!(t.mechanism(), Mechanism::AscendNotify);
    // The 65-byte key, then the 32-byte name of the ring's word file (signals with
    // generations).
    assert_eq!(t.payload().len(), 65 + 32);
    assert_eq!(t.generation(), s.id.get());
    let c = calls();
    assert!(c.contains(&"aclrtCreateNotify(0)".to_owned()), "{c:?}");
    assert!(
        c.contains(&"aclrtNotifyGetExportKey(65,0x2)".to_owned()),
        "{c:?}"
    );
    // Cached: no second key; the other validation is refused.
    b.export_signal(&s, ExportOptions::any_process()).unwrap();
    assert_eq!(count(&calls(), "aclrtNotifyGetExportKey"), 0);
    assert!(b.export_signal(&s, ExportOptions::default()).is_err());

    b.grant_signal(&t, &[ProcessId(11)]).unwrap();
    assert!(calls().contains(&"aclrtNotifySetImportPid([11])".to_owned()));

    let imported = b.import_signal(&t, DeviceId(1)).unwrap();
    assert!(calls().contains(&"aclrtNotifyImportByKey(0x2)".to_owned()));
    // An imported notify is not exported again, nor granted through its token.
    assert!(matches!(
        b.export_signal(&imported, ExportOptions::default()),
        Err(Error::InvalidArgument { .. })
    ));

    b.notify(&s, RawStream::DEFAULT).unwrap();
    b.wait(&s, RawStream::DEFAULT, Some(Duration::from_millis(1500)))
        .unwrap();
    b.wait(&s, RawStream::DEFAULT, None).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtWaitAndResetNotify(2)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtWaitAndResetNotify(0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtSynchronizeStream"), 2, "{c:?}");
    // Both waits ran on one stream of devipc's own, created once with its event, with the
    // event recorded after each vendor wait and synchronised in slices of at most 50 ms
    // (notify.rs, the wait's deadline; the wait without a deadline is sliced too, so that
    // a destroy on another thread ends it); nothing polls.
    assert_eq!(count(&c, "aclrtCreateStream"), 1, "{c:?}");
    assert!(
        c.contains(&"aclrtCreateEventExWithFlag(1)".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtRecordEvent"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtSynchronizeEventWithTimeout"), 2, "{c:?}");
    assert!(
        c.contains(&"aclrtSynchronizeEventWithTimeout(50)".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtQueryEventStatus"), 0, "{c:?}");

    fail("aclrtWaitAndResetNotify", 107019);
    let err = b
        .wait(&s, RawStream::DEFAULT, Some(Duration::from_secs(1)))
        .unwrap_err();
    // The time measured (the fake fails at once), not the 1 s asked for.
    assert!(
        matches!(err, Error::Timeout { after, .. } if after < Duration::from_secs(1)),
        "{err:?}"
    );
    unfail("aclrtWaitAndResetNotify");

    b.destroy_signal(imported).unwrap();
    b.destroy_signal(s.clone()).unwrap();
    // Destroying the signal releases devipc's wait stream and event too, and the ring of
    // four IPC events it was created with (the import never opened its ring's events).
    let c = calls();
    assert_eq!(count(&c, "aclrtDestroyStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtDestroyEvent"), 1 + 4, "{c:?}");
    assert!(matches!(
        b.destroy_signal(s),
        Err(Error::UnknownHandle { kind: "signal", .. })
    ));
}

#[test]
#[serial]
fn only_the_exporter_grants_a_signal() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(0)).unwrap();
    let t = b.export_signal(&s, ExportOptions::default()).unwrap();
    // A token naming a notify of another process.
    let foreign = SignalToken::new(SignalTokenParts {
        mechanism: Mechanism::AscendNotify,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin::current(ProcessId(1)),
        generation: t.generation(),
        payload: t.payload().to_vec(),
    })
    .unwrap();
    let err = b.grant_signal(&foreign, &[ProcessId(3)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    // Our own notify, once destroyed.
    b.destroy_signal(s).unwrap();
    assert!(b.grant_signal(&t, &[ProcessId(3)]).is_err());
}

#[test]
#[serial]
fn a_runtime_rejecting_the_notify_peer_flag_gets_peer_access_enabled_instead() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(1)).unwrap();
    let t = b.export_signal(&s, ExportOptions::default()).unwrap();
    fake::with(|s| s.notify_import_flag_limit = Some(1));
    calls();
    let imported = b.import_signal(&t, DeviceId(0)).unwrap();
    let c = calls();
    let wanted = [
        "aclrtNotifyImportByKey(0x2)",
        "aclrtDeviceEnablePeerAccess(0->1,0)",
        "aclrtNotifyImportByKey(0x0)",
    ];
    let seen: Vec<&String> = c.iter().filter(|c| wanted.contains(&c.as_str())).collect();
    assert_eq!(seen, wanted, "{c:?}");
    // Another failure of the flagged import is reported as it is.
    fail("aclrtNotifyImportByKey", 507899);
    let err = b.import_signal(&t, DeviceId(0)).unwrap_err();
    assert_eq!(
        err.vendor_name(),
        Some("ACL_ERROR_RT_DRV_INTERNAL_ERROR"),
        "{err}"
    );
    unfail("aclrtNotifyImportByKey");
    b.destroy_signal(imported).unwrap();
    b.destroy_signal(s).unwrap();
}

/// Without the event functions the wait is the vendor's alone, in whole seconds (N16 of
/// the 2026-11-28 audit): a sub-second limit is rounded up to 1 s, and the timeout says so
/// instead of reporting a 10 ms limit that lasted a second.
#[test]
#[serial]
fn without_the_event_functions_a_timeout_rounds_up_to_whole_seconds_and_says_so() {
    let mut api = fake_api();
    api.aclrtCreateEventExWithFlag = None;
    let b = backend(api);
    let s = b.create_signal(DeviceId(0)).unwrap();
    calls();
    fail("aclrtWaitAndResetNotify", 107019);
    for (limit, secs) in [
        (Duration::from_millis(10), 1),
        (Duration::from_millis(1500), 2),
    ] {
        let err = b.wait(&s, RawStream::DEFAULT, Some(limit)).unwrap_err();
        let c = calls();
        assert!(
            c.contains(&format!("aclrtWaitAndResetNotify({secs})")),
            "{c:?}"
        );
        assert_eq!(
            count(&c, "aclrtCreateStream"),
            0,
            "the caller's stream: {c:?}"
        );
        match err {
            Error::Timeout { what, .. } => assert!(
                what.contains(&format!("rounded up to {secs} s"))
                    && what.contains(&format!("{limit:?}")),
                "{what}"
            ),
            other => panic!("{other:?}"),
        }
    }
    unfail("aclrtWaitAndResetNotify");
    b.wait(&s, RawStream::DEFAULT, Some(Duration::from_millis(10)))
        .unwrap();
    b.destroy_signal(s).unwrap();
}

#[test]
#[serial]
fn a_runtime_without_the_bounded_event_sync_polls_the_event() {
    let mut api = fake_api();
    api.aclrtSynchronizeEventWithTimeout = None;
    let b = backend(api);
    let s = b.create_signal(DeviceId(0)).unwrap();
    calls();
    b.notify(&s, RawStream::DEFAULT).unwrap();
    b.wait(&s, RawStream::DEFAULT, Some(Duration::from_secs(1)))
        .unwrap();
    let c = calls();
    assert_eq!(count(&c, "aclrtQueryEventStatus"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtSynchronizeEventWithTimeout"), 0, "{c:?}");
    b.destroy_signal(s).unwrap();
}
