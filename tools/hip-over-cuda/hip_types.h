/*
 * The HIP C types, constants and error codes the hip-over-cuda shim needs, written from
 * devipc's own Rust definitions (backend-hip/sys/src/types.rs and consts.rs), not from
 * any vendor header. Only what devipc's HIP function list (backend-hip/sys/src/list.rs)
 * passes across the ABI is here.
 *
 * The error codes and names are checked against devipc_hip_sys::ERRORS, and the other
 * constants against devipc's, by backend-hip/sys/tests/hip_sys/shim_coverage.rs; the
 * struct layouts by the _Static_asserts at the end (the sizes and offsets devipc's
 * types.rs asserts).
 */
#ifndef DEVIPC_HIP_TYPES_H
#define DEVIPC_HIP_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* ----- hipError_t (consts.rs hip_errors!) ----------------------------------------- */

/* HOC_HIP_ERRORS(X): every code devipc knows, X(name, value), sorted by value. */
#define HOC_HIP_ERRORS(X)                                                              \
    X(hipSuccess, 0)                                                                   \
    X(hipErrorInvalidValue, 1)                                                         \
    X(hipErrorOutOfMemory, 2)                                                          \
    X(hipErrorNotInitialized, 3)                                                       \
    X(hipErrorDeinitialized, 4)                                                        \
    X(hipErrorProfilerDisabled, 5)                                                     \
    X(hipErrorProfilerNotInitialized, 6)                                               \
    X(hipErrorProfilerAlreadyStarted, 7)                                               \
    X(hipErrorProfilerAlreadyStopped, 8)                                               \
    X(hipErrorInvalidConfiguration, 9)                                                 \
    X(hipErrorInvalidPitchValue, 12)                                                   \
    X(hipErrorInvalidSymbol, 13)                                                       \
    X(hipErrorInvalidDevicePointer, 17)                                                \
    X(hipErrorInvalidMemcpyDirection, 21)                                              \
    X(hipErrorInsufficientDriver, 35)                                                  \
    X(hipErrorMissingConfiguration, 52)                                                \
    X(hipErrorPriorLaunchFailure, 53)                                                  \
    X(hipErrorInvalidDeviceFunction, 98)                                               \
    X(hipErrorNoDevice, 100)                                                           \
    X(hipErrorInvalidDevice, 101)                                                      \
    X(hipErrorInvalidImage, 200)                                                       \
    X(hipErrorInvalidContext, 201)                                                     \
    X(hipErrorContextAlreadyCurrent, 202)                                              \
    X(hipErrorMapFailed, 205)                                                          \
    X(hipErrorUnmapFailed, 206)                                                        \
    X(hipErrorArrayIsMapped, 207)                                                      \
    X(hipErrorAlreadyMapped, 208)                                                      \
    X(hipErrorNoBinaryForGpu, 209)                                                     \
    X(hipErrorAlreadyAcquired, 210)                                                    \
    X(hipErrorNotMapped, 211)                                                          \
    X(hipErrorNotMappedAsArray, 212)                                                   \
    X(hipErrorNotMappedAsPointer, 213)                                                 \
    X(hipErrorECCNotCorrectable, 214)                                                  \
    X(hipErrorUnsupportedLimit, 215)                                                   \
    X(hipErrorContextAlreadyInUse, 216)                                                \
    X(hipErrorPeerAccessUnsupported, 217)                                              \
    X(hipErrorInvalidKernelFile, 218)                                                  \
    X(hipErrorInvalidGraphicsContext, 219)                                             \
    X(hipErrorInvalidSource, 300)                                                      \
    X(hipErrorFileNotFound, 301)                                                       \
    X(hipErrorSharedObjectSymbolNotFound, 302)                                         \
    X(hipErrorSharedObjectInitFailed, 303)                                             \
    X(hipErrorOperatingSystem, 304)                                                    \
    X(hipErrorInvalidHandle, 400)                                                      \
    X(hipErrorIllegalState, 401)                                                       \
    X(hipErrorNotFound, 500)                                                           \
    X(hipErrorNotReady, 600)                                                           \
    X(hipErrorIllegalAddress, 700)                                                     \
    X(hipErrorLaunchOutOfResources, 701)                                               \
    X(hipErrorLaunchTimeOut, 702)                                                      \
    X(hipErrorPeerAccessAlreadyEnabled, 704)                                           \
    X(hipErrorPeerAccessNotEnabled, 705)                                               \
    X(hipErrorSetOnActiveProcess, 708)                                                 \
    X(hipErrorContextIsDestroyed, 709)                                                 \
    X(hipErrorAssert, 710)                                                             \
    X(hipErrorHostMemoryAlreadyRegistered, 712)                                        \
    X(hipErrorHostMemoryNotRegistered, 713)                                            \
    X(hipErrorLaunchFailure, 719)                                                      \
    X(hipErrorCooperativeLaunchTooLarge, 720)                                          \
    X(hipErrorNotSupported, 801)                                                       \
    X(hipErrorStreamCaptureUnsupported, 900)                                           \
    X(hipErrorStreamCaptureInvalidated, 901)                                           \
    X(hipErrorStreamCaptureMerge, 902)                                                 \
    X(hipErrorStreamCaptureUnmatched, 903)                                             \
    X(hipErrorStreamCaptureUnjoined, 904)                                              \
    X(hipErrorStreamCaptureIsolation, 905)                                             \
    X(hipErrorStreamCaptureImplicit, 906)                                              \
    X(hipErrorCapturedEvent, 907)                                                      \
    X(hipErrorStreamCaptureWrongThread, 908)                                           \
    X(hipErrorGraphExecUpdateFailure, 910)                                             \
    X(hipErrorInvalidChannelDescriptor, 911)                                           \
    X(hipErrorInvalidTexture, 912)                                                     \
    X(hipErrorInvalidResourceType, 914)                                                \
    X(hipErrorInvalidResourceConfiguration, 915)                                       \
    X(hipErrorStreamDetached, 916)                                                     \
    X(hipErrorUnknown, 999)                                                            \
    X(hipErrorRuntimeMemory, 1052)                                                     \
    X(hipErrorRuntimeOther, 1053)                                                      \
    X(hipErrorInvalidClusterSize, 1054)

#define HOC_ENUM_ENTRY(name, value) name = value,
typedef enum hipError_t { HOC_HIP_ERRORS(HOC_ENUM_ENTRY) } hipError_t;
#undef HOC_ENUM_ENTRY

/* ----- plain scalar types (types.rs) ---------------------------------------------- */

typedef int hipMemcpyKind;
typedef int hipDevice_t;
typedef int hipMemoryType;
typedef int hipDriverProcAddressQueryResult;
typedef int hipMemLocationType;
typedef int hipMemcpySrcAccessOrder;
typedef int hipMemAccessFlags;
typedef int hipMemAllocationType;
typedef int hipMemAllocationHandleType;
typedef int hipMemAllocationGranularity_flags;
typedef int hipPointer_attribute;
typedef int hipDeviceAttribute_t;
typedef void *hipDeviceptr_t;

typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipCtx_t *hipCtx_t;
typedef struct ihipMemGenericAllocationHandle *hipMemGenericAllocationHandle_t;

#define HIP_IPC_HANDLE_SIZE 64
typedef struct hipIpcMemHandle_st {
    char reserved[HIP_IPC_HANDLE_SIZE];
} hipIpcMemHandle_t;
typedef struct hipIpcEventHandle_st {
    char reserved[HIP_IPC_HANDLE_SIZE];
} hipIpcEventHandle_t;

typedef struct hipPointerAttribute_t {
    hipMemoryType type; /* 6.x numbering: the shim reports a 6.2 runtime */
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned int allocationFlags;
} hipPointerAttribute_t;

typedef struct hipUUID_t {
    char bytes[16];
} hipUUID;

typedef struct hipMemLocation {
    hipMemLocationType type;
    int id;
} hipMemLocation;

typedef struct hipMemAccessDesc {
    hipMemLocation location;
    hipMemAccessFlags flags;
} hipMemAccessDesc;

/* The ROCm 5.3+ layout (types.rs hipMemAllocationProp); the shim reports 6.2, so devipc
 * never passes the 5.2 layout here. */
typedef struct hipMemAllocationProp {
    hipMemAllocationType type;
    hipMemAllocationHandleType requestedHandleType;
    hipMemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
    } allocFlags;
} hipMemAllocationProp;

typedef struct hipMemcpyAttributes {
    hipMemcpySrcAccessOrder srcAccessOrder;
    hipMemLocation srcLocHint;
    hipMemLocation dstLocHint;
    unsigned int flags;
} hipMemcpyAttributes;

/* ----- constants (consts.rs) ------------------------------------------------------ */

enum {
    hipEventDefault = 0x0,
    hipEventBlockingSync = 0x1,
    hipEventDisableTiming = 0x2,
    hipEventInterprocess = 0x4,
};
#define hipEventDisableSystemFence 0x20000000u
#define hipEventReleaseToDevice 0x40000000u
#define hipEventReleaseToSystem 0x80000000u

enum {
    hipIpcMemLazyEnablePeerAccess = 0x01, /* the ROCm 6 value (consts.rs _ROCM6) */
};

enum {
    hipMemoryTypeUnregistered = 0, /* ROCm 6.x numbering (consts.rs memory_type_value) */
    hipMemoryTypeHost = 1,
    hipMemoryTypeDevice = 2,
    hipMemoryTypeManaged = 3,
    hipMemoryTypeArray = 10,
    hipMemoryTypeUnified = 11,
};
enum {
    hipInvalidDeviceId = -1,
};

enum {
    hipHostMallocDefault = 0x0,
    hipHostMallocPortable = 0x1,
    hipHostMallocMapped = 0x2,
    hipHostMallocWriteCombined = 0x4,
};
#define hipHostMallocNumaUser 0x20000000u
#define hipHostMallocCoherent 0x40000000u
#define hipHostMallocNonCoherent 0x80000000u

enum {
    HIP_GET_PROC_ADDRESS_SUCCESS = 0,
    HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

enum {
    hipMemLocationTypeInvalid = 0,
    hipMemLocationTypeDevice = 1,
    hipMemLocationTypeHost = 2,
    hipMemLocationTypeHostNuma = 3,
    hipMemLocationTypeHostNumaCurrent = 4,
};

enum {
    hipMemAccessFlagsProtNone = 0,
    hipMemAccessFlagsProtRead = 1,
    hipMemAccessFlagsProtReadWrite = 3,
};

enum {
    hipMemAllocationTypeInvalid = 0x0,
    hipMemAllocationTypePinned = 0x1,
};

enum {
    hipMemHandleTypeNone = 0x0,
    hipMemHandleTypePosixFileDescriptor = 0x1,
    hipMemHandleTypeWin32 = 0x2,
    hipMemHandleTypeWin32Kmt = 0x4,
    hipMemHandleTypeFabric = 0x8,
};

enum {
    hipMemAllocationGranularityMinimum = 0x0,
    hipMemAllocationGranularityRecommended = 0x1,
};

enum {
    HIP_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    HIP_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
    HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE = 10,
    HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    HIP_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    HIP_POINTER_ATTRIBUTE_MAPPED = 13,
};

enum {
    hipDeviceAttributeVirtualMemoryManagementSupported = 89,
};

enum {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
    hipMemcpyDeviceToDeviceNoCU = 1024,
};

/* ----- layouts asserted by devipc's types.rs (x86_64) ----------------------------- */

_Static_assert(sizeof(hipError_t) == 4, "hipError_t");
_Static_assert(sizeof(hipIpcMemHandle_t) == 64, "hipIpcMemHandle_t");
_Static_assert(sizeof(hipIpcEventHandle_t) == 64, "hipIpcEventHandle_t");
_Static_assert(sizeof(hipPointerAttribute_t) == 32, "hipPointerAttribute_t");
_Static_assert(offsetof(hipPointerAttribute_t, device) == 4, "device");
_Static_assert(offsetof(hipPointerAttribute_t, devicePointer) == 8, "devicePointer");
_Static_assert(offsetof(hipPointerAttribute_t, hostPointer) == 16, "hostPointer");
_Static_assert(offsetof(hipPointerAttribute_t, isManaged) == 24, "isManaged");
_Static_assert(offsetof(hipPointerAttribute_t, allocationFlags) == 28, "allocationFlags");
_Static_assert(sizeof(hipUUID) == 16, "hipUUID");
_Static_assert(sizeof(hipMemLocation) == 8, "hipMemLocation");
_Static_assert(sizeof(hipMemAccessDesc) == 12, "hipMemAccessDesc");
_Static_assert(sizeof(hipMemcpyAttributes) == 24, "hipMemcpyAttributes");
_Static_assert(offsetof(hipMemcpyAttributes, srcLocHint) == 4, "srcLocHint");
_Static_assert(offsetof(hipMemcpyAttributes, dstLocHint) == 12, "dstLocHint");
_Static_assert(offsetof(hipMemcpyAttributes, flags) == 20, "flags");
_Static_assert(sizeof(hipMemAllocationProp) == 32, "hipMemAllocationProp");
_Static_assert(offsetof(hipMemAllocationProp, requestedHandleType) == 4, "requestedHandleType");
_Static_assert(offsetof(hipMemAllocationProp, location) == 8, "location");
_Static_assert(offsetof(hipMemAllocationProp, win32HandleMetaData) == 16, "win32HandleMetaData");
_Static_assert(offsetof(hipMemAllocationProp, allocFlags) == 24, "allocFlags");

#endif /* DEVIPC_HIP_TYPES_H */
