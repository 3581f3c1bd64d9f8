//! The hip-over-cuda shim (`tools/hip-over-cuda`, issue 28) keeps up with this crate.
//!
//! The shim is C outside the workspace, so nothing else would notice when the HIP function
//! list ([`for_each_hip_fn!`](devipc_hip_sys::for_each_hip_fn), through
//! `HipApi::REQUIRED_SYMBOLS` / `OPTIONAL_SYMBOLS`) grows or a constant changes. These
//! tests read the shim's files as text (no compiler, no CUDA):
//! - `functions.txt` names every function of the list exactly once, as served or not
//!   served with a reason, and nothing else; every required function is served whatever
//!   the CUDA version (a library lacking one fails devipc's load);
//! - every served function is defined in `hip_over_cuda.c` as an export;
//! - `hip_types.h`'s error list is `ERRORS` (codes and names), and each of its other
//!   constants has devipc's value.
//!
//! `tools/hip-over-cuda/ci-check` adds what needs the CUDA headers: the library's exports
//! (`nm -D`) are exactly the served functions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use devipc_hip_sys::*;

fn tool_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/hip-over-cuda")
}

fn read(name: &str) -> String {
    let path = tool_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One line of `functions.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Coverage {
    /// Exported; `since` is the oldest CUDA (major, minor) it is built for, if any.
    Served { since: Option<(u32, u32)> },
    /// Not exported, with why.
    NotServed { reason: String },
}

/// `functions.txt` as `(name, coverage)` in file order; an error names the bad line.
fn parse(text: &str) -> Result<Vec<(String, Coverage)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("functions.txt line {}: {why}: {line:?}", i + 1);
        let mut words = line.split_whitespace();
        let status = words.next().unwrap_or_default();
        let name = words.next().ok_or_else(|| bad("no function name"))?;
        if !name.starts_with("hip") || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(bad("not a HIP function name"));
        }
        let rest: Vec<&str> = words.collect();
        let coverage = match status {
            "served" => match rest.as_slice() {
                [] => Coverage::Served { since: None },
                [cond] => {
                    let version = cond
                        .strip_prefix("cuda>=")
                        .ok_or_else(|| bad("a condition is cuda>=MAJOR.MINOR"))?;
                    let (major, minor) = version
                        .split_once('.')
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                        .ok_or_else(|| bad("a condition is cuda>=MAJOR.MINOR"))?;
                    Coverage::Served {
                        since: Some((major, minor)),
                    }
                }
                _ => return Err(bad("served takes at most one condition")),
            },
            "not-served" if !rest.is_empty() => Coverage::NotServed {
                reason: rest.join(" "),
            },
            "not-served" => return Err(bad("not-served needs a reason")),
            _ => return Err(bad("the status is served or not-served")),
        };
        out.push((name.to_owned(), coverage));
    }
    Ok(out)
}

fn coverage() -> Vec<(String, Coverage)> {
    parse(&read("functions.txt")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn parse_reads_every_form_and_names_bad_lines() {
    let text = "# comment\n\nserved hipInit\nserved hipMemcpyBatchAsync cuda>=12.8\n\
                not-served hipFoo CUDA has no such thing\n";
    assert_eq!(
        parse(text).unwrap(),
        vec![
            ("hipInit".to_owned(), Coverage::Served { since: None }),
            (
                "hipMemcpyBatchAsync".to_owned(),
                Coverage::Served {
                    since: Some((12, 8))
                }
            ),
            (
                "hipFoo".to_owned(),
                Coverage::NotServed {
                    reason: "CUDA has no such thing".to_owned()
                }
            ),
        ]
    );
    for (bad, why) in [
        ("served", "no function name"),
        ("served cudaMalloc", "not a HIP function name"),
        ("served hipInit cuda>=12", "cuda>=MAJOR.MINOR"),
        ("served hipInit if-you-like", "cuda>=MAJOR.MINOR"),
        ("served hipInit cuda>=12.8 twice", "at most one condition"),
        ("not-served hipInit", "needs a reason"),
        ("exported hipInit", "served or not-served"),
    ] {
        let err = parse(&format!("served hipFree\n{bad}\n")).unwrap_err();
        assert!(err.contains("line 2") && err.contains(why), "{bad}: {err}");
    }
}

#[test]
fn every_listed_function_is_covered_exactly_once() {
    let listed: Vec<&str> = HipApi::REQUIRED_SYMBOLS
        .iter()
        .chain(HipApi::OPTIONAL_SYMBOLS)
        .copied()
        .collect();
    let covered = coverage();
    let mut seen = BTreeMap::new();
    for (name, _) in &covered {
        *seen.entry(name.as_str()).or_insert(0) += 1;
    }
    let missing: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|n| !seen.contains_key(n))
        .collect();
    assert!(
        missing.is_empty(),
        "devipc's HIP function list names {missing:?}, which tools/hip-over-cuda/functions.txt \
         neither serves nor lists as not served: implement it in hip_over_cuda.c (and its \
         HOC_SERVED table) or add `not-served NAME REASON`"
    );
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "listed more than once: {twice:?}");
    let stale: Vec<&str> = seen
        .keys()
        .copied()
        .filter(|n| !listed.contains(n))
        .collect();
    assert!(
        stale.is_empty(),
        "functions.txt names {stale:?}, which devipc's HIP function list no longer has"
    );
    // The same order as the list, so a reader can compare them side by side.
    let order: Vec<&str> = covered.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, listed, "functions.txt is not in the list's order");
}

#[test]
fn required_functions_are_served_whatever_the_cuda_version() {
    let covered: BTreeMap<String, Coverage> = coverage().into_iter().collect();
    for name in HipApi::REQUIRED_SYMBOLS {
        assert_eq!(
            covered.get(*name),
            Some(&Coverage::Served { since: None }),
            "{name} is required: devipc refuses a library that lacks it, so the shim must \
             export it on every CUDA 12/13"
        );
    }
}

/// The names `hip_over_cuda.c` defines as exports (`HOC_EXPORT <type> name(`).
fn defined_exports(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in source.lines() {
        let Some(rest) = line.strip_prefix("HOC_EXPORT ") else {
            continue;
        };
        let Some(open) = rest.find('(') else { continue };
        let head = &rest[..open];
        if let Some(name) = head.split([' ', '*']).next_back() {
            out.push(name.to_owned());
        }
    }
    out
}

#[test]
fn served_functions_are_defined_in_the_shim() {
    let source = read("hip_over_cuda.c");
    let defined = defined_exports(&source);
    for (name, coverage) in coverage() {
        let is_defined = defined.contains(&name);
        match coverage {
            Coverage::Served { .. } => assert!(
                is_defined,
                "functions.txt serves {name}, but hip_over_cuda.c does not define it"
            ),
            Coverage::NotServed { .. } => assert!(
                !is_defined,
                "functions.txt says {name} is not served, but hip_over_cuda.c exports it"
            ),
        }
        let in_table = source.contains(&format!("X({name})"))
            || source.contains(&format!("HOC_PROC_ENTRY({name})"));
        assert_eq!(
            is_defined, in_table,
            "{name}: hipGetProcAddress's table (HOC_SERVED) and the exports disagree"
        );
    }
    let hip_exports: Vec<&String> = defined.iter().filter(|n| n.starts_with("hip")).collect();
    assert!(
        hip_exports
            .iter()
            .all(|n| HipApi::REQUIRED_SYMBOLS.contains(&n.as_str())
                || HipApi::OPTIONAL_SYMBOLS.contains(&n.as_str())),
        "hip_over_cuda.c exports a hip* function devipc does not list: {hip_exports:?}"
    );
}

#[test]
fn defined_exports_reads_the_export_lines() {
    let src = "HOC_EXPORT hipError_t hipInit(unsigned int flags)\n\
               HOC_EXPORT const char *hipGetErrorName(hipError_t e) { }\n\
               static hipError_t helper(void)\n";
    assert_eq!(defined_exports(src), ["hipInit", "hipGetErrorName"]);
}

/// `hip_types.h`'s error list: `X(name, value)` lines inside `HOC_HIP_ERRORS`.
fn header_errors(header: &str) -> Vec<(hipError_t, String)> {
    header
        .lines()
        .filter_map(|l| l.trim().strip_prefix("X(hip"))
        .filter_map(|rest| {
            let (name, value) = rest.split_once(',')?;
            let value = value.split(')').next()?.trim().parse().ok()?;
            Some((value, format!("hip{name}")))
        })
        .collect()
}

#[test]
fn error_codes_and_names_are_devipcs() {
    let ours = header_errors(&read("hip_types.h"));
    let theirs: Vec<(hipError_t, String)> =
        ERRORS.iter().map(|&(c, n)| (c, n.to_owned())).collect();
    assert_eq!(
        ours, theirs,
        "hip_types.h's HOC_HIP_ERRORS differs from devipc's ERRORS (codes and names)"
    );
}

/// Every other constant of `hip_types.h`: `name = value,` enum entries and `#define name
/// value` lines (hex or decimal, an optional `u`).
fn header_constants(header: &str) -> BTreeMap<String, i64> {
    let number = |v: &str| -> Option<i64> {
        let v = v.trim().trim_end_matches('u');
        match v.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    };
    let mut out = BTreeMap::new();
    let mut in_errors = false;
    for line in header.lines() {
        let code = line.split("/*").next().unwrap_or_default().trim();
        if code.starts_with("#define HOC_HIP_ERRORS") {
            in_errors = true;
        }
        if in_errors {
            in_errors = code.ends_with('\\');
            continue;
        }
        let entry = if let Some(def) = code.strip_prefix("#define ") {
            def.split_once(' ')
        } else if code.ends_with(',') && code.contains(" = ") {
            code.trim_end_matches(',').split_once(" = ")
        } else {
            None
        };
        if let Some((name, value)) = entry {
            if let Some(v) = number(value) {
                out.insert(name.trim().to_owned(), v);
            }
        }
    }
    out
}

#[test]
fn other_constants_have_devipcs_values() {
    use MemoryKind::*;
    let v6 = |k| i64::from(memory_type_value(k, 60_200_000).expect("a 6.2 value"));
    let devipc: BTreeMap<&str, i64> = [
        ("hipEventDefault", i64::from(hipEventDefault)),
        ("hipEventBlockingSync", hipEventBlockingSync.into()),
        ("hipEventDisableTiming", hipEventDisableTiming.into()),
        ("hipEventInterprocess", hipEventInterprocess.into()),
        (
            "hipEventDisableSystemFence",
            hipEventDisableSystemFence.into(),
        ),
        ("hipEventReleaseToDevice", hipEventReleaseToDevice.into()),
        ("hipEventReleaseToSystem", hipEventReleaseToSystem.into()),
        // The shim reports ROCm 6.2, so it takes the ROCm 6 value.
        (
            "hipIpcMemLazyEnablePeerAccess",
            ipc_mem_lazy_enable_peer_access(60_200_000).into(),
        ),
        ("hipMemoryTypeUnregistered", v6(Unregistered)),
        ("hipMemoryTypeHost", v6(Host)),
        ("hipMemoryTypeDevice", v6(Device)),
        ("hipMemoryTypeManaged", v6(Managed)),
        ("hipMemoryTypeArray", v6(Array)),
        ("hipMemoryTypeUnified", v6(Unified)),
        ("hipInvalidDeviceId", hipInvalidDeviceId.into()),
        ("hipHostMallocDefault", hipHostMallocDefault.into()),
        ("hipHostMallocPortable", hipHostMallocPortable.into()),
        ("hipHostMallocMapped", hipHostMallocMapped.into()),
        (
            "hipHostMallocWriteCombined",
            hipHostMallocWriteCombined.into(),
        ),
        ("hipHostMallocNumaUser", hipHostMallocNumaUser.into()),
        ("hipHostMallocCoherent", hipHostMallocCoherent.into()),
        ("hipHostMallocNonCoherent", hipHostMallocNonCoherent.into()),
        (
            "HIP_GET_PROC_ADDRESS_SUCCESS",
            HIP_GET_PROC_ADDRESS_SUCCESS.into(),
        ),
        (
            "HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND",
            HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND.into(),
        ),
        (
            "HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT",
            HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.into(),
        ),
        (
            "hipMemLocationTypeInvalid",
            hipMemLocationTypeInvalid.into(),
        ),
        ("hipMemLocationTypeDevice", hipMemLocationTypeDevice.into()),
        ("hipMemLocationTypeHost", hipMemLocationTypeHost.into()),
        (
            "hipMemLocationTypeHostNuma",
            hipMemLocationTypeHostNuma.into(),
        ),
        (
            "hipMemLocationTypeHostNumaCurrent",
            hipMemLocationTypeHostNumaCurrent.into(),
        ),
        (
            "hipMemAccessFlagsProtNone",
            hipMemAccessFlagsProtNone.into(),
        ),
        (
            "hipMemAccessFlagsProtRead",
            hipMemAccessFlagsProtRead.into(),
        ),
        (
            "hipMemAccessFlagsProtReadWrite",
            hipMemAccessFlagsProtReadWrite.into(),
        ),
        (
            "hipMemAllocationTypeInvalid",
            hipMemAllocationTypeInvalid.into(),
        ),
        (
            "hipMemAllocationTypePinned",
            hipMemAllocationTypePinned.into(),
        ),
        ("hipMemHandleTypeNone", hipMemHandleTypeNone.into()),
        (
            "hipMemHandleTypePosixFileDescriptor",
            hipMemHandleTypePosixFileDescriptor.into(),
        ),
        ("hipMemHandleTypeWin32", hipMemHandleTypeWin32.into()),
        ("hipMemHandleTypeWin32Kmt", hipMemHandleTypeWin32Kmt.into()),
        ("hipMemHandleTypeFabric", hipMemHandleTypeFabric.into()),
        (
            "hipMemAllocationGranularityMinimum",
            hipMemAllocationGranularityMinimum.into(),
        ),
        (
            "hipMemAllocationGranularityRecommended",
            hipMemAllocationGranularityRecommended.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_MEMORY_TYPE",
            HIP_POINTER_ATTRIBUTE_MEMORY_TYPE.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_DEVICE_POINTER",
            HIP_POINTER_ATTRIBUTE_DEVICE_POINTER.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL",
            HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE",
            HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR",
            HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_RANGE_SIZE",
            HIP_POINTER_ATTRIBUTE_RANGE_SIZE.into(),
        ),
        (
            "HIP_POINTER_ATTRIBUTE_MAPPED",
            HIP_POINTER_ATTRIBUTE_MAPPED.into(),
        ),
        (
            "hipDeviceAttributeVirtualMemoryManagementSupported",
            hipDeviceAttributeVirtualMemoryManagementSupported.into(),
        ),
        ("hipMemcpyHostToHost", hipMemcpyHostToHost.into()),
        ("hipMemcpyHostToDevice", hipMemcpyHostToDevice.into()),
        ("hipMemcpyDeviceToHost", hipMemcpyDeviceToHost.into()),
        ("hipMemcpyDeviceToDevice", hipMemcpyDeviceToDevice.into()),
        ("hipMemcpyDefault", hipMemcpyDefault.into()),
        (
            "hipMemcpyDeviceToDeviceNoCU",
            hipMemcpyDeviceToDeviceNoCU.into(),
        ),
        ("HIP_IPC_HANDLE_SIZE", HIP_IPC_HANDLE_SIZE as i64),
    ]
    .into_iter()
    .collect();
    let header = header_constants(&read("hip_types.h"));
    // Guard against a parser that finds nothing.
    assert!(header.len() >= devipc.len(), "{header:?}");
    for (name, value) in &header {
        if name.starts_with("DEVIPC_") || name.starts_with("HOC_") {
            continue;
        }
        assert_eq!(
            devipc.get(name.as_str()),
            Some(value),
            "hip_types.h's {name} = {value} is not devipc's ({:?})",
            devipc.get(name.as_str())
        );
    }
    for name in devipc.keys() {
        assert!(header.contains_key(*name), "hip_types.h lacks {name}");
    }
}
