/* Two processes on one emulated backend: the producer (this program) starts the consumer
 * (this program again, fork + exec) and hands it, over a pipe, a memory token as text, the
 * same token as bytes, a framework block's external export and a signal token. The
 * consumer checks the bytes, copies them on a stream into its own memory (a request
 * polled to completion), writes its reply, closes its imports and notifies; the
 * producer waits for the signal, checks the reply and releases everything.
 *
 * usage: pair hip|ascend   (the consumer role is `pair --consumer KIND RFD WFD`) */
#define _DEFAULT_SOURCE /* usleep */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define SIZE (1u << 16)
#define EXT_SIZE 8192u
#define LINE 8192

static void put_line(FILE *f, const char *key, const char *value) {
    ASSERT(fprintf(f, "%s %s\n", key, value) > 0);
    ASSERT(fflush(f) == 0);
}

/* Reads the next line, which must start with `key`, into `value`. */
static void get_line(FILE *f, const char *key, char *value) {
    char line[LINE];
    ASSERT(fgets(line, sizeof line, f) != NULL);
    size_t n = strlen(key);
    ASSERT(strncmp(line, key, n) == 0 && line[n] == ' ');
    line[strcspn(line, "\n")] = 0;
    strcpy(value, line + n + 1);
}

static void to_hex(const uint8_t *bytes, size_t len, char *out) {
    for (size_t i = 0; i < len; i++) sprintf(out + 2 * i, "%02x", bytes[i]);
    out[2 * len] = 0;
}

static size_t from_hex(const char *hex, uint8_t *out) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + 3); }

static int consumer(const char *kind, int rfd, int wfd) {
    FILE *in = fdopen(rfd, "r");
    FILE *out = fdopen(wfd, "w");
    ASSERT(in && out);
    devipc_runtime *rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(kind), &rt));
    uint32_t pid = 0;
    CHECK(devipc_runtime_process_id(rt, &pid));
    char value[LINE];
    snprintf(value, sizeof value, "%u", pid);
    put_line(out, "pid", value);

    /* The memory token, as text and as bytes: both parse to the same token. */
    devipc_mem_token *tok = NULL, *tok2 = NULL;
    get_line(in, "mem", value);
    CHECK(devipc_mem_token_from_text(value, &tok));
    get_line(in, "membytes", value);
    uint8_t bytes[LINE / 2];
    size_t nbytes = from_hex(value, bytes);
    CHECK(devipc_mem_token_from_bytes(bytes, nbytes, &tok2));
    char text1[LINE], text2[LINE];
    CHECK(devipc_mem_token_to_text(tok, text1, sizeof text1, NULL));
    CHECK(devipc_mem_token_to_text(tok2, text2, sizeof text2, NULL));
    ASSERT(strcmp(text1, text2) == 0);
    uint64_t len = 0;
    CHECK(devipc_mem_token_len(tok, &len));
    ASSERT(len == SIZE);

    /* Import on the exporter's device (found by its physical identity) and read. */
    bool visible = false;
    uint32_t dev = 99;
    CHECK(devipc_runtime_local_device_of(rt, tok, &visible, &dev));
    ASSERT(visible && dev == 0);
    devipc_import *imp = NULL;
    CHECK(devipc_runtime_import_on_exporter_device(rt, tok, &imp));
    bool local = true;
    CHECK(devipc_import_is_local(imp, &local));
    ASSERT(!local);
    size_t ilen = 0;
    CHECK(devipc_import_len(imp, &ilen));
    ASSERT(ilen == SIZE);
    uint8_t *buf = malloc(SIZE);
    ASSERT(buf);
    CHECK(devipc_import_read(imp, 0, buf, SIZE));
    for (size_t i = 0; i < SIZE; i++) ASSERT(buf[i] == pattern(i));
    /* The same token imported again shares the vendor import. */
    devipc_import *again = NULL;
    CHECK(devipc_runtime_import(rt, tok2, 0, &again));
    CHECK(devipc_import_read(again, SIZE - 4, buf, 4));
    ASSERT(buf[0] == pattern(SIZE - 4));
    CHECK(devipc_import_write(imp, 100, "reply", 5));

    /* The data plane: a stream-ordered copy out of the import into local memory, its
     * request polled to completion. */
    devipc_stream *stream = NULL;
    CHECK(devipc_runtime_create_stream(rt, 0, &stream));
    devipc_buffer *local_buf = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, SIZE, &local_buf));
    devipc_span *from = NULL, *to = NULL;
    CHECK(devipc_import_span(imp, 0, SIZE, &from));
    CHECK(devipc_buffer_span(local_buf, 0, SIZE, &to));
    devipc_request *req = NULL;
    CHECK(devipc_stream_copy(stream, to, from, &req));
    bool done = false;
    for (int tries = 0; !done; tries++) {
        ASSERT(tries < 60000);
        CHECK(devipc_request_is_complete(req, &done));
        if (!done) usleep(1000);
    }
    CHECK(devipc_request_free(&req));
    memset(buf, 0, SIZE);
    CHECK(devipc_buffer_read(local_buf, 0, buf, SIZE));
    ASSERT(buf[0] == pattern(0) && buf[SIZE - 1] == pattern(SIZE - 1));
    ASSERT(memcmp(buf + 100, "reply", 5) == 0);
    CHECK(devipc_span_free(&from));
    CHECK(devipc_span_free(&to));
    CHECK(devipc_buffer_free(&local_buf));
    CHECK(devipc_stream_free(&stream));

    /* The framework block, exported externally. */
    devipc_mem_token *ext_tok = NULL;
    get_line(in, "ext", value);
    CHECK(devipc_mem_token_from_text(value, &ext_tok));
    devipc_import *ext = NULL;
    CHECK(devipc_runtime_import(rt, ext_tok, 0, &ext));
    char word[9] = {0};
    size_t elen = 0;
    CHECK(devipc_import_len(ext, &elen));
    ASSERT(elen == EXT_SIZE);
    CHECK(devipc_import_write(ext, EXT_SIZE - 8, "external", 8));
    CHECK(devipc_import_read(ext, EXT_SIZE - 8, word, 8));
    ASSERT(memcmp(word, "external", 8) == 0);

    /* The signal: import, then notify once every import is closed. */
    devipc_signal_token *stok = NULL;
    get_line(in, "sig", value);
    CHECK(devipc_signal_token_from_text(value, &stok));
    devipc_signal *sig = NULL;
    CHECK(devipc_runtime_import_signal(rt, stok, 0, &sig));
    CHECK(devipc_import_close(&imp));
    CHECK(devipc_import_close(&again));
    CHECK(devipc_import_close(&ext));
    ASSERT(imp == NULL && again == NULL && ext == NULL);
    CHECK(devipc_signal_notify(sig));

    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_signal_token_free(&stok));
    CHECK(devipc_mem_token_free(&ext_tok));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_mem_token_free(&tok2));
    CHECK(devipc_runtime_free(&rt));
    CHECK(devipc_drain(60000));
    ASSERT(devipc_live_handles() == 0);
    free(buf);
    fclose(in);
    fclose(out);
    return 0;
}

static int producer(const char *self, const char *kind) {
    int down[2], up[2];
    ASSERT(pipe(down) == 0 && pipe(up) == 0);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        close(down[1]);
        close(up[0]);
        char rfd[16], wfd[16];
        snprintf(rfd, sizeof rfd, "%d", down[0]);
        snprintf(wfd, sizeof wfd, "%d", up[1]);
        execl(self, self, "--consumer", kind, rfd, wfd, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    FILE *out = fdopen(down[1], "w");
    FILE *in = fdopen(up[0], "r");
    ASSERT(in && out);

    devipc_runtime *rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(kind), &rt));
    bool emulated = false;
    CHECK(devipc_runtime_is_emulated(rt, &emulated));
    ASSERT(emulated);
    char value[LINE];
    get_line(in, "pid", value);
    uint32_t peer = (uint32_t)strtoul(value, NULL, 10);

    /* Memory: allocate, fill, export (granted only), grant the consumer, send. */
    devipc_buffer *buf = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, SIZE, &buf));
    uint8_t *bytes = malloc(SIZE);
    ASSERT(bytes);
    for (size_t i = 0; i < SIZE; i++) bytes[i] = pattern(i);
    CHECK(devipc_buffer_write(buf, 0, bytes, SIZE));
    devipc_export_options opts;
    CHECK(devipc_export_options_init(&opts));
    devipc_mem_token *tok = NULL;
    size_t buf_len = 0; /* Ascend rounds allocations up to its granularity */
    CHECK(devipc_buffer_len(buf, &buf_len));
    ASSERT(buf_len >= SIZE);
    CHECK(devipc_buffer_export_range(buf, 0, SIZE, &opts, &tok));
    CHECK(devipc_runtime_grant(rt, tok, &peer, 1));
    size_t needed = 0;
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_mem_token_to_text(tok, NULL, 0, &needed));
    char *text = malloc(needed);
    ASSERT(text);
    CHECK(devipc_mem_token_to_text(tok, text, needed, NULL));
    put_line(out, "mem", text);
    free(text);
    uint8_t tbytes[LINE / 2];
    size_t nbytes = 0;
    CHECK(devipc_mem_token_to_bytes(tok, tbytes, sizeof tbytes, &nbytes));
    char hex[LINE];
    to_hex(tbytes, nbytes, hex);
    put_line(out, "membytes", hex);

    /* Framework memory: exported to any process, no grant. */
    uint64_t block = 0;
    CHECK(devipc_testing_framework_malloc(rt, 0, EXT_SIZE, &block));
    opts.flags = DEVIPC_EXPORT_ANY_PROCESS;
    devipc_mem_token *ext_tok = NULL;
    CHECK(devipc_runtime_export_external(rt, 0, block, EXT_SIZE, &opts, &ext_tok));
    /* Not importable here: its lifetime is the framework's (use the pointer instead). */
    devipc_import *mine = NULL;
    EXPECT(DEVIPC_ERR_UNSUPPORTED, devipc_runtime_import(rt, ext_tok, 0, &mine));
    ASSERT(mine == NULL);
    char ext_text[LINE];
    CHECK(devipc_mem_token_to_text(ext_tok, ext_text, sizeof ext_text, NULL));
    put_line(out, "ext", ext_text);

    /* The signal the consumer notifies when done. */
    devipc_signal *sig = NULL;
    CHECK(devipc_runtime_create_signal(rt, 0, &sig));
    devipc_signal_token *stok = NULL;
    opts.flags = 0;
    CHECK(devipc_signal_export(sig, &opts, &stok));
    CHECK(devipc_signal_grant(sig, stok, &peer, 1));
    char sig_text[LINE];
    CHECK(devipc_signal_token_to_text(stok, sig_text, sizeof sig_text, NULL));
    put_line(out, "sig", sig_text);

    CHECK(devipc_signal_wait(sig, 60000));
    char reply[6] = {0};
    CHECK(devipc_buffer_read(buf, 100, reply, 5));
    ASSERT(strcmp(reply, "reply") == 0);

    int status = 0;
    ASSERT(waitpid(child, &status, 0) == child);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Every importer closed: end the external exports, free the block. */
    CHECK(devipc_runtime_close_external(rt, 0, block));
    CHECK(devipc_testing_framework_free(rt, 0, block));
    CHECK(devipc_signal_token_free(&stok));
    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_mem_token_free(&ext_tok));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_runtime_free(&rt)); /* the buffer keeps the backend */
    CHECK(devipc_buffer_free(&buf));
    ASSERT(devipc_live_handles() == 0);
    free(bytes);
    fclose(in);
    fclose(out);
    printf("PASS pair %s\n", kind);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--consumer") == 0)
        return consumer(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc != 2) {
        fprintf(stderr, "usage: %s hip|ascend\n", argv[0]);
        return 2;
    }
    return producer(argv[0], argv[1]);
}
