/*
 * unblock_batch.c - see unblock_batch.h.
 */
#include "engine/unblock_batch.h"

/* DAGs left in the queue when a run starts for the DAG it finishes to be
 * kept: at 2 or 3 (a few clients) the kept client's next request is part of
 * what keeps the worker busy. */
#define UNBLOCK_BATCH_WAITING 4
/* A longer run is not kept: a wake-up costs little beside it, and the kept
 * client would wait as long again. */
#define UNBLOCK_BATCH_RUN_MAX_US 500

static UnblockBatch_UnblockFn unblock_fn;
static long long pairs = 0; /* atomic: read by INFO */

static __thread RedisModuleBlockedClient *kept_bc = NULL;
static __thread void *kept_privdata = NULL;
static __thread const void *kept_runner = NULL;

void UnblockBatch_SetUnblock(UnblockBatch_UnblockFn fn) {
    unblock_fn = fn;
}

int UnblockBatch_Pending(void) {
    return kept_bc != NULL;
}

void UnblockBatch_Flush(void) {
    if (kept_bc == NULL) return;
    RedisModuleBlockedClient *bc = kept_bc;
    kept_bc = NULL;
    kept_runner = NULL;
    unblock_fn(bc, kept_privdata);
}

int UnblockBatch_BeforeRun(const void *runner, long waiting) {
    int may = runner != NULL && waiting >= UNBLOCK_BATCH_WAITING;
    if (kept_bc != NULL && (!may || runner != kept_runner)) UnblockBatch_Flush();
    return may;
}

int UnblockBatch_ShortRun(long long run_us) {
    return run_us <= UNBLOCK_BATCH_RUN_MAX_US;
}

void UnblockBatch_Keep(const void *runner, RedisModuleBlockedClient *bc, void *privdata) {
    if (kept_bc == NULL) {
        kept_bc = bc;
        kept_privdata = privdata;
        kept_runner = runner;
        return;
    }
    /* The one kept first, then this one: the first unblock wakes Redis's
     * main thread, the second finds its list not empty. */
    __atomic_add_fetch(&pairs, 1, __ATOMIC_RELAXED);
    UnblockBatch_Flush();
    unblock_fn(bc, privdata);
}

long long UnblockBatch_Pairs(void) {
    return __atomic_load_n(&pairs, __ATOMIC_RELAXED);
}
