/*
 * dag_run.h - running a DAG's ops on a run-queue worker (or, for an inline
 * run, on the main thread).
 */
#ifndef REDISAI_DAG_RUN_H
#define REDISAI_DAG_RUN_H

#include "engine/dag.h"
#include "engine/run_queue.h"

/* Runs op through its backend, telling it worker_index; on success the
 * outputs fill their slots, else op->err says why. */
void Dag_RunOp(RAI_Dag *dag, RAI_DagOp *op, int worker_index);
/* Runs ops from next_op while they belong to q; then moves the DAG to the
 * next op's queue, or finishes it. */
void Dag_RunFrom(RAI_Dag *dag, RAI_RunQueue *q);
/* After one model run for a batch of DAGs, each with its rows and its op
 * done: the members with no model or script op left are finished, then the
 * others queued for their next op (ahead of new requests on q), running
 * none of them here: no member's answer waits for another member's later
 * ops. Reorders dags. */
void Dag_ContinueBatch(RAI_Dag **dags, size_t n, RAI_RunQueue *q);
/* On a worker with model runs in flight (core/async_run.h): waits for
 * their answers and continues their DAGs, so that what comes next is
 * ordered after them as if it had queued behind them. */
void Dag_SettleInFlight(void);
/* The DAG is done (or failed, or timed out): its client gets the reply on
 * the main thread, or an LLAPI DAG's on_finish runs here. */
void Dag_Finish(RAI_Dag *dag);
/* TIMEOUT counts from enqueue and is checked before each op; a running op
 * is never interrupted. Finishes the DAG (1) when it has passed. */
int Dag_TimedOut(RAI_Dag *dag);
/* The key a run is for, in info (RAI_RunInfo.key). */
void Dag_RunInfoKey(const RAI_DagOp *op, RAI_RunInfo *info);
/* Tell Redis the time a blocked client's run takes (SLOWLOG, latency). */
void Dag_MeasureStart(RAI_Dag *dag);
void Dag_MeasureEnd(RAI_Dag *dag);

#endif
