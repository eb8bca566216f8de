/*
 * dag_start.h - a parsed DAG handed to the engine.
 */
#ifndef REDISAI_DAG_START_H
#define REDISAI_DAG_START_H

#include "core/error.h"
#include "engine/dag.h"
#include "redismodule.h"

/* Blocks the client and queues the DAG; the client gets its reply when the
 * DAG is done. Records the caller if not done yet. Takes ownership of dag.
 * A short model run with nothing else waiting runs here instead and is
 * answered at once (inline_run.h). Main thread. */
int Dag_Start(RedisModuleCtx *ctx, RAI_Dag *dag);
/* Queues a DAG that no client waits for (the LLAPI): dag->on_finish runs
 * on the worker thread that finishes it and owns the DAG from then on. No
 * caller is recorded: scripts' redis.execute act in DB 0 unrestricted. Any
 * thread; REDISMODULE_ERR after err when the CPU queue is missing. */
int Dag_Enqueue(RAI_Dag *dag, RAI_Error *err);

#endif
