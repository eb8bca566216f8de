/*
 * script_commands.h - AI.SCRIPTSTORE, AI.SCRIPTSET, AI.SCRIPTGET, AI.SCRIPTDEL.
 */
#ifndef REDISAI_SCRIPT_COMMANDS_H
#define REDISAI_SCRIPT_COMMANDS_H

#include "redismodule.h"

int ScriptStore_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptDel_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
