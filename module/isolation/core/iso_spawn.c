/*
 * iso_spawn.c - finds, checks and starts redisai-backend-host
 * (docs/isolation.md, "The host process"). posix_spawn, never fork (a 100 GB Redis
 * spawns as fast as an empty one) and never a shell: the absolute path,
 * checked through an O_PATH descriptor that is then the very file executed.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend_kind.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

extern char **environ;

static char host_path[PATH_MAX + 32];

const char *Iso_HostPath(void) {
    if (host_path[0]) return host_path;
    Dl_info info;
    if (dladdr((void *)Iso_HostPath, &info) == 0 || info.dli_fname == NULL) return NULL;
    char real[PATH_MAX];
    if (realpath(info.dli_fname, real) == NULL) return NULL;
    char *slash = strrchr(real, '/');
    if (slash == NULL) return NULL;
    *slash = '\0';
    snprintf(host_path, sizeof(host_path), "%s/redisai-backend-host", real);
    return host_path;
}

/* Owner root or Redis's user, a regular executable file, not writable by
 * group or others: whoever may replace it could run code as Redis. */
static int checkHost(int fd, const char *path, char *why, size_t whylen) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s: not a regular file", path);
        return 0;
    }
    if (!(st.st_mode & S_IXUSR)) {
        snprintf(why, whylen, "%s: not executable", path);
        return 0;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        snprintf(why, whylen, "%s: owned by uid %u, neither root nor Redis's user", path,
                 (unsigned)st.st_uid);
        return 0;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, whylen, "%s: writable by group or others (mode %o)", path,
                 (unsigned)(st.st_mode & 07777));
        return 0;
    }
    return 1;
}

/* Redis's environment plus the framework quieting an in-process load sets
 * (backend_loader.c), unless the user set them. */
static char **hostEnv(void) {
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **env = calloc(n + 3, sizeof(char *));
    if (env == NULL) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) env[k++] = environ[i];
    if (getenv("TF_CPP_MIN_LOG_LEVEL") == NULL) env[k++] = "TF_CPP_MIN_LOG_LEVEL=3";
    if (getenv("TF_ENABLE_ONEDNN_OPTS") == NULL) env[k++] = "TF_ENABLE_ONEDNN_OPTS=0";
    env[k] = NULL;
    return env;
}

int IsoSpawn_Start(IsoSlot *s, char *why, size_t whylen) {
    const char *path = Iso_HostPath();
    if (path == NULL) {
        snprintf(why, whylen, "cannot find the folder of redisai.so (dladdr)");
        return -1;
    }
    int exe = open(path, O_PATH | O_CLOEXEC);
    if (exe < 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!checkHost(exe, path, why, whylen)) {
        close(exe);
        return -1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, whylen, "socketpair: %s", strerror(errno));
        close(exe);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    /* dup2 clears FD_CLOEXEC on the copies only: fd 3 is the connection,
     * fd 4 the checked file, which is what runs. */
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_adddup2(&fa, exe, 4);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 5);
#endif
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETPGROUP);
    char ppid[32];
    snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
    char *argv[] = {(char *)path, "--kind", (char *)Backend_KindName(s->kind), "--name", s->name,
                    "--so", s->real, "--ppid", ppid, "--fd", "3", NULL};
    char **env = hostEnv();
    /* The checked descriptor when /proc is there (no window between check
     * and exec), else the path. */
    const char *run = access("/proc/self/fd", X_OK) == 0 ? "/proc/self/fd/4" : path;
    pid_t pid = 0;
    int rc = env ? posix_spawn(&pid, run, &fa, &at, argv, env) : ENOMEM;
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    close(exe);
    if (rc != 0) {
        snprintf(why, whylen, "posix_spawn %s: %s", path, strerror(rc));
        close(sv[0]);
        return -1;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    pthread_mutex_lock(&s->mu);
    s->pid = pid;
    s->pidfd = pidfd;
    s->ctl = sv[0];
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void IsoSpawn_Kill(IsoSlot *s) {
    if (s->pidfd >= 0 && syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0) == 0) return;
    if (s->pid > 0) kill(s->pid, SIGKILL);
}

static const char *signalName(int sig) {
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "SIG?";
    }
}

void IsoSpawn_Describe(int code, int status, char *text, size_t tl, char *token, size_t kl) {
    if (code == CLD_EXITED) {
        snprintf(text, tl, "exit status %d", status);
        snprintf(token, kl, "exit_%d", status);
    } else {
        snprintf(text, tl, "signal %d %s", status, signalName(status));
        snprintf(token, kl, "signal_%d_%s", status, signalName(status));
    }
}
