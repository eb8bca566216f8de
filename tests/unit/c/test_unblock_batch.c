/*
 * test_unblock_batch.c - module/engine/unblock_batch.c: which finished DAGs
 * a worker keeps, and when it unblocks them. The unblock function is a fake
 * that records the clients in order; blocked clients are plain tokens.
 */
#include <pthread.h>

#include "engine/unblock_batch.h"
#include "unit.h"
#include "unit_shim.h"

#define MAX_SEEN 16
static RedisModuleBlockedClient *seen[MAX_SEEN];
static int nseen;

static void fakeUnblock(RedisModuleBlockedClient *bc, void *privdata) {
    CHECK(privdata == (void *)bc); /* each client with its own DAG */
    if (nseen < MAX_SEEN) seen[nseen] = bc;
    nseen++;
}

static RedisModuleBlockedClient *client(int i) {
    return (RedisModuleBlockedClient *)(size_t)(0x1000 + i);
}

static void keep(const void *runner, int i) {
    UnblockBatch_Keep(runner, client(i), client(i));
}

static const int model_a = 0, model_b = 0;
#define A ((const void *)&model_a)
#define B ((const void *)&model_b)

/* Two DAGs of one model while enough wait: one unblock call each, made
 * together after the second run. */
static void testPairs(void) {
    nseen = 0;
    long long pairs = UnblockBatch_Pairs();
    CHECK_INT(UnblockBatch_BeforeRun(A, 4), 1);
    CHECK_INT(UnblockBatch_ShortRun(120), 1);
    keep(A, 1);
    CHECK_INT(nseen, 0);
    CHECK_INT(UnblockBatch_Pending(), 1);
    CHECK_INT(UnblockBatch_BeforeRun(A, 9), 1);
    CHECK_INT(nseen, 0); /* the same model: the kept client waits for this run */
    keep(A, 2);
    CHECK_INT(nseen, 2);
    CHECK(seen[0] == client(1) && seen[1] == client(2));
    CHECK_INT(UnblockBatch_Pending(), 0);
    CHECK_INT(UnblockBatch_Pairs(), pairs + 1);
}

/* Whatever could delay a kept client unblocks it first. */
static void testFlushes(void) {
    nseen = 0;
    CHECK_INT(UnblockBatch_BeforeRun(A, 4), 1);
    keep(A, 3);
    CHECK_INT(UnblockBatch_BeforeRun(B, 30), 1); /* another model's run */
    CHECK_INT(nseen, 1);
    CHECK(seen[0] == client(3));

    keep(B, 4);
    CHECK_INT(UnblockBatch_BeforeRun(B, 3), 0); /* too few waiting */
    CHECK_INT(nseen, 2);
    CHECK(seen[1] == client(4));

    CHECK_INT(UnblockBatch_BeforeRun(B, 4), 1);
    keep(B, 5);
    UnblockBatch_Flush(); /* the worker is about to wait */
    CHECK_INT(nseen, 3);
    CHECK(seen[2] == client(5));
    UnblockBatch_Flush();
    CHECK_INT(nseen, 3);
    CHECK_INT(UnblockBatch_Pending(), 0);
}

static void testWhatMayBeKept(void) {
    nseen = 0;
    CHECK_INT(UnblockBatch_BeforeRun(NULL, 100), 0); /* not a model or script run */
    CHECK_INT(UnblockBatch_BeforeRun(A, 3), 0);
    CHECK_INT(UnblockBatch_BeforeRun(A, 4), 1);
    CHECK_INT(UnblockBatch_ShortRun(500), 1);
    CHECK_INT(UnblockBatch_ShortRun(501), 0);
    CHECK_INT(nseen, 0);
}

static void *flushElsewhere(void *arg) {
    (void)arg;
    CHECK_INT(UnblockBatch_Pending(), 0);
    UnblockBatch_Flush();
    return NULL;
}

/* Each worker keeps its own: another thread's flush leaves it. */
static void testPerThread(void) {
    nseen = 0;
    CHECK_INT(UnblockBatch_BeforeRun(A, 4), 1);
    keep(A, 6);
    pthread_t t;
    if (CHECK(pthread_create(&t, NULL, flushElsewhere, NULL) == 0)) pthread_join(t, NULL);
    CHECK_INT(nseen, 0);
    UnblockBatch_Flush();
    CHECK_INT(nseen, 1);
}

int main(void) {
    UnitShim_Init();
    UnblockBatch_SetUnblock(fakeUnblock);
    testPairs();
    testFlushes();
    testWhatMayBeKept();
    testPerThread();
    return Unit_Done("unblock_batch");
}
