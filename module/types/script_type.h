/*
 * script_type.h - the AI_SCRIPT Redis data type (encoding version 4).
 */
#ifndef REDISAI_SCRIPT_TYPE_H
#define REDISAI_SCRIPT_TYPE_H

#include "redismodule.h"

extern RedisModuleType *RAI_ScriptType;

int ScriptType_Register(RedisModuleCtx *ctx);

#endif
