//! The registry's unit tests: the import cache and the same-process shortcut, on the
//! recording probe backend.

use devipc_core::token::MemTokenParts;

use crate::recording_backend::RECORDED_OBJECT_SIZE;
use devipc_core::{
    BackendKind, Error, ExportOptions, HostIdentity, Mechanism, ProcessId, TokenOrigin,
};

use super::*;
use crate::raw::Backend;
use crate::recording_backend::RecordingBackend;

fn probe_runtime() -> Runtime {
    Runtime::from_backend(Backend::from(RecordingBackend::new(BackendKind::Hip)))
}

fn probe(rt: &Runtime) -> &RecordingBackend {
    match rt.backend() {
        Backend::Recording(p) => p,
        #[allow(unreachable_patterns, reason = "other variants exist per feature")]
        _ => unreachable!("probe runtime"),
    }
}

/// A token from another process: `generation` and `offset`/`len` vary per test.
fn remote(generation: u64, offset: u64, len: u64) -> MemToken {
    remote_sized(generation, 4096, offset, len)
}

/// As [`remote`], claiming an object of `object_size` bytes.
fn remote_sized(generation: u64, object_size: u64, offset: u64, len: u64) -> MemToken {
    MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin {
            pid: ProcessId(std::process::id() + 1),
            start_time: 1,
            host: HostIdentity::current(),
        },
        generation,
        object_size,
        offset,
        len,
        payload: vec![9; 64],
    })
    .unwrap()
}

#[test]
fn fingerprints_follow_the_identity_not_the_range_or_generation() {
    let t = remote(1, 0, 64);
    let same = |u: &MemToken| Fingerprint::of(u) == Fingerprint::of(&t);
    assert!(
        same(&remote(7, 512, 100)),
        "range and generation are not identity"
    );
    let with = |change: &dyn Fn(&mut MemTokenParts)| {
        let mut parts = t.to_parts();
        change(&mut parts);
        MemToken::new(parts).unwrap()
    };
    assert!(!same(&with(&|p| p.payload[0] ^= 1)));
    assert!(!same(&with(&|p| p.origin.start_time += 1)));
    assert!(!same(&with(&|p| p.origin.pid.0 += 1)));
    assert!(!same(&with(&|p| p.emulated = false)));
}

#[test]
fn a_second_import_shares_the_mapping_and_the_last_drop_closes_it() {
    let rt = probe_runtime();
    let before = rt.vendor_imports();
    let a = rt.import(&remote(1, 0, 4096), DeviceId(0)).unwrap();
    let b = rt.import(&remote(1, 512, 100), DeviceId(0)).unwrap();
    assert_eq!(
        rt.vendor_imports() - before,
        1,
        "one vendor import for both"
    );
    assert_eq!(
        probe(&rt).count("import"),
        1,
        "the second import must not reach the vendor"
    );
    assert_eq!(b.ptr().0, a.ptr().0 + 512);
    assert_eq!((a.len(), b.len()), (4096, 100));
    assert_eq!(rt.live_imports(), 1);
    drop(a);
    assert_eq!(probe(&rt).count("close"), 0, "b still uses the mapping");
    drop(b);
    assert_eq!(probe(&rt).count("close"), 1);
    assert_eq!(rt.live_imports(), 0);
    let _c = rt.import(&remote(1, 0, 8), DeviceId(0)).unwrap();
    assert_eq!(rt.vendor_imports() - before, 2, "closed, so imported again");
    assert_eq!(
        probe(&rt).count("import"),
        2,
        "after the close, a new import reaches the vendor"
    );
}

#[test]
fn another_device_is_another_import() {
    let rt = probe_runtime();
    let _a = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
    let _b = rt.import(&remote(1, 0, 64), DeviceId(1)).unwrap();
    assert_eq!(probe(&rt).count("import"), 2);
    assert_eq!(rt.live_imports(), 2);
}

#[test]
fn a_new_generation_never_evicts_the_live_import() {
    let rt = probe_runtime();
    let old = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
    // Another generation behind the same handle while the first is mapped: refused,
    // without a vendor call, and the live import stays.
    let err = rt.import(&remote(2, 0, 64), DeviceId(0)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidToken { reason } if reason.contains("generation 2")),
        "{err}"
    );
    assert_eq!(probe(&rt).count("import"), 1);
    let again = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
    assert_eq!(
        probe(&rt).count("import"),
        1,
        "generation 1 is still cached"
    );
    drop((old, again));
    assert_eq!(probe(&rt).count("close"), 1);
    // Once the old import is closed, the new generation imports.
    let _new = rt.import(&remote(2, 0, 64), DeviceId(0)).unwrap();
    assert_eq!(probe(&rt).count("import"), 2);
}

#[test]
fn views_are_bounded_by_the_runtimes_object_size_not_the_tokens_claim() {
    let rt = probe_runtime();
    // A cold import of a range beyond the real object (the probe maps 4096 bytes).
    let forged = remote_sized(1, RECORDED_OBJECT_SIZE as u64 * 4, 4096, 4096);
    let err = rt.import(&forged, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err}");
    assert_eq!(
        rt.live_imports(),
        0,
        "the refused import left nothing behind"
    );
    // A cache hit: the first import is honest, the second claims a larger object.
    let honest = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
    for (offset, len) in [(4000, 1000), (4096, 1), (u64::MAX / 2, 8)] {
        let forged = remote_sized(1, u64::MAX, offset, len);
        let err = rt.import(&forged, DeviceId(0)).unwrap_err();
        assert!(
            matches!(err, Error::InvalidToken { .. }),
            "{offset}+{len}: {err}"
        );
    }
    // The last byte of the real object is fine.
    let edge = rt
        .import(&remote_sized(1, 8192, 4095, 1), DeviceId(0))
        .unwrap();
    assert_eq!(edge.ptr().0, honest.ptr().0 + 4095);
    assert_eq!(
        probe(&rt).count("import"),
        2,
        "one refused cold import, one real"
    );
}

#[test]
fn an_own_token_with_a_forged_range_does_not_reach_other_local_memory() {
    let rt = probe_runtime();
    let buf = rt.allocate(DeviceId(0), 64).unwrap();
    let token = buf.export(ExportOptions::default()).unwrap();
    let parts = |offset: u64, len: u64, object_size: u64| MemTokenParts {
        object_size,
        offset,
        len,
        ..token.to_parts()
    };
    let forged = MemToken::new(parts(64, 64, 1 << 20)).unwrap();
    let err = rt.import(&forged, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err}");
    let relabelled = MemToken::new(MemTokenParts {
        generation: token.generation() + 1,
        ..parts(0, 64, 64)
    })
    .unwrap();
    let err = rt.import(&relabelled, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err}");
    assert!(rt.import(&token, DeviceId(0)).unwrap().is_local());
}

/// The old cache dropped an evicted import while holding its lock; when that was the
/// last reference, its drop re-locked the cache and every later import hung. Two
/// threads import and drop the same handle under two generations many times; a
/// watchdog fails the test instead of hanging.
#[test]
fn racing_imports_and_drops_across_generations_never_deadlock() {
    let rt = probe_runtime();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..2u64)
        .map(|t| {
            let rt = rt.clone();
            let done = done_tx.clone();
            std::thread::spawn(move || {
                for i in 0..3000u64 {
                    let generation = 1 + (i + t) % 2;
                    if let Ok(view) = rt.import(&remote(generation, 0, 64), DeviceId(0)) {
                        drop(view);
                    }
                }
                done.send(()).unwrap();
            })
        })
        .collect();
    for _ in 0..2 {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("an import or drop hung: the cache deadlocked");
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(rt.live_imports(), 0);
    assert_eq!(probe(&rt).count("import"), probe(&rt).count("close"));
}

#[test]
fn a_same_process_token_is_served_locally_without_a_vendor_import() {
    let rt = probe_runtime();
    let buf = rt.allocate(DeviceId(0), 64).unwrap();
    let token = buf.export(ExportOptions::default()).unwrap();
    let view = rt.import(&token, DeviceId(0)).unwrap();
    assert!(view.is_local());
    assert_eq!(view.ptr(), buf.ptr());
    assert_eq!(probe(&rt).count("import"), 0);
    // The view keeps the allocation alive after the buffer is dropped.
    drop(buf);
    assert_eq!(probe(&rt).count("free"), 0);
    drop(view);
    assert_eq!(probe(&rt).count("free"), 1);
    // Once freed, the token no longer resolves locally, and never reaches the vendor.
    let err = rt.import(&token, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert_eq!(probe(&rt).count("import"), 0);
}

/// A token naming this process's pid but another start time was made by an earlier
/// process that had our pid: it is not ours, and never served from our memory.
#[test]
fn a_recycled_pid_is_not_this_process() {
    let rt = probe_runtime();
    let buf = rt.allocate(DeviceId(0), 64).unwrap();
    let token = buf.export(ExportOptions::default()).unwrap();
    let mut origin = token.origin();
    origin.start_time = origin.start_time.wrapping_sub(1);
    let old_owner = MemToken::new(MemTokenParts {
        origin,
        len: 64,
        ..token.to_parts()
    })
    .unwrap();
    assert_ne!(old_owner.identity(), token.identity());
    let view = rt.import(&old_owner, DeviceId(0)).unwrap();
    assert!(
        !view.is_local(),
        "another process's token went to the vendor"
    );
    assert_eq!(probe(&rt).count("import"), 1);
}

#[test]
fn a_token_from_another_host_is_refused_before_the_vendor() {
    let rt = probe_runtime();
    let mut parts_host = HostIdentity::current();
    parts_host.boot_id_hash ^= 1;
    let foreign = MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin {
            pid: ProcessId(std::process::id() + 1),
            start_time: 1,
            host: parts_host,
        },
        generation: 1,
        object_size: 64,
        offset: 0,
        len: 64,
        payload: vec![9; 64],
    })
    .unwrap();
    let err = rt.import(&foreign, DeviceId(0)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("another host")),
        "{err}"
    );
    assert_eq!(probe(&rt).count("import"), 0);
}

#[test]
fn a_token_for_another_backend_is_a_mismatch() {
    let rt = Runtime::from_backend(Backend::from(RecordingBackend::new(BackendKind::Ascend)));
    let err = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("backend mismatch: expected an ascend token, found a hip token"),
        "{text}"
    );
}

#[test]
fn buffer_bounds_are_checked() {
    let rt = probe_runtime();
    let buf = rt.allocate(DeviceId(0), 64).unwrap();
    assert!(buf.write(60, &[0; 4]).is_ok());
    assert!(matches!(
        buf.write(61, &[0; 4]),
        Err(Error::InvalidArgument { .. })
    ));
    let mut out = [0u8; 8];
    assert!(matches!(
        buf.read(usize::MAX, &mut out),
        Err(Error::InvalidArgument { .. })
    ));
    let imp = rt.import(&remote(1, 0, 16), DeviceId(0)).unwrap();
    assert!(matches!(
        imp.read(9, &mut out),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn concurrent_imports_of_one_handle_import_once() {
    let rt = probe_runtime();
    let token = remote(1, 0, 64);
    let held: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| rt.import(&token, DeviceId(0)).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(probe(&rt).count("import"), 1);
    drop(held);
    assert_eq!(probe(&rt).count("close"), 1);
}
