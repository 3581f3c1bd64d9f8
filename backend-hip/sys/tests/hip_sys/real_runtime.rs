//! Loads the REAL HIP runtime and checks what it says on this machine.
//!
//! Without feature `link` the table comes from `HipApi::discover()`; when no library is
//! found the test prints `SKIPPED: ...` to stderr and passes, unless `DEVIPC_NO_SKIP=1`,
//! in which case it fails. With feature `link` it uses `HipApi::linked()` (the binary
//! would not have linked without the library).
//!
//! Expected on a machine without a GPU (no `/dev/kfd`), measured with Debian 12's ROCm
//! 5.2.3 (`libamdhip64.so.5.2.21153`): `hipRuntimeGetVersion` = 50221153,
//! `hipGetDeviceCount` = `hipErrorNoDevice` (100) with count 0, `hipInit(0)` =
//! `hipErrorInvalidDevice` (101).

use std::ffi::CStr;
use std::path::Path;

#[cfg(not(feature = "link"))]
use devipc_core::Error;
use devipc_core::{LibrarySource, RuntimeVersion};
use devipc_hip_sys::*;

/// The table under test, or `None` when the runtime is not installed and skipping is
/// allowed.
fn real_api() -> Option<HipApi> {
    #[cfg(feature = "link")]
    {
        let api = HipApi::linked();
        assert_eq!(api.source(), &LibrarySource::Linked);
        Some(api)
    }
    #[cfg(not(feature = "link"))]
    {
        match HipApi::discover() {
            Ok(api) => {
                assert!(
                    matches!(api.source(), LibrarySource::Loaded(_)),
                    "{:?}",
                    api.source()
                );
                eprintln!("real_runtime: loaded {}", api.source());
                Some(api)
            }
            Err(e @ Error::LibraryNotFound { .. }) => {
                devipc_testkit::skip(
                    "the HIP table against the real runtime",
                    &format!("libamdhip64 not installed (apt-get install libamdhip64-dev): {e}"),
                );
                None
            }
            Err(e) => panic!("the HIP runtime was found but did not load: {e}"),
        }
    }
}

fn name_of(api: &HipApi, code: hipError_t) -> String {
    // SAFETY: hipGetErrorName takes any code and returns a static NUL-terminated string.
    let p = unsafe { (api.hipGetErrorName)(code) };
    assert!(!p.is_null(), "hipGetErrorName({code}) returned NULL");
    // SAFETY: non-null, static, NUL-terminated (above).
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

fn string_of(api: &HipApi, code: hipError_t) -> String {
    // SAFETY: as for hipGetErrorName.
    let p = unsafe { (api.hipGetErrorString)(code) };
    assert!(!p.is_null(), "hipGetErrorString({code}) returned NULL");
    // SAFETY: non-null, static, NUL-terminated.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

fn has_amd_gpu_driver() -> bool {
    Path::new("/dev/kfd").exists()
}

#[test]
fn real_runtime_version_device_count_and_error_names() {
    let Some(api) = real_api() else { return };

    // Version: works without a device.
    let mut version: i32 = -1;
    // SAFETY: valid out pointer.
    let rc = unsafe { (api.hipRuntimeGetVersion)(&mut version) };
    assert_eq!(
        rc,
        hipSuccess,
        "hipRuntimeGetVersion: {}",
        name_of(&api, rc)
    );
    let decoded = RuntimeVersion::from_hip_encoded(version).expect("non-negative version");
    eprintln!("real_runtime: hipRuntimeGetVersion = {version} ({decoded})");
    assert!(
        (5..=7).contains(&decoded.major),
        "unexpected HIP major version {decoded}"
    );
    // hipGetProcAddress first shipped in ROCm 6.2 (an optional symbol): ROCm 5.2 lacks it.
    assert_eq!(
        api.hipGetProcAddress.is_some(),
        (decoded.major, decoded.minor) >= (6, 2),
        "hipGetProcAddress presence on {decoded}"
    );
    let expected_flag = if decoded.major >= 6 { 1 } else { 0 };
    assert_eq!(ipc_mem_lazy_enable_peer_access(version), expected_flag);

    let mut driver: i32 = -1;
    // SAFETY: valid out pointer.
    let rc = unsafe { (api.hipDriverGetVersion)(&mut driver) };
    assert_eq!(rc, hipSuccess, "hipDriverGetVersion: {}", name_of(&api, rc));
    eprintln!("real_runtime: hipDriverGetVersion = {driver}");

    // SAFETY: NULL is the documented invalid argument (api-facts B.1).
    let rc = unsafe { (api.hipRuntimeGetVersion)(std::ptr::null_mut()) };
    assert_eq!(rc, hipErrorInvalidValue);

    // Devices.
    let mut count: i32 = -7;
    // SAFETY: valid out pointer.
    let count_rc = unsafe { (api.hipGetDeviceCount)(&mut count) };
    // SAFETY: no preconditions.
    let init_rc = unsafe { (api.hipInit)(0) };
    eprintln!(
        "real_runtime: hipGetDeviceCount = {} ({}), count {count}; hipInit(0) = {} ({})",
        count_rc,
        name_of(&api, count_rc),
        init_rc,
        name_of(&api, init_rc)
    );
    if has_amd_gpu_driver() && count_rc == hipSuccess {
        assert!(count > 0);
        assert_eq!(init_rc, hipSuccess);
    } else {
        assert!(
            !has_amd_gpu_driver(),
            "/dev/kfd exists but hipGetDeviceCount failed with {}",
            name_of(&api, count_rc)
        );
        // No GPU: a typed "no device" result, never success.
        assert_eq!(count_rc, hipErrorNoDevice);
        assert_eq!(count, 0);
        assert_eq!(name_of(&api, count_rc), "hipErrorNoDevice");
        assert_eq!(error_name(count_rc), Some("hipErrorNoDevice"));
        if (decoded.major, decoded.minor) == (5, 2) {
            // Measured on ROCm 5.2.3: hipInit checks for devices first, before its flags
            // (the emulator with DEVIPC_EMU_DEVICES=0 does the same).
            assert_eq!(init_rc, hipErrorInvalidDevice);
            // SAFETY: no preconditions; a non-zero flag is an invalid argument.
            let init_flags_rc = unsafe { (api.hipInit)(1) };
            assert_eq!(
                init_flags_rc,
                hipErrorInvalidDevice,
                "hipInit(1) without a GPU: {}",
                name_of(&api, init_flags_rc)
            );
        } else {
            assert!(
                [hipErrorNoDevice, hipErrorInvalidDevice].contains(&init_rc),
                "hipInit without a GPU returned {init_rc} ({})",
                name_of(&api, init_rc)
            );
        }
        assert_eq!(name_of(&api, init_rc), error_name(init_rc).unwrap());
    }

    // Our fallback name table agrees with the runtime's own names.
    let mut newer_than_runtime = Vec::new();
    for &(code, name) in ERRORS {
        let runtime_name = name_of(&api, code);
        if runtime_name == name {
            continue;
        }
        // Codes this runtime predates: it calls them hipErrorUnknown, except 1054, which
        // is the hipErrorTbd end marker before HIP 7.
        let expected_unknown = if code == hipErrorInvalidClusterSize {
            "hipErrorTbd"
        } else {
            "hipErrorUnknown"
        };
        assert_eq!(runtime_name, expected_unknown, "code {code} ({name})");
        newer_than_runtime.push(code);
    }
    if decoded.major == 5 {
        assert_eq!(newer_than_runtime, [911, 912, 914, 915, 916, 1054]);
    }
    eprintln!("real_runtime: codes newer than this runtime: {newer_than_runtime:?}");
    assert_eq!(name_of(&api, 12345), "hipErrorUnknown");
    assert!(!string_of(&api, hipErrorNoDevice).is_empty());
}

/// Issue 15: the VMM family and `hipPointerGetAttribute` (optional fields) are found in
/// the real runtime. ROCm 5.2 exports the VMM functions as `@@hip_5.1` and
/// `hipPointerGetAttribute` as `@@hip_5.0` (`nm -D libamdhip64.so.5.2.21153`), so every one
/// of them must be `Some`; only `hipGetProcAddress` (6.2+) may be missing.
#[test]
fn real_runtime_exports_the_vmm_family() {
    let Some(api) = real_api() else { return };
    let missing: Vec<&str> = api
        .missing_optional()
        .into_iter()
        .filter(|f| {
            devipc_hip_sys::VMM_FUNCTIONS.contains(f)
                || *f == "hipPointerGetAttribute"
                || *f == "hipDeviceGetUuid"
        })
        .collect();
    assert!(missing.is_empty(), "the real runtime lacks {missing:?}");
    // Every optional symbol but hipGetProcAddress (6.2) and hipMemcpyBatchAsync (7.1) is
    // one of them (hipDeviceGetUuid, issue 16, is `@@hip_5.1` like the VMM family), or one
    // of the four `@@hip_4.2` functions issue 25 made optional (every runtime has them).
    assert_eq!(
        HipApi::OPTIONAL_SYMBOLS.len(),
        devipc_hip_sys::VMM_FUNCTIONS.len() + 3 + 4 + 1
    );
    assert!(HipApi::OPTIONAL_SYMBOLS.contains(&"hipMemcpyBatchAsync"));
    for f in [
        "hipDeviceGet",
        "hipDeviceGetAttribute",
        "hipMemcpyHtoD",
        "hipMemcpyDtoH",
    ] {
        assert!(
            !api.missing_optional().contains(&f),
            "the real runtime lacks {f}"
        );
    }
    // A NULL argument is refused before any device is needed (CLR hip_vm.cpp checks its
    // arguments first); without a GPU the runtime may report the missing device instead.
    let f = api.hipMemGetAllocationGranularity.unwrap();
    // SAFETY: NULL out pointer and NULL prop are the documented invalid arguments.
    let rc = unsafe { f(std::ptr::null_mut(), std::ptr::null(), 0) };
    eprintln!(
        "real_runtime: hipMemGetAllocationGranularity(NULL, NULL, 0) = {rc} ({})",
        name_of(&api, rc)
    );
    assert_ne!(rc, hipSuccess);
}

/// Issue 16: the physical-identity calls of the real runtime. Without a GPU they fail
/// (the runtime has no device to name); with one, device 0's bus id has CLR's
/// `"%04x:%02x:%02x.0"` form and maps back to ordinal 0.
#[test]
fn real_runtime_identity_calls() {
    let Some(api) = real_api() else { return };
    let mut count = 0;
    // SAFETY: a valid out-pointer.
    let counted = unsafe { (api.hipGetDeviceCount)(&mut count) };
    let mut bus = [0 as core::ffi::c_char; 16];
    // SAFETY: a 16-byte buffer and its length.
    let rc = unsafe { (api.hipDeviceGetPCIBusId)(bus.as_mut_ptr(), 16, 0) };
    let mut uuid = hipUUID::default();
    let get_uuid = api
        .hipDeviceGetUuid
        .expect("ROCm 5.1+ exports hipDeviceGetUuid");
    // SAFETY: a valid out-pointer.
    let uuid_rc = unsafe { get_uuid(&mut uuid, 0) };
    eprintln!(
        "real_runtime: {count} device(s) ({}); hipDeviceGetPCIBusId(0) = {} ({}); \
         hipDeviceGetUuid(0) = {} ({})",
        name_of(&api, counted),
        rc,
        name_of(&api, rc),
        uuid_rc,
        name_of(&api, uuid_rc)
    );
    if counted != hipSuccess || count == 0 {
        assert_ne!(rc, hipSuccess);
        assert_ne!(uuid_rc, hipSuccess);
        return;
    }
    assert_eq!(rc, hipSuccess);
    assert_eq!(uuid_rc, hipSuccess);
    // SAFETY: snprintf wrote a NUL-terminated string into the buffer.
    let text = unsafe { CStr::from_ptr(bus.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(text.len(), 12, "{text}");
    assert!(text.ends_with(".0"), "{text}");
    let c = std::ffi::CString::new(text.clone()).unwrap();
    let mut back = -1;
    // SAFETY: a valid out-pointer and a NUL-terminated string.
    let rc = unsafe { (api.hipDeviceGetByPCIBusId)(&mut back, c.as_ptr()) };
    assert_eq!((rc, back), (hipSuccess, 0), "{text}");
}
