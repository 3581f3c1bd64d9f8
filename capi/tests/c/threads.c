/* Several threads on one runtime handle: each allocates, writes, exports, imports its own
 * export, reads it back, fails on purpose and reads its own last error (each thread has
 * its own), then frees; meanwhile they share one signal, notified and waited across
 * threads, and race to free copies of one shared handle (exactly one free succeeds).
 *
 * usage: threads hip|ascend */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define THREADS 8
#define ROUNDS 20

static devipc_runtime *rt;
static devipc_signal *sig;
static devipc_buffer *shared;
static int frees_ok;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    for (int round = 0; round < ROUNDS; round++) {
        devipc_buffer *buf = NULL;
        CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
        uint8_t out[64], in[64];
        memset(out, (int)(id * 31 + (uintptr_t)round), sizeof out);
        CHECK(devipc_buffer_write(buf, 128, out, sizeof out));
        devipc_mem_token *tok = NULL;
        CHECK(devipc_buffer_export(buf, NULL, &tok));
        char text[1024];
        CHECK(devipc_mem_token_to_text(tok, text, sizeof text, NULL));
        devipc_mem_token *parsed = NULL;
        CHECK(devipc_mem_token_from_text(text, &parsed));
        devipc_import *imp = NULL;
        CHECK(devipc_runtime_import(rt, parsed, 0, &imp));
        CHECK(devipc_import_read(imp, 128, in, sizeof in));
        ASSERT(memcmp(in, out, sizeof in) == 0);

        /* This thread's failure, read back on this thread. */
        uint32_t bogus = (uint32_t)(100 + id);
        devipc_buffer *none = NULL;
        EXPECT(DEVIPC_ERR_INVALID_DEVICE, devipc_runtime_allocate(rt, bogus, 64, &none));
        char msg[512], want[32];
        CHECK(devipc_last_error_message(msg, sizeof msg, NULL));
        snprintf(want, sizeof want, "invalid device %u", bogus);
        ASSERT(strstr(msg, want) != NULL);

        CHECK(devipc_import_close(&imp));
        CHECK(devipc_mem_token_free(&parsed));
        CHECK(devipc_mem_token_free(&tok));
        CHECK(devipc_buffer_free(&buf));
    }
    /* Hand the signal on: thread i waits for i-1's notify (thread 0 is started by main). */
    CHECK(devipc_signal_wait(sig, 60000));
    CHECK(devipc_signal_notify(sig));
    /* Race to free a copy of the shared handle: one wins, the others see it gone. */
    devipc_buffer *mine = shared;
    devipc_status s = devipc_buffer_free(&mine);
    ASSERT(s == DEVIPC_OK || s == DEVIPC_ERR_UNKNOWN_HANDLE);
    if (s == DEVIPC_OK) {
        pthread_mutex_lock(&lock);
        frees_ok++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s hip|ascend\n", argv[0]);
        return 2;
    }
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(argv[1]), &rt));
    CHECK(devipc_runtime_create_signal(rt, 0, &sig));
    CHECK(devipc_runtime_allocate(rt, 0, 4096, &shared));
    pthread_t threads[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        ASSERT(pthread_create(&threads[i], NULL, worker, (void *)i) == 0);
    CHECK(devipc_signal_notify(sig));
    for (int i = 0; i < THREADS; i++) ASSERT(pthread_join(threads[i], NULL) == 0);
    ASSERT(frees_ok == 1);
    /* The last notify is still pending: consume it. */
    CHECK(devipc_signal_wait(sig, 60000));
    ASSERT(devipc_last_error_code() == DEVIPC_OK); /* main's own last error: none */
    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_runtime_free(&rt));
    ASSERT(devipc_live_handles() == 0);
    printf("PASS threads %s\n", argv[1]);
    return 0;
}
