/*
 * ipc_smoke: the bare two-process check to run first on a GPU machine, before devipc.
 *
 *   ipc_smoke SHIM.so selftest [functions.txt]
 *                                no GPU needed: version encoding, every error name,
 *                                hipGetProcAddress of every served function, the guards
 *   ipc_smoke SHIM.so run        GPU: the parent exports, a child (fork + exec of this
 *                                program, pipes for stdin/stdout) opens; bytes both ways
 *                                through a legacy IPC handle, an IPC event ping-pong, and
 *                                a VMM allocation shared as a POSIX fd
 *
 * The shim is loaded with dlopen, as devipc loads it, and only through its HIP entry
 * points. Each check prints "PASS <name> <detail>" or "FAIL <name> <detail>" (INFO for
 * observations); the exit status is 0 when nothing failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hip_types.h"

#define SIZE (1u << 20)
#define ROUNDS 500

/* The entry points the smoke program calls, typed from hip_types.h. */
#define SMOKE_FNS(X)                                                                       \
    X(hipError_t, hipRuntimeGetVersion, (int *))                                           \
    X(hipError_t, hipGetDeviceCount, (int *))                                              \
    X(hipError_t, hipSetDevice, (int))                                                     \
    X(hipError_t, hipMalloc, (void **, size_t))                                            \
    X(hipError_t, hipFree, (void *))                                                       \
    X(hipError_t, hipMemcpy, (void *, const void *, size_t, hipMemcpyKind))                \
    X(hipError_t, hipMemcpyAsync, (void *, const void *, size_t, hipMemcpyKind, hipStream_t)) \
    X(hipError_t, hipDeviceSynchronize, (void))                                            \
    X(hipError_t, hipMemGetAddressRange, (hipDeviceptr_t *, size_t *, hipDeviceptr_t))     \
    X(hipError_t, hipStreamCreate, (hipStream_t *))                                        \
    X(hipError_t, hipStreamSynchronize, (hipStream_t))                                     \
    X(hipError_t, hipStreamWaitEvent, (hipStream_t, hipEvent_t, unsigned int))            \
    X(hipError_t, hipIpcGetMemHandle, (hipIpcMemHandle_t *, void *))                       \
    X(hipError_t, hipIpcOpenMemHandle, (void **, hipIpcMemHandle_t, unsigned int))         \
    X(hipError_t, hipIpcCloseMemHandle, (void *))                                          \
    X(hipError_t, hipEventCreateWithFlags, (hipEvent_t *, unsigned int))                   \
    X(hipError_t, hipEventRecord, (hipEvent_t, hipStream_t))                               \
    X(hipError_t, hipEventSynchronize, (hipEvent_t))                                       \
    X(hipError_t, hipIpcGetEventHandle, (hipIpcEventHandle_t *, hipEvent_t))               \
    X(hipError_t, hipIpcOpenEventHandle, (hipEvent_t *, hipIpcEventHandle_t))              \
    X(const char *, hipGetErrorName, (hipError_t))                                         \
    X(const char *, hipGetErrorString, (hipError_t))                                       \
    X(hipError_t, hipGetProcAddress,                                                       \
      (const char *, void **, int, uint64_t, hipDriverProcAddressQueryResult *))           \
    X(hipError_t, hipDeviceGetAttribute, (int *, hipDeviceAttribute_t, int))               \
    X(hipError_t, hipMemGetAllocationGranularity,                                          \
      (size_t *, const hipMemAllocationProp *, hipMemAllocationGranularity_flags))         \
    X(hipError_t, hipMemCreate,                                                            \
      (hipMemGenericAllocationHandle_t *, size_t, const hipMemAllocationProp *,            \
       unsigned long long))                                                                \
    X(hipError_t, hipMemRelease, (hipMemGenericAllocationHandle_t))                        \
    X(hipError_t, hipMemAddressReserve, (void **, size_t, size_t, void *, unsigned long long)) \
    X(hipError_t, hipMemAddressFree, (void *, size_t))                                     \
    X(hipError_t, hipMemMap,                                                               \
      (void *, size_t, size_t, hipMemGenericAllocationHandle_t, unsigned long long))       \
    X(hipError_t, hipMemUnmap, (void *, size_t))                                           \
    X(hipError_t, hipMemSetAccess, (void *, size_t, const hipMemAccessDesc *, size_t))     \
    X(hipError_t, hipMemExportToShareableHandle,                                           \
      (void *, hipMemGenericAllocationHandle_t, hipMemAllocationHandleType,                \
       unsigned long long))                                                                \
    X(hipError_t, hipMemImportFromShareableHandle,                                         \
      (hipMemGenericAllocationHandle_t *, void *, hipMemAllocationHandleType))

#define SMOKE_FIELD(ret, name, args) ret(*name) args;
static struct {
    SMOKE_FNS(SMOKE_FIELD)
    const char *(*version)(void);
} hip;
#undef SMOKE_FIELD

static int failures;
static const char *role = "parent";

static void report(const char *kind, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    FILE *out = strcmp(role, "parent") == 0 ? stdout : stderr;
    fprintf(out, "%s %s%s%s ", kind, strcmp(role, "parent") ? role : "",
            strcmp(role, "parent") ? ":" : "", name);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    fflush(out);
    va_end(ap);
    if (strcmp(kind, "FAIL") == 0) failures++;
}

/* Evaluates a HIP call; on failure reports it with the shim's text and returns 0. */
#define OK(name, call)                                                                 \
    ({                                                                                 \
        hipError_t e_ = (call);                                                        \
        if (e_ != hipSuccess)                                                          \
            report("FAIL", name, "%s = %d %s", #call, (int)e_, hip.hipGetErrorString(e_)); \
        e_ == hipSuccess;                                                              \
    })

static void load(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL load %s\n", dlerror());
        exit(2);
    }
#define SMOKE_LOAD(ret, name, args)                                                    \
    if (!(*(void **)&hip.name = dlsym(lib, #name))) {                                  \
        fprintf(stderr, "FAIL load %s lacks %s\n", path, #name);                       \
        exit(2);                                                                       \
    }
    SMOKE_FNS(SMOKE_LOAD)
#undef SMOKE_LOAD
    *(void **)&hip.version = dlsym(lib, "devipc_shim_version");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void to_hex(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static int from_hex(const char *s, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return 0;
        ((unsigned char *)p)[i] = (unsigned char)v;
    }
    return 1;
}

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(i * 131 + seed); }

/* ----- selftest (no GPU) ---------------------------------------------------------- */

static const char *served[] = {
#define SMOKE_NAME(ret, name, args) #name,
    SMOKE_FNS(SMOKE_NAME)
#undef SMOKE_NAME
};

static int selftest(const char *functions)
{
    report("INFO", "shim", "%s", hip.version ? hip.version() : "(no devipc_shim_version)");
    if (!hip.version) report("FAIL", "shim-version", "devipc_shim_version is not exported");
    int v = 0;
    if (OK("runtime-version", hip.hipRuntimeGetVersion(&v))) {
        if (v / 100000 == 602 && v % 100000 >= 12000)
            report("PASS", "runtime-version", "%d (HIP 6.2.<CUDA runtime>)", v);
        else
            report("FAIL", "runtime-version", "%d is not 6.2.<CUDA runtime version>", v);
    }
    int bad = 0;
#define SMOKE_ERR(name, value)                                                         \
    if (strcmp(hip.hipGetErrorName(value), #name) != 0) {                              \
        report("FAIL", "error-names", "%d is %s, not %s", value, hip.hipGetErrorName(value), #name); \
        bad++;                                                                         \
    }
    HOC_HIP_ERRORS(SMOKE_ERR)
#undef SMOKE_ERR
    if (strcmp(hip.hipGetErrorName(711), "hipErrorUnknown") != 0) bad++;
    if (!strstr(hip.hipGetErrorString(hipErrorInvalidValue), "hip-over-cuda")) bad++;
    if (!bad) report("PASS", "error-names", "every HIP code named as devipc names it");
    else report("FAIL", "error-names", "%d wrong", bad);
    bad = 0;
    for (size_t i = 0; i < sizeof served / sizeof served[0]; i++) {
        void *fn = NULL;
        hipDriverProcAddressQueryResult st = -1;
        if (hip.hipGetProcAddress(served[i], &fn, 60200000, 0, &st) != hipSuccess || !fn ||
            st != HIP_GET_PROC_ADDRESS_SUCCESS) {
            report("FAIL", "proc-address", "%s not found", served[i]);
            bad++;
        }
    }
    /* Every function functions.txt says is served (when given): hipGetProcAddress finds it. */
    size_t listed = 0;
    FILE *list = functions ? fopen(functions, "r") : NULL;
    if (functions && !list) report("FAIL", "proc-address", "cannot read %s", functions);
    char line[256];
    while (list && fgets(line, sizeof line, list)) {
        char status[32], name[128];
        if (sscanf(line, "%31s %127s", status, name) != 2 || strcmp(status, "served") != 0)
            continue;
        void *f = NULL;
        listed++;
        if (hip.hipGetProcAddress(name, &f, 60200000, 0, NULL) != hipSuccess || !f) {
            report("FAIL", "proc-address", "%s (served in functions.txt) not found", name);
            bad++;
        }
    }
    if (list) fclose(list);
    void *fn = (void *)1;
    if (hip.hipGetProcAddress("hipNoSuchFunction", &fn, 60200000, 0, NULL) != hipErrorInvalidValue ||
        fn != NULL)
        bad++;
    if (!bad)
        report("PASS", "proc-address", "%zu + %zu listed functions found, an unknown one refused",
               sizeof served / sizeof served[0], listed);
    /* The guards: HIP's InvalidValue where CUDA would crash or accept NULL. */
    hipDeviceptr_t base;
    size_t size;
    int guards = hip.hipIpcGetMemHandle(NULL, (void *)0x1000) == hipErrorInvalidValue &&
                 hip.hipIpcOpenMemHandle(NULL, (hipIpcMemHandle_t){{0}}, 1) == hipErrorInvalidValue &&
                 hip.hipIpcGetEventHandle(NULL, NULL) == hipErrorInvalidValue &&
                 hip.hipMemGetAddressRange(NULL, &size, NULL) == hipErrorInvalidValue &&
                 hip.hipMemGetAddressRange(&base, NULL, NULL) == hipErrorInvalidValue &&
                 hip.hipRuntimeGetVersion(NULL) == hipErrorInvalidValue;
    report(guards ? "PASS" : "FAIL", "null-guards", "NULL out-pointers give hipErrorInvalidValue");
    int count = -1;
    hipError_t e = hip.hipGetDeviceCount(&count);
    report("INFO", "device-count", "%s, %d device(s): %s", hip.hipGetErrorName(e), count,
           hip.hipGetErrorString(e));
    if (e != hipSuccess && count != 0)
        report("FAIL", "device-count", "a failed hipGetDeviceCount must write 0");
    return failures ? 1 : 0;
}

/* ----- the child ------------------------------------------------------------------ */

static int read_line(FILE *f, char *buf, size_t n)
{
    if (!fgets(buf, (int)n, f)) return 0;
    buf[strcspn(buf, "\n")] = 0;
    return 1;
}

static int child(void)
{
    role = "child";
    char line[512];
    unsigned char *host = malloc(SIZE);
    void *mem = NULL;
    hipEvent_t ping = NULL, pong = NULL;
    hipStream_t s = NULL;
    if (!host || !OK("set-device", hip.hipSetDevice(0)) || !OK("stream", hip.hipStreamCreate(&s)))
        return 1;
    while (read_line(stdin, line, sizeof line)) {
        if (strncmp(line, "mem ", 4) == 0) {
            hipIpcMemHandle_t h;
            if (!from_hex(line + 4, &h, sizeof h) ||
                !OK("open-mem", hip.hipIpcOpenMemHandle(&mem, h, hipIpcMemLazyEnablePeerAccess)) ||
                !OK("read", hip.hipMemcpy(host, mem, SIZE, hipMemcpyDeviceToHost))) {
                printf("mem FAIL\n");
            } else {
                size_t bad = 0;
                for (size_t i = 0; i < SIZE; i++) bad += host[i] != pattern(i, 7);
                memset(host, 0xC3, 4096);
                int ok = bad == 0 && OK("write", hip.hipMemcpy((char *)mem + 128, host, 4096,
                                                               hipMemcpyHostToDevice)) &&
                         OK("sync", hip.hipDeviceSynchronize());
                printf("mem %s %zu\n", ok ? "ok" : "FAIL", bad);
            }
        } else if (strncmp(line, "ev ", 3) == 0) {
            hipIpcEventHandle_t a, b;
            int ok = from_hex(line + 3, &a, sizeof a) && from_hex(line + 3 + 129, &b, sizeof b) &&
                     OK("open-ping", hip.hipIpcOpenEventHandle(&ping, a)) &&
                     OK("open-pong", hip.hipIpcOpenEventHandle(&pong, b));
            printf("ev %s\n", ok ? "ok" : "FAIL");
        } else if (line[0] == 'p') {
            unsigned long long r = strtoull(line + 2, NULL, 10), v = ~0ull, back = 2 * r + 1;
            int ok = OK("wait-ping", hip.hipStreamWaitEvent(s, ping, 0)) &&
                     OK("read-round", hip.hipMemcpyAsync(&v, mem, 8, hipMemcpyDeviceToHost, s)) &&
                     OK("sync-round", hip.hipStreamSynchronize(s)) &&
                     OK("write-round", hip.hipMemcpyAsync((char *)mem + 8, &back, 8,
                                                          hipMemcpyHostToDevice, s)) &&
                     OK("record-pong", hip.hipEventRecord(pong, s)) &&
                     OK("sync-write", hip.hipStreamSynchronize(s));
            printf("q %s %llu\n", ok && v == r ? "ok" : "FAIL", v);
        } else if (strncmp(line, "vmm ", 4) == 0) {
            int fd = -1;
            size_t size = 0;
            sscanf(line + 4, "%d %zu", &fd, &size);
            struct stat st;
            off_t end = -1;
            if (fstat(fd, &st) == 0) end = lseek(fd, 0, SEEK_END);
            hipMemGenericAllocationHandle_t h = NULL;
            void *va = NULL;
            hipMemAccessDesc acc = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
            /* The ROCm 6.2 .. 7.0 convention the shim reports: a pointer to the fd. */
            int ok = OK("vmm-import", hip.hipMemImportFromShareableHandle(
                                          &h, &fd, hipMemHandleTypePosixFileDescriptor)) &&
                     OK("vmm-reserve", hip.hipMemAddressReserve(&va, size, 0, NULL, 0)) &&
                     OK("vmm-map", hip.hipMemMap(va, size, 0, h, 0)) &&
                     OK("vmm-access", hip.hipMemSetAccess(va, size, &acc, 1)) &&
                     OK("vmm-read", hip.hipMemcpy(host, va, 4096, hipMemcpyDeviceToHost));
            size_t bad = 0;
            for (size_t i = 0; ok && i < 4096; i++) bad += host[i] != pattern(i, 11);
            memset(host, 0x5A, 4096);
            ok = ok && bad == 0 &&
                 OK("vmm-write", hip.hipMemcpy((char *)va + 4096, host, 4096, hipMemcpyHostToDevice)) &&
                 OK("vmm-sync", hip.hipDeviceSynchronize());
            if (va) {
                hip.hipMemUnmap(va, size);
                hip.hipMemAddressFree(va, size);
            }
            if (h) hip.hipMemRelease(h);
            printf("vmm %s st_size=%lld lseek_end=%lld\n", ok ? "ok" : "FAIL",
                   (long long)st.st_size, (long long)end);
        } else if (strcmp(line, "bye") == 0) {
            int ok = !mem || OK("close-mem", hip.hipIpcCloseMemHandle(mem));
            printf("bye %s\n", ok ? "ok" : "FAIL");
            fflush(stdout);
            return ok ? 0 : 1;
        }
        fflush(stdout);
    }
    return 1;
}

/* ----- the parent ----------------------------------------------------------------- */

static FILE *to_child, *from_child;

static int ask(const char *name, char *reply, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(to_child, fmt, ap);
    va_end(ap);
    fflush(to_child);
    if (!read_line(from_child, reply, n)) {
        report("FAIL", name, "the child gave no answer (it crashed or exited; its stderr is above)");
        return 0;
    }
    return 1;
}

static pid_t spawn(const char *self, const char *shim)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execl(self, self, shim, "child", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child = fdopen(in[1], "w");
    from_child = fdopen(out[0], "r");
    return pid;
}

static int run(const char *self, const char *shim)
{
    int count = 0, v = 0;
    if (!OK("device-count", hip.hipGetDeviceCount(&count)) || count < 1) return 1;
    hip.hipRuntimeGetVersion(&v);
    report("INFO", "shim", "%s", hip.version ? hip.version() : "?");
    report("INFO", "devices", "%d device(s), hipRuntimeGetVersion %d", count, v);
    unsigned char *host = malloc(SIZE);
    void *mem = NULL;
    hipStream_t s = NULL;
    hipEvent_t ping = NULL, pong = NULL;
    unsigned flags = hipEventInterprocess | hipEventDisableTiming;
    if (!host || !OK("set-device", hip.hipSetDevice(0)) || !OK("malloc", hip.hipMalloc(&mem, SIZE)) ||
        !OK("stream", hip.hipStreamCreate(&s)) ||
        !OK("event", hip.hipEventCreateWithFlags(&ping, flags)) ||
        !OK("event", hip.hipEventCreateWithFlags(&pong, flags)))
        return 1;
    for (size_t i = 0; i < SIZE; i++) host[i] = pattern(i, 7);
    hipIpcMemHandle_t mh;
    hipIpcEventHandle_t eh[2];
    if (!OK("fill", hip.hipMemcpy(mem, host, SIZE, hipMemcpyHostToDevice)) ||
        !OK("get-mem-handle", hip.hipIpcGetMemHandle(&mh, (char *)mem + 4096)) ||
        !OK("get-event-handle", hip.hipIpcGetEventHandle(&eh[0], ping)) ||
        !OK("get-event-handle", hip.hipIpcGetEventHandle(&eh[1], pong)))
        return 1;
    /* Same process: CUDA refuses to open its own handle (hip.mem.open-in-exporter-rejected). */
    void *self_open = NULL;
    hipError_t e = hip.hipIpcOpenMemHandle(&self_open, mh, hipIpcMemLazyEnablePeerAccess);
    report("INFO", "open-in-exporter", "%s", hip.hipGetErrorName(e));
    hipDeviceptr_t base = NULL;
    size_t range = 0;
    if (OK("address-range", hip.hipMemGetAddressRange(&base, &range, (char *)mem + 100)))
        report(base == mem && range >= SIZE ? "PASS" : "FAIL", "address-range",
               "base %p size %zu for %p + 100", base, range, mem);

    pid_t pid = spawn(self, shim);
    if (pid < 0) {
        report("FAIL", "spawn", "%s", strerror(errno));
        return 1;
    }
    char hex[2 * 64 + 1], hex2[2 * 64 + 1], reply[256];
    to_hex(&mh, sizeof mh, hex);
    double t0 = now();
    if (ask("mem-open", reply, sizeof reply, "mem %s\n", hex)) {
        int ok = strncmp(reply, "mem ok", 6) == 0;
        if (ok && OK("read-back", hip.hipMemcpy(host, mem, SIZE, hipMemcpyDeviceToHost))) {
            size_t bad = 0;
            for (size_t i = 0; i < SIZE; i++)
                bad += host[i] != (i >= 128 && i < 128 + 4096 ? 0xC3 : pattern(i, 7));
            ok = bad == 0;
        }
        report(ok ? "PASS" : "FAIL", "bytes-both-ways",
               "child opened the handle of an interior pointer, read 1 MiB, wrote 4 KiB at +128 "
               "(%s; %.1f ms)", reply, (now() - t0) * 1e3);
    }
    to_hex(&eh[0], sizeof eh[0], hex);
    to_hex(&eh[1], sizeof eh[1], hex2);
    if (ask("event-open", reply, sizeof reply, "ev %s %s\n", hex, hex2) &&
        strcmp(reply, "ev ok") == 0) {
        int ok = 1;
        t0 = now();
        for (unsigned long long r = 0; ok && r < ROUNDS; r++) {
            unsigned long long back = 0;
            ok = OK("round-write", hip.hipMemcpyAsync(mem, &r, 8, hipMemcpyHostToDevice, s)) &&
                 OK("record-ping", hip.hipEventRecord(ping, s)) &&
                 OK("sync-ping", hip.hipStreamSynchronize(s)) &&
                 ask("round", reply, sizeof reply, "p %llu\n", r) &&
                 strncmp(reply, "q ok", 4) == 0 && OK("sync-pong", hip.hipEventSynchronize(pong)) &&
                 OK("round-read", hip.hipMemcpy(&back, (char *)mem + 8, 8, hipMemcpyDeviceToHost)) &&
                 back == 2 * r + 1;
            if (!ok) report("FAIL", "event-ping-pong", "round %llu: %s, read back %llu", r, reply, back);
        }
        if (ok)
            report("PASS", "event-ping-pong", "%d rounds, %.1f us per round trip", ROUNDS,
                   (now() - t0) * 1e6 / ROUNDS);
    } else {
        report("FAIL", "event-open", "%s", reply);
    }

    int vmm = 0;
    hip.hipDeviceGetAttribute(&vmm, hipDeviceAttributeVirtualMemoryManagementSupported, 0);
    if (!vmm) {
        report("FAIL", "vmm-fd", "the device does not support virtual memory management");
    } else {
        hipMemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = hipMemAllocationTypePinned;
        prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
        prop.location.type = hipMemLocationTypeDevice;
        size_t gran = 0;
        hipMemGenericAllocationHandle_t h = NULL;
        void *va = NULL;
        int fd = -1;
        hipMemAccessDesc acc = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
        for (size_t i = 0; i < 4096; i++) host[i] = pattern(i, 11);
        int ok = OK("vmm-granularity", hip.hipMemGetAllocationGranularity(
                                           &gran, &prop, hipMemAllocationGranularityMinimum)) &&
                 OK("vmm-create", hip.hipMemCreate(&h, gran, &prop, 0)) &&
                 OK("vmm-reserve", hip.hipMemAddressReserve(&va, gran, 0, NULL, 0)) &&
                 OK("vmm-map", hip.hipMemMap(va, gran, 0, h, 0)) &&
                 OK("vmm-access", hip.hipMemSetAccess(va, gran, &acc, 1)) &&
                 OK("vmm-fill", hip.hipMemcpy(va, host, 4096, hipMemcpyHostToDevice)) &&
                 OK("vmm-export", hip.hipMemExportToShareableHandle(
                                      &fd, h, hipMemHandleTypePosixFileDescriptor, 0));
        if (ok) {
            struct stat st;
            fstat(fd, &st);
            off_t end = lseek(fd, 0, SEEK_END);
            report("INFO", "vmm-fd", "exported fd %d: st_size %lld, lseek(SEEK_END) %lld (devipc "
                   "bounds a VMM import by this size)", fd, (long long)st.st_size, (long long)end);
            fcntl(fd, F_SETFD, 0); /* inherited by the child: it already runs, so re-spawn */
            if (ask("vmm-bye", reply, sizeof reply, "bye\n")) waitpid(pid, NULL, 0);
            pid = spawn(self, shim);
            ok = pid > 0 && ask("vmm", reply, sizeof reply, "vmm %d %zu\n", fd, gran) &&
                 strncmp(reply, "vmm ok", 6) == 0 &&
                 OK("vmm-read-back", hip.hipMemcpy(host, (char *)va + 4096, 4096, hipMemcpyDeviceToHost));
            size_t bad = 0;
            for (size_t i = 0; ok && i < 4096; i++) bad += host[i] != 0x5A;
            report(ok && bad == 0 ? "PASS" : "FAIL", "vmm-fd",
                   "child imported the fd, read 4 KiB and wrote 4 KiB back (%s)", reply);
        }
        if (va) {
            hip.hipMemUnmap(va, gran);
            hip.hipMemAddressFree(va, gran);
        }
        if (h) hip.hipMemRelease(h);
        if (fd >= 0) close(fd);
    }
    if (pid > 0 && ask("bye", reply, sizeof reply, "bye\n")) {
        int status = 0;
        waitpid(pid, &status, 0);
        report(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strcmp(reply, "bye ok") == 0
                   ? "PASS" : "FAIL",
               "child-exit", "%s, status %d", reply, status);
    }
    hip.hipFree(mem);
    printf("SUMMARY %s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SHIM.so selftest [functions.txt] | run\n", argv[0]);
        return 2;
    }
    load(argv[1]);
    if (strcmp(argv[2], "selftest") == 0) return selftest(argc > 3 ? argv[3] : NULL);
    if (strcmp(argv[2], "child") == 0) return child();
    if (strcmp(argv[2], "run") == 0) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return 2;
        self[n] = 0;
        return run(self, argv[1]);
    }
    fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
}
