/*
 * dag_reply.h - after a DAG ran, on the main thread: its outputs stored and
 * replicated, its client answered, its runs counted in AI.INFO.
 */
#ifndef REDISAI_DAG_REPLY_H
#define REDISAI_DAG_REPLY_H

#include "engine/dag.h"
#include "redismodule.h"

/* Stores the outputs and replies: from the reply callback of a blocked
 * client, or at once after an inline run. */
int Dag_Reply(RedisModuleCtx *ctx, RAI_Dag *dag);
/* Adds the DAG's finished model and script ops to their keys' AI.INFO
 * statistics. Any thread: the counters are atomic. */
void Dag_UpdateStats(RAI_Dag *dag);
/* The blocked client's callbacks (RedisModule_BlockClient). */
int Dag_ReplyCallback(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
void Dag_FreeCallback(RedisModuleCtx *ctx, void *privdata);

#endif
