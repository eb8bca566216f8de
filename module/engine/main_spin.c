/*
 * main_spin.c - see main_spin.h. Main thread only: no locks.
 */
#include "engine/main_spin.h"

#include <sched.h>
#include <sys/eventfd.h>

#include "core/clock.h"
#include "core/config.h"
#include "engine/run_queue.h"
#include "redismodule.h"

/* Readable from its creation on: its count is never read. */
static int ready_fd = -1;
static int in_loop = 0;
static long long spin_until_us = 0;
static long long passes = 0;

static int lone(void) {
    return rai_config.worker_spin_us > 0 && RunQueue_ClientsWaiting() <= 1;
}

static void onPass(int fd, void *data, int mask) {
    REDISMODULE_NOT_USED(fd);
    REDISMODULE_NOT_USED(data);
    REDISMODULE_NOT_USED(mask);
    if (!lone() || Clock_NowUs() >= spin_until_us) {
        RedisModule_EventLoopDel(ready_fd, REDISMODULE_EVENTLOOP_READABLE);
        in_loop = 0;
        return;
    }
    passes++;
    /* The worker, or a client on this machine, may need this CPU. */
    sched_yield();
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
        in_loop = 1;
    }
}

long long MainSpin_Passes(void) {
    return passes;
}
