/*
 * dag_commands.h - AI.DAGEXECUTE, AI.DAGEXECUTE_RO, AI.DAGRUN, AI.DAGRUN_RO:
 * parse a chain of operations into one DAG for the engine (dag.c).
 */
#ifndef REDISAI_DAG_COMMANDS_H
#define REDISAI_DAG_COMMANDS_H

#include "redismodule.h"

int DagExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagExecuteRO_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagRunRO_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
