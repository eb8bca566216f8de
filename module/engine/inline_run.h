/*
 * inline_run.h - a short model run on Redis's main thread, when nothing else
 * waits for the engine (docs/performance.md, "Inline runs").
 *
 * A queued run crosses two threads: the main thread hands it to a worker,
 * and the worker's unblock comes back for the reply in a second pass of the
 * event loop. Inline runs skip that hand-off. They were on by default until
 * the spins (run_queue.c, main_spin.h) made the hand-off cheap: a lone
 * client's queued run then beat its inline run on every model measured
 * (core/config.h), so they are an operator's choice now. With the limit set,
 * AI.MODELEXECUTE / AI.MODELRUN runs on the main thread and replies at once
 * when all of these hold:
 *   - INLINE_RUN_MAX_US > 0 (default 0: RedisAI 1.2's path, core/config.h);
 *   - the DAG is that one model op (DAGs and scripts always queue: a
 *     script's redis.execute takes Redis's lock, which the main thread holds);
 *   - the model runs in-process (not isolated) with batching off;
 *   - its latest run took at most INLINE_RUN_MAX_US, on inputs at least as
 *     large as this request's (so a larger input, which may run longer, goes
 *     to the queue and is measured there), and its inline runs did not take
 *     longer than that three times in a row (a run can take longer on the
 *     main thread than on a worker); after three, the model stays queued
 *     for a second, then gets three more tries;
 *   - no client's request is queued or running or waiting for its reply,
 *     and its queue is idle (nothing queued, no worker running: the LLAPI's
 *     runs count too). Under load the workers keep the runs: the main
 *     thread only parses and replies, as before;
 *   - no run went inline in this pass of the event loop
 *     (engine/pass_end.h): when several clients are ready at once, the
 *     others are not kept waiting behind runs, and under load the workers
 *     keep the runs.
 * Otherwise the DAG is queued as always. Replies, stored outputs,
 * replication, AI.INFO statistics and errors are the same either way.
 */
#ifndef REDISAI_INLINE_RUN_H
#define REDISAI_INLINE_RUN_H

#include <stddef.h>

#include "engine/run_queue.h"
#include "redismodule.h"
#include "types/model.h"

typedef enum RAI_RunWhere {
    RUN_QUEUED, /* its client blocked, the DAG queued */
    RUN_INLINE, /* on the main thread, in the command */
} RAI_RunWhere;

/* Where a DAG about to start on q runs. m is its model when the DAG is one
 * model op (else NULL: always queued), in_bytes the size of that op's
 * inputs. ctx is the command's. Main thread. */
RAI_RunWhere InlineRun_Decide(RedisModuleCtx *ctx, const RAI_Model *m, size_t in_bytes,
                              RAI_RunQueue *q);
/* An inline run of m took us microseconds. Main thread. */
void InlineRun_Ran(RAI_Model *m, long long us);
/* A client's DAG was queued (its blocked client made) / its blocked
 * client was freed, reply sent or client gone. Main thread. */
void InlineRun_QueuedStart(void);
void InlineRun_QueuedEnd(void);
/* INFO MODULES: how many runs went inline. */
long long InlineRun_Count(void);

#endif
