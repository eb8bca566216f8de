/*
 * blocked_time.c - see blocked_time.h. The main thread holds the client
 * blocked last until a release point; a worker about to run for it waits
 * on a condition variable until then.
 *
 * Release points are where the command that blocked the held client has
 * returned to Redis: the next BlockedTime_Hold (commands run one after the
 * other on the main thread, and a blocking AI command is never nested in
 * another: Dag_RefuseIfCannotBlock), so at most one client is held at a
 * time; and the end of the pass (engine/pass_end.h: a module timer of
 * 0 ms, which Redis runs from its event loop after the pass's commands,
 * never from inside a command). The wait is often nothing: a worker usually
 * wakes later than the main thread needs to finish the command.
 *
 * The timer alone is not enough: a command Redis runs from beforeSleep (the
 * next pipelined command of a client just unblocked) blocks after the
 * pass's timers ran, and the event loop may then sleep until its next
 * timer (tens of ms) with the worker waiting: a pipelining client got 29
 * runs a second. So a worker that has to wait asks for a one-shot event
 * (RedisModule_EventLoopAddOneShot writes to Redis's module pipe, which
 * wakes the loop), and that event, run between commands, releases too.
 * Without it (Redis 6.2) nothing is held: runs start at once, and SLOWLOG
 * may count a run's start twice there, as before this bound existed.
 */
#include "engine/blocked_time.h"

#include <pthread.h>

#include "engine/pass_end.h"

static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released_cond = PTHREAD_COND_INITIALIZER;
/* Main thread only. */
static RAI_BlockedTime *held = NULL;
/* Atomic: a worker asked for the one-shot release and it has not run. */
static int wake_pending = 0;

static int measured(void) {
    return RedisModule_BlockedClientMeasureTimeStart && RedisModule_BlockedClientMeasureTimeEnd;
}

static int canHold(void) {
    return measured() && RedisModule_EventLoopAddOneShot;
}

static void releaseHeld(void) {
    if (held == NULL) return;
    pthread_mutex_lock(&release_lock);
    __atomic_store_n(&held->released, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&released_cond);
    pthread_mutex_unlock(&release_lock);
    held = NULL;
}

/* Main thread, from the event loop: no command is running. */
static void onWake(void *data) {
    REDISMODULE_NOT_USED(data);
    __atomic_store_n(&wake_pending, 0, __ATOMIC_RELEASE);
    releaseHeld();
}

void BlockedTime_Hold(RedisModuleCtx *ctx, RAI_BlockedTime *t, RedisModuleBlockedClient *bc) {
    releaseHeld();
    *t = (RAI_BlockedTime){.bc = bc};
    if (bc == NULL || !canHold()) {
        t->released = 1; /* nothing measured, or no way to wake the loop */
        return;
    }
    held = t;
    PassEnd_Call(ctx, releaseHeld);
}

/* Answered before its release: a DAG that ended without a run (its TIMEOUT
 * passed, or it has no model or script op). */
void BlockedTime_Forget(RAI_BlockedTime *t) {
    if (held == t) held = NULL;
}

static int isReleased(RAI_BlockedTime *t) {
    return __atomic_load_n(&t->released, __ATOMIC_ACQUIRE);
}

/* A worker's wait, usually none. No polling: on few cores a polling worker
 * takes the CPU the main thread needs to get to the release point (over a
 * quarter of the throughput at 32 clients on 2 cores, docs/performance.md). */
static void waitReleased(RAI_BlockedTime *t) {
    if (isReleased(t)) return;
    if (!__atomic_exchange_n(&wake_pending, 1, __ATOMIC_ACQ_REL)) {
        if (RedisModule_EventLoopAddOneShot(onWake, NULL) != REDISMODULE_OK) {
            __atomic_store_n(&wake_pending, 0, __ATOMIC_RELEASE); /* the timer still comes */
        }
    }
    pthread_mutex_lock(&release_lock);
    while (!isReleased(t)) pthread_cond_wait(&released_cond, &release_lock);
    pthread_mutex_unlock(&release_lock);
}

void BlockedTime_RunStart(RAI_BlockedTime *t) {
    if (t->bc == NULL || !measured()) return;
    waitReleased(t);
    RedisModule_BlockedClientMeasureTimeStart(t->bc);
}

void BlockedTime_RunEnd(RAI_BlockedTime *t) {
    if (t->bc == NULL || !measured()) return;
    RedisModule_BlockedClientMeasureTimeEnd(t->bc);
}
