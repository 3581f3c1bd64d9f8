/* The data plane on one emulated backend: streams (devipc's own and a wrapped default
 * stream), spans, copies (one, a batch, host to device, device to host), requests polled
 * and waited, events, and the lifetime rules: a request keeps the memory it copies through
 * after its buffer, import and span handles are freed, and freeing an unfinished request
 * never blocks (a held stream keeps the copy in flight meanwhile).
 *
 * usage: dataplane hip|ascend */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define SIZE 65536u

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Polls the request until it completed (at most 60 s). */
static void poll_until_done(devipc_request *req) {
    bool done = false;
    double until = now() + 60;
    while (!done) {
        CHECK(devipc_request_is_complete(req, &done));
        ASSERT(now() < until);
        if (!done) nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s hip|ascend\n", argv[0]);
        return 2;
    }
    devipc_runtime *rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(argv[1]), &rt));
    devipc_stream *stream = NULL;
    CHECK(devipc_runtime_create_stream(rt, 0, &stream));
    uint32_t dev = 9;
    CHECK(devipc_stream_device(stream, &dev));
    ASSERT(dev == 0);
    devipc_buffer *a = NULL, *b = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, SIZE, &a));
    CHECK(devipc_runtime_allocate(rt, 0, SIZE, &b));
    static uint8_t pattern[SIZE], back[SIZE];
    for (size_t i = 0; i < SIZE; i++) pattern[i] = (uint8_t)(i * 13 + 1);
    CHECK(devipc_buffer_write(a, 0, pattern, SIZE));

    /* One copy, polled to completion. */
    devipc_span *sa = NULL, *sb = NULL;
    CHECK(devipc_buffer_span(a, 0, SIZE, &sa));
    CHECK(devipc_buffer_span(b, 0, SIZE, &sb));
    size_t len = 0;
    CHECK(devipc_span_len(sa, &len));
    ASSERT(len == SIZE);
    devipc_span *outside = NULL;
    size_t alen = 0; /* Ascend rounds allocations up to its granularity */
    CHECK(devipc_buffer_len(a, &alen));
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_span(a, alen - 8, 16, &outside));
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_span_slice(sa, 8, SIZE, &outside));
    ASSERT(outside == NULL);
    devipc_request *req = NULL;
    CHECK(devipc_stream_copy(stream, sb, sa, &req));
    poll_until_done(req);
    CHECK(devipc_request_wait(req, 0)); /* complete: returns at once */
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_request_take_host(req, back, sizeof back, NULL));
    CHECK(devipc_request_free(&req));
    CHECK(devipc_buffer_read(b, 0, back, SIZE));
    ASSERT(memcmp(back, pattern, SIZE) == 0);

    /* Host to device, then device to host, in stream order. */
    devipc_span *head = NULL;
    CHECK(devipc_span_slice(sb, 0, 16, &head));
    devipc_request *w = NULL, *r = NULL;
    CHECK(devipc_stream_write(stream, head, "ABCDEFGHIJKLMNOP", 16, &w));
    CHECK(devipc_stream_read(stream, head, &r));
    devipc_request *refused = NULL;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_stream_write(stream, head, "short", 5, &refused));
    ASSERT(refused == NULL);
    char bytes[16];
    size_t needed = 0;
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_request_take_host(r, bytes, 4, &needed));
    ASSERT(needed == 16);
    CHECK(devipc_request_take_host(r, bytes, sizeof bytes, NULL));
    ASSERT(memcmp(bytes, "ABCDEFGHIJKLMNOP", 16) == 0);
    CHECK(devipc_request_take_host(r, bytes, sizeof bytes, NULL)); /* again: same bytes */
    CHECK(devipc_request_free(&r));

    /* A batch; a refused pair names its index. */
    devipc_span *a1 = NULL, *a2 = NULL, *b1 = NULL, *b2 = NULL, *b2short = NULL;
    CHECK(devipc_span_slice(sa, 0, 1024, &a1));
    CHECK(devipc_span_slice(sa, 1024, 1024, &a2));
    CHECK(devipc_span_slice(sb, 4096, 1024, &b1));
    CHECK(devipc_span_slice(sb, 8192, 1024, &b2));
    CHECK(devipc_span_slice(sb, 8192, 512, &b2short));
    const devipc_span *dsts[2] = {b1, b2}, *srcs[2] = {a1, a2};
    CHECK(devipc_stream_copy_batch(stream, dsts, srcs, 2, &req));
    CHECK(devipc_request_wait(req, 60000));
    CHECK(devipc_request_free(&req));
    CHECK(devipc_buffer_read(b, 8192, back, 1024));
    ASSERT(memcmp(back, pattern + 1024, 1024) == 0);
    dsts[1] = b2short;
    EXPECT(DEVIPC_ERR_COPY, devipc_stream_copy_batch(stream, dsts, srcs, 2, &req));
    ASSERT(req == NULL);
    size_t index = 99;
    ASSERT(devipc_last_error_copy_index(&index) && index == 1);
    ASSERT(devipc_test_last_error_has("copy 1 of 2"));
    devipc_span *gone = b2short;
    CHECK(devipc_span_free(&b2short));
    dsts[1] = gone; /* a freed span in a batch: refused, with its index */
    EXPECT(DEVIPC_ERR_COPY, devipc_stream_copy_batch(stream, dsts, srcs, 2, &req));
    ASSERT(devipc_last_error_copy_index(&index) && index == 1);
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_stream_copy_batch(stream, NULL, srcs, 2, &req));

    /* Events: recorded after a copy; another stream waits for it on the device. */
    devipc_event *ev = NULL;
    CHECK(devipc_runtime_create_event(rt, 0, &ev));
    bool done = false;
    CHECK(devipc_stream_copy(stream, sb, sa, &req));
    CHECK(devipc_stream_record(stream, ev));
    CHECK(devipc_event_wait(ev, 60000));
    CHECK(devipc_event_is_complete(ev, &done));
    ASSERT(done);
    devipc_stream *other = NULL;
    CHECK(devipc_stream_wrap(rt, 0, 0, &other)); /* the default stream */
    CHECK(devipc_stream_wait_event(other, ev));
    CHECK(devipc_stream_synchronize(other));
    CHECK(devipc_request_free(&req));

    /* Lifetime: a copy out of an import, held in flight; every handle it uses is freed
     * before it ran, and freeing the request does not wait. */
    devipc_mem_token *tok = NULL;
    CHECK(devipc_buffer_export(a, NULL, &tok));
    devipc_import *imp = NULL;
    CHECK(devipc_runtime_import(rt, tok, 0, &imp));
    devipc_span *si = NULL;
    CHECK(devipc_import_span(imp, 0, SIZE, &si));
    CHECK(devipc_buffer_write(b, 0, "\0\0\0\0", 4));
    CHECK(devipc_testing_hold_stream(stream));
    CHECK(devipc_stream_copy(stream, sb, si, &req));
    CHECK(devipc_request_is_complete(req, &done));
    ASSERT(!done);
    EXPECT(DEVIPC_ERR_TIMEOUT, devipc_request_wait(req, 20));
    CHECK(devipc_import_close(&imp));
    CHECK(devipc_span_free(&si));
    CHECK(devipc_span_free(&sa));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_buffer_free(&a));
    double t0 = now();
    CHECK(devipc_request_free(&req));
    ASSERT(now() - t0 < 5.0);
    CHECK(devipc_testing_release_stream(stream));
    CHECK(devipc_drain(60000));
    CHECK(devipc_buffer_read(b, 0, back, SIZE));
    ASSERT(memcmp(back, pattern, SIZE) == 0);

    /* Signals with generations: two posts are two generations; a wait for each orders
     * the other stream; a generation not posted yet times out. (The same-process import
     * shares the signal, as a peer's would share its words.) */
    devipc_signal *sig = NULL, *peer_sig = NULL;
    devipc_signal_token *stok = NULL;
    devipc_export_options eo;
    devipc_export_options_init(&eo);
    eo.flags = DEVIPC_EXPORT_ANY_PROCESS;
    CHECK(devipc_runtime_create_signal(rt, 0, &sig));
    CHECK(devipc_signal_export(sig, &eo, &stok));
    CHECK(devipc_runtime_import_signal(rt, stok, 0, &peer_sig));
    uint64_t g1 = 0, g2 = 0, posted = 0, waited = 0;
    CHECK(devipc_signal_post(sig, stream, 10000, &g1));
    CHECK(devipc_signal_post(sig, stream, 10000, &g2));
    ASSERT(g1 == 1 && g2 == 2);
    CHECK(devipc_signal_wait_for(peer_sig, other, g1, 10000));
    CHECK(devipc_signal_wait_for(peer_sig, other, g2, 10000));
    EXPECT(DEVIPC_ERR_TIMEOUT, devipc_signal_wait_for(peer_sig, other, 3, 50));
    CHECK(devipc_signal_generations(sig, &posted, &waited));
    ASSERT(posted == 2 && waited == 2);
    CHECK(devipc_stream_synchronize(other));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_post(sig, NULL, 0, &g1));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_generations(sig, NULL, &waited));
    CHECK(devipc_signal_free(&peer_sig));
    CHECK(devipc_signal_token_free(&stok));
    CHECK(devipc_signal_free(&sig));

    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_stream_copy(stream, NULL, sb, &req));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_request_wait(NULL, 0));
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_stream_copy((devipc_stream *)ev, sb, sb, &req));

    /* A panic inside devipc is a status. */
    EXPECT(DEVIPC_ERR_PANIC, devipc_testing_panic());
    ASSERT(devipc_test_last_error_has("devipc_testing_panic was called"));

    CHECK(devipc_event_free(&ev));
    CHECK(devipc_stream_free(&other));
    CHECK(devipc_span_free(&a1));
    CHECK(devipc_span_free(&a2));
    CHECK(devipc_span_free(&b1));
    CHECK(devipc_span_free(&b2));
    CHECK(devipc_span_free(&head));
    CHECK(devipc_span_free(&sb));
    CHECK(devipc_request_free(&w));
    CHECK(devipc_stream_free(&stream));
    CHECK(devipc_buffer_free(&b));
    CHECK(devipc_runtime_free(&rt));
    CHECK(devipc_drain(60000));
    ASSERT(devipc_live_handles() == 0);
    printf("PASS dataplane %s\n", argv[1]);
    return 0;
}
