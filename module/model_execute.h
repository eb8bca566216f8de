/*
 * model_execute.h - AI.MODELEXECUTE and AI.MODELRUN (deprecated): parse on
 * the main thread into a one-operation DAG, then hand it to the engine.
 */
#ifndef REDISAI_MODEL_EXECUTE_H
#define REDISAI_MODEL_EXECUTE_H

#include "redismodule.h"

int ModelExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
