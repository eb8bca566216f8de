/*
 * script_execute.h - AI.SCRIPTEXECUTE and AI.SCRIPTRUN (deprecated): parse on
 * the main thread into a one-operation DAG, then hand it to the engine.
 */
#ifndef REDISAI_SCRIPT_EXECUTE_H
#define REDISAI_SCRIPT_EXECUTE_H

#include "redismodule.h"

int ScriptExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
