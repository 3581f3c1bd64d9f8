/*
 * hip-over-cuda: the HIP entry points devipc loads (backend-hip/sys/src/list.rs),
 * implemented on the CUDA runtime and driver API, so devipc's HIP backend, conformance
 * suite and Python package run on an NVIDIA GPU with real device memory and real
 * cross-process IPC. A test tool, not a HIP implementation: see README.md ("What a shim
 * run validates") and its list of deviations from ROCm.
 *
 * Loaded only through DEVIPC_HIP_LIB; the file is libdevipc_hip_over_cuda.so, never
 * libamdhip64. Every argument, enum, struct and error code is translated explicitly: HIP
 * codes and names go out, never CUDA's. The driver API is reached through
 * cudaGetDriverEntryPoint(ByVersion), with the prototypes of the cuda.h the shim was
 * compiled against, so nothing links libcuda at build time.
 *
 * Layout: error translation; the driver table; helpers (context, enums, structs); then
 * the exports in the order of devipc's list; hipGetProcAddress's table last.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "hip_types.h"

#if !defined(CUDART_VERSION) || CUDART_VERSION < 12000
#error "hip-over-cuda needs the CUDA 12 or 13 runtime headers (cuda_runtime_api.h)"
#endif

#define HOC_EXPORT __attribute__((visibility("default")))
#define HOC_SHIM_VERSION "0.1.0"

/* The HIP runtime version the shim reports (deviation 1): ROCm 6.2's encoding, with the
 * CUDA runtime version as the patch number, e.g. 6.2.13000 for CUDA 13.0. */
#define HOC_HIP_VERSION_BASE 60200000

_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(hipIpcMemHandle_t), "IPC mem handle");
_Static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(hipIpcEventHandle_t), "IPC event handle");
_Static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(uintptr_t), "VMM handle");

/* ===================================================================================== */
/* Error translation (deviation 2: HIP codes and names, never CUDA's)                    */
/* ===================================================================================== */

/* The last CUDA failure on this thread, so hipGetErrorString can name it. */
static __thread struct {
    hipError_t hip;
    int code;
    int driver; /* 1: a CUresult, 0: a cudaError_t */
} last_failure;

/* cudaError_t -> hipError_t (HIP-on-NVIDIA's runtime switch). */
static hipError_t hip_of_cuda_code(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return hipSuccess;
    case cudaErrorInvalidValue: return hipErrorInvalidValue;
    case cudaErrorMemoryAllocation: return hipErrorOutOfMemory;
    case cudaErrorInitializationError: return hipErrorNotInitialized;
    case cudaErrorCudartUnloading: return hipErrorDeinitialized;
    case cudaErrorProfilerDisabled: return hipErrorProfilerDisabled;
    case cudaErrorProfilerNotInitialized: return hipErrorProfilerNotInitialized;
    case cudaErrorProfilerAlreadyStarted: return hipErrorProfilerAlreadyStarted;
    case cudaErrorProfilerAlreadyStopped: return hipErrorProfilerAlreadyStopped;
    case cudaErrorInvalidConfiguration: return hipErrorInvalidConfiguration;
    case cudaErrorInvalidPitchValue: return hipErrorInvalidPitchValue;
    case cudaErrorInvalidSymbol: return hipErrorInvalidSymbol;
    case cudaErrorInvalidDevicePointer: return hipErrorInvalidDevicePointer;
    case cudaErrorInvalidMemcpyDirection: return hipErrorInvalidMemcpyDirection;
    case cudaErrorInsufficientDriver: return hipErrorInsufficientDriver;
    case cudaErrorMissingConfiguration: return hipErrorMissingConfiguration;
    case cudaErrorPriorLaunchFailure: return hipErrorPriorLaunchFailure;
    case cudaErrorInvalidDeviceFunction: return hipErrorInvalidDeviceFunction;
    case cudaErrorNoDevice: return hipErrorNoDevice;
    case cudaErrorInvalidDevice: return hipErrorInvalidDevice;
    case cudaErrorInvalidKernelImage: return hipErrorInvalidImage;
    case cudaErrorDeviceUninitialized: return hipErrorInvalidContext;
    case cudaErrorMapBufferObjectFailed: return hipErrorMapFailed;
    case cudaErrorUnmapBufferObjectFailed: return hipErrorUnmapFailed;
    case cudaErrorArrayIsMapped: return hipErrorArrayIsMapped;
    case cudaErrorAlreadyMapped: return hipErrorAlreadyMapped;
    case cudaErrorNoKernelImageForDevice: return hipErrorNoBinaryForGpu;
    case cudaErrorAlreadyAcquired: return hipErrorAlreadyAcquired;
    case cudaErrorNotMapped: return hipErrorNotMapped;
    case cudaErrorNotMappedAsArray: return hipErrorNotMappedAsArray;
    case cudaErrorNotMappedAsPointer: return hipErrorNotMappedAsPointer;
    case cudaErrorECCUncorrectable: return hipErrorECCNotCorrectable;
    case cudaErrorUnsupportedLimit: return hipErrorUnsupportedLimit;
    case cudaErrorDeviceAlreadyInUse: return hipErrorContextAlreadyInUse;
    case cudaErrorPeerAccessUnsupported: return hipErrorPeerAccessUnsupported;
    case cudaErrorInvalidPtx: return hipErrorInvalidKernelFile;
    case cudaErrorInvalidGraphicsContext: return hipErrorInvalidGraphicsContext;
    case cudaErrorInvalidSource: return hipErrorInvalidSource;
    case cudaErrorFileNotFound: return hipErrorFileNotFound;
    case cudaErrorSharedObjectSymbolNotFound: return hipErrorSharedObjectSymbolNotFound;
    case cudaErrorSharedObjectInitFailed: return hipErrorSharedObjectInitFailed;
    case cudaErrorOperatingSystem: return hipErrorOperatingSystem;
    case cudaErrorInvalidResourceHandle: return hipErrorInvalidHandle;
    case cudaErrorIllegalState: return hipErrorIllegalState;
    case cudaErrorSymbolNotFound: return hipErrorNotFound;
    case cudaErrorNotReady: return hipErrorNotReady;
    case cudaErrorIllegalAddress: return hipErrorIllegalAddress;
    case cudaErrorLaunchOutOfResources: return hipErrorLaunchOutOfResources;
    case cudaErrorLaunchTimeout: return hipErrorLaunchTimeOut;
    case cudaErrorPeerAccessAlreadyEnabled: return hipErrorPeerAccessAlreadyEnabled;
    case cudaErrorPeerAccessNotEnabled: return hipErrorPeerAccessNotEnabled;
    case cudaErrorSetOnActiveProcess: return hipErrorSetOnActiveProcess;
    case cudaErrorContextIsDestroyed: return hipErrorContextIsDestroyed;
    case cudaErrorAssert: return hipErrorAssert;
    case cudaErrorHostMemoryAlreadyRegistered: return hipErrorHostMemoryAlreadyRegistered;
    case cudaErrorHostMemoryNotRegistered: return hipErrorHostMemoryNotRegistered;
    case cudaErrorLaunchFailure: return hipErrorLaunchFailure;
    case cudaErrorCooperativeLaunchTooLarge: return hipErrorCooperativeLaunchTooLarge;
    case cudaErrorNotSupported: return hipErrorNotSupported;
    case cudaErrorStreamCaptureUnsupported: return hipErrorStreamCaptureUnsupported;
    case cudaErrorStreamCaptureInvalidated: return hipErrorStreamCaptureInvalidated;
    case cudaErrorStreamCaptureMerge: return hipErrorStreamCaptureMerge;
    case cudaErrorStreamCaptureUnmatched: return hipErrorStreamCaptureUnmatched;
    case cudaErrorStreamCaptureUnjoined: return hipErrorStreamCaptureUnjoined;
    case cudaErrorStreamCaptureIsolation: return hipErrorStreamCaptureIsolation;
    case cudaErrorStreamCaptureImplicit: return hipErrorStreamCaptureImplicit;
    case cudaErrorCapturedEvent: return hipErrorCapturedEvent;
    case cudaErrorStreamCaptureWrongThread: return hipErrorStreamCaptureWrongThread;
    case cudaErrorGraphExecUpdateFailure: return hipErrorGraphExecUpdateFailure;
    /* No HIP equivalent (e.g. 711 TooManyPeers, 800 NotPermitted): HIP's default. */
    default: return hipErrorUnknown;
    }
}

/* CUresult -> hipError_t (HIP-on-NVIDIA's driver switch). */
static hipError_t hip_of_cu_code(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return hipSuccess;
    case CUDA_ERROR_INVALID_VALUE: return hipErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return hipErrorOutOfMemory;
    case CUDA_ERROR_NOT_INITIALIZED: return hipErrorNotInitialized;
    case CUDA_ERROR_DEINITIALIZED: return hipErrorDeinitialized;
    case CUDA_ERROR_PROFILER_DISABLED: return hipErrorProfilerDisabled;
    case CUDA_ERROR_PROFILER_NOT_INITIALIZED: return hipErrorProfilerNotInitialized;
    case CUDA_ERROR_PROFILER_ALREADY_STARTED: return hipErrorProfilerAlreadyStarted;
    case CUDA_ERROR_PROFILER_ALREADY_STOPPED: return hipErrorProfilerAlreadyStopped;
    case CUDA_ERROR_NO_DEVICE: return hipErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return hipErrorInvalidDevice;
    case CUDA_ERROR_INVALID_IMAGE: return hipErrorInvalidImage;
    case CUDA_ERROR_INVALID_CONTEXT: return hipErrorInvalidContext;
    case CUDA_ERROR_CONTEXT_ALREADY_CURRENT: return hipErrorContextAlreadyCurrent;
    case CUDA_ERROR_MAP_FAILED: return hipErrorMapFailed;
    case CUDA_ERROR_UNMAP_FAILED: return hipErrorUnmapFailed;
    case CUDA_ERROR_ARRAY_IS_MAPPED: return hipErrorArrayIsMapped;
    case CUDA_ERROR_ALREADY_MAPPED: return hipErrorAlreadyMapped;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return hipErrorNoBinaryForGpu;
    case CUDA_ERROR_ALREADY_ACQUIRED: return hipErrorAlreadyAcquired;
    case CUDA_ERROR_NOT_MAPPED: return hipErrorNotMapped;
    case CUDA_ERROR_NOT_MAPPED_AS_ARRAY: return hipErrorNotMappedAsArray;
    case CUDA_ERROR_NOT_MAPPED_AS_POINTER: return hipErrorNotMappedAsPointer;
    case CUDA_ERROR_ECC_UNCORRECTABLE: return hipErrorECCNotCorrectable;
    case CUDA_ERROR_UNSUPPORTED_LIMIT: return hipErrorUnsupportedLimit;
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE: return hipErrorContextAlreadyInUse;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return hipErrorPeerAccessUnsupported;
    case CUDA_ERROR_INVALID_PTX: return hipErrorInvalidKernelFile;
    case CUDA_ERROR_INVALID_GRAPHICS_CONTEXT: return hipErrorInvalidGraphicsContext;
    case CUDA_ERROR_INVALID_SOURCE: return hipErrorInvalidSource;
    case CUDA_ERROR_FILE_NOT_FOUND: return hipErrorFileNotFound;
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: return hipErrorSharedObjectSymbolNotFound;
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED: return hipErrorSharedObjectInitFailed;
    case CUDA_ERROR_OPERATING_SYSTEM: return hipErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE: return hipErrorInvalidHandle;
    case CUDA_ERROR_ILLEGAL_STATE: return hipErrorIllegalState;
    case CUDA_ERROR_NOT_FOUND: return hipErrorNotFound;
    case CUDA_ERROR_NOT_READY: return hipErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return hipErrorIllegalAddress;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return hipErrorLaunchOutOfResources;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return hipErrorLaunchTimeOut;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return hipErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return hipErrorPeerAccessNotEnabled;
    case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE: return hipErrorSetOnActiveProcess;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return hipErrorContextIsDestroyed;
    case CUDA_ERROR_ASSERT: return hipErrorAssert;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return hipErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return hipErrorHostMemoryNotRegistered;
    case CUDA_ERROR_LAUNCH_FAILED: return hipErrorLaunchFailure;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: return hipErrorCooperativeLaunchTooLarge;
    case CUDA_ERROR_NOT_SUPPORTED: return hipErrorNotSupported;
    default: return hipErrorUnknown;
    }
}

static hipError_t from_cuda(cudaError_t e)
{
    hipError_t h = hip_of_cuda_code(e);
    if (e != cudaSuccess) {
        last_failure.hip = h;
        last_failure.code = (int)e;
        last_failure.driver = 0;
    }
    return h;
}

static hipError_t from_cu(CUresult r)
{
    hipError_t h = hip_of_cu_code(r);
    if (r != CUDA_SUCCESS) {
        last_failure.hip = h;
        last_failure.code = (int)r;
        last_failure.driver = 1;
    }
    return h;
}

/* A failure the shim itself decides (a guard); clears the CUDA note. */
static hipError_t shim_error(hipError_t h)
{
    last_failure.hip = h;
    last_failure.code = 0;
    last_failure.driver = -1;
    return h;
}

#define HOC_GUARD(cond)                                                                \
    do {                                                                               \
        if (cond) return shim_error(hipErrorInvalidValue);                             \
    } while (0)

/* ===================================================================================== */
/* The driver API, through the runtime's entry-point query                               */
/* ===================================================================================== */

/* HOC_DRIVER_FNS(X): the driver functions the shim calls. The field types are the
 * prototypes of the compiled-against cuda.h (its macros pick the _v2 names), and the
 * query asks for that header's CUDA_VERSION, so the ABI matches. */
#define HOC_DRIVER_FNS(X)                                                              \
    X(cuInit)                                                                          \
    X(cuGetErrorName)                                                                  \
    X(cuDeviceGet)                                                                     \
    X(cuDeviceGetAttribute)                                                            \
    X(cuDeviceGetUuid)                                                                 \
    X(cuDevicePrimaryCtxRetain)                                                        \
    X(cuCtxPushCurrent)                                                                \
    X(cuMemGetAddressRange)                                                            \
    X(cuPointerGetAttribute)                                                           \
    X(cuMemGetAllocationGranularity)                                                   \
    X(cuMemCreate)                                                                     \
    X(cuMemRelease)                                                                    \
    X(cuMemAddressReserve)                                                             \
    X(cuMemAddressFree)                                                                \
    X(cuMemMap)                                                                        \
    X(cuMemUnmap)                                                                      \
    X(cuMemSetAccess)                                                                  \
    X(cuMemGetAccess)                                                                  \
    X(cuMemExportToShareableHandle)                                                    \
    X(cuMemImportFromShareableHandle)                                                  \
    X(cuMemRetainAllocationHandle)                                                     \
    X(cuMemGetAllocationPropertiesFromHandle)

#define HOC_DRIVER_FIELD(name) __typeof__(&name) name;
static struct {
    HOC_DRIVER_FNS(HOC_DRIVER_FIELD)
} drv;
#undef HOC_DRIVER_FIELD

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static cudaError_t drv_status = cudaSuccess; /* why the table could not be filled */
static const char *drv_missing;              /* the first function not found */

static cudaError_t entry_point(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
#if CUDART_VERSION >= 12050
    cudaError_t e =
        cudaGetDriverEntryPointByVersion(name, fn, CUDA_VERSION, cudaEnableDefault, &status);
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &status);
#endif
    if (e == cudaSuccess && (status != cudaDriverEntryPointSuccess || *fn == NULL))
        e = cudaErrorSymbolNotFound;
    return e;
}

static void drv_load(void)
{
#define HOC_DRIVER_LOAD(name)                                                          \
    if (drv_status == cudaSuccess) {                                                   \
        void *fn = NULL;                                                               \
        drv_status = entry_point(#name, &fn);                                          \
        if (drv_status == cudaSuccess)                                                 \
            memcpy(&drv.name, &fn, sizeof fn);                                         \
        else                                                                           \
            drv_missing = #name;                                                       \
    }
    HOC_DRIVER_FNS(HOC_DRIVER_LOAD)
#undef HOC_DRIVER_LOAD
}

/* The driver table, or the translated reason it cannot be had. */
static hipError_t need_driver(void)
{
    pthread_once(&drv_once, drv_load);
    return drv_status == cudaSuccess ? hipSuccess : from_cuda(drv_status);
}

/* Deviation 4: the driver-API calls need a current context, which HIP's runtime never
 * asks for. Make the calling thread's device's primary context current first (what
 * cudaSetDevice does since CUDA 12). */
static hipError_t bind_primary_context(void)
{
    hipError_t h = need_driver();
    if (h != hipSuccess) return h;
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaSetDevice(device);
    return from_cuda(e);
}

static hipError_t device_count(int *count)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) *count = 0;
    return from_cuda(e);
}

/* hipErrorInvalidDevice unless 0 <= device < count (the ordinal checks of CLR). */
static hipError_t check_ordinal(int device)
{
    int count = 0;
    hipError_t h = device_count(&count);
    if (h != hipSuccess) return h;
    if (device < 0 || device >= count) return shim_error(hipErrorInvalidDevice);
    return hipSuccess;
}

/* ===================================================================================== */
/* Enum and struct translation                                                           */
/* ===================================================================================== */

static int cuda_memcpy_kind(hipMemcpyKind kind, enum cudaMemcpyKind *out)
{
    switch (kind) {
    case hipMemcpyHostToHost: *out = cudaMemcpyHostToHost; return 1;
    case hipMemcpyHostToDevice: *out = cudaMemcpyHostToDevice; return 1;
    case hipMemcpyDeviceToHost: *out = cudaMemcpyDeviceToHost; return 1;
    case hipMemcpyDeviceToDevice: *out = cudaMemcpyDeviceToDevice; return 1;
    case hipMemcpyDefault: *out = cudaMemcpyDefault; return 1;
    /* A device-to-device copy without compute units: CUDA picks its own engine. */
    case hipMemcpyDeviceToDeviceNoCU: *out = cudaMemcpyDeviceToDevice; return 1;
    default: return 0;
    }
}

static int cu_location_type(hipMemLocationType t, CUmemLocationType *out)
{
    switch (t) {
    case hipMemLocationTypeInvalid: *out = CU_MEM_LOCATION_TYPE_INVALID; return 1;
    case hipMemLocationTypeDevice: *out = CU_MEM_LOCATION_TYPE_DEVICE; return 1;
#if CUDA_VERSION >= 12020
    case hipMemLocationTypeHost: *out = CU_MEM_LOCATION_TYPE_HOST; return 1;
    case hipMemLocationTypeHostNuma: *out = CU_MEM_LOCATION_TYPE_HOST_NUMA; return 1;
    case hipMemLocationTypeHostNumaCurrent:
        *out = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
        return 1;
#endif
    default: return 0;
    }
}

static hipMemLocationType hip_location_type(CUmemLocationType t)
{
    switch (t) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return hipMemLocationTypeDevice;
#if CUDA_VERSION >= 12020
    case CU_MEM_LOCATION_TYPE_HOST: return hipMemLocationTypeHost;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return hipMemLocationTypeHostNuma;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return hipMemLocationTypeHostNumaCurrent;
#endif
    default: return hipMemLocationTypeInvalid;
    }
}

static int cu_location(const hipMemLocation *in, CUmemLocation *out)
{
    memset(out, 0, sizeof *out);
    if (!cu_location_type(in->type, &out->type)) return 0;
    out->id = in->id;
    return 1;
}

static int cu_handle_type(hipMemAllocationHandleType t, CUmemAllocationHandleType *out)
{
    switch (t) {
    case hipMemHandleTypeNone: *out = CU_MEM_HANDLE_TYPE_NONE; return 1;
    case hipMemHandleTypePosixFileDescriptor:
        *out = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        return 1;
    case hipMemHandleTypeWin32: *out = CU_MEM_HANDLE_TYPE_WIN32; return 1;
    case hipMemHandleTypeWin32Kmt: *out = CU_MEM_HANDLE_TYPE_WIN32_KMT; return 1;
#if CUDA_VERSION >= 12030
    case hipMemHandleTypeFabric: *out = CU_MEM_HANDLE_TYPE_FABRIC; return 1;
#endif
    default: return 0;
    }
}

static hipMemAllocationHandleType hip_handle_type(CUmemAllocationHandleType t)
{
    switch (t) {
    case CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: return hipMemHandleTypePosixFileDescriptor;
    case CU_MEM_HANDLE_TYPE_WIN32: return hipMemHandleTypeWin32;
    case CU_MEM_HANDLE_TYPE_WIN32_KMT: return hipMemHandleTypeWin32Kmt;
#if CUDA_VERSION >= 12030
    case CU_MEM_HANDLE_TYPE_FABRIC: return hipMemHandleTypeFabric;
#endif
    default: return hipMemHandleTypeNone;
    }
}

/* hipMemAllocationProp (ROCm 5.3+ layout) -> CUmemAllocationProp, field by field. An
 * enum value the shim cannot name in CUDA's terms is hipErrorInvalidValue. */
static hipError_t cu_prop(const hipMemAllocationProp *in, CUmemAllocationProp *out)
{
    memset(out, 0, sizeof *out);
    switch (in->type) {
    case hipMemAllocationTypeInvalid: out->type = CU_MEM_ALLOCATION_TYPE_INVALID; break;
    case hipMemAllocationTypePinned: out->type = CU_MEM_ALLOCATION_TYPE_PINNED; break;
    default: return shim_error(hipErrorInvalidValue);
    }
    if (!cu_handle_type(in->requestedHandleType, &out->requestedHandleTypes))
        return shim_error(hipErrorInvalidValue);
    if (!cu_location(&in->location, &out->location)) return shim_error(hipErrorInvalidValue);
    out->win32HandleMetaData = in->win32HandleMetaData;
    out->allocFlags.compressionType = in->allocFlags.compressionType;
    out->allocFlags.gpuDirectRDMACapable = in->allocFlags.gpuDirectRDMACapable;
    out->allocFlags.usage = in->allocFlags.usage;
    return hipSuccess;
}

static void hip_prop(const CUmemAllocationProp *in, hipMemAllocationProp *out)
{
    memset(out, 0, sizeof *out);
    out->type = in->type == CU_MEM_ALLOCATION_TYPE_PINNED ? hipMemAllocationTypePinned
                                                          : hipMemAllocationTypeInvalid;
    out->requestedHandleType = hip_handle_type(in->requestedHandleTypes);
    out->location.type = hip_location_type(in->location.type);
    out->location.id = in->location.id;
    out->win32HandleMetaData = in->win32HandleMetaData;
    out->allocFlags.compressionType = in->allocFlags.compressionType;
    out->allocFlags.gpuDirectRDMACapable = in->allocFlags.gpuDirectRDMACapable;
    out->allocFlags.usage = in->allocFlags.usage;
}

static CUmemGenericAllocationHandle cu_handle(hipMemGenericAllocationHandle_t h)
{
    return (CUmemGenericAllocationHandle)(uintptr_t)h;
}

static hipMemGenericAllocationHandle_t hip_handle(CUmemGenericAllocationHandle h)
{
    return (hipMemGenericAllocationHandle_t)(uintptr_t)h;
}

static CUdeviceptr cu_ptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* ===================================================================================== */
/* Version and names                                                                     */
/* ===================================================================================== */

static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static char version_text[256];

static void version_init(void)
{
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    snprintf(version_text, sizeof version_text,
             "hip-over-cuda %s (devipc test shim, NOT AMD HIP): HIP 6.2.%d API over CUDA "
             "runtime %d.%d, driver %d.%d; built against CUDA %d.%d",
             HOC_SHIM_VERSION, runtime, runtime / 1000, (runtime % 1000) / 10, driver / 1000,
             (driver % 1000) / 10, CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
}

/* The shim's identity, e.g. for a report header. Not a HIP function. */
HOC_EXPORT const char *devipc_shim_version(void)
{
    pthread_once(&version_once, version_init);
    return version_text;
}

static const char *hip_name(hipError_t code)
{
    switch ((int)code) {
#define HOC_NAME_CASE(name, value)                                                     \
    case value: return #name;
        HOC_HIP_ERRORS(HOC_NAME_CASE)
#undef HOC_NAME_CASE
    default: return "hipErrorUnknown";
    }
}

/* Interned message strings: hipGetErrorString promises a static string. */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
struct interned {
    struct interned *next;
    char text[];
};
static struct interned *interned_head;

static const char *intern(const char *text)
{
    pthread_mutex_lock(&intern_lock);
    for (struct interned *i = interned_head; i; i = i->next) {
        if (strcmp(i->text, text) == 0) {
            pthread_mutex_unlock(&intern_lock);
            return i->text;
        }
    }
    size_t n = strlen(text) + 1;
    struct interned *i = malloc(sizeof *i + n);
    const char *out = "hip-over-cuda: out of memory";
    if (i) {
        memcpy(i->text, text, n);
        i->next = interned_head;
        interned_head = i;
        out = i->text;
    }
    pthread_mutex_unlock(&intern_lock);
    return out;
}

/* ===================================================================================== */
/* Exports, in the order of devipc's list (backend-hip/sys/src/list.rs)                  */
/* ===================================================================================== */

HOC_EXPORT hipError_t hipInit(unsigned int flags)
{
    hipError_t h = need_driver();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuInit(flags));
}

/* Deviation 1: ROCm 6.2's encoding with the CUDA runtime version as the patch. */
HOC_EXPORT hipError_t hipRuntimeGetVersion(int *runtimeVersion)
{
    HOC_GUARD(runtimeVersion == NULL);
    int v = 0;
    cudaError_t e = cudaRuntimeGetVersion(&v);
    if (e != cudaSuccess) return from_cuda(e);
    *runtimeVersion = HOC_HIP_VERSION_BASE + v;
    return hipSuccess;
}

/* CUDA's own driver version, unencoded (e.g. 13000), as HIP-on-NVIDIA reports it. */
HOC_EXPORT hipError_t hipDriverGetVersion(int *driverVersion)
{
    HOC_GUARD(driverVersion == NULL);
    return from_cuda(cudaDriverGetVersion(driverVersion));
}

HOC_EXPORT hipError_t hipGetDeviceCount(int *count)
{
    HOC_GUARD(count == NULL);
    return device_count(count);
}

HOC_EXPORT hipError_t hipSetDevice(int deviceId) { return from_cuda(cudaSetDevice(deviceId)); }

HOC_EXPORT hipError_t hipGetDevice(int *deviceId)
{
    HOC_GUARD(deviceId == NULL);
    return from_cuda(cudaGetDevice(deviceId));
}

HOC_EXPORT hipError_t hipDeviceSynchronize(void) { return from_cuda(cudaDeviceSynchronize()); }

HOC_EXPORT hipError_t hipMalloc(void **ptr, size_t size)
{
    HOC_GUARD(ptr == NULL);
    return from_cuda(cudaMalloc(ptr, size));
}

HOC_EXPORT hipError_t hipFree(void *ptr) { return from_cuda(cudaFree(ptr)); }

HOC_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind)
{
    enum cudaMemcpyKind k;
    if (!cuda_memcpy_kind(kind, &k)) return shim_error(hipErrorInvalidMemcpyDirection);
    return from_cuda(cudaMemcpy(dst, src, sizeBytes, k));
}

HOC_EXPORT hipError_t hipMemset(void *dst, int value, size_t sizeBytes)
{
    return from_cuda(cudaMemset(dst, value, sizeBytes));
}

/* Deviation 3 (guard): HIP refuses NULL out-pointers, CUDA accepts them. */
HOC_EXPORT hipError_t hipMemGetAddressRange(hipDeviceptr_t *pbase, size_t *psize, hipDeviceptr_t dptr)
{
    HOC_GUARD(pbase == NULL || psize == NULL);
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUdeviceptr base = 0;
    size_t size = 0;
    h = from_cu(drv.cuMemGetAddressRange(&base, &size, cu_ptr(dptr)));
    if (h != hipSuccess) return h;
    *pbase = (void *)(uintptr_t)base;
    *psize = size;
    return hipSuccess;
}

HOC_EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
    HOC_GUARD(stream == NULL);
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreate(&s);
    if (e == cudaSuccess) *stream = (hipStream_t)s;
    return from_cuda(e);
}

HOC_EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
    return from_cuda(cudaStreamDestroy((cudaStream_t)stream));
}

HOC_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream)
{
    return from_cuda(cudaStreamSynchronize((cudaStream_t)stream));
}

/* Deviation 3 (guard): CUDA segfaults on a NULL handle pointer. */
HOC_EXPORT hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *devPtr)
{
    HOC_GUARD(handle == NULL);
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof h);
    cudaError_t e = cudaIpcGetMemHandle(&h, devPtr);
    if (e == cudaSuccess) memcpy(handle->reserved, &h, sizeof h);
    return from_cuda(e);
}

/* hipIpcMemLazyEnablePeerAccess (ROCm 6: 0x1) becomes cudaIpcMemLazyEnablePeerAccess;
 * any other bit goes to CUDA as it is, and CUDA decides (HIP-on-NVIDIA does the same). */
HOC_EXPORT hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle, unsigned int flags)
{
    HOC_GUARD(devPtr == NULL);
    unsigned int cflags = flags & ~(unsigned int)hipIpcMemLazyEnablePeerAccess;
    if (flags & hipIpcMemLazyEnablePeerAccess) cflags |= cudaIpcMemLazyEnablePeerAccess;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle.reserved, sizeof h);
    return from_cuda(cudaIpcOpenMemHandle(devPtr, h, cflags));
}

HOC_EXPORT hipError_t hipIpcCloseMemHandle(void *devPtr)
{
    return from_cuda(cudaIpcCloseMemHandle(devPtr));
}

/* HIP's event flags in CUDA's terms. The release-scope flags and DisableSystemFence are
 * AMD fence scopes, defined as 0 ("no-op") by HIP-on-NVIDIA: dropped. Unknown bits go to
 * CUDA, which refuses them. */
static unsigned int cuda_event_flags(unsigned int flags)
{
    unsigned int out = 0;
    if (flags & hipEventBlockingSync) out |= cudaEventBlockingSync;
    if (flags & hipEventDisableTiming) out |= cudaEventDisableTiming;
    if (flags & hipEventInterprocess) out |= cudaEventInterprocess;
    unsigned int known = hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess |
                         hipEventDisableSystemFence | hipEventReleaseToDevice |
                         hipEventReleaseToSystem;
    return out | (flags & ~known);
}

HOC_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags)
{
    HOC_GUARD(event == NULL);
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cuda_event_flags(flags));
    if (e == cudaSuccess) *event = (hipEvent_t)ev;
    return from_cuda(e);
}

HOC_EXPORT hipError_t hipEventDestroy(hipEvent_t event)
{
    return from_cuda(cudaEventDestroy((cudaEvent_t)event));
}

HOC_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    return from_cuda(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

HOC_EXPORT hipError_t hipEventSynchronize(hipEvent_t event)
{
    return from_cuda(cudaEventSynchronize((cudaEvent_t)event));
}

HOC_EXPORT hipError_t hipEventQuery(hipEvent_t event)
{
    return from_cuda(cudaEventQuery((cudaEvent_t)event));
}

HOC_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    return from_cuda(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, flags));
}

HOC_EXPORT hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t *handle, hipEvent_t event)
{
    HOC_GUARD(handle == NULL);
    cudaIpcEventHandle_t h;
    memset(&h, 0, sizeof h);
    cudaError_t e = cudaIpcGetEventHandle(&h, (cudaEvent_t)event);
    if (e == cudaSuccess) memcpy(handle->reserved, &h, sizeof h);
    return from_cuda(e);
}

HOC_EXPORT hipError_t hipIpcOpenEventHandle(hipEvent_t *event, hipIpcEventHandle_t handle)
{
    HOC_GUARD(event == NULL);
    cudaIpcEventHandle_t h;
    memcpy(&h, handle.reserved, sizeof h);
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaIpcOpenEventHandle(&ev, h);
    if (e == cudaSuccess) *event = (hipEvent_t)ev;
    return from_cuda(e);
}

HOC_EXPORT hipError_t hipDeviceCanAccessPeer(int *canAccessPeer, int deviceId, int peerDeviceId)
{
    HOC_GUARD(canAccessPeer == NULL);
    return from_cuda(cudaDeviceCanAccessPeer(canAccessPeer, deviceId, peerDeviceId));
}

HOC_EXPORT hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags)
{
    return from_cuda(cudaDeviceEnablePeerAccess(peerDeviceId, flags));
}

/* Deviation 2: HIP's names (devipc's ERRORS list), hipErrorUnknown for unknown codes. */
HOC_EXPORT const char *hipGetErrorName(hipError_t hip_error) { return hip_name(hip_error); }

/* The HIP name, CUDA's description and, when this thread's last failure translated to
 * this code, the CUDA code it came from; always naming the shim. */
HOC_EXPORT const char *hipGetErrorString(hipError_t hip_error)
{
    char text[512];
    const char *name = hip_name(hip_error);
    if (last_failure.hip == hip_error && last_failure.driver == 0) {
        cudaError_t e = (cudaError_t)last_failure.code;
        snprintf(text, sizeof text, "%s [hip-over-cuda: %s, %s]", name, cudaGetErrorName(e),
                 cudaGetErrorString(e));
    } else if (last_failure.hip == hip_error && last_failure.driver == 1) {
        int code = last_failure.code;
        const char *cu_name = NULL;
        pthread_once(&drv_once, drv_load);
        if (drv_status != cudaSuccess || drv.cuGetErrorName((CUresult)code, &cu_name) != CUDA_SUCCESS)
            cu_name = NULL;
        snprintf(text, sizeof text, "%s [hip-over-cuda: %s (CUresult %d)]", name,
                 cu_name ? cu_name : "an unknown CUresult", code);
    } else if (last_failure.hip == hip_error && last_failure.driver == -1) {
        snprintf(text, sizeof text, "%s [hip-over-cuda: refused by the shim's HIP checks]", name);
    } else {
        snprintf(text, sizeof text, "%s [hip-over-cuda]", name);
    }
    return intern(text);
}

HOC_EXPORT hipError_t hipEventCreate(hipEvent_t *event)
{
    HOC_GUARD(event == NULL);
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreate(&ev);
    if (e == cudaSuccess) *event = (hipEvent_t)ev;
    return from_cuda(e);
}

HOC_EXPORT hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
    HOC_GUARD(ms == NULL);
    return from_cuda(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
}

HOC_EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes,
                                     hipMemcpyKind kind, hipStream_t stream)
{
    enum cudaMemcpyKind k;
    if (!cuda_memcpy_kind(kind, &k)) return shim_error(hipErrorInvalidMemcpyDirection);
    return from_cuda(cudaMemcpyAsync(dst, src, sizeBytes, k, (cudaStream_t)stream));
}

/* CUDA's attributes in HIP 6's numbering (Unregistered 0, Host 1, Device 2, Managed 3);
 * memory CUDA does not know gives Unregistered and hipInvalidDeviceId, as ROCm 6. */
HOC_EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attributes, const void *ptr)
{
    HOC_GUARD(attributes == NULL);
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess) return from_cuda(e);
    memset(attributes, 0, sizeof *attributes);
    switch (a.type) {
    case cudaMemoryTypeHost: attributes->type = hipMemoryTypeHost; break;
    case cudaMemoryTypeDevice: attributes->type = hipMemoryTypeDevice; break;
    case cudaMemoryTypeManaged: attributes->type = hipMemoryTypeManaged; break;
    default: attributes->type = hipMemoryTypeUnregistered; break;
    }
    attributes->device =
        attributes->type == hipMemoryTypeUnregistered ? hipInvalidDeviceId : a.device;
    attributes->devicePointer = a.devicePointer;
    attributes->hostPointer = a.hostPointer;
    attributes->isManaged = a.type == cudaMemoryTypeManaged;
    if (a.type == cudaMemoryTypeHost && a.hostPointer) {
        unsigned int f = 0;
        if (cudaHostGetFlags(&f, a.hostPointer) == cudaSuccess) attributes->allocationFlags = f;
    }
    return hipSuccess;
}

/* CLR: the device's primary context, pushed on the thread's stack; flags not used. */
HOC_EXPORT hipError_t hipCtxCreate(hipCtx_t *ctx, unsigned int flags, hipDevice_t device)
{
    (void)flags;
    HOC_GUARD(ctx == NULL);
    hipError_t h = check_ordinal(device);
    if (h == hipErrorInvalidDevice) return shim_error(hipErrorInvalidValue);
    if (h != hipSuccess) return h;
    h = need_driver();
    if (h != hipSuccess) return h;
    CUdevice dev = 0;
    CUcontext c = NULL;
    h = from_cu(drv.cuDeviceGet(&dev, device));
    if (h == hipSuccess) h = from_cu(drv.cuDevicePrimaryCtxRetain(&c, dev));
    if (h == hipSuccess) h = from_cu(drv.cuCtxPushCurrent(c));
    if (h == hipSuccess) *ctx = (hipCtx_t)c;
    return h;
}

/* Portable / Mapped / WriteCombined mean the same in CUDA; the coherence and NUMA flags
 * are AMD memory kinds with no CUDA meaning and are dropped (Coherent together with
 * NonCoherent stays an error, as in CLR). */
HOC_EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    HOC_GUARD(ptr == NULL);
    HOC_GUARD((flags & hipHostMallocCoherent) && (flags & hipHostMallocNonCoherent));
    unsigned int known = hipHostMallocPortable | hipHostMallocMapped |
                         hipHostMallocWriteCombined | hipHostMallocNumaUser |
                         hipHostMallocCoherent | hipHostMallocNonCoherent;
    HOC_GUARD(flags & ~known);
    unsigned int cflags = cudaHostAllocDefault;
    if (flags & hipHostMallocPortable) cflags |= cudaHostAllocPortable;
    if (flags & hipHostMallocMapped) cflags |= cudaHostAllocMapped;
    if (flags & hipHostMallocWriteCombined) cflags |= cudaHostAllocWriteCombined;
    return from_cuda(cudaHostAlloc(ptr, size, cflags));
}

HOC_EXPORT hipError_t hipHostFree(void *ptr) { return from_cuda(cudaFreeHost(ptr)); }

/* The PCI location of a device, from CUDA's attributes. */
static hipError_t pci_location(int device, int *domain, int *bus, int *dev)
{
    cudaError_t e = cudaDeviceGetAttribute(domain, cudaDevAttrPciDomainId, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(bus, cudaDevAttrPciBusId, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(dev, cudaDevAttrPciDeviceId, device);
    return from_cuda(e);
}

/* CLR's format ("%04x:%02x:%02x.0") and checks, not cudaDeviceGetPCIBusId's
 * "%08X:%02X:%02X.0": no device NoDevice, bad ordinal InvalidDevice, NULL or len <= 12
 * (after writing what fits) InvalidValue. */
HOC_EXPORT hipError_t hipDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    int count = 0;
    hipError_t h = device_count(&count);
    if (h != hipSuccess) return h;
    if (count == 0) return shim_error(hipErrorNoDevice);
    if (device < 0 || device >= count) return shim_error(hipErrorInvalidDevice);
    HOC_GUARD(pciBusId == NULL || len <= 0);
    int domain = 0, bus = 0, dev = 0;
    h = pci_location(device, &domain, &bus, &dev);
    if (h != hipSuccess) return h;
    snprintf(pciBusId, (size_t)len, "%04x:%02x:%02x.0", (unsigned)domain, (unsigned)bus,
             (unsigned)dev);
    HOC_GUARD(len <= 12);
    return hipSuccess;
}

/* CLR: sscanf("%04x:%02x:%02x") and a compare with every visible device. */
HOC_EXPORT hipError_t hipDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    HOC_GUARD(device == NULL || pciBusId == NULL);
    unsigned int want_domain = 0, want_bus = 0, want_dev = 0;
    HOC_GUARD(sscanf(pciBusId, "%04x:%02x:%02x", &want_domain, &want_bus, &want_dev) != 3);
    int count = 0;
    hipError_t h = device_count(&count);
    if (h != hipSuccess) return h;
    for (int d = 0; d < count; d++) {
        int domain = 0, bus = 0, dev = 0;
        h = pci_location(d, &domain, &bus, &dev);
        if (h != hipSuccess) return h;
        if ((unsigned)domain == want_domain && (unsigned)bus == want_bus &&
            (unsigned)dev == want_dev) {
            *device = d;
            return hipSuccess;
        }
    }
    return shim_error(hipErrorInvalidValue);
}

/* ----- optional entries ----------------------------------------------------------- */

static void *proc_address(const char *name); /* the table at the end */

/* The shim's own function of that name (every export of this file). */
HOC_EXPORT hipError_t hipGetProcAddress(const char *symbol, void **pfn, int hipVersion,
                                        uint64_t flags,
                                        hipDriverProcAddressQueryResult *symbolStatus)
{
    (void)hipVersion;
    (void)flags;
    HOC_GUARD(pfn == NULL || symbol == NULL || symbol[0] == '\0');
    void *fn = proc_address(symbol);
    *pfn = fn;
    if (symbolStatus)
        *symbolStatus = fn ? HIP_GET_PROC_ADDRESS_SUCCESS : HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return fn ? hipSuccess : shim_error(hipErrorInvalidValue);
}

HOC_EXPORT hipError_t hipMemGetAllocationGranularity(size_t *granularity,
                                                     const hipMemAllocationProp *prop,
                                                     hipMemAllocationGranularity_flags option)
{
    HOC_GUARD(granularity == NULL || prop == NULL);
    CUmemAllocationGranularity_flags copt;
    switch (option) {
    case hipMemAllocationGranularityMinimum: copt = CU_MEM_ALLOC_GRANULARITY_MINIMUM; break;
    case hipMemAllocationGranularityRecommended:
        copt = CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;
        break;
    default: return shim_error(hipErrorInvalidValue);
    }
    CUmemAllocationProp cp;
    hipError_t h = cu_prop(prop, &cp);
    if (h == hipSuccess) h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemGetAllocationGranularity(granularity, &cp, copt));
}

HOC_EXPORT hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                                   const hipMemAllocationProp *prop, unsigned long long flags)
{
    HOC_GUARD(handle == NULL || prop == NULL);
    CUmemAllocationProp cp;
    hipError_t h = cu_prop(prop, &cp);
    if (h == hipSuccess) h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUmemGenericAllocationHandle ch = 0;
    h = from_cu(drv.cuMemCreate(&ch, size, &cp, flags));
    if (h == hipSuccess) *handle = hip_handle(ch);
    return h;
}

HOC_EXPORT hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)
{
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemRelease(cu_handle(handle)));
}

HOC_EXPORT hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                           unsigned long long flags)
{
    HOC_GUARD(ptr == NULL);
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUdeviceptr p = 0;
    h = from_cu(drv.cuMemAddressReserve(&p, size, alignment, cu_ptr(addr), flags));
    if (h == hipSuccess) *ptr = (void *)(uintptr_t)p;
    return h;
}

HOC_EXPORT hipError_t hipMemAddressFree(void *devPtr, size_t size)
{
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemAddressFree(cu_ptr(devPtr), size));
}

HOC_EXPORT hipError_t hipMemMap(void *ptr, size_t size, size_t offset,
                                hipMemGenericAllocationHandle_t handle, unsigned long long flags)
{
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemMap(cu_ptr(ptr), size, offset, cu_handle(handle), flags));
}

HOC_EXPORT hipError_t hipMemUnmap(void *ptr, size_t size)
{
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemUnmap(cu_ptr(ptr), size));
}

static int cu_access_flags(hipMemAccessFlags f, CUmemAccess_flags *out)
{
    switch (f) {
    case hipMemAccessFlagsProtNone: *out = CU_MEM_ACCESS_FLAGS_PROT_NONE; return 1;
    case hipMemAccessFlagsProtRead: *out = CU_MEM_ACCESS_FLAGS_PROT_READ; return 1;
    case hipMemAccessFlagsProtReadWrite: *out = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; return 1;
    default: return 0;
    }
}

HOC_EXPORT hipError_t hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                      size_t count)
{
    HOC_GUARD(desc == NULL || count == 0 || count > 1024);
    CUmemAccessDesc *cd = calloc(count, sizeof *cd);
    if (cd == NULL) return shim_error(hipErrorOutOfMemory);
    for (size_t i = 0; i < count; i++) {
        if (!cu_location(&desc[i].location, &cd[i].location) ||
            !cu_access_flags(desc[i].flags, &cd[i].flags)) {
            free(cd);
            return shim_error(hipErrorInvalidValue);
        }
    }
    hipError_t h = bind_primary_context();
    if (h == hipSuccess) h = from_cu(drv.cuMemSetAccess(cu_ptr(ptr), size, cd, count));
    free(cd);
    return h;
}

HOC_EXPORT hipError_t hipMemGetAccess(unsigned long long *flags, const hipMemLocation *location,
                                      void *ptr)
{
    HOC_GUARD(flags == NULL || location == NULL);
    CUmemLocation loc;
    HOC_GUARD(!cu_location(location, &loc));
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    unsigned long long f = 0;
    h = from_cu(drv.cuMemGetAccess(&f, &loc, cu_ptr(ptr)));
    if (h != hipSuccess) return h;
    switch (f) {
    case CU_MEM_ACCESS_FLAGS_PROT_READ: *flags = hipMemAccessFlagsProtRead; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: *flags = hipMemAccessFlagsProtReadWrite; break;
    default: *flags = hipMemAccessFlagsProtNone; break;
    }
    return hipSuccess;
}

/* POSIX fd: CUDA writes the int fd to *(int*)shareableHandle, as HIP does. */
HOC_EXPORT hipError_t hipMemExportToShareableHandle(void *shareableHandle,
                                                    hipMemGenericAllocationHandle_t handle,
                                                    hipMemAllocationHandleType handleType,
                                                    unsigned long long flags)
{
    HOC_GUARD(shareableHandle == NULL);
    CUmemAllocationHandleType t;
    HOC_GUARD(!cu_handle_type(handleType, &t));
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    return from_cu(drv.cuMemExportToShareableHandle(shareableHandle, cu_handle(handle), t, flags));
}

/* Deviation 5: the shim reports ROCm 6.2, so devipc passes a POINTER to the int fd
 * (the 6.2 .. 7.0 convention, consts.rs import_takes_fd_by_value); CUDA takes the fd
 * value cast to void*. A fabric handle is a pointer to its 64 bytes in both. */
HOC_EXPORT hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                      void *osHandle,
                                                      hipMemAllocationHandleType shHandleType)
{
    /* Also a guard: an fd passed by value (the 7.1 convention) is a small integer, which
     * ROCm 6.2 .. 7.0 would dereference; the shim refuses it instead. */
    HOC_GUARD(handle == NULL || (uintptr_t)osHandle < 4096);
    CUmemAllocationHandleType t;
    HOC_GUARD(!cu_handle_type(shHandleType, &t));
    void *arg = osHandle;
    if (t == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = *(const int *)osHandle;
        arg = (void *)(intptr_t)fd;
    }
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUmemGenericAllocationHandle ch = 0;
    h = from_cu(drv.cuMemImportFromShareableHandle(&ch, arg, t));
    if (h == hipSuccess) *handle = hip_handle(ch);
    return h;
}

/* Deviation 6: CLR's retain takes no reference (devipc never releases its result);
 * CUDA's does, so the shim drops it again at once. */
HOC_EXPORT hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t *handle,
                                                   void *addr)
{
    HOC_GUARD(handle == NULL);
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUmemGenericAllocationHandle ch = 0;
    h = from_cu(drv.cuMemRetainAllocationHandle(&ch, addr));
    if (h != hipSuccess) return h;
    h = from_cu(drv.cuMemRelease(ch));
    if (h == hipSuccess) *handle = hip_handle(ch);
    return h;
}

HOC_EXPORT hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp *prop,
                                                              hipMemGenericAllocationHandle_t handle)
{
    HOC_GUARD(prop == NULL);
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    CUmemAllocationProp cp;
    memset(&cp, 0, sizeof cp);
    h = from_cu(drv.cuMemGetAllocationPropertiesFromHandle(&cp, cu_handle(handle)));
    if (h == hipSuccess) hip_prop(&cp, prop);
    return h;
}

/* The attributes devipc names (consts.rs HIP_POINTER_ATTRIBUTE_*), answered by CUDA's
 * attribute of the same meaning and converted to HIP's type and numbering. */
HOC_EXPORT hipError_t hipPointerGetAttribute(void *data, hipPointer_attribute attribute,
                                             hipDeviceptr_t ptr)
{
    HOC_GUARD(data == NULL);
    CUpointer_attribute ca;
    switch (attribute) {
    case HIP_POINTER_ATTRIBUTE_MEMORY_TYPE: ca = CU_POINTER_ATTRIBUTE_MEMORY_TYPE; break;
    case HIP_POINTER_ATTRIBUTE_DEVICE_POINTER: ca = CU_POINTER_ATTRIBUTE_DEVICE_POINTER; break;
    case HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL: ca = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL; break;
    case HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE:
        ca = CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE;
        break;
    case HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR: ca = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR; break;
    case HIP_POINTER_ATTRIBUTE_RANGE_SIZE: ca = CU_POINTER_ATTRIBUTE_RANGE_SIZE; break;
    case HIP_POINTER_ATTRIBUTE_MAPPED: ca = CU_POINTER_ATTRIBUTE_MAPPED; break;
    default: return shim_error(hipErrorInvalidValue);
    }
    hipError_t h = bind_primary_context();
    if (h != hipSuccess) return h;
    /* Wide and zeroed: CUDA writes 1 (bool), 4 (enums, ints) or 8 bytes. */
    unsigned long long raw = 0;
    h = from_cu(drv.cuPointerGetAttribute(&raw, ca, cu_ptr(ptr)));
    if (h != hipSuccess) return h;
    switch (attribute) {
    case HIP_POINTER_ATTRIBUTE_MEMORY_TYPE: {
        int t;
        switch ((unsigned int)raw) {
        case CU_MEMORYTYPE_HOST: t = hipMemoryTypeHost; break;
        case CU_MEMORYTYPE_DEVICE: t = hipMemoryTypeDevice; break;
        case CU_MEMORYTYPE_ARRAY: t = hipMemoryTypeArray; break;
        case CU_MEMORYTYPE_UNIFIED: t = hipMemoryTypeUnified; break;
        default: t = hipMemoryTypeUnregistered; break;
        }
        memcpy(data, &t, sizeof t);
        break;
    }
    case HIP_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR: {
        void *p = (void *)(uintptr_t)raw;
        memcpy(data, &p, sizeof p);
        break;
    }
    case HIP_POINTER_ATTRIBUTE_RANGE_SIZE: {
        size_t s = (size_t)raw;
        memcpy(data, &s, sizeof s);
        break;
    }
    case HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
        int d = (int)(unsigned int)raw;
        memcpy(data, &d, sizeof d);
        break;
    }
    default: { /* the booleans */
        int b = (raw & 0xffffffffu) != 0;
        memcpy(data, &b, sizeof b);
        break;
    }
    }
    return hipSuccess;
}

HOC_EXPORT hipError_t hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device)
{
    hipError_t h = check_ordinal(device);
    if (h != hipSuccess) return h;
    HOC_GUARD(uuid == NULL);
    h = need_driver();
    if (h != hipSuccess) return h;
    CUdevice dev = 0;
    CUuuid u;
    memset(&u, 0, sizeof u);
    h = from_cu(drv.cuDeviceGet(&dev, device));
    if (h == hipSuccess) h = from_cu(drv.cuDeviceGetUuid(&u, dev));
    if (h == hipSuccess) memcpy(uuid->bytes, u.bytes, sizeof uuid->bytes);
    return h;
}

HOC_EXPORT hipError_t hipDeviceGet(hipDevice_t *device, int ordinal)
{
    HOC_GUARD(device == NULL);
    hipError_t h = check_ordinal(ordinal);
    if (h != hipSuccess) return h;
    *device = ordinal;
    return hipSuccess;
}

/* Only the attributes devipc names (consts.rs); any other is hipErrorInvalidValue, what
 * CLR answers for an attribute its switch lacks. */
HOC_EXPORT hipError_t hipDeviceGetAttribute(int *pi, hipDeviceAttribute_t attr, int deviceId)
{
    HOC_GUARD(pi == NULL);
    hipError_t h = check_ordinal(deviceId);
    if (h != hipSuccess) return h;
    switch (attr) {
    case hipDeviceAttributeVirtualMemoryManagementSupported: {
        h = need_driver();
        if (h != hipSuccess) return h;
        CUdevice dev = 0;
        h = from_cu(drv.cuDeviceGet(&dev, deviceId));
        if (h == hipSuccess)
            h = from_cu(drv.cuDeviceGetAttribute(
                pi, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
        return h;
    }
    default: return shim_error(hipErrorInvalidValue);
    }
}

HOC_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t sizeBytes)
{
    return from_cuda(cudaMemcpy(dst, src, sizeBytes, cudaMemcpyHostToDevice));
}

HOC_EXPORT hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t sizeBytes)
{
    return from_cuda(cudaMemcpy(dst, src, sizeBytes, cudaMemcpyDeviceToHost));
}

#if CUDART_VERSION >= 12080
#define HOC_HAS_BATCH 1

static int cuda_location(const hipMemLocation *in, struct cudaMemLocation *out)
{
    memset(out, 0, sizeof *out);
    switch (in->type) {
    case hipMemLocationTypeInvalid: out->type = cudaMemLocationTypeInvalid; break;
    case hipMemLocationTypeDevice: out->type = cudaMemLocationTypeDevice; break;
    case hipMemLocationTypeHost: out->type = cudaMemLocationTypeHost; break;
    case hipMemLocationTypeHostNuma: out->type = cudaMemLocationTypeHostNuma; break;
    case hipMemLocationTypeHostNumaCurrent:
        out->type = cudaMemLocationTypeHostNumaCurrent;
        break;
    default: return 0;
    }
    out->id = in->id;
    return 1;
}

static int cuda_memcpy_attributes(const hipMemcpyAttributes *in, struct cudaMemcpyAttributes *out)
{
    memset(out, 0, sizeof *out);
    switch (in->srcAccessOrder) {
    case 0: out->srcAccessOrder = cudaMemcpySrcAccessOrderInvalid; break;
    case 1: out->srcAccessOrder = cudaMemcpySrcAccessOrderStream; break;
    case 2: out->srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall; break;
    case 3: out->srcAccessOrder = cudaMemcpySrcAccessOrderAny; break;
    default: return 0;
    }
    if (!cuda_location(&in->srcLocHint, &out->srcLocHint) ||
        !cuda_location(&in->dstLocHint, &out->dstLocHint))
        return 0;
    if (in->flags & ~1u) return 0;
    out->flags = (in->flags & 1u) ? cudaMemcpyFlagPreferOverlapWithCompute : 0;
    return 1;
}

/* HIP 7.1's batch over cudaMemcpyBatchAsync (CUDA 12.8+). HIP's "no attributes"
 * (numAttrs 0) becomes CUDA's one stream-ordered attribute for every copy. Deviation 7:
 * CUDA refuses the legacy null stream, which HIP accepts, so on the null stream the
 * copies are enqueued one by one (cudaMemcpyDefault), as CLR itself does. CUDA 13 reports
 * no failing index: *failIdx stays SIZE_MAX there. */
HOC_EXPORT hipError_t hipMemcpyBatchAsync(void **dsts, void **srcs, size_t *sizes, size_t count,
                                          hipMemcpyAttributes *attrs, size_t *attrsIdxs,
                                          size_t numAttrs, size_t *failIdx, hipStream_t stream)
{
    HOC_GUARD(dsts == NULL || srcs == NULL || sizes == NULL || failIdx == NULL || count == 0);
    HOC_GUARD(numAttrs > 0 && (attrs == NULL || attrsIdxs == NULL));
    *failIdx = SIZE_MAX;
    if (stream == NULL) {
        for (size_t i = 0; i < count; i++) {
            cudaError_t e = cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, 0);
            if (e != cudaSuccess) {
                *failIdx = i;
                return from_cuda(e);
            }
        }
        return hipSuccess;
    }
    size_t n = numAttrs > 0 ? numAttrs : 1;
    struct cudaMemcpyAttributes *ca = calloc(n, sizeof *ca);
    size_t *idx = calloc(n, sizeof *idx);
    if (ca == NULL || idx == NULL) {
        free(ca);
        free(idx);
        return shim_error(hipErrorOutOfMemory);
    }
    if (numAttrs == 0) {
        ca[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        idx[0] = 0;
    } else {
        for (size_t i = 0; i < numAttrs; i++) {
            if (!cuda_memcpy_attributes(&attrs[i], &ca[i])) {
                free(ca);
                free(idx);
                return shim_error(hipErrorInvalidValue);
            }
            idx[i] = attrsIdxs[i];
        }
    }
#if CUDART_VERSION >= 13000
    cudaError_t e = cudaMemcpyBatchAsync((void *const *)dsts, (const void *const *)srcs,
                                         (const size_t *)sizes, count, ca, idx, n,
                                         (cudaStream_t)stream);
#else
    size_t cfail = SIZE_MAX;
    cudaError_t e = cudaMemcpyBatchAsync(dsts, srcs, sizes, count, ca, idx, n, &cfail,
                                         (cudaStream_t)stream);
    if (e != cudaSuccess) *failIdx = cfail;
#endif
    free(ca);
    free(idx);
    return from_cuda(e);
}
#else
#define HOC_HAS_BATCH 0
#endif

/* ===================================================================================== */
/* hipGetProcAddress's table: every hip* export above                                    */
/* ===================================================================================== */

/* HOC_SERVED(X): the served functions. tools/hip-over-cuda/ci-check checks that this list,
 * the library's exports (nm -D) and functions.txt agree. */
#define HOC_SERVED(X)                                                                  \
    X(hipInit) X(hipRuntimeGetVersion) X(hipDriverGetVersion) X(hipGetDeviceCount)     \
    X(hipSetDevice) X(hipGetDevice) X(hipDeviceSynchronize) X(hipMalloc) X(hipFree)    \
    X(hipMemcpy) X(hipMemset) X(hipMemGetAddressRange) X(hipStreamCreate)              \
    X(hipStreamDestroy) X(hipStreamSynchronize) X(hipIpcGetMemHandle)                  \
    X(hipIpcOpenMemHandle) X(hipIpcCloseMemHandle) X(hipEventCreateWithFlags)          \
    X(hipEventDestroy) X(hipEventRecord) X(hipEventSynchronize) X(hipEventQuery)       \
    X(hipStreamWaitEvent) X(hipIpcGetEventHandle) X(hipIpcOpenEventHandle)             \
    X(hipDeviceCanAccessPeer) X(hipDeviceEnablePeerAccess) X(hipGetErrorName)          \
    X(hipGetErrorString) X(hipEventCreate) X(hipEventElapsedTime) X(hipMemcpyAsync)    \
    X(hipPointerGetAttributes) X(hipCtxCreate) X(hipHostMalloc) X(hipHostFree)         \
    X(hipDeviceGetPCIBusId) X(hipDeviceGetByPCIBusId) X(hipGetProcAddress)             \
    X(hipMemGetAllocationGranularity) X(hipMemCreate) X(hipMemRelease)                 \
    X(hipMemAddressReserve) X(hipMemAddressFree) X(hipMemMap) X(hipMemUnmap)           \
    X(hipMemSetAccess) X(hipMemGetAccess) X(hipMemExportToShareableHandle)             \
    X(hipMemImportFromShareableHandle) X(hipMemRetainAllocationHandle)                 \
    X(hipMemGetAllocationPropertiesFromHandle) X(hipPointerGetAttribute)               \
    X(hipDeviceGetUuid) X(hipDeviceGet) X(hipDeviceGetAttribute) X(hipMemcpyHtoD)      \
    X(hipMemcpyDtoH)

struct proc_entry {
    const char *name;
    void *fn;
};

#define HOC_PROC_ENTRY(name) {#name, (void *)name},
static const struct proc_entry proc_table[] = {
    HOC_SERVED(HOC_PROC_ENTRY)
#if HOC_HAS_BATCH
    HOC_PROC_ENTRY(hipMemcpyBatchAsync)
#endif
};
#undef HOC_PROC_ENTRY

static void *proc_address(const char *name)
{
    for (size_t i = 0; i < sizeof proc_table / sizeof proc_table[0]; i++)
        if (strcmp(proc_table[i].name, name) == 0) return proc_table[i].fn;
    return NULL;
}
