/* Test helpers for the C programs of capi/tests/c: a failed check prints where, the call,
 * the status and the thread's last error, and exits 1. */
#ifndef DEVIPC_TEST_CHECK_H
#define DEVIPC_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devipc.h"

static inline void devipc_test_report(const char *file, int line, const char *what,
                                      devipc_status got, devipc_status want) {
    char msg[2048];
    size_t needed = 0;
    devipc_last_error_message(msg, sizeof msg, &needed);
    fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n  last error: %s\n", file,
            line, what, (int)got, devipc_status_name(got), (int)want, devipc_status_name(want),
            msg);
    exit(1);
}

/* The call must succeed. */
#define CHECK(call)                                                                      \
    do {                                                                                 \
        devipc_status s_ = (call);                                                       \
        if (s_ != DEVIPC_OK) devipc_test_report(__FILE__, __LINE__, #call, s_, DEVIPC_OK); \
    } while (0)

/* The call must fail with `want`. */
#define EXPECT(want, call)                                                                \
    do {                                                                                  \
        devipc_status s_ = (call);                                                        \
        if (s_ != (want)) devipc_test_report(__FILE__, __LINE__, #call, s_, (want));      \
    } while (0)

/* A condition that must hold. */
#define ASSERT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* The last error's message contains `needle`. */
static inline int devipc_test_last_error_has(const char *needle) {
    char msg[2048];
    devipc_last_error_message(msg, sizeof msg, NULL);
    if (strstr(msg, needle) != NULL) return 1;
    fprintf(stderr, "last error \"%s\" lacks \"%s\"\n", msg, needle);
    return 0;
}

/* DEVIPC_BACKEND_HIP for "hip", DEVIPC_BACKEND_ASCEND for "ascend", else exits. */
static inline devipc_backend_kind devipc_test_kind(const char *name) {
    if (strcmp(name, "hip") == 0) return DEVIPC_BACKEND_HIP;
    if (strcmp(name, "ascend") == 0) return DEVIPC_BACKEND_ASCEND;
    fprintf(stderr, "unknown backend %s (hip or ascend)\n", name);
    exit(2);
}

#endif
