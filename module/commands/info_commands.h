/*
 * info_commands.h - AI.INFO, AI._MODELSCAN, AI._SCRIPTSCAN.
 */
#ifndef REDISAI_INFO_COMMANDS_H
#define REDISAI_INFO_COMMANDS_H

#include "redismodule.h"

int Info_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelScan_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptScan_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
