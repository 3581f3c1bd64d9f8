//! Unit tests of the generated table: the list's contents (and the VMM family derived
//! from it), the generated loader on libc, and loading and discovery against libraries
//! that are not HIP. `hip_api_from_module!` is tested from outside the crate, the way the
//! emulator uses it (`tests/hip_sys/macros.rs`).

use super::*;
use std::ffi::OsString;
use std::path::PathBuf;

use devipc_core::{BackendKind, Error, LibrarySource};
use libloading::Library;

use crate::HipApi;
use crate::discovery::{self, Candidate};

/// The functions the brief for this crate asks for, in no particular order.
const EXPECTED: [&str; 39] = [
    "hipInit",
    "hipRuntimeGetVersion",
    "hipDriverGetVersion",
    "hipGetDeviceCount",
    "hipSetDevice",
    "hipGetDevice",
    "hipDeviceSynchronize",
    "hipMalloc",
    "hipFree",
    "hipMemcpy",
    "hipMemset",
    "hipMemGetAddressRange",
    "hipStreamCreate",
    "hipStreamDestroy",
    "hipStreamSynchronize",
    "hipIpcGetMemHandle",
    "hipIpcOpenMemHandle",
    "hipIpcCloseMemHandle",
    "hipEventCreateWithFlags",
    "hipEventDestroy",
    "hipEventRecord",
    "hipEventSynchronize",
    "hipEventQuery",
    "hipStreamWaitEvent",
    "hipIpcGetEventHandle",
    "hipIpcOpenEventHandle",
    "hipDeviceCanAccessPeer",
    "hipDeviceEnablePeerAccess",
    "hipGetErrorName",
    "hipGetErrorString",
    "hipEventCreate",
    "hipEventElapsedTime",
    "hipMemcpyAsync",
    "hipPointerGetAttributes",
    "hipCtxCreate",
    "hipHostMalloc",
    "hipHostFree",
    "hipDeviceGetPCIBusId",
    "hipDeviceGetByPCIBusId",
];

#[test]
fn table_lists_every_function_once_all_required() {
    let mut listed: Vec<&str> = HipApi::REQUIRED_SYMBOLS.to_vec();
    listed.sort_unstable();
    let mut expected = EXPECTED.to_vec();
    expected.sort_unstable();
    assert_eq!(listed, expected);
    assert_eq!(
        HipApi::OPTIONAL_SYMBOLS,
        [
            "hipGetProcAddress",
            "hipMemGetAllocationGranularity",
            "hipMemCreate",
            "hipMemRelease",
            "hipMemAddressReserve",
            "hipMemAddressFree",
            "hipMemMap",
            "hipMemUnmap",
            "hipMemSetAccess",
            "hipMemGetAccess",
            "hipMemExportToShareableHandle",
            "hipMemImportFromShareableHandle",
            "hipMemRetainAllocationHandle",
            "hipMemGetAllocationPropertiesFromHandle",
            "hipPointerGetAttribute",
            "hipDeviceGetUuid",
            "hipDeviceGet",
            "hipDeviceGetAttribute",
            "hipMemcpyHtoD",
            "hipMemcpyDtoH",
            "hipMemcpyBatchAsync",
        ]
    );
}

/// D25: `VMM_FUNCTIONS` is derived from the list, not copied: the optional `hipMem*`
/// entries, in list order. Every other optional function is named here, so an optional
/// `hipMem*` function outside the VMM family (which the prefix would wrongly take in)
/// fails this test instead of slipping into the family.
#[test]
fn vmm_functions_are_the_optional_hip_mem_entries_of_the_list() {
    let vmm = crate::VMM_FUNCTIONS;
    assert_eq!(vmm.len(), 13, "{vmm:?}");
    let in_list_order: Vec<&str> = HipApi::OPTIONAL_SYMBOLS
        .iter()
        .copied()
        .filter(|f| vmm.contains(f))
        .collect();
    assert_eq!(in_list_order, vmm, "a subsequence of the optional entries");
    let others: Vec<&str> = HipApi::OPTIONAL_SYMBOLS
        .iter()
        .copied()
        .filter(|f| !vmm.contains(f))
        .collect();
    assert_eq!(
        others,
        [
            "hipGetProcAddress",
            "hipPointerGetAttribute",
            "hipDeviceGetUuid",
            "hipDeviceGet",
            "hipDeviceGetAttribute",
            "hipMemcpyHtoD",
            "hipMemcpyDtoH",
            "hipMemcpyBatchAsync",
        ]
    );
    // Issue 25: the optional copies start with `hipMem` but are not VMM functions.
    assert!(!vmm.contains(&"hipMemcpyHtoD") && !vmm.contains(&"hipMemcpyDtoH"));
    assert!(!vmm.contains(&"hipMemcpyBatchAsync"));
    for f in [
        "hipMemCreate",
        "hipMemMap",
        "hipMemSetAccess",
        "hipMemExportToShareableHandle",
        "hipMemImportFromShareableHandle",
        "hipMemRetainAllocationHandle",
    ] {
        assert!(vmm.contains(&f), "{f}");
    }
    assert!(HipApi::REQUIRED_SYMBOLS.iter().all(|f| !vmm.contains(f)));
}

// --- The generated loader, exercised on libc with a list of libc functions. ---

devipc_sys_common::define_fn_table! {
    [pub struct LibcTable; search = crate::discovery::SEARCH_ORDER;]
    required {
        fn getpid() -> c_int;
    }
    optional {
        fn devipc_test_no_such_optional_fn() -> c_int;
        fn getppid() -> c_int;
    }
}

devipc_sys_common::define_fn_table! {
    [#[allow(dead_code)] pub struct MissingTable; search = crate::discovery::SEARCH_ORDER;]
    required {
        fn getpid() -> c_int;
        fn devipc_test_no_such_required_fn() -> c_int;
    }
    optional {}
}

fn libc() -> Library {
    // SAFETY: the C library is already loaded into every process; opening it again
    // runs no new initialisers.
    unsafe { Library::new("libc.so.6") }.expect("libc.so.6 loads")
}

#[test]
fn loader_resolves_required_and_optional_symbols() {
    // SAFETY: getpid and getppid in libc have the declared prototypes.
    let table = unsafe { LibcTable::from_library(libc(), "libc.so.6".into()) }.unwrap();
    assert_eq!(table.source, LibrarySource::Loaded("libc.so.6".into()));
    assert!(table.library.is_some());
    // SAFETY: getpid has no preconditions.
    assert_eq!(unsafe { (table.getpid)() } as u32, std::process::id());
    assert!(table.devipc_test_no_such_optional_fn.is_none());
    assert!(table.getppid.is_some());
    assert_eq!(LibcTable::REQUIRED_SYMBOLS, ["getpid"]);
    assert_eq!(
        LibcTable::OPTIONAL_SYMBOLS,
        ["devipc_test_no_such_optional_fn", "getppid"]
    );
}

#[test]
fn loader_reports_the_first_missing_required_symbol() {
    // SAFETY: as above; the second symbol does not exist.
    let err = unsafe { MissingTable::from_library(libc(), "/lib/libc-test.so".into()) }
        .map(|_| ())
        .unwrap_err();
    match err {
        Error::MissingSymbol { library, symbol } => {
            assert_eq!(library, PathBuf::from("/lib/libc-test.so"));
            assert_eq!(symbol, "devipc_test_no_such_required_fn");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
}

// --- Loading and discovery against libraries that are not HIP. ---

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
    move |key| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn devipc_hip_lib_pointing_at_libc_is_a_missing_symbol() {
    let candidates = discovery::candidates(env_of(&[("DEVIPC_HIP_LIB", "libc.so.6")]));
    // SAFETY: libc is not HIP, but it exports none of the HIP names, so no function is
    // ever called; loading it runs no new initialisers.
    let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
    match err {
        Error::MissingSymbol { library, symbol } => {
            assert_eq!(library, PathBuf::from("libc.so.6"));
            assert_eq!(symbol, "hipInit");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
    // SAFETY: as above.
    let err = unsafe { HipApi::load("libc.so.6") }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::MissingSymbol {
                symbol: "hipInit",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn nothing_loadable_is_library_not_found_listing_every_candidate() {
    let candidates = vec![
        Candidate {
            path: "/nonexistent/devipc-a/libamdhip64.so".into(),
            origin: "$ROCM_PATH/lib".into(),
        },
        Candidate {
            path: "/nonexistent/devipc-b/libamdhip64.so.6".into(),
            origin: "/opt/rocm/lib".into(),
        },
        Candidate {
            path: "libdevipc-test-no-such-library.so.5".into(),
            origin: discovery::LOADER_PATH_ORIGIN.into(),
        },
    ];
    // SAFETY: none of the candidates exists, nothing is loaded.
    let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
    let text = err.to_string();
    match err {
        Error::LibraryNotFound { backend, tried } => {
            assert_eq!(backend, BackendKind::Hip);
            assert_eq!(tried.len(), candidates.len());
            for (attempt, candidate) in tried.iter().zip(&candidates) {
                assert_eq!(attempt.path, candidate.path);
                assert_eq!(attempt.origin, candidate.origin);
                assert!(!attempt.error.is_empty());
                assert!(text.contains(&*candidate.path.to_string_lossy()), "{text}");
            }
            assert!(
                tried[0].error.contains("No such file"),
                "{}",
                tried[0].error
            );
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    assert!(text.contains("DEVIPC_HIP_LIB"), "{text}");
}

#[test]
fn explicit_missing_file_is_not_found_without_falling_back() {
    let candidates = discovery::candidates(env_of(&[
        ("DEVIPC_HIP_LIB", "/nonexistent/devipc/libamdhip64.so"),
        ("ROCM_PATH", "/usr"),
    ]));
    // SAFETY: the only candidate does not exist.
    let err = unsafe { HipApi::load_first(&candidates) }.unwrap_err();
    match err {
        Error::LibraryNotFound { tried, .. } => {
            assert_eq!(tried.len(), 1, "{tried:?}");
            assert_eq!(
                tried[0].path,
                PathBuf::from("/nonexistent/devipc/libamdhip64.so")
            );
            assert_eq!(tried[0].origin, "DEVIPC_HIP_LIB");
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    // SAFETY: does not exist.
    let err = unsafe { HipApi::load("/nonexistent/devipc/libamdhip64.so") }.unwrap_err();
    assert!(
        matches!(&err, Error::LibraryNotFound { tried, .. } if tried.len() == 1 && tried[0].origin == "HipApi::load"),
        "{err:?}"
    );
}
