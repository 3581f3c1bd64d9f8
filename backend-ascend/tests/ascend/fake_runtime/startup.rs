//! Start-up and what the backend reports about the runtime: the `aclInit` repeat
//! tolerated, `aclFinalize` only when devipc initialised ACL, no device, error names and
//! runtime messages, unknown codes, the version and capabilities (optional symbols
//! absent), and the process id without `aclrtDeviceGetBareTgid`.

use devipc_ascend::AscendBackend;
use devipc_ascend::sys::acl_api_from_module;
use devipc_core::{
    DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, ProcessId, RuntimeVersion,
};
use serial_test::serial;
use std::sync::Arc;

use super::*;

#[test]
#[serial]
fn a_framework_initialised_acl_is_accepted_and_not_finalized() {
    let api = fake_api();
    fail("aclInit", 100002);
    let b = backend(api);
    assert!(!b.initialized_acl());
    drop(b);
    let c = calls();
    assert_eq!(count(&c, "aclInit"), 1, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 0, "{c:?}");
}

#[test]
#[serial]
fn acl_is_finalized_once_when_devipc_initialised_it_and_the_last_backend_goes() {
    let first = backend(fake_api());
    assert!(first.initialized_acl());
    // A second backend on the same runtime neither initialises again nor finalizes
    // under the first.
    // SAFETY: the `fake` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let second = backend(unsafe { acl_api_from_module!(fake) });
    assert!(second.initialized_acl());
    drop(first);
    assert_eq!(count(&calls(), "aclFinalize"), 0);
    drop(second);
    let c = calls();
    assert_eq!(count(&c, "aclInit"), 0, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 1, "{c:?}");
    // A later backend initialises afresh.
    // SAFETY: the `fake` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let third = backend(unsafe { acl_api_from_module!(fake) });
    drop(third);
    let c = calls();
    assert_eq!(
        (count(&c, "aclInit"), count(&c, "aclFinalize")),
        (1, 1),
        "{c:?}"
    );
}

#[test]
#[serial]
fn a_failing_init_is_a_vendor_error_with_name_and_runtime_message() {
    let api = fake_api();
    fail("aclInit", 100003);
    set_message("EH0001: config file is broken");
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    match &err {
        Error::Vendor {
            api,
            code,
            name,
            message,
            ..
        } => {
            assert_eq!(*api, "aclInit");
            assert_eq!(*code, 100003);
            assert_eq!(name, "ACL_ERROR_INVALID_FILE");
            assert_eq!(message, "EH0001: config file is broken");
        }
        other => panic!("expected a vendor error, got {other:?}"),
    }
    assert_eq!(count(&calls(), "aclFinalize"), 0);
}

#[test]
#[serial]
fn no_device_is_a_typed_vendor_error_and_undoes_the_init() {
    let api = fake_api();
    fake::with(|s| s.device_count = 0);
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    assert_eq!(err.vendor_code(), Some(207004), "{err}");
    assert_eq!(err.vendor_name(), Some("ACL_ERROR_RT_NO_DEVICE"));
    assert!(err.to_string().contains("aclrtGetDeviceCount"), "{err}");
    let c = calls();
    assert_eq!(
        (count(&c, "aclInit"), count(&c, "aclFinalize")),
        (1, 1),
        "{c:?}"
    );

    let api = fake_api();
    fail("aclrtGetDeviceCount", 207004);
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    assert_eq!(err.vendor_name(), Some("ACL_ERROR_RT_NO_DEVICE"), "{err}");
    // No runtime message: the table's description stands in.
    match err {
        Error::Vendor { message, .. } => assert!(!message.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
#[serial]
fn unknown_codes_are_named_by_number() {
    let b = backend(fake_api());
    fail("aclrtMallocPhysical", 123_456);
    let err = b.allocate(DeviceId(0), 1).unwrap_err();
    assert_eq!(err.vendor_name(), Some("aclError(123456)"), "{err}");
    assert_eq!(err.vendor_code(), Some(123_456));
}

#[test]
#[serial]
fn info_reports_version_and_capabilities() {
    let b = backend(fake_api());
    let info = b.info();
    assert_eq!(info.runtime_version, Some(RuntimeVersion::new(8, 3, 0)));
    assert!(
        info.source.is_emulated(),
        "a module table counts as emulated"
    );
    let caps = info.capabilities;
    assert!(caps.access_control);
    assert!(caps.export_allocation && caps.export_external && caps.signals);
    assert!(caps.disable_pid_validation && caps.cross_device_import);
    assert_eq!(b.device_count().unwrap(), 2);
    assert!(calls().contains(&"aclsysGetVersionStr(runtime)".to_owned()));

    // Without aclsysGetVersionStr, the ACL API version.
    let mut api = fake_api();
    api.aclsysGetVersionStr = None;
    let b = backend(api);
    assert_eq!(
        b.info().runtime_version,
        Some(RuntimeVersion::new(1, 16, 0))
    );
}

#[test]
#[serial]
fn an_old_runtime_reports_missing_families_as_unsupported() {
    let mut api = fake_api();
    api.aclrtMemExportToShareableHandle = None;
    api.aclrtCreateNotify = None;
    api.aclrtIpcMemGetExportKey = None;
    let b = backend(api);
    let caps = b.info().capabilities;
    assert!(!caps.export_allocation && !caps.signals && !caps.export_external);

    let alloc = b.allocate(DeviceId(0), 4096).unwrap();
    let err = b
        .export(&alloc, 0..4096, ExportOptions::default())
        .unwrap_err();
    match &err {
        Error::Unsupported { what, .. } => {
            assert_eq!(
                what,
                "aclrtMemExportToShareableHandle (this CANN is too old)"
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let err = b.create_signal(DeviceId(0)).unwrap_err();
    assert!(
        err.to_string()
            .contains("aclrtCreateNotify (this CANN is too old)"),
        "{err}"
    );
    let err = b
        .export_external(DeviceId(0), DevicePtr(0x1000), 16, ExportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    b.free(alloc).unwrap();
}

#[test]
#[serial]
fn without_bare_tgid_the_process_id_is_getpid() {
    let mut api = fake_api();
    api.aclrtDeviceGetBareTgid = None;
    let b = backend(api);
    assert_eq!(b.process_id().unwrap(), ProcessId::current());
}
