/* The rendezvous between two processes (fork+exec): the exporter serves a buffer and a
 * signal at a Unix socket and accepts; the importer connects (waiting for the server),
 * takes the import and the signal, checks the bytes and notifies; the exporter's wait
 * returns. And the error paths: nobody serving, options of the wrong size, taking twice,
 * an index past the count, NULLs.
 *
 * usage: rendezvous hip|ascend */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define SIZE 4096

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + 3);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--importer") == 0) {
        /* The importer, exec'd by the exporter below. */
        devipc_runtime *rt = NULL;
        CHECK(devipc_runtime_open_emulated(devipc_test_kind(argv[2]), &rt));
        devipc_connect_options opts;
        CHECK(devipc_connect_options_init(&opts));
        opts.flags = DEVIPC_CONNECT_WAIT_FOR_SERVER;
        opts.timeout_ms = 30000;
        devipc_connection *conn = NULL;
        CHECK(devipc_runtime_connect(rt, argv[3], 0, &opts, &conn));
        uint32_t exporter = 0;
        CHECK(devipc_connection_exporter_pid(conn, &exporter));
        ASSERT(exporter == (uint32_t)getppid());
        size_t count = 0;
        CHECK(devipc_connection_signal_count(conn, &count));
        ASSERT(count == 1);
        devipc_import *imp = NULL, *again = NULL, *first = NULL;
        devipc_signal *sig = NULL, *none = NULL;
        CHECK(devipc_connection_take_import(conn, &first));
        EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_connection_take_import(conn, &again));
        ASSERT(again == NULL); /* a failed take leaves the out NULL */
        CHECK(devipc_connection_free(&conn));
        /* The connection is gone; what was taken lives on, what was not is released. */
        EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_connection_take_signal(conn, 0, &none));
        CHECK(devipc_import_close(&first));
        CHECK(devipc_runtime_connect(rt, argv[3], 0, &opts, &conn));
        CHECK(devipc_connection_take_import(conn, &imp));
        EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_connection_take_signal(conn, 7, &none));
        CHECK(devipc_connection_take_signal(conn, 0, &sig));
        EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_connection_take_signal(conn, 0, &none));
        CHECK(devipc_connection_free(&conn));
        uint8_t got[SIZE], want[SIZE];
        fill(want, SIZE);
        CHECK(devipc_import_read(imp, 0, got, SIZE));
        ASSERT(memcmp(got, want, SIZE) == 0);
        CHECK(devipc_signal_notify(sig));
        CHECK(devipc_signal_free(&sig));
        CHECK(devipc_import_close(&imp));
        CHECK(devipc_runtime_free(&rt));
        CHECK(devipc_drain(60000));
        ASSERT(devipc_live_handles() == 0);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s hip|ascend\n", argv[0]);
        return 2;
    }
    const char *kind = argv[1];
    char path[64];
    snprintf(path, sizeof path, "/tmp/devipc-rdv-%d.sock", (int)getpid());

    devipc_runtime *rt = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(kind), &rt));
    /* Nobody serves yet: the socket's error, at once. */
    devipc_connection *conn = NULL;
    EXPECT(DEVIPC_ERR_IO, devipc_runtime_connect(rt, path, 0, NULL, &conn));
    ASSERT(conn == NULL);
    EXPECT(DEVIPC_ERR_NULL_ARGUMENT, devipc_runtime_connect(rt, NULL, 0, NULL, &conn));
    devipc_connect_options small = {0};
    small.struct_size = 4;
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_runtime_connect(rt, path, 0, &small, &conn));

    devipc_buffer *buf = NULL;
    CHECK(devipc_runtime_allocate(rt, 0, SIZE, &buf));
    uint8_t data[SIZE];
    fill(data, SIZE);
    CHECK(devipc_buffer_write(buf, 0, data, SIZE));
    devipc_signal *sig = NULL;
    CHECK(devipc_runtime_create_signal(rt, 0, &sig));
    devipc_share_options so;
    CHECK(devipc_share_options_init(&so));
    so.io_timeout_ms = 20000;
    devipc_share_server *server = NULL;
    so.socket_mode = 01000; /* not permission bits */
    EXPECT(DEVIPC_ERR_INVALID_ARGUMENT, devipc_buffer_share(buf, 0, SIZE, path, &so, &server));
    so.socket_mode = 0;
    CHECK(devipc_buffer_share(buf, 0, SIZE, path, &so, &server));
    CHECK(devipc_share_server_add_signal(server, sig));
    EXPECT(DEVIPC_ERR_TIMEOUT, devipc_share_server_accept(server, 50, NULL));

    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        execl(argv[0], argv[0], "--importer", kind, path, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    /* The importer connects twice. */
    for (int i = 0; i < 2; i++) {
        uint32_t peer = 0;
        CHECK(devipc_share_server_accept(server, 30000, &peer));
        ASSERT(peer == (uint32_t)child);
    }
    CHECK(devipc_signal_wait(sig, 30000));
    int status = 0;
    ASSERT(waitpid(child, &status, 0) == child);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(devipc_share_server_free(&server));
    CHECK(devipc_share_server_free(&server)); /* NULL now: nothing to do */
    CHECK(devipc_signal_free(&sig));
    CHECK(devipc_buffer_free(&buf));
    CHECK(devipc_runtime_free(&rt));
    CHECK(devipc_drain(60000));
    ASSERT(devipc_live_handles() == 0);
    printf("PASS rendezvous %s\n", kind);
    return 0;
}
