//! Link mode (feature `link`): [`HipApi::linked`] fills the table from `extern "C"`
//! declarations of the list, resolved by the linker against `libamdhip64`, and
//! `link_abi_check` proves at compile time that every prototype matches `hip-sys`'s.
//!
//! The declarations use this crate's types rather than `hip-sys`'s: `hip-sys` returns
//! `hipError_t` as a Rust enum generated from the HIP 5.4 headers, and a runtime returning
//! a code that enum lacks (ROCm 6.x/7.x added several) would be undefined behaviour.
//! `hip-sys`'s build script emits `-l amdhip64` and the search path (`$HIP_PATH/lib`);
//! the `#[link]` attribute on the block keeps the dependency explicit.

use crate::HipApi;
#[allow(unused_imports)] // the optional functions' types, in `linked()`
use crate::types::*;

/// `extern "C"` declarations of every required function of the list (the optional ones
/// may be missing from the linked runtime and are looked up at run time).
mod externs {
    #[allow(unused_imports)]
    use crate::types::*;

    crate::for_each_hip_fn!(devipc_sys_common::declare_linked_fns; "amdhip64");
}

impl HipApi {
    /// The table of the HIP runtime linked into this binary at build time, with
    /// [`LibrarySource::Linked`](devipc_core::LibrarySource::Linked).
    ///
    /// Needs feature `link`, which links against `libamdhip64` through the `hip-sys` crate
    /// and checks every prototype of the list against `hip-sys`'s declarations at compile
    /// time. The optional functions are looked up in the process, `None` when the linked
    /// runtime lacks them.
    pub fn linked() -> Self {
        crate::for_each_hip_fn!(devipc_sys_common::linked_table; crate::HipApi; externs)
    }
}

/// Compile-time ABI check of the list against `hip-sys` (feature `link`).
///
/// The list is expanded a second time with the names it uses bound to `hip-sys`'s types
/// (`hipError_t`, `hipMemcpyKind`, `hipStream_t`, `hipEvent_t`, `hipDeviceptr_t`,
/// `hipIpcMemHandle_t`, `hipIpcEventHandle_t`, `hipUUID`, ... from `hip_sys::hiprt`; `c_int`, `c_uint`,
/// `c_char`, `c_void` and `usize` are the same Rust types in both crates), and each
/// `hip_sys::hiprt::<name>` is assigned to a function pointer of the resulting type
/// without any cast. A different parameter count, order, pointer level, constness or type
/// does not compile. What remains is that each same-named type pair is the same C type,
/// asserted below: identical layouts for the structs and pointers, and for the two C
/// enums (a `#[repr(u32)]` Rust enum in `hip-sys`, `c_int` here) the same size and
/// alignment, which the C ABI passes and returns identically.
#[cfg(feature = "link")]
mod link_abi_check {
    #![allow(unused_imports)]
    use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
    use hip_sys::hiprt::{
        hipCtx_t, hipDevice_t, hipDeviceAttribute_t, hipDeviceptr_t, hipError_t, hipEvent_t,
        hipIpcEventHandle_t, hipIpcMemHandle_t, hipMemAccessDesc,
        hipMemAllocationGranularity_flags, hipMemAllocationHandleType, hipMemAllocationProp,
        hipMemGenericAllocationHandle_t, hipMemLocation, hipMemcpyKind, hipPointer_attribute,
        hipPointerAttribute_t, hipStream_t, hipUUID,
    };

    macro_rules! check_against_hip_sys {
        (
            []
            required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
            optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            $( const _: unsafe extern "C" fn($($rty),*) -> $rret = hip_sys::hiprt::$rname; )*
            $( check_optional!($oname; unsafe extern "C" fn($($oty),*) -> $oret); )*
        };
    }

    /// One optional function: checked like the required ones when hip-sys (HIP 5.4
    /// headers) declares it, which holds for the VMM family and `hipPointerGetAttribute`.
    macro_rules! check_optional {
        // Newer than hip-sys's HIP 5.4 headers (ROCm 6.2), so hip-sys has nothing to check
        // it against; its prototype comes from the 6.2 header (clr
        // hip_device_runtime.cpp).
        (hipGetProcAddress; $fn_ty:ty) => {};
        // HIP 7.1 (issue 25), also newer than hip-sys.
        (hipMemcpyBatchAsync; $fn_ty:ty) => {};
        ($name:ident; $fn_ty:ty) => {
            const _: $fn_ty = hip_sys::hiprt::$name;
        };
    }

    crate::for_each_hip_fn!(check_against_hip_sys);

    /// Same size and alignment.
    const fn same_layout<A, B>() -> bool {
        size_of::<A>() == size_of::<B>() && align_of::<A>() == align_of::<B>()
    }

    const _: () = {
        use crate::types as ours;
        assert!(same_layout::<hipError_t, ours::hipError_t>());
        assert!(same_layout::<hipMemcpyKind, ours::hipMemcpyKind>());
        assert!(same_layout::<hipStream_t, ours::hipStream_t>());
        assert!(same_layout::<hipEvent_t, ours::hipEvent_t>());
        assert!(same_layout::<hipIpcMemHandle_t, ours::hipIpcMemHandle_t>());
        assert!(same_layout::<hipIpcEventHandle_t, ours::hipIpcEventHandle_t>());
        assert!(same_layout::<hipCtx_t, ours::hipCtx_t>());
        assert!(same_layout::<hipDevice_t, ours::hipDevice_t>());
        // Issue 16: `hipDeviceGetUuid`'s out-parameter, 16 `char`s in both.
        assert!(same_layout::<hipUUID, ours::hipUUID>());
        // hip-sys's 5.4 struct: `memoryType` (a 4-byte C enum) where ours has `type`; the
        // other fields and the size are the same (a 32-byte struct either way).
        assert!(same_layout::<
            hipPointerAttribute_t,
            ours::hipPointerAttribute_t,
        >());
        assert!(
            core::mem::offset_of!(hipPointerAttribute_t, allocationFlags)
                == core::mem::offset_of!(ours::hipPointerAttribute_t, allocationFlags)
        );
        assert!(size_of::<hipIpcMemHandle_t>() == ours::HIP_IPC_HANDLE_SIZE);
        assert!(size_of::<hipIpcEventHandle_t>() == ours::HIP_IPC_HANDLE_SIZE);
        // `hipDeviceptr_t` is `*mut c_void` in both: the same Rust type.
        let _: fn(hipDeviceptr_t) -> ours::hipDeviceptr_t = |p| p;
        // VMM (issue 15). hip-sys has the ROCm 5.3+ `hipMemAllocationProp` layout, the one
        // the table uses; the 5.2 layout is checked against Debian's header instead
        // (tests/hip_sys/headers.rs).
        assert!(same_layout::<
            hipMemGenericAllocationHandle_t,
            ours::hipMemGenericAllocationHandle_t,
        >());
        assert!(same_layout::<hipMemLocation, ours::hipMemLocation>());
        assert!(same_layout::<hipMemAccessDesc, ours::hipMemAccessDesc>());
        assert!(same_layout::<
            hipMemAllocationProp,
            ours::hipMemAllocationProp,
        >());
        assert!(
            core::mem::offset_of!(hipMemAllocationProp, requestedHandleType)
                == core::mem::offset_of!(ours::hipMemAllocationProp, requestedHandleType)
        );
        assert!(
            core::mem::offset_of!(hipMemAllocationProp, location)
                == core::mem::offset_of!(ours::hipMemAllocationProp, location)
        );
        assert!(
            core::mem::offset_of!(hipMemAllocationProp, win32HandleMetaData)
                == core::mem::offset_of!(ours::hipMemAllocationProp, win32HandleMetaData)
        );
        assert!(
            core::mem::offset_of!(hipMemAllocationProp, allocFlags)
                == core::mem::offset_of!(ours::hipMemAllocationProp, allocFlags)
        );
        assert!(
            core::mem::offset_of!(hipMemAccessDesc, flags)
                == core::mem::offset_of!(ours::hipMemAccessDesc, flags)
        );
        assert!(same_layout::<
            hipMemAllocationHandleType,
            ours::hipMemAllocationHandleType,
        >());
        assert!(same_layout::<
            hipMemAllocationGranularity_flags,
            ours::hipMemAllocationGranularity_flags,
        >());
        assert!(same_layout::<
            hipPointer_attribute,
            ours::hipPointer_attribute,
        >());
        assert!(same_layout::<c_ulonglong, ours::c_ulonglong>());
        // Issue 25: `hipDeviceGetAttribute`'s attribute, a 4-byte C enum in both.
        assert!(same_layout::<
            hipDeviceAttribute_t,
            ours::hipDeviceAttribute_t,
        >());
    };

    /// Asserts that each named constant has the same value in `hip-sys` and here.
    macro_rules! same_values {
        ($( $prefix:ident :: $name:ident ),* $(,)?) => {
            const _: () = {
                $( assert!(same_values!(@value $prefix :: $name) == crate::consts::$name as i64); )*
            };
        };
        (@value hipError_t :: $name:ident) => { hip_sys::hiprt::hipError_t::$name as i64 };
        (@value hipMemcpyKind :: $name:ident) => { hip_sys::hiprt::hipMemcpyKind::$name as i64 };
        (@value hiprt :: $name:ident) => { hip_sys::hiprt::$name as i64 };
        (@value $enum:ident :: $name:ident) => { hip_sys::hiprt::$enum::$name as i64 };
    }

    // Every error code hip-sys (HIP 5.4 headers) knows; it lacks 911-916, and its 1054 is
    // the `hipErrorTbd` marker, which this crate deliberately does not define.
    same_values!(
        hipError_t::hipSuccess,
        hipError_t::hipErrorInvalidValue,
        hipError_t::hipErrorOutOfMemory,
        hipError_t::hipErrorNotInitialized,
        hipError_t::hipErrorDeinitialized,
        hipError_t::hipErrorProfilerDisabled,
        hipError_t::hipErrorProfilerNotInitialized,
        hipError_t::hipErrorProfilerAlreadyStarted,
        hipError_t::hipErrorProfilerAlreadyStopped,
        hipError_t::hipErrorInvalidConfiguration,
        hipError_t::hipErrorInvalidPitchValue,
        hipError_t::hipErrorInvalidSymbol,
        hipError_t::hipErrorInvalidDevicePointer,
        hipError_t::hipErrorInvalidMemcpyDirection,
        hipError_t::hipErrorInsufficientDriver,
        hipError_t::hipErrorMissingConfiguration,
        hipError_t::hipErrorPriorLaunchFailure,
        hipError_t::hipErrorInvalidDeviceFunction,
        hipError_t::hipErrorNoDevice,
        hipError_t::hipErrorInvalidDevice,
        hipError_t::hipErrorInvalidImage,
        hipError_t::hipErrorInvalidContext,
        hipError_t::hipErrorContextAlreadyCurrent,
        hipError_t::hipErrorMapFailed,
        hipError_t::hipErrorUnmapFailed,
        hipError_t::hipErrorArrayIsMapped,
        hipError_t::hipErrorAlreadyMapped,
        hipError_t::hipErrorNoBinaryForGpu,
        hipError_t::hipErrorAlreadyAcquired,
        hipError_t::hipErrorNotMapped,
        hipError_t::hipErrorNotMappedAsArray,
        hipError_t::hipErrorNotMappedAsPointer,
        hipError_t::hipErrorECCNotCorrectable,
        hipError_t::hipErrorUnsupportedLimit,
        hipError_t::hipErrorContextAlreadyInUse,
        hipError_t::hipErrorPeerAccessUnsupported,
        hipError_t::hipErrorInvalidKernelFile,
        hipError_t::hipErrorInvalidGraphicsContext,
        hipError_t::hipErrorInvalidSource,
        hipError_t::hipErrorFileNotFound,
        hipError_t::hipErrorSharedObjectSymbolNotFound,
        hipError_t::hipErrorSharedObjectInitFailed,
        hipError_t::hipErrorOperatingSystem,
        hipError_t::hipErrorInvalidHandle,
        hipError_t::hipErrorIllegalState,
        hipError_t::hipErrorNotFound,
        hipError_t::hipErrorNotReady,
        hipError_t::hipErrorIllegalAddress,
        hipError_t::hipErrorLaunchOutOfResources,
        hipError_t::hipErrorLaunchTimeOut,
        hipError_t::hipErrorPeerAccessAlreadyEnabled,
        hipError_t::hipErrorPeerAccessNotEnabled,
        hipError_t::hipErrorSetOnActiveProcess,
        hipError_t::hipErrorContextIsDestroyed,
        hipError_t::hipErrorAssert,
        hipError_t::hipErrorHostMemoryAlreadyRegistered,
        hipError_t::hipErrorHostMemoryNotRegistered,
        hipError_t::hipErrorLaunchFailure,
        hipError_t::hipErrorCooperativeLaunchTooLarge,
        hipError_t::hipErrorNotSupported,
        hipError_t::hipErrorStreamCaptureUnsupported,
        hipError_t::hipErrorStreamCaptureInvalidated,
        hipError_t::hipErrorStreamCaptureMerge,
        hipError_t::hipErrorStreamCaptureUnmatched,
        hipError_t::hipErrorStreamCaptureUnjoined,
        hipError_t::hipErrorStreamCaptureIsolation,
        hipError_t::hipErrorStreamCaptureImplicit,
        hipError_t::hipErrorCapturedEvent,
        hipError_t::hipErrorStreamCaptureWrongThread,
        hipError_t::hipErrorGraphExecUpdateFailure,
        hipError_t::hipErrorUnknown,
        hipError_t::hipErrorRuntimeMemory,
        hipError_t::hipErrorRuntimeOther,
        hipError_t::hipErrorMemoryAllocation,
        hipError_t::hipErrorInitializationError,
        hipError_t::hipErrorMapBufferObjectFailed,
        hipError_t::hipErrorInvalidResourceHandle,
        hipMemcpyKind::hipMemcpyHostToHost,
        hipMemcpyKind::hipMemcpyHostToDevice,
        hipMemcpyKind::hipMemcpyDeviceToHost,
        hipMemcpyKind::hipMemcpyDeviceToDevice,
        hipMemcpyKind::hipMemcpyDefault,
        hiprt::hipEventDefault,
        hiprt::hipEventBlockingSync,
        hiprt::hipEventDisableTiming,
        hiprt::hipEventInterprocess,
        hiprt::hipEventReleaseToDevice,
        hiprt::hipEventReleaseToSystem,
        hiprt::hipStreamDefault,
        hiprt::hipStreamNonBlocking,
        hipMemLocationType::hipMemLocationTypeInvalid,
        hipMemLocationType::hipMemLocationTypeDevice,
        hipMemAccessFlags::hipMemAccessFlagsProtNone,
        hipMemAccessFlags::hipMemAccessFlagsProtRead,
        hipMemAccessFlags::hipMemAccessFlagsProtReadWrite,
        hipMemAllocationType::hipMemAllocationTypeInvalid,
        hipMemAllocationType::hipMemAllocationTypePinned,
        hipMemAllocationType::hipMemAllocationTypeMax,
        hipMemAllocationHandleType::hipMemHandleTypeNone,
        hipMemAllocationHandleType::hipMemHandleTypePosixFileDescriptor,
        hipMemAllocationHandleType::hipMemHandleTypeWin32,
        hipMemAllocationHandleType::hipMemHandleTypeWin32Kmt,
        hipMemAllocationGranularity_flags::hipMemAllocationGranularityMinimum,
        hipMemAllocationGranularity_flags::hipMemAllocationGranularityRecommended,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_MEMORY_TYPE,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_DEVICE_POINTER,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_RANGE_SIZE,
        hipPointer_attribute::HIP_POINTER_ATTRIBUTE_MAPPED,
    );

    const _: () = {
        assert!(hip_sys::hiprt::HIP_IPC_HANDLE_SIZE as usize == crate::types::HIP_IPC_HANDLE_SIZE);
        // hip-sys was generated from HIP 5.4 headers (`HIP_VERSION` 50422804), where the
        // flag is 0; the version-based choice must agree with the header of that version.
        assert!(hip_sys::hiprt::HIP_VERSION_MAJOR == 5);
        assert!(
            hip_sys::hiprt::hipIpcMemLazyEnablePeerAccess
                == crate::consts::ipc_mem_lazy_enable_peer_access(
                    hip_sys::hiprt::HIP_VERSION as i32
                )
        );
    };
}
