//! Unit tests of the generated table: the list's required/optional split and loading
//! libraries that are not ACL.

use std::path::PathBuf;

use devipc_core::Error;

use crate::AclApi;
use crate::abi::FUNCTION_DECLS;

#[test]
fn symbol_lists_follow_the_declarations() {
    let required: Vec<_> = FUNCTION_DECLS
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    let optional: Vec<_> = FUNCTION_DECLS
        .iter()
        .filter(|f| !f.required)
        .map(|f| f.name)
        .collect();
    assert_eq!(required, AclApi::REQUIRED_SYMBOLS);
    assert_eq!(optional, AclApi::OPTIONAL_SYMBOLS);
    assert_eq!(FUNCTION_DECLS.len(), 67);
    assert_eq!(AclApi::REQUIRED_SYMBOLS[0], "aclInit");
}

#[test]
fn the_newer_families_are_optional() {
    for name in [
        "aclrtMemExportToShareableHandle",
        "aclrtMemSetPidToShareableHandle",
        "aclrtMemImportFromShareableHandle",
        "aclrtIpcMemGetExportKey",
        "aclrtIpcMemSetImportPid",
        "aclrtIpcMemImportByKey",
        "aclrtIpcMemClose",
        "aclrtCreateNotify",
        "aclrtNotifyGetExportKey",
        "aclrtWaitAndResetNotify",
        "aclrtDeviceGetBareTgid",
        "aclrtMemGetAddressRange",
        "aclrtMemcpyAsync",
        "aclrtMemcpyBatchAsync",
        "aclsysGetVersionStr",
        "aclrtGetVersion",
        // Issue 16: CANN 8.x, absent from the 2024 header.
        "aclrtGetLogicDevIdByUserDevId",
        "aclrtGetUserDevIdByLogicDevId",
        "aclrtGetLogicDevIdByPhyDevId",
        "aclrtGetPhyDevIdByLogicDevId",
        "aclrtDeviceGetUuid",
        "aclrtNotifyBatchReset",
    ] {
        assert!(AclApi::OPTIONAL_SYMBOLS.contains(&name), "{name}");
    }
    for name in [
        "aclInit",
        "aclrtMalloc",
        "aclrtMallocPhysical",
        "aclrtMapMem",
    ] {
        assert!(AclApi::REQUIRED_SYMBOLS.contains(&name), "{name}");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_library_without_acl_is_missing_the_first_required_symbol() {
    // SAFETY: libc is already loaded in this process; loading it again runs no
    // initializer, and no symbol is called.
    let err = unsafe { AclApi::load("libc.so.6") }.unwrap_err();
    match err {
        Error::MissingSymbol { library, symbol } => {
            assert_eq!(library, PathBuf::from("libc.so.6"));
            assert_eq!(symbol, "aclInit");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
}

#[test]
fn an_unloadable_path_is_library_not_found_with_the_loader_error() {
    let path = "/nonexistent/devipc/libascendcl.so";
    // SAFETY: the file does not exist; nothing is loaded.
    let err = unsafe { AclApi::load(path) }.unwrap_err();
    let Error::LibraryNotFound { tried, .. } = err else {
        panic!("expected LibraryNotFound, got {err:?}")
    };
    assert_eq!(tried.len(), 1);
    assert_eq!(tried[0].path, PathBuf::from(path));
    assert_eq!(tried[0].origin, "AclApi::load");
    assert!(!tried[0].error.is_empty());
}
