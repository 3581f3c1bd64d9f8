//! Unit tests of `runtime.rs`: the dispatch of every [`DeviceIpc`] method through
//! [`Backend`], the release errors a runtime keeps, and clones sharing one backend (on the
//! recording backend, no device).

use std::time::Duration;

use super::*;
use crate::recording_backend::RecordingBackend;

/// Calls every trait method through `Backend` and checks each reached the variant, in
/// order, with its result passed back unchanged.
#[test]
fn dispatches_every_method_to_the_variant() {
    let backend = Backend::from(RecordingBackend::new(BackendKind::Hip));
    let d = DeviceId(1);
    let s = RawStream::DEFAULT;
    assert_eq!(backend.kind(), BackendKind::Hip);
    assert_eq!(backend.device_count().unwrap(), 3);
    assert_eq!(backend.process_id().unwrap(), ProcessId::current());
    let physical = backend.physical_device(d).unwrap();
    assert_eq!(physical.physical_id, Some(11));
    assert_eq!(backend.device_of_physical(&physical).unwrap(), Some(d));
    backend.enable_peer_access(d, DeviceId(0)).unwrap();
    let alloc = backend.allocate(d, 64).unwrap();
    assert_eq!((alloc.device, alloc.size), (d, 64));
    let token = backend
        .export(&alloc, 0..64, ExportOptions::default())
        .unwrap();
    backend
        .export_external(d, DevicePtr(0x10), 64, ExportOptions::any_process())
        .unwrap();
    backend.close_external(d, DevicePtr(0x10)).unwrap();
    backend.grant(&token, &[ProcessId(9)]).unwrap();
    let mapping = backend.import(&token, d).unwrap();
    assert_eq!(mapping.len, 64);
    let mut buf = [0u8; 2];
    // SAFETY: the probe never dereferences the pointer.
    unsafe {
        backend.write(mapping.ptr, &[1, 2]).unwrap();
        backend.read(mapping.ptr, &mut buf).unwrap();
    }
    assert_eq!(buf, [0xAB, 0xAB]);
    backend.close(mapping).unwrap();
    backend.free(alloc).unwrap();
    let sig = backend.create_signal(d).unwrap();
    let stoken = backend
        .export_signal(&sig, ExportOptions::default())
        .unwrap();
    backend.grant_signal(&stoken, &[ProcessId(9)]).unwrap();
    let peer = backend.import_signal(&stoken, d).unwrap();
    backend.notify(&sig, s).unwrap();
    let waited = backend.wait(&peer, s, Some(Duration::from_millis(5)));
    assert!(matches!(waited, Err(devipc_core::Error::Timeout { .. })));
    backend.destroy_signal(peer).unwrap();
    backend.destroy_signal(sig).unwrap();

    let Backend::Recording(probe) = &backend else {
        panic!("Backend::from(RecordingBackend) must give the Recording variant");
    };
    assert_eq!(
        probe.calls(),
        [
            "info",
            "device_count",
            "process_id",
            "physical_device",
            "device_of_physical",
            "enable_peer_access",
            "allocate",
            "export",
            "export_external",
            "close_external",
            "grant",
            "import",
            "write",
            "read",
            "close",
            "free",
            "create_signal",
            "export_signal",
            "grant_signal",
            "import_signal",
            "notify",
            "wait",
            "destroy_signal",
            "destroy_signal",
        ]
    );
}

/// Every `log` record of this test binary (this test is the only one that installs a
/// logger), to check that a failed release is logged with its text.
struct Recorder(Mutex<Vec<(log::Level, String)>>);

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let mut records = self.0.lock().unwrap_or_else(|p| p.into_inner());
        records.push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

static RECORDER: Recorder = Recorder(Mutex::new(Vec::new()));

/// Issue 14: a release that fails in `Drop` (a buffer's free, an import's close, a
/// signal's destroy) is logged and kept for the runtime's owner, oldest first, at most
/// `RELEASE_ERRORS_KEPT` of them.
#[test]
fn releases_that_fail_in_drop_are_logged_and_kept_for_the_owner() {
    use devipc_core::token::MemTokenParts;
    use devipc_core::{DeviceId, HostIdentity, Mechanism, MemToken};

    log::set_logger(&RECORDER).expect("only this test installs a logger");
    log::set_max_level(log::LevelFilter::Trace);
    let rt = Runtime::from_backend(Backend::from(RecordingBackend::new(BackendKind::Hip)));
    let Backend::Recording(probe) = rt.backend() else {
        unreachable!("probe runtime")
    };
    let token = MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin {
            pid: ProcessId(std::process::id() + 1),
            start_time: 1,
            host: HostIdentity::current(),
        },
        generation: 1,
        object_size: 4096,
        offset: 0,
        len: 64,
        payload: vec![0x5A; 64],
    })
    .unwrap();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let imported = rt.import(&token, DeviceId(0)).unwrap();
    let signal = rt.create_signal(DeviceId(0)).unwrap();
    probe.fail_releases(true);
    drop(buffer);
    drop(imported);
    drop(signal);

    let clone = rt.clone();
    let apis: Vec<&str> = clone
        .take_release_errors()
        .iter()
        .map(|e| match e {
            Error::Vendor { api, .. } => *api,
            other => panic!("expected the probe's vendor error, got {other:?}"),
        })
        .collect();
    assert_eq!(apis, ["probeFree", "probeClose", "probeDestroySignal"]);
    assert!(rt.take_release_errors().is_empty(), "taken once");
    assert_eq!(rt.discarded_release_errors(), 0);
    let logged: Vec<(log::Level, String)> = RECORDER
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, m)| m.contains("probeErrorReleaseRefused"))
        .cloned()
        .collect();
    let prefixes = [
        "devipc: freeing a shared buffer failed: ",
        "devipc: closing an imported mapping failed: ",
        "devipc: destroying a signal failed: ",
    ];
    assert_eq!(logged.len(), prefixes.len(), "{logged:?}");
    for ((level, message), prefix) in logged.iter().zip(prefixes) {
        assert_eq!(*level, log::Level::Error);
        assert!(message.starts_with(prefix), "{message}");
    }

    // Bounded: the newest are kept, the older ones counted.
    for _ in 0..Runtime::RELEASE_ERRORS_KEPT + 3 {
        drop(rt.allocate(DeviceId(0), 64).unwrap());
    }
    assert_eq!(rt.discarded_release_errors(), 3);
    assert_eq!(rt.take_release_errors().len(), Runtime::RELEASE_ERRORS_KEPT);
    assert_eq!(rt.discarded_release_errors(), 3, "never reset");

    // A release that succeeds leaves nothing.
    probe.fail_releases(false);
    drop(rt.allocate(DeviceId(0), 64).unwrap());
    assert!(rt.take_release_errors().is_empty());
}

#[test]
fn runtime_clones_share_the_backend() {
    let rt = Runtime::from_backend(Backend::from(RecordingBackend::new(BackendKind::Ascend)));
    let clone = rt.clone();
    assert!(std::ptr::eq(rt.backend(), clone.backend()));
    assert_eq!(clone.info().kind, BackendKind::Ascend);
}
