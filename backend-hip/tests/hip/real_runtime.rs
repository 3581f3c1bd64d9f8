//! The HIP backend against the real ROCm runtime installed on this machine (Debian's
//! `libamdhip64-dev`, ROCm 5.2): it loads, reads the version, and, with no GPU, reports a
//! typed no-device error instead of panicking. With feature `link` the same test runs on
//! the table linked at build time.
//!
//! Without the library the test prints `SKIPPED` and passes, unless `DEVIPC_NO_SKIP=1`.

use std::sync::Arc;

use devipc_core::{Error, LibrarySource};
use devipc_hip::HipBackend;
use devipc_hip::sys::HipApi;

fn real_api() -> Option<HipApi> {
    #[cfg(feature = "link")]
    return Some(HipApi::linked());
    #[cfg(not(feature = "link"))]
    match HipApi::discover() {
        Ok(api) => Some(api),
        Err(e @ Error::LibraryNotFound { .. }) => {
            devipc_testkit::skip(
                "the HIP backend against the real runtime",
                &format!("libamdhip64 not installed (apt-get install libamdhip64-dev): {e}"),
            );
            None
        }
        Err(e) => panic!("unexpected load error: {e}"),
    }
}

#[test]
fn starting_without_a_gpu_is_a_typed_no_device_error() {
    let Some(api) = real_api() else { return };
    assert!(!api.source().is_emulated());
    if cfg!(feature = "link") {
        assert_eq!(api.source(), &LibrarySource::Linked);
    }
    let mut version = 0;
    // SAFETY: a valid out-pointer; hipRuntimeGetVersion works without a device.
    assert_eq!(unsafe { (api.hipRuntimeGetVersion)(&mut version) }, 0);
    let version =
        devipc_core::RuntimeVersion::from_hip_encoded(version).expect("a positive HIP_VERSION");
    assert!(version.major >= 5, "{version}");

    let err = HipBackend::from_api(Arc::new(api)).expect_err("no GPU on this machine");
    match &err {
        Error::Vendor {
            api, code, name, ..
        } => {
            assert_eq!(*api, "hipGetDeviceCount");
            assert_eq!(*code, 100);
            assert_eq!(name, "hipErrorNoDevice");
        }
        other => panic!("expected a vendor no-device error, got {other:?}"),
    }
    assert!(err.to_string().contains("hipErrorNoDevice"), "{err}");
}

#[cfg(not(feature = "link"))]
#[test]
fn open_discovers_the_runtime_and_reports_no_device() {
    if real_api().is_none() {
        return;
    }
    let err = HipBackend::open().expect_err("no GPU on this machine");
    assert_eq!(err.vendor_name(), Some("hipErrorNoDevice"), "{err}");
}
