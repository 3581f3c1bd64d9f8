//! HIP numeric constants devipc needs: flags, copy kinds and every `hipError_t` value.
//!
//! Values are copied from the HIP 5.2 headers (Debian `libamdhip64-dev 5.2.3`) and the
//! upstream ROCm 6.x/7.x headers (api-facts B.2, B.3, B.5). Where the ABI changed between
//! ROCm releases (`hipIpcMemLazyEnablePeerAccess`) both values are here under separate
//! names and [`ipc_mem_lazy_enable_peer_access`] picks one from the runtime version.
//! [`error_name`] is the fallback code-to-name table for when the runtime's own
//! `hipGetErrorName` cannot be used.

use crate::types::{c_uint, hipError_t, hipMemcpyKind};

// ---------------------------------------------------------------------------------------
// Event and stream flags
// ---------------------------------------------------------------------------------------

/// `hipEventDefault`: an event with timing and active (spinning) synchronisation.
pub const hipEventDefault: c_uint = 0x0;
/// `hipEventBlockingSync`: `hipEventSynchronize` blocks the thread instead of spinning.
pub const hipEventBlockingSync: c_uint = 0x1;
/// `hipEventDisableTiming`: no timing data; required together with
/// [`hipEventInterprocess`] (api-facts C.2).
pub const hipEventDisableTiming: c_uint = 0x2;
/// `hipEventInterprocess`: the event can be exported with `hipIpcGetEventHandle`. Must be
/// combined with [`hipEventDisableTiming`], otherwise creation fails with
/// `hipErrorInvalidValue` (api-facts C.2).
pub const hipEventInterprocess: c_uint = 0x4;
/// `hipEventDisableSystemFence`: no system-scope acquire/release fence. Declared and
/// accepted by `hipEventCreateWithFlags` from ROCm 5.6 (hip-tests require
/// `HIP_VERSION >= 5.6` for it); older runtimes reject it as an unknown flag. It counts as
/// a release flag: combined with another one it is `hipErrorInvalidValue`.
pub const hipEventDisableSystemFence: c_uint = 0x2000_0000;
/// `hipEventReleaseToDevice`: release fence scoped to the device.
pub const hipEventReleaseToDevice: c_uint = 0x4000_0000;
/// `hipEventReleaseToSystem`: release fence scoped to the whole system.
pub const hipEventReleaseToSystem: c_uint = 0x8000_0000;

/// `hipStreamDefault`: a stream that synchronises with the null stream.
pub const hipStreamDefault: c_uint = 0x00;
/// `hipStreamNonBlocking`: a stream that does not synchronise with the null stream.
pub const hipStreamNonBlocking: c_uint = 0x01;

// ---------------------------------------------------------------------------------------
// IPC memory open flag: an ABI break between ROCm 5 and 6
// ---------------------------------------------------------------------------------------

/// `hipIpcMemLazyEnablePeerAccess` as defined by ROCm 5.x and earlier headers: `0`.
///
/// `hipIpcOpenMemHandle` compares its `flags` for exact equality with this value, so a
/// 5.x runtime rejects `1` with `hipErrorInvalidValue` (api-facts B.2). Prefer
/// [`ipc_mem_lazy_enable_peer_access`].
pub const hipIpcMemLazyEnablePeerAccess_ROCM5: c_uint = 0;

/// `hipIpcMemLazyEnablePeerAccess` as defined from ROCm 6.0 on (and on HIP-on-NVIDIA):
/// `0x01` (upstream commit `8bb3011cb`, "[ABI Break] changed hipIpcMemLazyEnablePeerAccess
/// flag value"). A 6.x runtime rejects `0` with `hipErrorInvalidValue`. Prefer
/// [`ipc_mem_lazy_enable_peer_access`].
pub const hipIpcMemLazyEnablePeerAccess_ROCM6: c_uint = 0x01;

/// The `hipIpcMemLazyEnablePeerAccess` value the running runtime accepts, chosen from the
/// `HIP_VERSION`-encoded number that `hipRuntimeGetVersion` writes
/// (`major * 10_000_000 + minor * 100_000 + patch`).
///
/// Major version 6 and later get [`hipIpcMemLazyEnablePeerAccess_ROCM6`]; everything
/// below, including nonsense such as 0 or negative numbers, gets
/// [`hipIpcMemLazyEnablePeerAccess_ROCM5`]. Validating the version is the caller's job.
pub const fn ipc_mem_lazy_enable_peer_access(runtime_version: i32) -> c_uint {
    if runtime_version / 10_000_000 >= 6 {
        hipIpcMemLazyEnablePeerAccess_ROCM6
    } else {
        hipIpcMemLazyEnablePeerAccess_ROCM5
    }
}

// ---------------------------------------------------------------------------------------
// hipMemcpyKind
// ---------------------------------------------------------------------------------------

/// `hipMemcpyHostToHost`.
pub const hipMemcpyHostToHost: hipMemcpyKind = 0;
/// `hipMemcpyHostToDevice`.
pub const hipMemcpyHostToDevice: hipMemcpyKind = 1;
/// `hipMemcpyDeviceToHost`.
pub const hipMemcpyDeviceToHost: hipMemcpyKind = 2;
/// `hipMemcpyDeviceToDevice`.
pub const hipMemcpyDeviceToDevice: hipMemcpyKind = 3;
/// `hipMemcpyDefault`: direction inferred from the pointers (unified addressing).
pub const hipMemcpyDefault: hipMemcpyKind = 4;
/// `hipMemcpyDeviceToDeviceNoCU` (ROCm 6.1 and later only; absent in 5.x and 6.0).
pub const hipMemcpyDeviceToDeviceNoCU: hipMemcpyKind = 1024;

// ---------------------------------------------------------------------------------------
// hipError_t
// ---------------------------------------------------------------------------------------

/// Defines one `pub const` per error code and the [`ERRORS`] table from one list.
macro_rules! hip_errors {
    ($( $(#[$doc:meta])* $name:ident = $value:literal, )*) => {
        $(
            $(#[$doc])*
            pub const $name: hipError_t = $value;
        )*

        /// Every `hipError_t` value devipc knows, as `(code, canonical name)`, sorted by
        /// code. Deprecated aliases (e.g. `hipErrorMemoryAllocation`) are not listed; the
        /// canonical name is the one `hipGetErrorName` returns.
        pub const ERRORS: &[(hipError_t, &str)] = &[$( ($value, stringify!($name)), )*];
    };
}

hip_errors! {
    /// `hipSuccess`: the call succeeded.
    hipSuccess = 0,
    /// `hipErrorInvalidValue`: an argument is NULL or out of range.
    hipErrorInvalidValue = 1,
    /// `hipErrorOutOfMemory`: a memory allocation failed.
    hipErrorOutOfMemory = 2,
    /// `hipErrorNotInitialized`: the runtime is not initialised.
    hipErrorNotInitialized = 3,
    /// `hipErrorDeinitialized`: the runtime is shutting down.
    hipErrorDeinitialized = 4,
    /// `hipErrorProfilerDisabled`.
    hipErrorProfilerDisabled = 5,
    /// `hipErrorProfilerNotInitialized`.
    hipErrorProfilerNotInitialized = 6,
    /// `hipErrorProfilerAlreadyStarted`.
    hipErrorProfilerAlreadyStarted = 7,
    /// `hipErrorProfilerAlreadyStopped`.
    hipErrorProfilerAlreadyStopped = 8,
    /// `hipErrorInvalidConfiguration`; also what `hipIpcGetEventHandle` returns for an event
    /// created without `hipEventInterprocess` (api-facts C.2).
    hipErrorInvalidConfiguration = 9,
    /// `hipErrorInvalidPitchValue`.
    hipErrorInvalidPitchValue = 12,
    /// `hipErrorInvalidSymbol`.
    hipErrorInvalidSymbol = 13,
    /// `hipErrorInvalidDevicePointer`; also an IPC attach failure in ROCr (api-facts C.1).
    hipErrorInvalidDevicePointer = 17,
    /// `hipErrorInvalidMemcpyDirection`.
    hipErrorInvalidMemcpyDirection = 21,
    /// `hipErrorInsufficientDriver`.
    hipErrorInsufficientDriver = 35,
    /// `hipErrorMissingConfiguration`.
    hipErrorMissingConfiguration = 52,
    /// `hipErrorPriorLaunchFailure`.
    hipErrorPriorLaunchFailure = 53,
    /// `hipErrorInvalidDeviceFunction`.
    hipErrorInvalidDeviceFunction = 98,
    /// `hipErrorNoDevice`: no HIP-capable device; `hipGetDeviceCount` on a machine without
    /// a GPU returns it (and writes 0).
    hipErrorNoDevice = 100,
    /// `hipErrorInvalidDevice`: a device id outside `0..count`; ROCm 5.2's `hipInit`
    /// returns it on a machine without a GPU.
    hipErrorInvalidDevice = 101,
    /// `hipErrorInvalidImage`.
    hipErrorInvalidImage = 200,
    /// `hipErrorInvalidContext`; also opening an IPC handle in the exporting process
    /// (api-facts C.1, C.2).
    hipErrorInvalidContext = 201,
    /// `hipErrorContextAlreadyCurrent`.
    hipErrorContextAlreadyCurrent = 202,
    /// `hipErrorMapFailed` (alias `hipErrorMapBufferObjectFailed`).
    hipErrorMapFailed = 205,
    /// `hipErrorUnmapFailed`.
    hipErrorUnmapFailed = 206,
    /// `hipErrorArrayIsMapped`.
    hipErrorArrayIsMapped = 207,
    /// `hipErrorAlreadyMapped`.
    hipErrorAlreadyMapped = 208,
    /// `hipErrorNoBinaryForGpu`.
    hipErrorNoBinaryForGpu = 209,
    /// `hipErrorAlreadyAcquired`.
    hipErrorAlreadyAcquired = 210,
    /// `hipErrorNotMapped`.
    hipErrorNotMapped = 211,
    /// `hipErrorNotMappedAsArray`.
    hipErrorNotMappedAsArray = 212,
    /// `hipErrorNotMappedAsPointer`.
    hipErrorNotMappedAsPointer = 213,
    /// `hipErrorECCNotCorrectable`.
    hipErrorECCNotCorrectable = 214,
    /// `hipErrorUnsupportedLimit`.
    hipErrorUnsupportedLimit = 215,
    /// `hipErrorContextAlreadyInUse`.
    hipErrorContextAlreadyInUse = 216,
    /// `hipErrorPeerAccessUnsupported`.
    hipErrorPeerAccessUnsupported = 217,
    /// `hipErrorInvalidKernelFile`.
    hipErrorInvalidKernelFile = 218,
    /// `hipErrorInvalidGraphicsContext`.
    hipErrorInvalidGraphicsContext = 219,
    /// `hipErrorInvalidSource`.
    hipErrorInvalidSource = 300,
    /// `hipErrorFileNotFound`.
    hipErrorFileNotFound = 301,
    /// `hipErrorSharedObjectSymbolNotFound`.
    hipErrorSharedObjectSymbolNotFound = 302,
    /// `hipErrorSharedObjectInitFailed`.
    hipErrorSharedObjectInitFailed = 303,
    /// `hipErrorOperatingSystem`.
    hipErrorOperatingSystem = 304,
    /// `hipErrorInvalidHandle` (alias `hipErrorInvalidResourceHandle`): a bad stream or
    /// event handle.
    hipErrorInvalidHandle = 400,
    /// `hipErrorIllegalState`.
    hipErrorIllegalState = 401,
    /// `hipErrorNotFound`; also `hipMemGetAddressRange` on an unknown pointer (api-facts B.3).
    hipErrorNotFound = 500,
    /// `hipErrorNotReady`: `hipEventQuery` / `hipStreamQuery` while work is pending.
    hipErrorNotReady = 600,
    /// `hipErrorIllegalAddress`.
    hipErrorIllegalAddress = 700,
    /// `hipErrorLaunchOutOfResources`.
    hipErrorLaunchOutOfResources = 701,
    /// `hipErrorLaunchTimeOut`.
    hipErrorLaunchTimeOut = 702,
    /// `hipErrorPeerAccessAlreadyEnabled`.
    hipErrorPeerAccessAlreadyEnabled = 704,
    /// `hipErrorPeerAccessNotEnabled`.
    hipErrorPeerAccessNotEnabled = 705,
    /// `hipErrorSetOnActiveProcess`.
    hipErrorSetOnActiveProcess = 708,
    /// `hipErrorContextIsDestroyed`.
    hipErrorContextIsDestroyed = 709,
    /// `hipErrorAssert`: a kernel called `assert`.
    hipErrorAssert = 710,
    /// `hipErrorHostMemoryAlreadyRegistered`.
    hipErrorHostMemoryAlreadyRegistered = 712,
    /// `hipErrorHostMemoryNotRegistered`.
    hipErrorHostMemoryNotRegistered = 713,
    /// `hipErrorLaunchFailure`.
    hipErrorLaunchFailure = 719,
    /// `hipErrorCooperativeLaunchTooLarge`.
    hipErrorCooperativeLaunchTooLarge = 720,
    /// `hipErrorNotSupported`.
    hipErrorNotSupported = 801,
    /// `hipErrorStreamCaptureUnsupported`.
    hipErrorStreamCaptureUnsupported = 900,
    /// `hipErrorStreamCaptureInvalidated`.
    hipErrorStreamCaptureInvalidated = 901,
    /// `hipErrorStreamCaptureMerge`.
    hipErrorStreamCaptureMerge = 902,
    /// `hipErrorStreamCaptureUnmatched`.
    hipErrorStreamCaptureUnmatched = 903,
    /// `hipErrorStreamCaptureUnjoined`.
    hipErrorStreamCaptureUnjoined = 904,
    /// `hipErrorStreamCaptureIsolation`.
    hipErrorStreamCaptureIsolation = 905,
    /// `hipErrorStreamCaptureImplicit`.
    hipErrorStreamCaptureImplicit = 906,
    /// `hipErrorCapturedEvent`.
    hipErrorCapturedEvent = 907,
    /// `hipErrorStreamCaptureWrongThread`.
    hipErrorStreamCaptureWrongThread = 908,
    /// `hipErrorGraphExecUpdateFailure`.
    hipErrorGraphExecUpdateFailure = 910,
    /// `hipErrorInvalidChannelDescriptor` (added after ROCm 6.2; older runtimes name it
    /// `hipErrorUnknown`).
    hipErrorInvalidChannelDescriptor = 911,
    /// `hipErrorInvalidTexture` (added after ROCm 6.2).
    hipErrorInvalidTexture = 912,
    /// `hipErrorInvalidResourceType` (HIP 7).
    hipErrorInvalidResourceType = 914,
    /// `hipErrorInvalidResourceConfiguration` (HIP 7).
    hipErrorInvalidResourceConfiguration = 915,
    /// `hipErrorStreamDetached` (HIP 7).
    hipErrorStreamDetached = 916,
    /// `hipErrorUnknown`; also what `hipGetErrorName` says for any code it does not know.
    hipErrorUnknown = 999,
    /// `hipErrorRuntimeMemory`: an HSA runtime memory call failed.
    hipErrorRuntimeMemory = 1052,
    /// `hipErrorRuntimeOther`: another HSA runtime call failed.
    hipErrorRuntimeOther = 1053,
    /// `hipErrorInvalidClusterSize` (HIP 7). In ROCm 5.x and 6.x, 1054 is the
    /// `hipErrorTbd` end-of-enum marker, which no API returns; that marker has no
    /// constant here because its value moved in HIP 7.
    hipErrorInvalidClusterSize = 1054,
}

/// `hipErrorMemoryAllocation`: deprecated alias of [`hipErrorOutOfMemory`].
pub const hipErrorMemoryAllocation: hipError_t = hipErrorOutOfMemory;
/// `hipErrorInitializationError`: deprecated alias of [`hipErrorNotInitialized`].
pub const hipErrorInitializationError: hipError_t = hipErrorNotInitialized;
/// `hipErrorMapBufferObjectFailed`: deprecated alias of [`hipErrorMapFailed`].
pub const hipErrorMapBufferObjectFailed: hipError_t = hipErrorMapFailed;
/// `hipErrorInvalidResourceHandle`: deprecated alias of [`hipErrorInvalidHandle`].
pub const hipErrorInvalidResourceHandle: hipError_t = hipErrorInvalidHandle;

/// The canonical symbolic name of a `hipError_t` code, e.g. `hipErrorInvalidContext` for
/// 201, or `None` for a code no known HIP version defines.
///
/// A fallback table: prefer the runtime's own `hipGetErrorName`, which knows the codes of
/// its version. The names agree with ROCm 5.2's `hipGetErrorName` for every code that
/// version defines (checked by the `real_runtime` test); 911-916 are newer (a 5.2 runtime
/// calls them `hipErrorUnknown`) and 1054 is HIP 7's `hipErrorInvalidClusterSize` (a
/// 5.x/6.x runtime calls its end-of-enum marker `hipErrorTbd`).
pub fn error_name(code: hipError_t) -> Option<&'static str> {
    ERRORS
        .binary_search_by_key(&code, |&(c, _)| c)
        .ok()
        .map(|i| ERRORS[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_peer_access_flag_follows_the_runtime_major_version() {
        let table: &[(i32, c_uint)] = &[
            (50221153, 0), // Debian 12 ROCm 5.2.3
            (50422804, 0), // hip-sys bindings' HIP 5.4
            (50731921, 0), // 5.7.1
            (59999999, 0),
            (60000000, 1), // 6.0.0
            (60032830, 1),
            (60200000, 1), // 6.2
            (70000000, 1), // 7.0
            (70251234, 1),
            (40200000, 0),
            (0, 0),
            (-1, 0),
            (-60000000, 0),
            (i32::MAX, 1),
        ];
        for &(version, flag) in table {
            assert_eq!(
                ipc_mem_lazy_enable_peer_access(version),
                flag,
                "version {version}"
            );
        }
        assert_eq!(hipIpcMemLazyEnablePeerAccess_ROCM5, 0);
        assert_eq!(hipIpcMemLazyEnablePeerAccess_ROCM6, 1);
    }

    #[test]
    fn error_table_is_sorted_and_unique() {
        for pair in ERRORS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{pair:?}");
        }
        let mut names: Vec<_> = ERRORS.iter().map(|&(_, n)| n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ERRORS.len());
        assert!(ERRORS.iter().all(|&(_, n)| n.starts_with("hip")));
    }

    #[test]
    fn error_names() {
        let table: &[(hipError_t, Option<&str>)] = &[
            (0, Some("hipSuccess")),
            (1, Some("hipErrorInvalidValue")),
            (2, Some("hipErrorOutOfMemory")),
            (3, Some("hipErrorNotInitialized")),
            (9, Some("hipErrorInvalidConfiguration")),
            (17, Some("hipErrorInvalidDevicePointer")),
            (100, Some("hipErrorNoDevice")),
            (101, Some("hipErrorInvalidDevice")),
            (201, Some("hipErrorInvalidContext")),
            (205, Some("hipErrorMapFailed")),
            (400, Some("hipErrorInvalidHandle")),
            (500, Some("hipErrorNotFound")),
            (600, Some("hipErrorNotReady")),
            (704, Some("hipErrorPeerAccessAlreadyEnabled")),
            (705, Some("hipErrorPeerAccessNotEnabled")),
            (801, Some("hipErrorNotSupported")),
            (908, Some("hipErrorStreamCaptureWrongThread")),
            (916, Some("hipErrorStreamDetached")),
            (999, Some("hipErrorUnknown")),
            (1053, Some("hipErrorRuntimeOther")),
            (1054, Some("hipErrorInvalidClusterSize")),
            // Gaps and nonsense.
            (10, None),
            (711, None), // cudaErrorTooManyPeers has no HIP equivalent
            (913, None),
            (1055, None),
            (-1, None),
            (i32::MIN, None),
        ];
        for &(code, name) in table {
            assert_eq!(error_name(code), name, "code {code}");
        }
    }

    #[test]
    fn aliases_share_the_canonical_code() {
        assert_eq!(hipErrorMemoryAllocation, 2);
        assert_eq!(hipErrorInitializationError, 3);
        assert_eq!(hipErrorMapBufferObjectFailed, 205);
        assert_eq!(hipErrorInvalidResourceHandle, 400);
        assert_eq!(
            error_name(hipErrorInvalidResourceHandle),
            Some("hipErrorInvalidHandle")
        );
    }

    #[test]
    fn flag_values() {
        assert_eq!(hipEventInterprocess | hipEventDisableTiming, 0x6);
        assert_eq!(hipEventReleaseToSystem, 0x8000_0000);
        assert_eq!(hipStreamNonBlocking, 1);
        assert_eq!(hipMemcpyHostToDevice, 1);
        assert_eq!(hipMemcpyDeviceToHost, 2);
    }
}
