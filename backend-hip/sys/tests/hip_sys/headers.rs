//! Checks this crate's VMM declarations against the HIP header installed on this machine
//! (Debian 12's `libamdhip64-dev`, ROCm 5.2.3: `/usr/include/hip/hip_runtime_api.h`).
//!
//! The test writes a C++ translation unit whose `static_assert`s hold the sizes, field
//! offsets and enum values **as this crate declares them** (taken from the Rust items with
//! `size_of` / `offset_of!` / the constants), and compiles it with `g++ -fsyntax-only`
//! against the header: any difference fails to compile. Checked: `hipMemLocation`,
//! `hipMemAccessDesc`, the ROCm 5.2 layout `hipMemAllocationProp_R0502` (size and every
//! offset), `hipMemGenericAllocationHandle_t` (a pointer), the values of
//! `hipMemLocationType`, `hipMemAccessFlags`, `hipMemAllocationType`,
//! `hipMemAllocationHandleType` (None/Posix/Win32/Win32Kmt), the granularity flags and the
//! `hipPointer_attribute` values used, and the 4-byte size of every enum. Not checked
//! here: the ROCm 5.3+ `hipMemAllocationProp` layout (the 5.2 header does not have it;
//! feature `link` checks it against hip-sys's HIP 5.4 bindings) and `hipMemHandleTypeFabric`
//! (HIP 7 only). Issue 16 adds `hipUUID` and the prototypes of `hipDeviceGetPCIBusId`,
//! `hipDeviceGetByPCIBusId` and `hipDeviceGetUuid`; issue 25 those of `hipDeviceGet`,
//! `hipDeviceGetAttribute` (its enum is 4 bytes) and `hipMemcpyHtoD` / `hipMemcpyDtoH`.
//! Without g++ or the header the test prints `SKIPPED: ...` and passes,
//! unless `DEVIPC_NO_SKIP=1`.

use std::mem::offset_of;
use std::path::Path;
use std::process::Command;

use devipc_hip_sys::*;

const HEADER: &str = "/usr/include/hip/hip_runtime_api.h";

/// The translation unit: every assertion uses the Rust side's number.
fn translation_unit() -> String {
    let mut tu = String::from(
        "#include <hip/hip_runtime_api.h>\n#include <cstddef>\n#include <type_traits>\n",
    );
    let mut eq = |lhs: &str, rhs: usize| {
        tu.push_str(&format!("static_assert(({lhs}) == {rhs}, \"{lhs}\");\n"));
    };
    eq("sizeof(hipUUID)", size_of::<hipUUID>());
    eq("alignof(hipUUID)", align_of::<hipUUID>());
    eq("offsetof(hipUUID, bytes)", offset_of!(hipUUID, bytes));
    eq("sizeof(hipMemLocation)", size_of::<hipMemLocation>());
    eq(
        "offsetof(hipMemLocation, type)",
        offset_of!(hipMemLocation, r#type),
    );
    eq(
        "offsetof(hipMemLocation, id)",
        offset_of!(hipMemLocation, id),
    );
    eq("sizeof(hipMemAccessDesc)", size_of::<hipMemAccessDesc>());
    eq(
        "offsetof(hipMemAccessDesc, location)",
        offset_of!(hipMemAccessDesc, location),
    );
    eq(
        "offsetof(hipMemAccessDesc, flags)",
        offset_of!(hipMemAccessDesc, flags),
    );
    type P = hipMemAllocationProp_R0502;
    eq("sizeof(hipMemAllocationProp)", size_of::<P>());
    eq("alignof(hipMemAllocationProp)", align_of::<P>());
    eq(
        "offsetof(hipMemAllocationProp, compressionType)",
        offset_of!(P, compressionType),
    );
    eq(
        "offsetof(hipMemAllocationProp, location)",
        offset_of!(P, location),
    );
    eq(
        "offsetof(hipMemAllocationProp, requestedHandleType)",
        offset_of!(P, requestedHandleType),
    );
    eq(
        "offsetof(hipMemAllocationProp, type)",
        offset_of!(P, r#type),
    );
    eq(
        "offsetof(hipMemAllocationProp, usage)",
        offset_of!(P, usage),
    );
    eq(
        "offsetof(hipMemAllocationProp, win32HandleMetaData)",
        offset_of!(P, win32HandleMetaData),
    );
    eq(
        "sizeof(hipMemGenericAllocationHandle_t)",
        size_of::<hipMemGenericAllocationHandle_t>(),
    );
    for ty in [
        "hipMemLocationType",
        "hipMemAccessFlags",
        "hipMemAllocationType",
        "hipMemAllocationHandleType",
        "hipMemAllocationGranularity_flags",
        "hipPointer_attribute",
        "hipDeviceAttribute_t",
    ] {
        eq(&format!("sizeof({ty})"), 4);
    }
    let values: &[(&str, i32)] = &[
        ("hipMemLocationTypeInvalid", hipMemLocationTypeInvalid),
        ("hipMemLocationTypeDevice", hipMemLocationTypeDevice),
        ("hipMemAccessFlagsProtNone", hipMemAccessFlagsProtNone),
        ("hipMemAccessFlagsProtRead", hipMemAccessFlagsProtRead),
        (
            "hipMemAccessFlagsProtReadWrite",
            hipMemAccessFlagsProtReadWrite,
        ),
        ("hipMemAllocationTypeInvalid", hipMemAllocationTypeInvalid),
        ("hipMemAllocationTypePinned", hipMemAllocationTypePinned),
        ("hipMemAllocationTypeMax", hipMemAllocationTypeMax),
        ("hipMemHandleTypeNone", hipMemHandleTypeNone),
        (
            "hipMemHandleTypePosixFileDescriptor",
            hipMemHandleTypePosixFileDescriptor,
        ),
        ("hipMemHandleTypeWin32", hipMemHandleTypeWin32),
        ("hipMemHandleTypeWin32Kmt", hipMemHandleTypeWin32Kmt),
        (
            "hipMemAllocationGranularityMinimum",
            hipMemAllocationGranularityMinimum,
        ),
        (
            "hipMemAllocationGranularityRecommended",
            hipMemAllocationGranularityRecommended,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_MEMORY_TYPE",
            HIP_POINTER_ATTRIBUTE_MEMORY_TYPE,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_DEVICE_POINTER",
            HIP_POINTER_ATTRIBUTE_DEVICE_POINTER,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL",
            HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE",
            HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR",
            HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        ),
        (
            "HIP_POINTER_ATTRIBUTE_RANGE_SIZE",
            HIP_POINTER_ATTRIBUTE_RANGE_SIZE,
        ),
        ("HIP_POINTER_ATTRIBUTE_MAPPED", HIP_POINTER_ATTRIBUTE_MAPPED),
    ];
    for (name, value) in values {
        tu.push_str(&format!(
            "static_assert(static_cast<long long>({name}) == {value}LL, \"{name}\");\n"
        ));
    }
    // The prototypes' parameter types, as this crate declares them.
    for proto in [
        "hipError_t (*)(hipMemGenericAllocationHandle_t*, size_t, const hipMemAllocationProp*, unsigned long long)@hipMemCreate",
        "hipError_t (*)(void*, hipMemGenericAllocationHandle_t, hipMemAllocationHandleType, unsigned long long)@hipMemExportToShareableHandle",
        "hipError_t (*)(hipMemGenericAllocationHandle_t*, void*, hipMemAllocationHandleType)@hipMemImportFromShareableHandle",
        "hipError_t (*)(size_t*, const hipMemAllocationProp*, hipMemAllocationGranularity_flags)@hipMemGetAllocationGranularity",
        "hipError_t (*)(void**, size_t, size_t, void*, unsigned long long)@hipMemAddressReserve",
        "hipError_t (*)(void*, size_t)@hipMemAddressFree",
        "hipError_t (*)(void*, size_t, size_t, hipMemGenericAllocationHandle_t, unsigned long long)@hipMemMap",
        "hipError_t (*)(void*, size_t)@hipMemUnmap",
        "hipError_t (*)(void*, size_t, const hipMemAccessDesc*, size_t)@hipMemSetAccess",
        "hipError_t (*)(unsigned long long*, const hipMemLocation*, void*)@hipMemGetAccess",
        "hipError_t (*)(hipMemGenericAllocationHandle_t)@hipMemRelease",
        "hipError_t (*)(hipMemGenericAllocationHandle_t*, void*)@hipMemRetainAllocationHandle",
        "hipError_t (*)(hipMemAllocationProp*, hipMemGenericAllocationHandle_t)@hipMemGetAllocationPropertiesFromHandle",
        "hipError_t (*)(void*, hipPointer_attribute, hipDeviceptr_t)@hipPointerGetAttribute",
        // Issue 16: the physical identity of a device.
        "hipError_t (*)(char*, int, int)@hipDeviceGetPCIBusId",
        "hipError_t (*)(int*, const char*)@hipDeviceGetByPCIBusId",
        "hipError_t (*)(hipUUID*, hipDevice_t)@hipDeviceGetUuid",
        // Issue 25: what AMD's VMM tests call first.
        "hipError_t (*)(hipDevice_t*, int)@hipDeviceGet",
        "hipError_t (*)(int*, hipDeviceAttribute_t, int)@hipDeviceGetAttribute",
        "hipError_t (*)(hipDeviceptr_t, void*, size_t)@hipMemcpyHtoD",
        "hipError_t (*)(void*, hipDeviceptr_t, size_t)@hipMemcpyDtoH",
    ] {
        let (ty, name) = proto.split_once('@').unwrap();
        tu.push_str(&format!(
            "static_assert(std::is_same<decltype(&{name}), {ty}>::value, \"{name}\");\n"
        ));
    }
    tu
}

#[test]
fn vmm_declarations_match_the_installed_hip_header() {
    if !Path::new(HEADER).exists() {
        devipc_testkit::skip(
            "the VMM declarations against the HIP header",
            &format!("{HEADER} missing (apt-get install libamdhip64-dev)"),
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("devipc-hip-sys-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tu = dir.join("vmm.cpp");
    std::fs::write(&tu, translation_unit()).unwrap();
    let out = Command::new("g++")
        .args(["-std=c++17", "-fsyntax-only", "-D__HIP_PLATFORM_AMD__"])
        .arg(&tu)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            devipc_testkit::skip(
                "the VMM declarations against the HIP header",
                &format!("cannot run g++: {e}"),
            );
            return;
        }
    };
    assert!(
        out.status.success(),
        "the VMM declarations differ from {HEADER}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
