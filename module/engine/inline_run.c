/*
 * inline_run.c - the decision of inline_run.h. Main thread only: the pass
 * flag and the counter need no locks.
 */
#include "engine/inline_run.h"

#include "core/config.h"
#include "engine/pass_end.h"
#include "loader/backend_loader.h"

/* An inline run happened in this pass. Only an inline run needs marking: a
 * queued one keeps every later request of the pass queued through the count
 * of clients waiting (its reply comes in beforeSleep at the earliest). */
static int ran_this_pass = 0;
static long long inline_runs = 0;

static void onPassEnd(void) {
    ran_this_pass = 0;
}

void InlineRun_QueuedStart(void) {
    RunQueue_ClientWaits(1);
}

void InlineRun_QueuedEnd(void) {
    RunQueue_ClientWaits(-1);
}

long long InlineRun_Count(void) {
    return inline_runs;
}

static int shortEnough(const RAI_Model *m, size_t in_bytes) {
    long long us = __atomic_load_n(&m->last_run_us, __ATOMIC_RELAXED);
    long long bytes = __atomic_load_n(&m->last_run_in_bytes, __ATOMIC_RELAXED);
    return us >= 0 && us <= rai_config.inline_run_max_us && (long long)in_bytes <= bytes;
}

int InlineRun_Decide(RedisModuleCtx *ctx, const RAI_Model *m, size_t in_bytes,
                     RAI_RunQueue *q) {
    if (ran_this_pass || RunQueue_ClientsWaiting() > 0 || rai_config.inline_run_max_us <= 0) {
        return 0;
    }
    if (m == NULL) return 0;
    if (m->batchsize > 0 || Backend_IsIsolated(m->be)) return 0;
    if (!shortEnough(m, in_bytes) || !RunQueue_Idle(q)) return 0;
    ran_this_pass = 1;
    PassEnd_Call(ctx, onPassEnd);
    inline_runs++;
    return 1;
}
