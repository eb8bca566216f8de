/*
 * main_spin.c - see main_spin.h. Main thread only, but the unblocks workers
 * leave to it (deferred_lock).
 */
#include "engine/main_spin.h"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>

#include "core/clock.h"
#include "core/config.h"
#include "engine/run_queue.h"
#include "redismodule.h"

/* Readable from its creation on: its count is never read. */
static int ready_fd = -1;
/* The fd is in the loop. Written by the main thread under deferred_lock,
 * read by workers under it (and by the main thread without). */
static int in_loop = 0;
static long long spin_until_us = 0;
static long long passes = 0;
/* When the previous pass's callback returned. */
static long long last_pass_end_us = 0;

/* Unblocks left by workers while the fd is in the loop: the next
 * pass's onPass makes them. A full array is never waited for: the worker
 * unblocks itself. */
#define DEFERRED_MAX 64
typedef struct Deferred {
    RedisModuleBlockedClient *bc;
    void *privdata;
} Deferred;
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static Deferred deferred[DEFERRED_MAX];
static int ndeferred = 0;
static long long unblocks = 0; /* main thread */

/* A pass that only came back here takes under a microsecond (0.7 us
 * measured); one that served a client's command takes several. */
#define IDLE_PASS_US 2

static int lone(void) {
    return rai_config.worker_spin_us > 0 && RunQueue_LoneClient();
}

void MainSpin_Unblock(RedisModuleBlockedClient *bc, void *privdata) {
    pthread_mutex_lock(&deferred_lock);
    int left = in_loop && ndeferred < DEFERRED_MAX;
    if (left) deferred[ndeferred++] = (Deferred){.bc = bc, .privdata = privdata};
    pthread_mutex_unlock(&deferred_lock);
    if (!left) RedisModule_UnblockClient(bc, privdata);
}

/* The unblocks left so far; after stop, workers unblock themselves again. */
static void takeDeferred(int stop) {
    Deferred mine[DEFERRED_MAX];
    pthread_mutex_lock(&deferred_lock);
    int n = ndeferred;
    for (int i = 0; i < n; i++) mine[i] = deferred[i];
    ndeferred = 0;
    if (stop) in_loop = 0;
    pthread_mutex_unlock(&deferred_lock);
    for (int i = 0; i < n; i++) RedisModule_UnblockClient(mine[i].bc, mine[i].privdata);
    unblocks += n;
}

static void onPass(int fd, void *data, int mask) {
    REDISMODULE_NOT_USED(fd);
    REDISMODULE_NOT_USED(data);
    REDISMODULE_NOT_USED(mask);
    long long now = Clock_NowUs();
    int stop = !lone() || now >= spin_until_us;
    takeDeferred(stop);
    if (stop) {
        RedisModule_EventLoopDel(ready_fd, REDISMODULE_EVENTLOOP_READABLE);
        return;
    }
    passes++;
    /* An idle pass yields the CPU: the framework's own threads or a client
     * on this machine may need it (a TF CNN at one client lost 8% without
     * this). A busy pass (other clients' commands) does not: yielding there
     * handed their CPU time to the run (GET at 32 clients beside a lone
     * Torch CNN client: -17%). */
    if (now - last_pass_end_us < IDLE_PASS_US) sched_yield();
    last_pass_end_us = Clock_NowUs();
}

void MainSpin_Note(void) {
    if (!lone() || RedisModule_EventLoopAdd == NULL) return;
    spin_until_us = Clock_NowUs() + rai_config.worker_spin_us;
    if (in_loop) return;
    if (ready_fd < 0) {
        ready_fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ready_fd < 0) return; /* no spin: the loop sleeps as before */
    }
    if (RedisModule_EventLoopAdd(ready_fd, REDISMODULE_EVENTLOOP_READABLE, onPass, NULL) ==
        REDISMODULE_OK) {
        pthread_mutex_lock(&deferred_lock);
        in_loop = 1;
        pthread_mutex_unlock(&deferred_lock);
    }
}

long long MainSpin_Passes(void) {
    return passes;
}

long long MainSpin_Unblocks(void) {
    return unblocks;
}
