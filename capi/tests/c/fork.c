/* fork() without exec while another thread uses the handle table: the child never blocks
 * on a lock the parent's thread held at the fork, an inherited handle is refused
 * (DEVIPC_ERR_INHERITED_ACROSS_FORK, or DEVIPC_ERR_UNKNOWN_HANDLE when the table was busy
 * at the fork and the child got an empty one), and a fresh runtime in the child works.
 * Each child has 20 s (alarm) before it is killed, which the parent reports.
 *
 * usage: fork hip|ascend */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define FORKS 20

static devipc_runtime *rt;
static devipc_buffer *buf;
static atomic_int stop;

static void *hammer(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        size_t len = 0;
        CHECK(devipc_buffer_len(buf, &len));
    }
    return NULL;
}

static int child(const char *kind) {
    alarm(20);
    uint8_t byte = 7;
    devipc_status s = devipc_buffer_write(buf, 0, &byte, 1);
    if (s != DEVIPC_ERR_INHERITED_ACROSS_FORK && s != DEVIPC_ERR_UNKNOWN_HANDLE) {
        fprintf(stderr, "child: an inherited buffer gave %d (%s)\n", (int)s,
                devipc_status_name(s));
        return 1;
    }
    devipc_runtime *mine = NULL;
    devipc_buffer *b = NULL;
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(kind), &mine));
    CHECK(devipc_runtime_allocate(mine, 0, 4096, &b));
    CHECK(devipc_buffer_write(b, 0, "fork", 4));
    char back[4];
    CHECK(devipc_buffer_read(b, 0, back, 4));
    ASSERT(memcmp(back, "fork", 4) == 0);
    CHECK(devipc_buffer_free(&b));
    CHECK(devipc_runtime_free(&mine));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fork hip|ascend\n");
        return 2;
    }
    CHECK(devipc_runtime_open_emulated(devipc_test_kind(argv[1]), &rt));
    CHECK(devipc_runtime_allocate(rt, 0, 4096, &buf));
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, hammer, NULL) == 0);
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            if (child(argv[1]) != 0) _exit(1);
            /* Done: end by exec, as a forked worker usually does. An _exit would leave the
             * parent's state, which the child never drops (it is the parent's), to a leak
             * checker running in the child (valgrind follows a fork). */
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        ASSERT(waitpid(pid, &status, 0) == pid);
        if (WIFSIGNALED(status)) {
            fprintf(stderr, "fork %d: the child was killed by signal %d (hung?)\n", i,
                    WTERMSIG(status));
            return 1;
        }
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&stop, 1);
    ASSERT(pthread_join(t, NULL) == 0);
    CHECK(devipc_buffer_free(&buf));
    CHECK(devipc_runtime_free(&rt));
    ASSERT(devipc_live_handles() == 0);
    printf("PASS fork %s\n", argv[1]);
    return 0;
}
