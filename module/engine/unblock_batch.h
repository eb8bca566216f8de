/*
 * unblock_batch.h - a worker's finished DAGs unblocked two at a time while
 * its queue is backed up (docs/performance.md, "Unblocks two at a time").
 *
 * RedisModule_UnblockClient writes Redis's module pipe when Redis's list of
 * unblocked clients is empty, under the mutex the main thread takes to drain
 * that list. With many clients waiting on one worker, nearly every run's end
 * woke the main thread out of its poll that way, sometimes a second time on
 * the mutex: 1.5 of the worker's 2.0 us of module CPU per request (ONNX CNN,
 * 32 clients). While at least UNBLOCK_BATCH_WAITING DAGs wait in the queue,
 * a DAG that a short run (at most UNBLOCK_BATCH_RUN_MAX_US) finished is kept
 * until the worker's next run of the same model or script has finished too,
 * and both clients are unblocked together: one wake-up for two requests, the
 * second unblock finding Redis's list not empty. The kept client waits one
 * more run, against the UNBLOCK_BATCH_WAITING runs it waited in the queue.
 *
 * Kept DAGs are unblocked before anything else can delay them
 * (UnblockBatch_Flush): a run of another model or script, a run that is not
 * kept (too few waiting), a hand-off to an isolated host, a batch's run,
 * waiting for a host's answers, and the worker's waiting for work.
 *
 * Per worker thread; no lock.
 */
#ifndef REDISAI_UNBLOCK_BATCH_H
#define REDISAI_UNBLOCK_BATCH_H

#include "redismodule.h"

/* How a kept client is unblocked in the end (engine/main_spin.h's
 * MainSpin_Unblock), set at module load. */
typedef void (*UnblockBatch_UnblockFn)(RedisModuleBlockedClient *bc, void *privdata);
void UnblockBatch_SetUnblock(UnblockBatch_UnblockFn fn);

/* A run of runner (a model or script) starts on this worker, with waiting
 * DAGs left in its queue: 1 when the DAG it finishes may be kept, if the
 * run is short (UnblockBatch_ShortRun). Unblocks what is kept first when it
 * may not wait for this run: too few waiting, or another runner. */
int UnblockBatch_BeforeRun(const void *runner, long waiting);
/* A run this long leaves its DAG's client to be kept. */
int UnblockBatch_ShortRun(long long run_us);
/* A DAG's client (bc, privdata) is to be unblocked after a run of runner
 * that may keep it: keeps it, or unblocks it with the one kept before. */
void UnblockBatch_Keep(const void *runner, RedisModuleBlockedClient *bc, void *privdata);
/* A client is kept. */
int UnblockBatch_Pending(void);
/* Unblocks what is kept. */
void UnblockBatch_Flush(void);

/* Pairs of clients unblocked together, since load (INFO). */
long long UnblockBatch_Pairs(void);

#endif
