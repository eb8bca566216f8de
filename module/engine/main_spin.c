/*
 * main_spin.c - see main_spin.h. Main thread only.
 */
#include "engine/main_spin.h"

#include <sched.h>
#include <sys/eventfd.h>

#include "core/clock.h"
#include "core/config.h"
#include "engine/completion.h"
#include "engine/run_queue.h"
#include "engine/run_threads.h"
#include "redismodule.h"

/* Readable from its creation on: its count is never read. */
static int ready_fd = -1;
static int in_loop = 0; /* the fd is in the loop */
static long long spin_until_us = 0;
static long long passes = 0;
/* When the previous pass's callback returned. */
static long long last_pass_end_us = 0;

/* A pass that only came back here takes under a microsecond (0.7 us
 * measured); one that served a client's command takes several. */
#define IDLE_PASS_US 2

/* Not while a lone heavy run has every core (engine/thread_policy.h): the
 * polling would take one from it, and the wake-up it saves is small beside
 * such a run. */
static int lone(void) {
    return rai_config.worker_spin_us > 0 && RunQueue_LoneClient() &&
           !RunThreads_SpinsStandDown();
}

static void onPass(int fd, void *data, int mask) {
    REDISMODULE_NOT_USED(fd);
    REDISMODULE_NOT_USED(data);
    REDISMODULE_NOT_USED(mask);
    long long now = Clock_NowUs();
    int stop = !lone() || now >= spin_until_us;
    if (stop) {
        /* Workers unblock their clients again from now on; what they
         * queued before is taken here. */
        Completion_SetPolling(0);
        Completion_Drain();
        in_loop = 0;
        RedisModule_EventLoopDel(ready_fd, REDISMODULE_EVENTLOOP_READABLE);
        return;
    }
    Completion_Drain();
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
        in_loop = 1;
        Completion_SetPolling(1);
    }
}

long long MainSpin_Passes(void) {
    return passes;
}
