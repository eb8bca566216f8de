/*
 * model_commands.h - AI.MODELSTORE, AI.MODELSET, AI.MODELGET, AI.MODELDEL.
 */
#ifndef REDISAI_MODEL_COMMANDS_H
#define REDISAI_MODEL_COMMANDS_H

#include "redismodule.h"

int ModelStore_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelDel_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
