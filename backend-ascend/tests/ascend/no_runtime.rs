//! Starting the backend on a machine without the ACL runtime: [`AscendBackend::open`]
//! fails with `LibraryNotFound` listing every path discovery tried, in order, each with
//! its loader error, and never panics.
//!
//! The test sets `DEVIPC_ASCEND_LIB` and clears the CANN variables for its duration
//! (`#[serial]`; every other test of this binary is `#[serial]` or `#[parallel]`, so none
//! runs beside it). On a machine where the runtime *is* installed at a default location,
//! the result is a start-up error or a backend instead; the test then prints `SKIPPED` and
//! passes, unless `DEVIPC_NO_SKIP=1`.

use std::ffi::OsStr;
use std::path::PathBuf;

use devipc_ascend::AscendBackend;
use devipc_ascend::sys::discovery;
use devipc_core::{BackendKind, Error};
use devipc_testkit::EnvGuard;
use serial_test::serial;

#[test]
#[serial]
fn open_without_a_runtime_lists_every_path_tried() {
    let missing = "/nonexistent/devipc-test/libascendcl.so";
    // SAFETY: #[serial], and this binary's other tests never run beside it (module docs).
    let _env = unsafe {
        EnvGuard::set(&[
            (discovery::LIBRARY_ENV_VAR, Some(OsStr::new(missing))),
            ("ASCEND_HOME_PATH", None),
            ("ASCEND_TOOLKIT_HOME", None),
        ])
    };
    let expected: Vec<PathBuf> = discovery::candidates(|k| std::env::var_os(k))
        .into_iter()
        .map(|c| c.path)
        .collect();
    match AscendBackend::open() {
        Err(Error::LibraryNotFound { backend, tried }) => {
            assert_eq!(backend, BackendKind::Ascend);
            let paths: Vec<PathBuf> = tried.iter().map(|a| a.path.clone()).collect();
            assert_eq!(paths, expected);
            assert_eq!(tried[0].path, PathBuf::from(missing));
            assert_eq!(tried[0].origin, "DEVIPC_ASCEND_LIB");
            assert!(tried.iter().all(|a| !a.error.is_empty()), "{tried:?}");
            let text = Error::LibraryNotFound {
                backend,
                tried: tried.clone(),
            }
            .to_string();
            assert!(text.contains("DEVIPC_ASCEND_LIB"), "{text}");
            // The override is the only candidate (as DEVIPC_HIP_LIB is for HIP).
            assert_eq!(tried.len(), 1, "{tried:?}");
        }
        other => {
            devipc_testkit::skip(
                "the Ascend backend without a runtime",
                &format!(
                    "an ACL runtime seems to be installed here, so 'not found' cannot be tested: {other:?}"
                ),
            );
        }
    }
}
