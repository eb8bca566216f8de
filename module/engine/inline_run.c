/*
 * inline_run.c - the decision of inline_run.h. Main thread only: the pass
 * flag and the counter need no locks.
 */
#include "engine/inline_run.h"

#include "core/clock.h"
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

/* A model whose inline runs took longer than the limit INLINE_STRIKES times
 * in a row stays queued for INLINE_RETRY_MS, then gets INLINE_STRIKES more
 * tries. Not one: the first inline run after a while of queued ones finds
 * the main thread's caches cold and takes longer than the next ones. */
#define INLINE_STRIKES 3
#define INLINE_RETRY_MS 1000

static int retryDue(const RAI_Model *m, long long now_ms) {
    return now_ms - m->inline_over_ms >= INLINE_RETRY_MS;
}

void InlineRun_Ran(RAI_Model *m, long long us) {
    if (us <= rai_config.inline_run_max_us) {
        m->inline_over = 0;
        return;
    }
    long long now = Clock_NowMs();
    m->inline_over = m->inline_over >= INLINE_STRIKES && retryDue(m, now) ? 1 : m->inline_over + 1;
    m->inline_over_ms = now;
}

/* On the main thread, where the limit bounds how long a run holds it: a
 * model can run slower there than on its worker (the Torch CNN here: about
 * 62 us inline, 47 us queued), and the time of a queued run alone would send
 * it inline again after every queued run. */
static int inlineShortEnough(const RAI_Model *m) {
    return m->inline_over < INLINE_STRIKES || retryDue(m, Clock_NowMs());
}

static int shortEnough(const RAI_Model *m, size_t in_bytes) {
    long long us = __atomic_load_n(&m->last_run_us, __ATOMIC_RELAXED);
    long long bytes = __atomic_load_n(&m->last_run_in_bytes, __ATOMIC_RELAXED);
    return us >= 0 && us <= rai_config.inline_run_max_us && (long long)in_bytes <= bytes;
}

RAI_RunWhere InlineRun_Decide(RedisModuleCtx *ctx, const RAI_Model *m, size_t in_bytes,
                              RAI_RunQueue *q) {
    if (ran_this_pass || RunQueue_ClientsWaiting() > 0 || rai_config.inline_run_max_us <= 0) {
        return RUN_QUEUED;
    }
    if (m == NULL) return RUN_QUEUED;
    if (m->batchsize > 0 || Backend_IsIsolated(m->be)) return RUN_QUEUED;
    if (!shortEnough(m, in_bytes) || !inlineShortEnough(m) || !RunQueue_Idle(q)) {
        return RUN_QUEUED;
    }
    ran_this_pass = 1;
    PassEnd_Call(ctx, onPassEnd);
    inline_runs++;
    return RUN_INLINE;
}
