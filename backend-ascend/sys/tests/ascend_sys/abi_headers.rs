//! Checks every declaration of this crate against the real ACL headers, with the tool
//! of `cargo xtask acl-headers check` ([`devipc_xtask::acl_headers`], which says what is
//! asserted and how).
//!
//! The headers ship inside the `torch-npu` wheel on PyPI. The tool downloads pinned wheels
//! with `pip download --no-deps`, extracts only the `acl` header directories into
//! `<target dir>/acl-headers/` (reused on later runs, and shared with `cargo xtask`;
//! nothing vendor is ever written into the source tree), and compiles one C++
//! translation unit, generated from [`devipc_ascend_sys::abi`], that includes the headers
//! and asserts every function signature, type, struct layout and constant. A function or
//! constant the fetched header does not declare (an older header) is printed as a note,
//! not a failure; the required functions and the structs must be present.
//!
//! Without Python/pip, network or a C++ compiler the tests print `SKIPPED: ...` and pass,
//! unless `DEVIPC_NO_SKIP=1`, which makes them fail. `DEVIPC_ACL_INCLUDE=<dir>` (a CANN
//! `include` directory holding `acl/acl_rt.h`) additionally checks a local install;
//! `DEVIPC_ACL_HEADERS_CACHE=<dir>` moves the download cache (e.g. for CI caching).

use std::path::{Path, PathBuf};

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::abi::{self, ConstKind, ParamDecl};
use devipc_xtask::acl_headers::{
    self, Decls, Error, Headers, NEWEST, OLD_2024, Report, Wheel, find_cxx, find_include_root,
};
use serial_test::parallel;

/// Reports that the ABI check cannot run here: loudly, or a failure under DEVIPC_NO_SKIP=1.
fn skip(reason: &str) {
    devipc_testkit::skip("the ACL ABI check against the torch-npu headers", reason);
}

/// The target directory of this build: the parent of `CARGO_TARGET_TMPDIR`
/// (`<target dir>/tmp`), wherever the checkout and the target directory are.
fn target_dir() -> &'static Path {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp)
}

/// The include root of `wheel`'s ACL headers, fetched into the cache of this target
/// directory. `Err` means "cannot fetch here" (no Python, pip or network): a skip. A wheel
/// fetched without the headers, or that fails to extract, is a failure.
fn fetch_headers(wheel: &Wheel) -> Result<PathBuf, String> {
    match acl_headers::fetch_headers(wheel, &acl_headers::cache_root(target_dir())) {
        Ok(root) => Ok(root),
        Err(Error::Unavailable(reason)) => Err(reason),
        Err(e @ Error::Failed(_)) => panic!("{e}"),
    }
}

/// Runs the whole check of `decls` against `headers` ([`acl_headers::check`]), whose errors
/// (the headers do not preprocess, the generated code does not compile for a reason other
/// than a mismatch) fail the test.
fn check(decls: &Decls, headers: &Headers, cxx: &str, scratch: &Path) -> Report {
    acl_headers::check(decls, headers, cxx, scratch).unwrap_or_else(|e| panic!("{e}"))
}

/// The full check of the crate against one header set, with the core-set requirements.
fn check_crate_against(what: &str, root: &Path, cxx: &str, scratch: &Path) -> Report {
    let report =
        acl_headers::check_crate(what, root, cxx, scratch).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.mismatches.is_empty(),
        "{} declaration(s) of devipc-ascend-sys disagree with {what}:\n{}",
        report.mismatches.len(),
        report.mismatches.join("\n")
    );
    assert!(
        report.param_names.is_empty(),
        "parameter names differ from {what}:\n{}",
        report.param_names.join("\n")
    );
    for name in AclApi::REQUIRED_SYMBOLS {
        assert!(
            report.present_functions.contains(*name),
            "required function {name} is not declared by {what}: it must be optional"
        );
    }
    // The tool's own verdict (`cargo xtask acl-headers check`) agrees.
    assert_eq!(report.crate_failures(what), Vec::<String>::new());
    report
}

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("devipc-ascend-sys-abi")
        .join(name)
}

// ---------------------------------------------------------------------------------------
// Deliberately wrong declarations: the check must catch each one.

const WRONG_MALLOC_PHYSICAL_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "handle",
        rust_type: "*mut aclrtDrvMemHandle",
    },
    ParamDecl {
        name: "size",
        rust_type: "usize",
    },
    ParamDecl {
        name: "prop",
        // The header has `const aclrtPhysicalMemProp *`.
        rust_type: "*mut aclrtPhysicalMemProp",
    },
    ParamDecl {
        name: "flags",
        rust_type: "u64",
    },
];

const WRONG_NOTIFY_KEY_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "notify",
        rust_type: "aclrtNotify",
    },
    ParamDecl {
        name: "key",
        rust_type: "*mut c_char",
    },
    ParamDecl {
        name: "len",
        rust_type: "usize",
    },
    ParamDecl {
        name: "flags",
        // The header has `uint64_t`.
        rust_type: "u32",
    },
];

const RENAMED_FREE_PHYSICAL_PARAMS: &[ParamDecl] = &[ParamDecl {
    // The header calls it `handle`.
    name: "memHandle",
    rust_type: "aclrtDrvMemHandle",
}];

/// The crate's records with one error of each kind planted; returns the names of the
/// planted errors, each of which must appear in a mismatch message.
fn plant_errors(decls: &mut Decls) -> Vec<&'static str> {
    let mut planted = Vec::new();
    for f in &mut decls.functions {
        match f.name {
            "aclrtMallocPhysical" => {
                f.params = WRONG_MALLOC_PHYSICAL_PARAMS;
                planted.push("fn aclrtMallocPhysical");
            }
            "aclrtNotifyGetExportKey" => {
                f.params = WRONG_NOTIFY_KEY_PARAMS;
                planted.push("fn aclrtNotifyGetExportKey");
            }
            "aclrtGetDeviceCount" => {
                f.ret = "u32";
                planted.push("fn aclrtGetDeviceCount");
            }
            _ => {}
        }
    }
    for c in &mut decls.constants {
        match c.name {
            // The classic mistake: the notify flag is 0x02, not 0x1 as for memory.
            "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION" => {
                c.value = 1;
                planted.push("const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust value");
            }
            "ACL_NOTIFY_DEVICE_USE_ONLY" => {
                c.size = 8;
                planted.push("const ACL_NOTIFY_DEVICE_USE_ONLY: Rust type `u32` has size 8");
            }
            "ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION" => {
                c.signed = true;
                planted.push("const ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust type `u64` is signed");
            }
            "ACL_ERROR_RT_INVALID_HANDLE" => {
                c.value = 107018;
                planted.push("const ACL_ERROR_RT_INVALID_HANDLE");
            }
            "ACL_ERROR_REPEAT_FINALIZE" => {
                c.value = 100036;
                planted.push("const ACL_ERROR_REPEAT_FINALIZE");
            }
            "ACL_MEM_HANDLE_TYPE_NONE" => {
                c.kind = ConstKind::Enumerator {
                    enum_type: "aclrtMemAttr",
                };
                planted.push("const ACL_MEM_HANDLE_TYPE_NONE: Rust puts it in enum `aclrtMemAttr`");
            }
            _ => {}
        }
    }
    for t in &mut decls.types {
        match t.name {
            "aclError" => {
                t.rust_type = "u32";
                planted.push("type aclError");
            }
            "aclrtMemcpyKind" => {
                t.size = 8;
                planted.push("type aclrtMemcpyKind");
            }
            _ => {}
        }
    }
    for s in &mut decls.structs {
        if s.name == "aclrtPhysicalMemProp" {
            let mut fields = s.fields.to_vec();
            fields[4].offset = 20; // `reserve` is at 24, after 4 bytes of padding
            s.fields = Box::leak(fields.into_boxed_slice());
            planted.push("struct aclrtPhysicalMemProp.reserve: Rust offset 20");
        }
        if s.name == "aclrtMemAccessDesc" {
            let mut fields = s.fields.to_vec();
            fields[2].rust_type = "[u8; 16]";
            s.fields = Box::leak(fields.into_boxed_slice());
            planted.push("struct aclrtMemAccessDesc.rsv: Rust type `uint8_t[16]`");
        }
    }
    planted
}

fn assert_all_planted_errors_found(report: &Report, planted: &[&str]) {
    for p in planted {
        assert!(
            report.mismatches.iter().any(|m| m.starts_with(p)),
            "the planted error `{p}` was not reported; mismatches:\n{}",
            report.mismatches.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

/// The crate against the newest torch-npu headers; then the same headers with planted
/// errors, which must all be caught.
#[test]
#[parallel]
fn abi_matches_the_newest_torch_npu_headers() {
    let Some(cxx) = find_cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = match fetch_headers(&NEWEST) {
        Ok(root) => root,
        Err(e) => {
            return skip(&format!(
                "cannot fetch torch-npu {} headers: {e}",
                NEWEST.version
            ));
        }
    };
    let what = format!("torch-npu {} headers ({})", NEWEST.version, root.display());
    let report = check_crate_against(&what, &root, &cxx, &scratch("newest"));
    // The newest header declares every function and struct devipc uses.
    for f in abi::FUNCTIONS {
        assert!(
            report.present_functions.contains(f.name),
            "{} is missing from {what}",
            f.name
        );
    }
    for s in abi::STRUCTS {
        assert!(
            report.present_structs.contains(s.name),
            "struct {} is missing from {what}",
            s.name
        );
    }
    // Issue 16 explicitly: the physical-identity functions are checked (present, and
    // their prototypes and `aclrtUuid`'s layout agree, or `check_crate_against` failed).
    for name in ISSUE_16_FUNCTIONS {
        assert!(report.present_functions.contains(*name), "{name} in {what}");
    }
    assert!(
        report.present_structs.contains("aclrtUuid"),
        "aclrtUuid in {what}"
    );

    let mut wrong = Decls::of_crate();
    let planted = plant_errors(&mut wrong);
    let report = check(
        &wrong,
        &Headers::acl(&root),
        &cxx,
        &scratch("newest-planted"),
    );
    assert_all_planted_errors_found(&report, &planted);
    assert_eq!(
        report.mismatches.len(),
        planted.len(),
        "unexpected extra mismatches:\n{}",
        report.mismatches.join("\n")
    );
}

/// The crate against a late-2024 torch-npu: what it declares must match, the newer
/// families are absent (notes), and every required function is present, which is what
/// makes them safe to require.
#[test]
#[parallel]
fn required_functions_exist_in_the_2024_headers() {
    let Some(cxx) = find_cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = match fetch_headers(&OLD_2024) {
        Ok(root) => root,
        Err(e) => {
            return skip(&format!(
                "cannot fetch torch-npu {} headers: {e}",
                OLD_2024.version
            ));
        }
    };
    let what = format!(
        "torch-npu {} headers ({})",
        OLD_2024.version,
        root.display()
    );
    let report = check_crate_against(&what, &root, &cxx, &scratch("old-2024"));
    assert!(
        report
            .absent
            .iter()
            .any(|a| a.starts_with("function aclrtIpcMemGetExportKey")),
        "expected the 2024 header to predate the IPC-key API: {:?}",
        report.absent
    );
    // Issue 16: the device-id translation and UUID functions (CANN 8.x) are newer than
    // this header too: noted as absent, not a failure, because they are optional.
    for name in ISSUE_16_FUNCTIONS {
        assert!(
            !report.present_functions.contains(*name)
                && report
                    .absent
                    .iter()
                    .any(|a| a.starts_with(&format!("function {name} "))),
            "expected {name} to be absent from {what}: {:?}",
            report.absent
        );
        assert!(
            AclApi::OPTIONAL_SYMBOLS.contains(name),
            "{name} must be optional"
        );
    }
    assert!(
        report.absent.iter().any(|a| a == "struct aclrtUuid"),
        "expected struct aclrtUuid to be absent from {what}: {:?}",
        report.absent
    );
}

/// The functions of issue 16 (physical device identity): in the newest header, absent
/// from the 2024 one.
const ISSUE_16_FUNCTIONS: &[&str] = &[
    "aclrtGetLogicDevIdByUserDevId",
    "aclrtGetUserDevIdByLogicDevId",
    "aclrtGetLogicDevIdByPhyDevId",
    "aclrtGetPhyDevIdByLogicDevId",
    "aclrtDeviceGetUuid",
];

/// A local CANN install named by DEVIPC_ACL_INCLUDE, when set.
#[test]
#[parallel]
fn abi_matches_local_acl_headers_if_named() {
    let Some(dir) = std::env::var_os("DEVIPC_ACL_INCLUDE") else {
        eprintln!("note: DEVIPC_ACL_INCLUDE is not set; no local CANN headers to check");
        return;
    };
    let Some(cxx) = find_cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = find_include_root(Path::new(&dir))
        .unwrap_or_else(|| panic!("no acl/acl_rt.h under DEVIPC_ACL_INCLUDE={dir:?}"));
    let what = format!("local headers {}", root.display());
    check_crate_against(&what, &root, &cxx, &scratch("local"));
}

/// The generator itself, without any download: a small header written here (devipc's own
/// restatement of a few ACL declarations) passes with the crate's records and fails with
/// wrong ones, and what it lacks is reported as absent.
#[test]
#[parallel]
fn generator_catches_wrong_declarations_offline() {
    let Some(cxx) = find_cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let dir = scratch("offline");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mini_acl.h"),
        r#"
#include <stddef.h>
#include <stdint.h>
typedef int aclError;
typedef void *aclrtDrvMemHandle;
typedef void *aclrtNotify;
static const int ACL_ERROR_INVALID_PARAM = 100000;
#define ACL_ERROR_RT_NO_PERMISSION 207006
#define ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x02UL
typedef enum aclrtMemLocationType { ACL_MEM_LOCATION_TYPE_HOST = 0, ACL_MEM_LOCATION_TYPE_DEVICE } aclrtMemLocationType;
typedef struct aclrtMemLocation { uint32_t id; aclrtMemLocationType type; } aclrtMemLocation;
#ifdef __cplusplus
extern "C" {
#endif
aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint64_t flags);
#ifdef __cplusplus
}
#endif
"#,
    )
    .unwrap();
    let headers = Headers {
        include_dirs: vec![dir.clone()],
        includes: vec!["mini_acl.h"],
    };
    let pick = |names: &[&str]| -> Decls {
        let all = Decls::of_crate();
        Decls {
            functions: all
                .functions
                .into_iter()
                .filter(|f| names.contains(&f.name))
                .collect(),
            types: all
                .types
                .into_iter()
                .filter(|t| names.contains(&t.name))
                .collect(),
            structs: all
                .structs
                .into_iter()
                .filter(|s| names.contains(&s.name))
                .collect(),
            constants: all
                .constants
                .into_iter()
                .filter(|c| names.contains(&c.name))
                .collect(),
        }
    };
    let names = [
        "aclrtFreePhysical",
        "aclrtNotifyGetExportKey",
        "aclrtMapMem", // not in the mini header: absent
        "aclError",
        "aclrtDrvMemHandle",
        "aclrtMemLocationType",
        "aclrtMemLocation",
        "ACL_ERROR_INVALID_PARAM",
        "ACL_ERROR_RT_NO_PERMISSION",
        "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION",
        "ACL_MEM_LOCATION_TYPE_DEVICE",
        "ACL_MEM_LOCATION_TYPE_MANAGED", // not in the mini header: absent
    ];
    let good = pick(&names);
    let report = check(&good, &headers, &cxx, &dir.join("good"));
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert!(report.param_names.is_empty(), "{:?}", report.param_names);
    assert!(report.assertions > 15, "{}", report.assertions);
    assert_eq!(
        report.absent,
        [
            "function aclrtMapMem (required)",
            "constant ACL_MEM_LOCATION_TYPE_MANAGED = 3"
        ]
    );

    let mut bad = good.clone();
    for f in &mut bad.functions {
        if f.name == "aclrtNotifyGetExportKey" {
            f.params = WRONG_NOTIFY_KEY_PARAMS;
        }
        if f.name == "aclrtFreePhysical" {
            f.params = RENAMED_FREE_PHYSICAL_PARAMS;
        }
    }
    for c in &mut bad.constants {
        if c.name == "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION" {
            c.value = 1;
        }
        if c.name == "ACL_ERROR_INVALID_PARAM" {
            c.signed = false;
        }
    }
    for t in &mut bad.types {
        if t.name == "aclrtDrvMemHandle" {
            t.rust_type = "*mut *mut c_void";
        }
    }
    for s in &mut bad.structs {
        let mut fields = s.fields.to_vec();
        fields[1].offset = 8;
        s.fields = Box::leak(fields.into_boxed_slice());
    }
    let report = check(&bad, &headers, &cxx, &dir.join("bad"));
    let expected = [
        "fn aclrtNotifyGetExportKey: Rust declares `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint32_t flags)`; header declares `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint64_t flags)`",
        "type aclrtDrvMemHandle: Rust declares it as `void **`",
        "struct aclrtMemLocation.type: Rust offset 8",
        "const ACL_ERROR_INVALID_PARAM: Rust type `aclError` is unsigned",
        "const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust value 1",
    ];
    let mut got = report.mismatches.clone();
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(got, want);
    // A renamed parameter is not an ABI mismatch, but it is reported.
    assert_eq!(
        report.param_names,
        ["fn aclrtFreePhysical: Rust names (memHandle), header names (handle)"]
    );
}
