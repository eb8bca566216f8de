/*
 * batch.h - auto-batching: the run queues' policy (engine/run_queue.h).
 */
#ifndef REDISAI_BATCH_H
#define REDISAI_BATCH_H

#include <stddef.h>

#include "engine/dag.h"
#include "engine/run_queue.h"

/* A RunQueue_TakeFn: the first DAG that can run now, with the queued DAGs
 * that batch with it (same model stored with BATCHSIZE, inputs equal but in
 * dim 0, rows up to BATCHSIZE). A DAG whose model wants MINBATCHSIZE and
 * has not got it stays queued (with every DAG of that model) until enough
 * arrive or MINBATCHTIMEOUT passes; *wait_ms is then the time to the
 * nearest such timeout or held DAG's TIMEOUT. */
size_t Batch_Take(RAI_RunQueue *q, RAI_Dag ***batch, size_t *cap, long long *wait_ms);
/* A RunQueue_RunFn: one DAG goes on alone; n > 1 run their next op as one
 * model run, inputs concatenated along dim 0, outputs sliced back, and each
 * is then finished or queued for its next op (Dag_ContinueBatch). */
void Batch_Run(RAI_Dag **dags, size_t n, RAI_RunQueue *q);

#endif
