//! Loading the table from real shared libraries: discovery without an ACL runtime,
//! a non-ACL library (libc), and small fixture libraries compiled here from the crate's
//! own C prototypes (one lacking a required symbol, one with every required symbol and
//! one optional one).
//!
//! Every test is `#[serial]`: some change the process environment, and the dynamic loader
//! reads it (`LD_LIBRARY_PATH`) while others load libraries. The other topics of this test
//! binary that read the environment or start processes are `#[parallel]`, so they never
//! run beside these.
//!
//! The fixtures need a C compiler (`$CC`, else `cc`). Without one the fixture tests print
//! `SKIPPED: ...` to stderr and pass, unless `DEVIPC_NO_SKIP=1`, which makes them fail.

use std::ffi::{CStr, OsStr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::abi::{self, TypeKind};
use devipc_ascend_sys::discovery;
use devipc_core::{Error, LibrarySource};
use devipc_testkit::EnvGuard;
use serial_test::serial;

/// Reports that a loader test cannot run here: loudly, or a failure under DEVIPC_NO_SKIP=1.
fn skip(reason: &str) {
    devipc_testkit::skip("ACL loader test", reason);
}

fn scratch_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("devipc-ascend-sys-loader");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
#[serial]
fn discover_without_acl_reports_every_path_tried() {
    let dir = scratch_dir();
    let missing_file = dir.join("no-such-libascendcl.so");
    let missing_root = dir.join("no-such-cann");
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _env = unsafe {
        EnvGuard::set(&[
            ("DEVIPC_ASCEND_LIB", None),
            ("ASCEND_HOME_PATH", Some(missing_root.as_os_str())),
            ("ASCEND_TOOLKIT_HOME", None),
        ])
    };
    let expected = discovery::candidates(|k| std::env::var_os(k));
    assert_eq!(expected[0].path, missing_root.join("lib64/libascendcl.so"));
    assert_eq!(expected.len(), 2 + 4 + 2);

    match AclApi::discover() {
        Err(Error::LibraryNotFound { backend, tried }) => {
            assert_eq!(backend, devipc_core::BackendKind::Ascend);
            let tried_paths: Vec<_> = tried.iter().map(|a| a.path.clone()).collect();
            let expected_paths: Vec<_> = expected.iter().map(|c| c.path.clone()).collect();
            assert_eq!(tried_paths, expected_paths);
            for (attempt, candidate) in tried.iter().zip(&expected) {
                assert_eq!(attempt.origin, candidate.origin);
                assert!(!attempt.error.is_empty(), "{attempt}");
            }
            let text = Error::LibraryNotFound { backend, tried }.to_string();
            assert!(text.contains("$ASCEND_HOME_PATH/lib64"), "{text}");
            assert!(
                text.contains("/usr/local/Ascend/cann/lib64/libascendcl.so"),
                "{text}"
            );
        }
        Ok(api) => {
            // An ACL runtime is installed here: the premise of this test does not hold,
            // and that is said, not hidden. The table it found must be a loaded one.
            eprintln!(
                "\n*** NOTE: an ACL runtime was found at {}; the no-ACL case was not exercised ***\n",
                api.source()
            );
            assert!(matches!(api.source(), LibrarySource::Loaded(_)));
        }
        Err(other) => panic!("expected LibraryNotFound, got {other:?}"),
    }

    // With the override set, the file it names is the only candidate: no fallback to the
    // root or the defaults, even though they would be tried without it.
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _override =
        unsafe { EnvGuard::set(&[("DEVIPC_ASCEND_LIB", Some(missing_file.as_os_str()))]) };
    let expected = discovery::candidates(|k| std::env::var_os(k));
    assert_eq!(expected.len(), 1);
    assert_eq!(expected[0].path, missing_file);
    match AclApi::discover() {
        Err(Error::LibraryNotFound { backend, tried }) => {
            assert_eq!(tried.len(), 1, "{tried:?}");
            assert_eq!(tried[0].path, missing_file);
            assert_eq!(tried[0].origin, "DEVIPC_ASCEND_LIB");
            assert!(!tried[0].error.is_empty());
            let text = Error::LibraryNotFound { backend, tried }.to_string();
            assert!(text.contains("DEVIPC_ASCEND_LIB"), "{text}");
        }
        other => panic!("expected LibraryNotFound for the override alone, got {other:?}"),
    }
}

/// The absolute path of the C library mapped into this process, from /proc/self/maps.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn libc_path() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n == "libc.so.6" || n.starts_with("libc-"))
        })
        .map(PathBuf::from)
        .expect("libc in /proc/self/maps")
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
#[serial]
fn override_naming_a_non_acl_library_is_missing_symbol() {
    let libc = libc_path();
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _env = unsafe { EnvGuard::set(&[("DEVIPC_ASCEND_LIB", Some(libc.as_os_str()))]) };
    match AclApi::discover() {
        Err(Error::MissingSymbol { library, symbol }) => {
            assert_eq!(library, libc);
            assert_eq!(symbol, "aclInit");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
}

/// C source of a fixture library defining `functions` with the crate's own prototypes.
/// The C types are declared from the crate's type records, not from vendor headers.
fn fixture_source(functions: &[&abi::FnDecl]) -> String {
    let mut c = String::from("#include <stddef.h>\n#include <stdint.h>\n");
    for t in abi::types() {
        match t.kind {
            TypeKind::Alias => {
                let target = abi::c_type_name(t.rust_type).unwrap();
                c += &format!("typedef {target} {};\n", t.name);
            }
            TypeKind::Enum => c += &format!("typedef int {};\n", t.name),
            TypeKind::Struct => c += &format!("typedef struct {0} {0};\n", t.name),
        }
    }
    for f in functions {
        let body = match f.name {
            "aclGetRecentErrMsg" => "return \"fixture message\";",
            "aclrtGetDeviceCount" => "*count = 7; return 0;",
            "aclrtDeviceGetBareTgid" => "*pid = 4242; return 0;",
            // Anything else reports "API not supported" (ACL_ERROR_API_NOT_SUPPORT).
            _ => "return 200001;",
        };
        let proto = f.c_prototype().unwrap();
        c += &format!("__attribute__((visibility(\"default\"))) {proto} {{ {body} }}\n");
    }
    c
}

/// Compiles `source` into a shared library named `name` in the scratch directory.
fn build_so(name: &str, source: &str) -> Result<PathBuf, String> {
    let dir = scratch_dir();
    let c_file = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&c_file, source).map_err(|e| e.to_string())?;
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
        .arg(&so)
        .arg(&c_file)
        .output()
        .map_err(|e| format!("cannot run C compiler {cc:?}: {e}"))?;
    if !out.status.success() {
        // A compiler that runs but rejects the source is a real failure, not a skip.
        panic!(
            "{cc:?} failed to build {name}:\n{}\n--- source ---\n{source}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(so)
}

/// The two fixture libraries, built once per test run.
struct Fixtures {
    /// Defines `aclInit` and `aclFinalize` only.
    partial: PathBuf,
    /// Defines every required function and `aclrtDeviceGetBareTgid`.
    complete: PathBuf,
}

fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Result<Fixtures, String>> = OnceLock::new();
    let built = FIXTURES.get_or_init(|| {
        let by_name = |n: &str| abi::FUNCTIONS.iter().find(|f| f.name == n).unwrap();
        let partial = build_so(
            "libpartial_acl",
            &fixture_source(&[by_name("aclInit"), by_name("aclFinalize")]),
        )?;
        let complete_fns: Vec<_> = abi::FUNCTIONS
            .iter()
            .filter(|f| f.required || f.name == "aclrtDeviceGetBareTgid")
            .collect();
        let complete = build_so("libcomplete_acl", &fixture_source(&complete_fns))?;
        Ok(Fixtures { partial, complete })
    });
    match built {
        Ok(f) => Some(f),
        Err(reason) => {
            skip(&format!(
                "no C compiler to build fixture libraries: {reason}"
            ));
            None
        }
    }
}

#[test]
#[serial]
fn a_library_lacking_a_required_symbol_names_it() {
    let Some(fx) = fixtures() else { return };
    // SAFETY: the fixture is built from this crate's prototypes and has no initializers.
    let err = unsafe { AclApi::load(&fx.partial) }.unwrap_err();
    match err {
        Error::MissingSymbol { library, symbol } => {
            assert_eq!(library, fx.partial);
            // aclInit and aclFinalize exist; the next required one in list order does not.
            assert_eq!(symbol, AclApi::REQUIRED_SYMBOLS[2]);
            assert_eq!(symbol, "aclGetRecentErrMsg");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
}

#[test]
#[serial]
fn a_library_with_the_required_symbols_loads_and_calls_through() {
    let Some(fx) = fixtures() else { return };
    // SAFETY: as above.
    let api = unsafe { AclApi::load(&fx.complete) }.unwrap();
    assert_eq!(api.source(), &LibrarySource::Loaded(fx.complete.clone()));
    let expected_missing: Vec<_> = AclApi::OPTIONAL_SYMBOLS
        .iter()
        .copied()
        .filter(|n| *n != "aclrtDeviceGetBareTgid")
        .collect();
    assert_eq!(api.missing_optional(), expected_missing);
    assert!(api.aclrtIpcMemGetExportKey.is_none());

    // SAFETY: the fixture functions write only through the pointers given, which are
    // valid locals, and return a static string.
    unsafe {
        let mut count = 0u32;
        assert_eq!((api.aclrtGetDeviceCount)(&mut count), 0);
        assert_eq!(count, 7);
        let mut pid = 0i32;
        let bare_tgid = api.aclrtDeviceGetBareTgid.expect("optional symbol present");
        assert_eq!(bare_tgid(&mut pid), 0);
        assert_eq!(pid, 4242);
        let msg = CStr::from_ptr((api.aclGetRecentErrMsg)());
        assert_eq!(msg, c"fixture message");
        assert_eq!(
            (api.aclInit)(std::ptr::null()),
            devipc_ascend_sys::codes::ACL_ERROR_API_NOT_SUPPORT
        );
    }
}

#[test]
#[serial]
fn discover_uses_the_override_file() {
    let Some(fx) = fixtures() else { return };
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _env = unsafe { EnvGuard::set(&[("DEVIPC_ASCEND_LIB", Some(fx.complete.as_os_str()))]) };
    let api = AclApi::discover().unwrap();
    assert_eq!(api.source(), &LibrarySource::Loaded(fx.complete.clone()));
}

#[test]
#[serial]
fn discover_stops_at_the_first_library_that_opens() {
    let Some(fx) = fixtures() else { return };
    // The partial library opens first: its missing symbol is reported, and the complete
    // one behind it (as $ASCEND_HOME_PATH/lib64/libascendcl.so) is not silently used.
    let root = scratch_dir().join("cann-root");
    std::fs::create_dir_all(root.join("lib64")).unwrap();
    let behind = root.join("lib64/libascendcl.so");
    std::fs::copy(&fx.complete, &behind).unwrap();
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _env = unsafe {
        EnvGuard::set(&[
            ("DEVIPC_ASCEND_LIB", Some(fx.partial.as_os_str())),
            ("ASCEND_HOME_PATH", Some(root.as_os_str())),
        ])
    };
    match AclApi::discover() {
        Err(Error::MissingSymbol { library, .. }) => assert_eq!(library, fx.partial),
        other => panic!("expected MissingSymbol from the override, got {other:?}"),
    }
    // Without the override, the root's library is found.
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _unset = unsafe { EnvGuard::set(&[("DEVIPC_ASCEND_LIB", None)]) };
    let api = AclApi::discover().unwrap();
    assert_eq!(api.source(), &LibrarySource::Loaded(behind));
}
