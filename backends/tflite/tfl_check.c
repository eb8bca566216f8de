/*
 * tfl_check.c - runs redisai_tflite_check on a new model: posix_spawn (never
 * fork: Redis may be large and has threads), the model on a memfd as its
 * fd 0, its verdict line read from a pipe with a deadline.
 *
 * The verdict comes from the line, not the exit status: when the backend
 * runs inside Redis, Redis's own reaping of child processes may collect the
 * validator first, and a validator that wrote no line was killed by its model.
 */
#define _GNU_SOURCE
#include "tflite/tfl_check.h"

#include "tflite/tfl_api.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int TflCheck_Find(const void *addr, char *path, size_t pathlen, char *why, size_t whylen) {
    if (Tfl_Beside(addr, "redisai_tflite_check", path, pathlen, why, whylen) != 0) return -1;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, whylen, "%s: %s (the model validator ships beside the backend)", path,
                 strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0) {
        snprintf(why, whylen, "%s: not an executable file", path);
        return -1;
    }
    return 0;
}

static long long nowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int writeAll(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static const char *signalName(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    default: return "a signal";
    }
}

/* The reason a validator that wrote no verdict gives, from its exit status
 * when this process could still collect it. */
static void describeDeath(pid_t pid, int killed, char *why, size_t whylen) {
    int status = 0;
    pid_t r;
    do {
        r = waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (killed) {
        snprintf(why, whylen, "Failed to load model from buffer (the model validator did not finish in time)");
    } else if (r == pid && WIFSIGNALED(status)) {
        snprintf(why, whylen,
                 "Failed to load model from buffer (the model crashed LiteRT in the validator: "
                 "signal %d %s)",
                 WTERMSIG(status), signalName(WTERMSIG(status)));
    } else if (r == pid && WIFEXITED(status)) {
        snprintf(why, whylen,
                 "Failed to load model from buffer (the model validator exited with status %d)",
                 WEXITSTATUS(status));
    } else {
        snprintf(why, whylen, "Failed to load model from buffer (the model crashed LiteRT in the validator)");
    }
}

int TflCheck_Model(const char *checker, const char *lib, const char *blob, size_t len,
                   long long timeout_ms, char *why, size_t whylen) {
    int model = memfd_create("redisai-tflite-model", MFD_CLOEXEC);
    int out[2] = {-1, -1};
    if (model < 0 || writeAll(model, blob, len) != 0 || lseek(model, 0, SEEK_SET) != 0 ||
        pipe2(out, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "Failed to load model from buffer (cannot start the validator: %s)",
                 strerror(errno));
        if (model >= 0) close(model);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, model, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {(char *)checker, (char *)lib, NULL};
    pid_t pid = 0;
    int rc = posix_spawn(&pid, checker, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(model);
    close(out[1]);
    if (rc != 0) {
        snprintf(why, whylen, "Failed to load model from buffer (cannot start %s: %s)", checker,
                 strerror(rc));
        close(out[0]);
        return -1;
    }
    char line[1024];
    size_t n = 0;
    int killed = 0;
    long long deadline = nowMs() + timeout_ms;
    for (;;) {
        long long left = deadline - nowMs();
        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        int pr = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        ssize_t r = read(out[0], line + n, sizeof(line) - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (n == sizeof(line) - 1) break;
    }
    close(out[0]);
    line[n] = '\0';
    char *nl = strchr(line, '\n');
    if (!killed && nl) {
        *nl = '\0';
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (strcmp(line, "OK") == 0) return 0;
        snprintf(why, whylen, "%s", strncmp(line, "ERR ", 4) == 0 ? line + 4 : line);
        return -1;
    }
    describeDeath(pid, killed, why, whylen);
    return -1;
}
