/* Every error path of the C ABI on one emulated backend: NULL arguments, bad and corrupt
 * tokens, freed, foreign and wrong-type handles, the other backend's tokens, bad devices,
 * ranges and options, too-small buffers, timeouts, and the last error's readers. Each
 * failure must be its status, with a message, and never a crash.
 *
 * usage: errors hip|ascend */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>

#include "check.h"

static const char *other(const char *kind) { return strcmp(kind, "hip") == 0 ? "ascend" : "hip"; }

static void status_names(void) {
    ASSERT(strcmp(devipc_status_name(DEVIPC_OK), "ok") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_INVALID_TOKEN), "invalid_token") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_UNKNOWN_HANDLE), "unknown_handle") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_COPY), "copy") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_NULL_ARGUMENT), "null_argument") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_PANIC), "panic") == 0);
    ASSERT(strcmp(devipc_status_name(DEVIPC_ERR_BUFFER_TOO_SMALL), "buffer_too_small") == 0);
    ASSERT(strcmp(devipc_status_name(12345), "unknown") == 0);
    ASSERT(devipc_abi_version() >> 16 == DEVIPC_ABI_VERSION_MAJOR);
    ASSERT((devipc_abi_version() & 0xffff) >= DEVIPC_ABI_VERSION_MINOR);
    ASSERT(strlen(devipc_version()) > 0);
}

static void last_error_readers(void) {
    devipc_last_error_clear();
    ASSERT(devipc_last_error_code() == DEVIPC_OK);
    ASSERT(strcmp(devipc_last_error_kind(), "ok") == 0);
    char msg[1024];
    size_t needed = 99;
    CHECK(devipc_last_error_message(msg, sizeof msg, &needed));
    ASSERT(needed == 1 && msg[0] == 0);

    devipc_mem_token *tok = NULL;
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_text("devipc3:not-a-token", &tok));
    ASSERT(tok == NULL);
    ASSERT(devipc_last_error_code() == DEVIPC_ERR_INVALID_TOKEN);
    ASSERT(strcmp(devipc_last_error_kind(), "invalid_token") == 0);
    int32_t vendor = 7;
    ASSERT(!devipc_last_error_vendor_code(&vendor) && vendor == 7);
    /* A size query, then a cut message: neither changes the last error. */
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_last_error_message(NULL, 0, &needed));
    ASSERT(needed > 20);
    char tiny[8];
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_last_error_message(tiny, sizeof tiny, NULL));
    ASSERT(strlen(tiny) == sizeof tiny - 1 && strncmp(tiny, "invalid", 7) == 0);
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_last_error_message(NULL, 8, NULL));
    ASSERT(devipc_last_error_code() == DEVIPC_ERR_INVALID_TOKEN);
    ASSERT(devipc_test_last_error_has("invalid devipc token"));
    /* A success leaves it. */
    CHECK(devipc_last_error_message(msg, sizeof msg, NULL));
    ASSERT(devipc_last_error_code() == DEVIPC_ERR_INVALID_TOKEN);
    ASSERT(devipc_last_error_vendor_code(NULL) == false);
}

static void null_arguments(devipc_runtime *rt) {
    devipc_runtime *r = NULL;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_open_emulated(DEVIPC_BACKEND_HIP, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_open_from_env(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_open_choice(NULL, &r));
    ASSERT(r == NULL);
    ASSERT(devipc_test_last_error_has("`choice` is NULL"));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_free(NULL));
    uint32_t n = 0;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_device_count(NULL, &n));
    ASSERT(devipc_test_last_error_has("`rt` is NULL"));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_device_count(rt, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_process_id(rt, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_backend_kind(rt, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_is_emulated(rt, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_physical_device(rt, 0, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_capabilities(rt, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_describe(rt, NULL, 16, NULL));
    devipc_buffer *buf = NULL;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_allocate(NULL, 0, 64, &buf));
    ASSERT(buf == NULL);
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_allocate(rt, 0, 64, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_buffer_free(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_buffer_write(NULL, 0, "x", 1));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_buffer_read(NULL, 0, &n, 1));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_buffer_export(NULL, NULL, NULL));
    devipc_mem_token *tok = NULL;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_mem_token_from_text(NULL, &tok));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_mem_token_from_bytes(NULL, 10, &tok));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_mem_token_from_text("x", NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_mem_token_to_text(NULL, NULL, 0, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_mem_token_free(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_token_free(NULL));
    devipc_import *imp = NULL;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_import(rt, NULL, 0, &imp));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_import_on_exporter_device(rt, NULL, &imp));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_import_close(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_import_read(NULL, 0, &n, 1));
    devipc_signal *sig = NULL;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_create_signal(rt, 0, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_import_signal(rt, NULL, 0, &sig));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_notify(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_wait(NULL, 0));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_signal_free(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_export_options_init(NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_testing_framework_malloc(rt, 0, 64, NULL));
    uint64_t addr;
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_export_external(rt, 0, 0, 64, NULL, NULL));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_testing_framework_malloc(NULL, 0, 64, &addr));
    /* A NULL handle to free is nothing to do. */
    CHECK(devipc_buffer_free(&buf));
    CHECK(devipc_import_close(&imp));
    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_runtime_free(&r));
}

static void bad_tokens(devipc_runtime *rt) {
    devipc_mem_token *tok = NULL;
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_text("", &tok));
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_text("hello", &tok));
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_text("devipc3:AAAA", &tok));
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_text("devipc3:\xff\xfe", &tok));
    ASSERT(devipc_test_last_error_has("not UTF-8"));
    const uint8_t junk[4] = {1, 2, 3, 4};
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_bytes(junk, sizeof junk, &tok));
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_bytes(NULL, 0, &tok));
    ASSERT(tok == NULL);

    /* A real token, corrupted: every single-byte flip and every truncation is refused. */
    devipc_buffer *buf = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
    CHECK(devipc_buffer_export(buf, NULL, &tok));
    uint8_t bytes[1024];
    size_t n = 0;
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_mem_token_to_bytes(tok, bytes, 4, &n));
    ASSERT(n > 4 && n <= sizeof bytes);
    CHECK(devipc_mem_token_to_bytes(tok, bytes, sizeof bytes, &n));
    devipc_mem_token *bad = NULL;
    for (size_t i = 0; i < n; i++) {
        bytes[i] ^= 0x41;
        EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_bytes(bytes, n, &bad));
        ASSERT(bad == NULL);
        bytes[i] ^= 0x41;
    }
    for (size_t len = 0; len < n; len++)
        EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_mem_token_from_bytes(bytes, len, &bad));
    CHECK(devipc_mem_token_from_bytes(bytes, n, &bad));
    CHECK(devipc_mem_token_free(&bad));
    /* A memory token is not a signal token. */
    char text[1024];
    CHECK(devipc_mem_token_to_text(tok, text, sizeof text, NULL));
    devipc_signal_token *stok = NULL;
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_signal_token_from_text(text, &stok));
    EXPECT(DEVIPC_ERR_INVALID_TOKEN, devipc_signal_token_from_bytes(bytes, n, &stok));
    ASSERT(stok == NULL);
    /* Too small a text buffer: cut, NUL-terminated, with the size needed. */
    char small[10];
    size_t needed = 0;
    EXPECT(DEVIPC_ERR_BUFFER_TOO_SMALL, devipc_mem_token_to_text(tok, small, sizeof small, &needed));
    ASSERT(needed == strlen(text) + 1 && strlen(small) == sizeof small - 1);
    ASSERT(strncmp(small, "devipc3:", 8) == 0);
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_buffer_free(&buf));
}

static void freed_and_foreign_handles(devipc_runtime *rt, const char *kind) {
    devipc_buffer *buf = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
    devipc_buffer *copy = buf;
    CHECK(devipc_buffer_free(&buf));
    ASSERT(buf == NULL);
    CHECK(devipc_buffer_free(&buf)); /* again through its own variable: nothing to do */
    /* The stale copy names no live object. */
    size_t len = 0;
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_buffer_len(copy, &len));
    ASSERT(devipc_test_last_error_has("buffer handle"));
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_buffer_write(copy, 0, "x", 1));
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_buffer_free(&copy));
    ASSERT(copy != NULL); /* not ours to clear */
    /* A handle of another type. */
    devipc_mem_token *tok = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
    CHECK(devipc_buffer_export(buf, NULL, &tok));
    uint32_t n = 0;
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_runtime_device_count((devipc_runtime *)buf, &n));
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_buffer_len((devipc_buffer *)tok, &len));
    devipc_runtime *as_rt = (devipc_runtime *)tok;
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_runtime_free(&as_rt));
    /* A value that was never a handle. */
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_buffer_len((devipc_buffer *)(uintptr_t)0x8, &len));
    /* Freed runtime: what was made from it still works (it keeps the backend). */
    devipc_runtime *rt2 = NULL;
    char choice[32];
    snprintf(choice, sizeof choice, "emulated-%s", kind);
    CHECK(devipc_runtime_open_choice(choice, &rt2));
    devipc_buffer *b2 = NULL;
    CHECK(devipc_runtime_allocate(rt2, 0, 128, &b2));
    devipc_runtime *stale = rt2;
    CHECK(devipc_runtime_free(&rt2));
    CHECK(devipc_buffer_write(b2, 0, "still", 5));
    EXPECT(DEVIPC_ERR_UNKNOWN_HANDLE, devipc_runtime_device_count(stale, &n));
    CHECK(devipc_buffer_free(&b2));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_buffer_free(&buf));
}

static void wrong_backend(devipc_runtime *rt, const char *kind) {
    devipc_runtime *other_rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(other(kind)), &other_rt));
    devipc_buffer *buf = NULL;
    CHECK(devipc_runtime_allocate(other_rt, 0, 4096, &buf));
    devipc_mem_token *tok = NULL;
    CHECK(devipc_buffer_export(buf, NULL, &tok));
    devipc_import *imp = NULL;
    EXPECT(DEVIPC_ERR_BACKEND_MISMATCH, devipc_runtime_import(rt, tok, 0, &imp));
    ASSERT(imp == NULL);
    EXPECT(DEVIPC_ERR_BACKEND_MISMATCH, devipc_runtime_import_on_exporter_device(rt, tok, &imp));
    bool visible;
    uint32_t dev;
    EXPECT(DEVIPC_ERR_BACKEND_MISMATCH, devipc_runtime_local_device_of(rt, tok, &visible, &dev));
    devipc_signal *sig = NULL;
    CHECK(devipc_runtime_create_signal(other_rt, 0, &sig));
    devipc_signal_token *stok = NULL;
    CHECK(devipc_signal_export(sig, NULL, &stok));
    devipc_signal *s2 = NULL;
    EXPECT(DEVIPC_ERR_BACKEND_MISMATCH, devipc_runtime_import_signal(rt, stok, 0, &s2));
    ASSERT(s2 == NULL);
    devipc_backend_kind k = 0;
    CHECK(devipc_mem_token_backend_kind(tok, &k));
    ASSERT(k == devipc_test_kind(other(kind)));
    CHECK(devipc_signal_token_free(&stok));
    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_buffer_free(&buf));
    CHECK(devipc_runtime_free(&other_rt));
}

static void bad_arguments(devipc_runtime *rt) {
    devipc_runtime *r = NULL;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_runtime_open_emulated(77, &r));
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_runtime_open_choice("emulated-cuda", &r));
    ASSERT(r == NULL);
    uint32_t count = 0;
    CHECK(devipc_runtime_device_count(rt, &count));
    ASSERT(count >= 1);
    devipc_buffer *buf = NULL;
    EXPECT(DEVIPC_ERR_INVALID_DEVICE, devipc_runtime_allocate(rt, count, 64, &buf));
    ASSERT(buf == NULL);
    devipc_physical_device phys;
    phys.struct_size = sizeof phys;
    EXPECT(DEVIPC_ERR_INVALID_DEVICE, devipc_runtime_physical_device(rt, count, &phys));
    CHECK(devipc_runtime_physical_device(rt, 0, &phys));
    ASSERT(phys.struct_size == sizeof phys);
    ASSERT(phys.has_uuid || phys.has_pci_bus_id || phys.has_physical_id);
    phys.struct_size = 4;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_runtime_physical_device(rt, 0, &phys));
    devipc_capabilities caps;
    caps.struct_size = sizeof caps;
    CHECK(devipc_runtime_capabilities(rt, &caps));
    ASSERT(caps.export_allocation && caps.signals);
    char desc[128];
    CHECK(devipc_runtime_describe(rt, desc, sizeof desc, NULL));
    ASSERT(strstr(desc, "emulated") != NULL);

    CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
    size_t len = 0;
    CHECK(devipc_buffer_len(buf, &len));
    char bytes[16] = {0};
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_write(buf, len - 2, bytes, 4));
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_read(buf, SIZE_MAX, bytes, 2));
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_buffer_read(buf, 0, NULL, 2));
    CHECK(devipc_buffer_read(buf, 0, NULL, 0)); /* nothing to copy */
    devipc_mem_token *tok = NULL;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_export_range(buf, 0, len + 1, NULL, &tok));
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_export_range(buf, SIZE_MAX, 2, NULL, &tok));
    ASSERT(tok == NULL);
    devipc_export_options opts;
    CHECK(devipc_export_options_init(&opts));
    opts.flags = 0x80;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_export(buf, &opts, &tok));
    opts.flags = 0;
    opts.struct_size = 2;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_export(buf, &opts, &tok));
    ASSERT(devipc_test_last_error_has("struct_size"));
    opts.struct_size = sizeof opts;
    CHECK(devipc_buffer_export_range(buf, 16, 32, &opts, &tok));
    /* Same-process import: a view of the local allocation, bounded by the range. */
    devipc_import *imp = NULL;
    EXPECT(DEVIPC_ERR_INVALID_DEVICE, devipc_runtime_import(rt, tok, count, &imp));
    CHECK(devipc_runtime_import(rt, tok, 0, &imp));
    bool local = false;
    CHECK(devipc_import_is_local(imp, &local));
    ASSERT(local);
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_import_read(imp, 30, bytes, 4));
    CHECK(devipc_import_write(imp, 0, "abcd", 4));
    CHECK(devipc_buffer_read(buf, 16, bytes, 4));
    ASSERT(memcmp(bytes, "abcd", 4) == 0);
    CHECK(devipc_import_close(&imp));
    CHECK(devipc_import_close(&imp));
    CHECK(devipc_mem_token_free(&tok));

    /* A signal never notified times out, no earlier than asked. */
    devipc_signal *sig = NULL;
    CHECK(devipc_runtime_create_signal(rt, 0, &sig));
    EXPECT(DEVIPC_ERR_TIMEOUT, devipc_signal_wait(sig, 50));
    ASSERT(devipc_test_last_error_has("timed out"));
    CHECK(devipc_signal_notify(sig));
    CHECK(devipc_signal_wait(sig, DEVIPC_WAIT_FOREVER));
    EXPECT(DEVIPC_ERR_TIMEOUT, devipc_signal_wait(sig, 0));
    CHECK(devipc_signal_free(&sig));

    /* External export of an address no framework allocated. */
    devipc_status s = devipc_runtime_export_external(rt, 0, 0x1000, 64, NULL, &tok);
    ASSERT(s != DEVIPC_OK && tok == NULL);
    CHECK(devipc_mem_token_free(&tok));
    CHECK(devipc_buffer_free(&buf));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s hip|ascend\n", argv[0]);
        return 2;
    }
    status_names();
    last_error_readers();
    devipc_runtime *rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(argv[1]), &rt));
    null_arguments(rt);
    bad_tokens(rt);
    freed_and_foreign_handles(rt, argv[1]);
    wrong_backend(rt, argv[1]);
    bad_arguments(rt);
    CHECK(devipc_runtime_free(&rt));
    ASSERT(devipc_live_handles() == 0);
    printf("PASS errors %s\n", argv[1]);
    return 0;
}
