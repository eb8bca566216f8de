/*
 * config_commands.h - the module arguments (docs/configuration.md) and the
 * AI.CONFIG command.
 */
#ifndef REDISAI_CONFIG_COMMANDS_H
#define REDISAI_CONFIG_COMMANDS_H

#include "redismodule.h"

/* Applies `K V ...` module arguments. Returns REDISMODULE_ERR (after
 * logging the reason) when the module load must fail. */
int Config_ApplyLoadArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int Config_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
