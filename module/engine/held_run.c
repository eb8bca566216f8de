/*
 * held_run.c - see held_run.h. dag->held goes WAITING -> DONE (the worker)
 * or WAITING -> BLOCKED (the main thread, after it blocked the client);
 * whichever compare-and-swap comes first decides who answers.
 */
#include "engine/held_run.h"

#include <sched.h>

#include "core/clock.h"
#include "core/config.h"
#include "engine/dag_reply.h"
#include "engine/inline_run.h"

static long long held_runs = 0;    /* main thread */
static long long held_blocked = 0; /* main thread */

static void cpuRelax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The state once the worker answered or the deadline passed. A yield now
 * and then lets a worker that shares this CPU run. */
static int waitDone(RAI_Dag *dag, long long deadline_us) {
    int state;
    for (unsigned i = 1; (state = __atomic_load_n(&dag->held, __ATOMIC_ACQUIRE)) == DAG_HELD_WAITING;
         i++) {
        if (Clock_NowUs() >= deadline_us) break;
        if (i % 64 == 0) {
            sched_yield();
        } else {
            cpuRelax();
        }
    }
    return state;
}

void HeldRun_Start(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_RunQueue *q) {
    long long deadline = Clock_NowUs() + 2 * rai_config.inline_run_max_us;
    dag->held = DAG_HELD_WAITING;
    dag->enqueued_ms = Clock_NowMs();
    RunQueue_Push(q, dag);
    if (waitDone(dag, deadline) == DAG_HELD_DONE) {
        held_runs++;
        Dag_Reply(ctx, dag);
        Dag_UpdateStats(dag);
        Dag_Free(dag);
        return;
    }
    /* Too long to hold the main thread: the client waits as a queued
     * DAG's does. If the worker finished in between, it left the DAG to
     * this thread, which unblocks the client itself. */
    held_blocked++;
    dag->bc = RedisModule_BlockClient(ctx, Dag_ReplyCallback, NULL, Dag_FreeCallback, 0);
    InlineRun_QueuedStart();
    int expect = DAG_HELD_WAITING;
    if (!__atomic_compare_exchange_n(&dag->held, &expect, DAG_HELD_BLOCKED, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        RedisModule_UnblockClient(dag->bc, dag);
    }
}

int HeldRun_Finished(RAI_Dag *dag) {
    if (__atomic_load_n(&dag->held, __ATOMIC_RELAXED) == DAG_HELD_NO) return 0;
    int expect = DAG_HELD_WAITING;
    return __atomic_compare_exchange_n(&dag->held, &expect, DAG_HELD_DONE, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

long long HeldRun_Count(void) {
    return held_runs;
}

long long HeldRun_Blocked(void) {
    return held_blocked;
}
