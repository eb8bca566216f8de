/*
 * script_type.h - the AI_SCRIPT Redis data type (encoding version 4).
 */
#ifndef REDISAI_SCRIPT_TYPE_H
#define REDISAI_SCRIPT_TYPE_H

#include "core/error.h"
#include "redismodule.h"
#include "types/script.h"

extern RedisModuleType *RAI_ScriptType;

int ScriptType_Register(RedisModuleCtx *ctx);
/* A new reference to the script at keyname, or NULL after err. */
RAI_Script *Script_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err);

#endif
