//! Device memory through the VMM calls: allocation rounded to the granularity with the
//! documented calls, rollback after a failed step, a failed release resumed, the
//! one-export rule, grants, cross-device imports asking for peer access, and tokens
//! checked before any vendor call.

use devipc_ascend::AscendBackend;
use devipc_core::token::MemTokenParts;
use devipc_core::{
    DeviceId, DeviceIpc, Error, ExportOptions, Mechanism, MemToken, ProcessId, TokenOrigin,
};
use serial_test::serial;

use super::*;

#[test]
#[serial]
fn allocate_rounds_to_the_granularity_and_makes_the_documented_calls() {
    let b = backend(fake_api());
    fake::with(|s| s.current = Some(1));
    calls();
    let alloc = b.allocate(DeviceId(0), 5 << 20).unwrap();
    assert_eq!(alloc.size, 6 << 20);
    assert_eq!(alloc.device, DeviceId(0));
    let c = calls();
    assert_eq!(
        c,
        [
            "aclrtGetDevice",
            "aclrtSetDevice(0)",
            "aclrtMemGetAllocationGranularity(0)",
            "aclrtMallocPhysical(6291456,dev0,attr4,0)",
            "aclrtReserveMemAddress(6291456)",
            "aclrtMapMem(6291456)",
            "aclrtMemSetAccess(6291456,dev0,flags3,1)",
            "aclrtSetDevice(1)",
        ]
    );
    // The caller's device is back.
    assert_eq!(fake::with(|s| s.current), Some(1));

    b.free(alloc.clone()).unwrap();
    let c = calls();
    assert_eq!(
        names(&c),
        [
            "aclrtGetDevice",
            "aclrtSetDevice",
            "aclrtUnmapMem",
            "aclrtReleaseMemAddress",
            "aclrtFreePhysical",
            "aclrtSetDevice"
        ]
    );
    let err = b.free(alloc).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownHandle {
                kind: "allocation",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
#[serial]
fn without_a_granularity_query_sizes_round_to_2_mib_and_access_is_not_set() {
    let mut api = fake_api();
    api.aclrtMemGetAllocationGranularity = None;
    api.aclrtMemSetAccess = None;
    let b = backend(api);
    let alloc = b.allocate(DeviceId(1), 1).unwrap();
    assert_eq!(alloc.size, 2 << 20);
    let c = calls();
    assert_eq!(count(&c, "aclrtMemSetAccess"), 0, "{c:?}");
    // A thread that had no device keeps the one devipc set (see the device module docs).
    assert_eq!(fake::with(|s| s.current), Some(1));
    b.free(alloc).unwrap();
}

#[test]
#[serial]
fn a_failed_step_releases_what_was_acquired_in_reverse() {
    let b = backend(fake_api());
    fail("aclrtMapMem", 107000);
    calls();
    let err = b.allocate(DeviceId(0), 1).unwrap_err();
    assert_eq!(
        err.vendor_name(),
        Some("ACL_ERROR_RT_PARAM_INVALID"),
        "{err}"
    );
    let c = calls();
    let tail: Vec<_> = names(&c)
        .into_iter()
        .skip_while(|n| *n != "aclrtMapMem")
        .collect();
    assert_eq!(
        tail,
        ["aclrtMapMem", "aclrtReleaseMemAddress", "aclrtFreePhysical"]
    );
    unfail("aclrtMapMem");

    fail("aclrtMemSetAccess", 107000);
    b.allocate(DeviceId(0), 1).unwrap_err();
    let c = calls();
    let tail: Vec<_> = names(&c)
        .into_iter()
        .skip_while(|n| *n != "aclrtMemSetAccess")
        .collect();
    assert_eq!(
        tail,
        [
            "aclrtMemSetAccess",
            "aclrtUnmapMem",
            "aclrtReleaseMemAddress",
            "aclrtFreePhysical"
        ]
    );
}

#[test]
#[serial]
fn a_failed_release_keeps_the_handle_and_resumes_where_it_stopped() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(0), 1).unwrap();
    fail("aclrtReleaseMemAddress", 107000);
    calls();
    b.free(alloc.clone()).unwrap_err();
    unfail("aclrtReleaseMemAddress");
    b.free(alloc).unwrap();
    let c = calls();
    // The unmap that succeeded the first time is not repeated.
    assert_eq!(count(&c, "aclrtUnmapMem"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtReleaseMemAddress"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtFreePhysical"), 1, "{c:?}");
}

#[test]
#[serial]
fn an_allocation_is_exported_once_and_its_handle_reused() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(1), 4 << 20).unwrap();
    calls();
    let t1 = b.export(&alloc, 0..4096, ExportOptions::default()).unwrap();
    let t2 = b
        .export(&alloc, 4096..8192, ExportOptions::default())
        .unwrap();
    let c = calls();
    assert_eq!(count(&c, "aclrtMemExportToShareableHandle"), 1, "{c:?}");
    assert!(
        c.contains(&"aclrtMemExportToShareableHandle(0,0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(t1.payload(), t2.payload());
    assert_eq!(t1.payload(), 0x5eed_u64.to_le_bytes());
    assert_eq!(t1.mechanism(), Mechanism::AscendVmm);
    assert_eq!(
        (t2.offset(), t2.len(), t2.object_size()),
        (4096, 4096, 4 << 20)
    );
    assert_eq!(t1.generation(), alloc.id.get());
    assert_eq!(t1.device(), DeviceId(1));
    assert_eq!(t1.origin().pid, ProcessId(4242), "the bare tgid");
    assert_eq!(b.process_id().unwrap(), ProcessId(4242));

    let err = b
        .export(&alloc, 0..16, ExportOptions::any_process())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("one shareable handle"), "{err}");

    let err = b
        .export(&alloc, 0..(4 << 20) + 1, ExportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");

    // any_process on a fresh allocation sets the VMM flag 0x1.
    let other = b.allocate(DeviceId(0), 1).unwrap();
    calls();
    b.export(&other, 0..1, ExportOptions::any_process())
        .unwrap();
    assert!(calls().contains(&"aclrtMemExportToShareableHandle(0,1)".to_owned()));
}

#[test]
#[serial]
fn grant_passes_the_pids_and_an_empty_list_is_a_no_op() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(0), 1).unwrap();
    let token = b.export(&alloc, 0..1, ExportOptions::default()).unwrap();
    calls();
    b.grant(&token, &[ProcessId(7), ProcessId(8)]).unwrap();
    b.grant(&token, &[]).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtMemSetPidToShareableHandle(0x5eed,[7, 8])".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtMemSetPidToShareableHandle"), 1);
    let err = b.grant(&token, &[ProcessId(u32::MAX)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[test]
#[serial]
fn a_cross_device_import_enables_peer_access_once_then_maps() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(1));
    calls();
    let m = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(m.len, 4096);
    let c = calls();
    let n = names(&c);
    let peer = n
        .iter()
        .position(|x| *x == "aclrtDeviceEnablePeerAccess")
        .unwrap();
    let import = n
        .iter()
        .position(|x| *x == "aclrtMemImportFromShareableHandle")
        .unwrap();
    assert!(peer < import, "{c:?}");
    assert!(
        c.contains(&"aclrtDeviceEnablePeerAccess(0->1,0)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtMemImportFromShareableHandle(0x5eed,0)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtReserveMemAddress(2097152)".to_owned()),
        "{c:?}"
    );
    b.close(m.clone()).unwrap();
    let m2 = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(count(&calls(), "aclrtDeviceEnablePeerAccess"), 0);
    assert_eq!(m2.ptr.0 % (2 << 20), 8192, "base + offset");
    b.close(m2).unwrap();
    let err = b.close(m).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownHandle {
                kind: "mapping",
                ..
            }
        ),
        "{err:?}"
    );
    b.free(alloc).unwrap();
}

/// A VMM token as another process on `device` would send it: handle 0x77, 2 MiB object,
/// range 8192..12288.
fn foreign_vmm_token(b: &AscendBackend, device: DeviceId) -> MemToken {
    MemToken::new(MemTokenParts {
        mechanism: Mechanism::AscendVmm,
        emulated: b.info().source.is_emulated(),
        device,
        physical: Default::default(),
        origin: TokenOrigin::current(ProcessId(1)),
        generation: 9,
        object_size: 2 << 20,
        offset: 8192,
        len: 4096,
        payload: 0x77_u64.to_le_bytes().to_vec(),
    })
    .unwrap()
}

#[test]
#[serial]
fn tokens_are_checked_before_any_vendor_call() {
    let b = backend(fake_api());
    let good = foreign_vmm_token(&b, DeviceId(0));
    calls();
    // Another backend's mechanism.
    let mut parts = good.to_parts();
    parts.mechanism = Mechanism::HipIpcMem;
    parts.payload = vec![0; 64];
    let hip = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&hip, DeviceId(0)),
        Err(Error::BackendMismatch { .. })
    ));
    assert!(matches!(
        b.grant(&hip, &[]),
        Err(Error::BackendMismatch { .. })
    ));
    // A real-runtime token on an emulated backend.
    let mut parts = good.to_parts();
    parts.emulated = false;
    let real = MemToken::new(parts).unwrap();
    let err = b.import(&real, DeviceId(0)).unwrap_err();
    assert!(err.to_string().contains("real ACL runtime"), "{err}");
    // Bad devices.
    assert!(matches!(
        b.import(&good, DeviceId(2)),
        Err(Error::InvalidDevice {
            device: DeviceId(2),
            count: 2
        })
    ));
    let mut parts = good.to_parts();
    parts.device = DeviceId(5);
    let far = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&far, DeviceId(0)),
        Err(Error::InvalidDevice { .. })
    ));
    // A payload of the wrong size.
    let mut parts = good.to_parts();
    parts.payload = vec![1, 2, 3];
    let short = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&short, DeviceId(0)),
        Err(Error::InvalidToken { .. })
    ));
    // A key without a NUL.
    let mut parts = good.to_parts();
    parts.mechanism = Mechanism::AscendIpcKey;
    parts.payload = vec![b'k'; 65];
    let unterminated = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&unterminated, DeviceId(0)),
        Err(Error::InvalidToken { .. })
    ));
    assert!(calls().iter().all(|c| !c.contains("Import")));
    assert!(matches!(
        b.allocate(DeviceId(9), 1),
        Err(Error::InvalidDevice { .. })
    ));
}
