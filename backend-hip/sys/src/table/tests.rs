//! Unit tests of the generated table: the list's contents, the generated loader on libc,
//! loading and discovery against libraries that are not HIP, and `hip_api_from_module!`.

use super::*;
use crate::for_each_hip_fn;
use std::ffi::{CStr, OsString};
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
        ]
    );
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

// --- hip_api_from_module!: every field calls the module function of its name. ---

/// Rust functions with the table's signatures that record which one was called.
#[allow(non_snake_case)]
mod recording {
    use crate::for_each_hip_fn;
    use crate::types::*;
    use std::cell::Cell;

    thread_local! {
        pub static LAST: Cell<&'static str> = const { Cell::new("") };
    }

    /// Distinct code per function: 1000 + its index in the table.
    pub fn code_of(name: &str) -> hipError_t {
        let index = crate::HipApi::REQUIRED_SYMBOLS
            .iter()
            .chain(crate::HipApi::OPTIONAL_SYMBOLS)
            .position(|n| *n == name)
            .expect("listed");
        1000 + index as hipError_t
    }

    pub trait Ret {
        fn make(name: &'static str, c_name: &'static CStr) -> Self;
    }
    impl Ret for hipError_t {
        fn make(name: &'static str, _: &'static CStr) -> Self {
            code_of(name)
        }
    }
    impl Ret for *const c_char {
        fn make(_: &'static str, c_name: &'static CStr) -> Self {
            c_name.as_ptr()
        }
    }
    use std::ffi::CStr;

    macro_rules! recording_fns {
        (
            []
            required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
            optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            $(
                pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                    $( let _ = $arg; )*
                    LAST.with(|l| l.set(stringify!($name)));
                    <$ret as Ret>::make(
                        stringify!($name),
                        // SAFETY: the literal ends in exactly one NUL.
                        unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    )
                }
            )*
            $(
                pub unsafe extern "C" fn $oname($($oarg: $oty),*) -> $oret {
                    $( let _ = $oarg; )*
                    LAST.with(|l| l.set(stringify!($oname)));
                    <$oret as Ret>::make(
                        stringify!($oname),
                        // SAFETY: the literal ends in exactly one NUL.
                        unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($oname), "\0").as_bytes()) },
                    )
                }
            )*
        };
    }
    for_each_hip_fn!(recording_fns);
}

trait CheckRet {
    fn check(self, name: &str);
}
impl CheckRet for hipError_t {
    fn check(self, name: &str) {
        assert_eq!(self, recording::code_of(name), "{name}");
    }
}
impl CheckRet for *const c_char {
    fn check(self, name: &str) {
        // SAFETY: the recording functions return a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(self) };
        assert_eq!(s.to_str().unwrap(), name);
    }
}

macro_rules! call_every_field {
    (
        [$api:ident]
        required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
        optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        $(
            recording::LAST.with(|l| l.set(""));
            // SAFETY: the recording functions ignore their arguments; all-zero bytes
            // are valid for every argument type (integers, raw pointers, handles).
            let ret: $ret = unsafe { ($api.$name)($(core::mem::zeroed::<$ty>()),*) };
            assert_eq!(recording::LAST.with(|l| l.get()), stringify!($name));
            ret.check(stringify!($name));
        )*
        $(
            recording::LAST.with(|l| l.set(""));
            let f = $api.$oname.expect(concat!(stringify!($oname), " is Some"));
            // SAFETY: as above.
            let ret: $oret = unsafe { f($(core::mem::zeroed::<$oty>()),*) };
            assert_eq!(recording::LAST.with(|l| l.get()), stringify!($oname));
            ret.check(stringify!($oname));
        )*
    };
}

#[test]
fn from_module_wires_every_field_to_the_function_of_its_name() {
    // SAFETY: test only; the recording functions dereference nothing.
    let api = unsafe { crate::hip_api_from_module!(self::recording) };
    assert_eq!(api.source(), &LibrarySource::Emulated);
    assert!(api.library.is_none());
    for_each_hip_fn!(call_every_field; api);
    let debug = format!("{api:?}");
    assert!(debug.contains("Emulated"), "{debug}");
}
