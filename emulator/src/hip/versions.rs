//! Where the emulated HIP version changes an answer: one function per change, each with
//! the release that first shipped it and the evidence, so codes and checks follow
//! `DEVIPC_EMU_HIP_VERSION` ([`crate::config::HipVersion`]) instead of always being those
//! of the newest runtime.
//!
//! The baseline is Debian's ROCm 5.2.3 (`libamdhip64.so.5.2.21153`, built from the 2022
//! hipamd/rocclr sources): `hipIpcGetMemHandle` of a pointer the runtime cannot export
//! returns `hipErrorInvalidDevicePointer` (hipamd `hip_memory.cpp`: `IpcCreate` failure ->
//! `HIP_RETURN(hipErrorInvalidDevicePointer)`), `hipIpcCloseMemHandle` of memory that was
//! not opened returns `hipErrorInvalidHandle` (`IpcDetach` failure), `hipMemGetAddressRange`
//! of an unknown pointer returns `hipErrorInvalidDevicePointer`, `hipIpcOpenMemHandle` has
//! no owner check (the 5.2 handle has no `owners_process_id` field), and
//! `hipPointerGetAttributes` of an unknown pointer returns `hipErrorInvalidValue`.
//!
//! The clr repository's first tag is rocm-5.6.0, so a change made in the hipamd era can
//! only be pinned to "5.6.0 or earlier". Where a release is not pinned, the function says
//! which one the emulator assumes and why.

use crate::config::HipVersion;

/// ROCm 5.6: `hipIpcOpenMemHandle` refuses a handle whose `owners_process_id` is the
/// calling process (`hipErrorInvalidContext`), and the IPC calls report a pointer the
/// runtime cannot export or close as `hipErrorInvalidValue`.
///
/// Evidence: clr commit `30e740023` (2022-11-29) added `owners_process_id` to the handle
/// and the check; it is in rocm-5.6.0, the earliest clr tag (api-facts C.1). It answered
/// the hip-tests IPC negative cases merged in ROCm/HIP PR #2880 (2022-11-04: "Verify that
/// opening the handle in the process that created it causes an error", reported failing
/// on the runtime of the day), which also expect `hipErrorInvalidValue` from
/// `hipIpcGetMemHandle` of freed / out-of-bounds memory and from `hipIpcCloseMemHandle`
/// in the exporter (hip-tests `unit/device/hipIpcGetMemHandle.cc`,
/// `hipIpcCloseMemHandle.cc`); ROCm 5.2.3 still returns 17 and 400 there, clr 6.x returns
/// `hipErrorInvalidValue` (`hipamd/src/hip_memory.cpp`). ASSUMPTION: the two code changes
/// shipped with the owner check, in 5.6 (the 2022-11 date would allow 5.5; the first
/// release that provably has them is 5.6.0).
pub(crate) fn clr_ipc_checks(v: HipVersion) -> bool {
    v.at_least(5, 6)
}

/// ROCm 6.0: `hipMemGetAddressRange` of a pointer inside no allocation returns
/// `hipErrorNotFound` (500) instead of `hipErrorInvalidDevicePointer` (17).
///
/// Evidence: the ROCm/HIP catch test `unit/memory/hipMemGetAddressRange.cc` (the tests'
/// home until ROCm 5.5) expects `hipErrorInvalidDevicePointer`; hip-tests expects
/// `hipErrorNotFound`, which clr returns by 2024-06 (ROCm/HIP issue #3531 against ROCm
/// 6.1, "hipErrorInvalidDevicePointer got swapped to hipErrorNotFound at some point") and
/// in 6.2 (api-facts B.3). ASSUMPTION: 6.0, the release that aligned several codes and
/// types with CUDA (`cuMemGetAddressRange` answers `CUDA_ERROR_NOT_FOUND`); 5.6 and 5.7
/// are UNVERIFIED.
pub(crate) fn address_range_not_found(v: HipVersion) -> bool {
    v.at_least(6, 0)
}

/// ROCm 6.0: `hipPointerGetAttributes` of memory the runtime does not know succeeds with
/// `type = hipMemoryTypeUnregistered` and `device = hipInvalidDeviceId`; before, it failed
/// with `hipErrorInvalidValue`. 6.0 is also where the struct's first field became `type`
/// and the `hipMemoryType` values were renumbered.
///
/// Evidence: clr CHANGELOG "HIP 5.7" known issues ("hipPointerGetAttributes could return
/// invalid value in case the input memory pointer was not allocated through any HIP API")
/// and "HIP 6.0" (`memoryType` removed from the union); cupy PR #8335 ("Before ROCm 6.0,
/// hipPointerGetAttributes returns error on unregistered pointers"); ROCm/HIP issue #3057
/// (a malloc pointer "succeeded" on 6.0).
pub(crate) fn pointer_attributes_v6(v: HipVersion) -> bool {
    v.at_least(6, 0)
}

/// ROCm 6.2: `hipGetProcAddress` exists (clr CHANGELOG "HIP 6.2 (For ROCm 6.2)": "Added
/// new HIP APIs - `hipGetProcAddress`"); ROCm 5.2's library has no such symbol (`nm -D`).
pub(crate) fn has_get_proc_address(v: HipVersion) -> bool {
    v.at_least(6, 2)
}

/// ROCm 7.0: `hipStreamWaitEvent` on an interprocess event is a device-side stream wait
/// (`IPCEvent::streamWait` enqueues `ROCCLR_COMMAND_STREAM_WAIT_VALUE` on the event's
/// shared signal) and returns at once. Before, it enqueued a marker whose completion
/// callback (`WaitThenDecrementSignal`) polls the shared signal until the record
/// completes, and waited for that marker on the calling thread
/// (`enqueueStreamWaitCommand` -> `command->awaitCompletion()`), so the call returned only
/// once the stream reached the wait and the event's latest record completed.
///
/// Evidence: clr `hipamd/src/hip_event_ipc.cpp` of the rocm-5.6 .. 6.x tags (the marker,
/// the callback, `awaitCompletion`); ROCm/clr issue #127 (2025-01, ROCm 6.3: the callback
/// "causes the CPU to not be able to queue further GPU work ahead"), answered by clr commit
/// `721c5800` in amd-staging on 2025-04-14; the stream-wait-value version of
/// `IPCEvent::streamWait` in later clr sources. ASSUMPTION: the change first shipped in
/// 7.0, the first release branched after that commit (6.4.0 was released the same week).
pub(crate) fn ipc_stream_wait_on_device(v: HipVersion) -> bool {
    v.at_least(7, 0)
}

/// ROCm 5.1: the VMM family exists (`hipMemCreate` .. `hipMemSetAccess` are `@@hip_5.1` in
/// ROCm 5.2's `libamdhip64.so.5`, `nm -D`), and `hipPointerGetAttribute` (`@@hip_5.0`).
/// Below, the table's fields are `None`, as for a real runtime without the symbols.
pub(crate) fn has_vmm(v: HipVersion) -> bool {
    v.at_least(5, 1)
}

/// ROCm 5.3: `hipMemAllocationProp` has its current layout (type, requestedHandleType,
/// location, win32HandleMetaData, allocFlags); ROCm 5.2 lays it out as compressionType,
/// location, requestedHandleType, type, usage, win32HandleMetaData. The emulator reads and
/// writes the caller's struct in the emulated version's layout.
///
/// Evidence: upstream ROCm/HIP commit `d267eb7d6` (2022-05-09, "SWDEV-322620 - Virtual
/// Memory Management APIs"), first in rocm-5.3.0; Debian's 5.2.3 header has the old layout
/// (api-facts B.4; checked by devipc-hip-sys's `headers` test).
pub(crate) fn prop_layout_current(v: HipVersion) -> bool {
    v.at_least(5, 3)
}

/// ROCm 6.2: VMM IPC works. `hipMemExportToShareableHandle` writes a dma-buf fd and
/// `hipMemImportFromShareableHandle` imports one; before, the export validates its
/// arguments and returns `hipErrorNotSupported` (hipamd of the 5.2 era and clr rocm-5.6.0
/// .. rocm-6.1.2), and so, having nothing to import, does the emulator's import.
///
/// Evidence: clr commit `56ebf5157` (2024-03-20, "SWDEV-413997 - VMM IPC implementation
/// for Linux"), first shipped in rocm-6.2.0 (api-facts B.4).
pub(crate) fn vmm_ipc(v: HipVersion) -> bool {
    v.at_least(6, 2)
}

/// ROCm 7.1.0: `hipMemImportFromShareableHandle` reads its `void* osHandle` as the fd
/// value (`(int)(uintptr_t)osHandle`, the CUDA convention); 6.2 .. 7.0.x read
/// `*(int*)osHandle`.
///
/// Evidence: field notes 2026-11 (MoRI `include/mori/utils/hip_compat.hpp` switches on
/// 7.1.0; rocm-systems PR #759), settling api-facts D.9; rocm-systems CLR
/// `ImportShareableHSAHandle` reads the value.
pub(crate) fn import_fd_by_value(v: HipVersion) -> bool {
    v.at_least(7, 1)
}

/// ROCm 7.12: `hipPointerGetAttribute(HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE)`
/// answers (1 for `hipMalloc` memory, 0 for VMM and host memory); before, the attribute
/// is declared but "not supported in HIP" (HIP 5.2 `driver_types.h`) and the call returns
/// `hipErrorNotSupported`.
///
/// Evidence: RCCL queries the attribute only when `HIP_VERSION >= 71260540` (7.12; field
/// notes 2026-11, RCCL `ipcRegisterBuffer` tests), and its test for older runtimes expects
/// the query to fail. ASSUMPTION: the failure code before 7.12 is
/// `hipErrorNotSupported` (UNVERIFIED; the old CLR's switch has no case for it).
pub(crate) fn legacy_ipc_attribute(v: HipVersion) -> bool {
    v.at_least(7, 12)
}

/// ROCm 5.3: `hipDeviceGetAttribute` knows
/// `hipDeviceAttributeVirtualMemoryManagementSupported` (89); before, its switch has no such
/// case and answers `hipErrorInvalidValue`.
///
/// Evidence: Debian's ROCm 5.2.3 `hip_runtime_api.h` ends the CUDA-compatible attributes at
/// `hipDeviceAttributeMemoryPoolsSupported` (88); the HIP 5.4 bindings (`hip-runtime-sys`)
/// and every later header have the VMM attribute at 89. ASSUMPTION: it came with the VMM
/// API rework of upstream commit `d267eb7d6` (2022-05-09, first in rocm-5.3.0), like the
/// current `hipMemAllocationProp` layout.
pub(crate) fn vmm_attribute(v: HipVersion) -> bool {
    v.at_least(5, 3)
}

/// ROCm 7.12: `hipMemSetAccess` accepts a `hipMemLocationTypeHost` descriptor (CPU access
/// to VMM memory, `location.id` ignored); before, a location that is no device is
/// `hipErrorInvalidValue`.
///
/// Evidence: rocm-systems CLR `projects/clr/hipamd/src/hip_vm.cpp` (`hipMemSetAccess`
/// takes the Device, Host, HostNuma and HostNumaCurrent location types); RCCL's
/// `dev_runtime` tests: "hipMemLocationTypeHost / ...HostNuma only exist from ROCm 7.12
/// (hip/driver_types.h); below that the enum stops at Device". An earlier CLR step
/// (ROCm/clr amd-staging `hip_vm.cpp`) took a host descriptor only for host-located
/// allocations; ASSUMPTION: no release the emulator models shipped that step (the
/// enumerator it needs first appears in 7.12's headers).
pub(crate) fn host_access_descriptor(v: HipVersion) -> bool {
    v.at_least(7, 12)
}

/// `HIP_VISIBLE_DEVICES` / `CUDA_VISIBLE_DEVICES` entries may name a device by UUID
/// (`GPU-...`): CLR `rocdevice.cpp` of the 6.x/7.x line converts them to an index; the
/// 5.x line's `Device::init` has no such code. The release that added it is UNVERIFIED;
/// the emulator assumes 6.0.
pub(crate) fn uuid_in_hip_visible_devices(v: HipVersion) -> bool {
    v.at_least(6, 0)
}

/// `hipDeviceGetUuid` is exported from ROCm 5.1 (`@@hip_5.1` in 5.2's library, like the
/// VMM family).
pub(crate) fn has_device_uuid(v: HipVersion) -> bool {
    v.at_least(5, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> HipVersion {
        HipVersion::parse(text).unwrap()
    }

    #[test]
    fn cut_offs() {
        for (text, ipc, range, attrs, proc) in [
            ("5.2", false, false, false, false),
            ("5.5", false, false, false, false),
            ("5.6", true, false, false, false),
            ("5.7", true, false, false, false),
            ("6.0", true, true, true, false),
            ("6.1", true, true, true, false),
            ("6.2", true, true, true, true),
            ("7.0", true, true, true, true),
        ] {
            let on_device = text == "7.0";
            assert_eq!(ipc_stream_wait_on_device(v(text)), on_device, "{text}");
            let version = v(text);
            assert_eq!(clr_ipc_checks(version), ipc, "{text}");
            assert_eq!(address_range_not_found(version), range, "{text}");
            assert_eq!(pointer_attributes_v6(version), attrs, "{text}");
            assert_eq!(has_get_proc_address(version), proc, "{text}");
        }
    }

    #[test]
    fn vmm_cut_offs() {
        // (version, has_vmm, current prop layout, ipc, fd by value, legacy-ipc attribute)
        for (text, vmm, layout, ipc, by_value, attr) in [
            ("5.0", false, false, false, false, false),
            ("5.2", true, false, false, false, false),
            ("5.3", true, true, false, false, false),
            ("6.1", true, true, false, false, false),
            ("6.2", true, true, true, false, false),
            ("7.0", true, true, true, false, false),
            ("7.1", true, true, true, true, false),
            ("7.12", true, true, true, true, true),
        ] {
            let version = v(text);
            assert_eq!(has_vmm(version), vmm, "{text}");
            assert_eq!(prop_layout_current(version), layout, "{text}");
            assert_eq!(vmm_ipc(version), ipc, "{text}");
            assert_eq!(import_fd_by_value(version), by_value, "{text}");
            assert_eq!(legacy_ipc_attribute(version), attr, "{text}");
            assert_eq!(host_access_descriptor(version), attr, "{text}");
            assert_eq!(vmm_attribute(version), layout, "{text}");
        }
    }
}
