/*
 * held_run.h - a lone client's short run on its worker while Redis's main
 * thread holds the command (docs/performance.md, "Held runs").
 *
 * Some models run slower on the main thread than on a worker (the Torch
 * CNN here: about 62 us inline, 47 us queued), so inline_run.c stops
 * running them inline. Queued, each request of a lone client then pays the
 * blocked client's round trip: RedisModule_BlockClient, the unblock's pipe
 * write, a context and a copy of the reply in beforeSleep. When
 * InlineRun_Decide says RUN_HELD (a lone client, its model's latest run
 * within INLINE_RUN_MAX_US, the queue idle with a worker looking for a
 * push), the command pushes the DAG and waits for it on the main thread,
 * as long as an inline run would hold it, then stores and replies in the
 * command, as after an inline run. A run not done within twice
 * INLINE_RUN_MAX_US is not waited for any longer: the client is blocked
 * then, and the worker unblocks it as for any queued run. Replies, stored
 * outputs, replication, AI.INFO statistics and errors are the same
 * either way; SLOWLOG counts the wait as the command's own time, as it
 * counts an inline run (a run blocked after the wait: the wait only, its
 * run is not reported to Redis as background time). Not for isolated
 * backends, batching models or DAGs of more than one op (inline_run.h).
 */
#ifndef REDISAI_HELD_RUN_H
#define REDISAI_HELD_RUN_H

#include "engine/dag.h"
#include "engine/run_queue.h"
#include "redismodule.h"

/* Pushes dag to q and waits for it: replied in ctx, or its client blocked.
 * Takes the DAG. Main thread, in the command. */
void HeldRun_Start(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_RunQueue *q);

/* The worker finished dag: 1 when the main thread still waits for it (the
 * DAG is the main thread's from now on, not to be touched), 0 when its
 * client must be unblocked as any queued DAG's. */
int HeldRun_Finished(RAI_Dag *dag);

/* INFO MODULES: runs answered while held; holds that ended in a block. */
long long HeldRun_Count(void);
long long HeldRun_Blocked(void);

#endif
