/*
 * inline_run.c - the decision of inline_run.h. Main thread only: the pass
 * flag and the counter need no locks.
 */
#include "engine/inline_run.h"

#include "core/config.h"
#include "loader/backend_loader.h"

static int subscribed = 0;
static int started_this_pass = 0;
static long long inline_runs = 0;
static long long queued_in_flight = 0;

static void onEventLoop(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    REDISMODULE_NOT_USED(ctx);
    REDISMODULE_NOT_USED(e);
    REDISMODULE_NOT_USED(data);
    if (sub == REDISMODULE_SUBEVENT_EVENTLOOP_AFTER_SLEEP) started_this_pass = 0;
}

void InlineRun_Init(RedisModuleCtx *ctx) {
    subscribed = RedisModule_SubscribeToServerEvent &&
                 RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_EventLoop,
                                                    onEventLoop) == REDISMODULE_OK;
    if (!subscribed) {
        RedisModule_Log(ctx, "notice",
                        "inline runs off: this Redis has no event-loop event for modules");
    }
}

void InlineRun_QueuedStart(void) {
    queued_in_flight++;
}

void InlineRun_QueuedEnd(void) {
    queued_in_flight--;
}

long long InlineRun_Count(void) {
    return inline_runs;
}

static int shortEnough(const RAI_Model *m, size_t in_bytes) {
    long long us = __atomic_load_n(&m->last_run_us, __ATOMIC_RELAXED);
    long long bytes = __atomic_load_n(&m->last_run_in_bytes, __ATOMIC_RELAXED);
    return us >= 0 && us <= rai_config.inline_run_max_us && (long long)in_bytes <= bytes;
}

int InlineRun_Decide(const RAI_Model *m, size_t in_bytes, RAI_RunQueue *q) {
    int first = !started_this_pass;
    started_this_pass = 1;
    if (!subscribed || !first || queued_in_flight > 0 || rai_config.inline_run_max_us <= 0) {
        return 0;
    }
    if (m == NULL) return 0;
    if (m->batchsize > 0 || Backend_IsIsolated(m->be)) return 0;
    if (!shortEnough(m, in_bytes) || !RunQueue_Idle(q)) return 0;
    inline_runs++;
    return 1;
}
