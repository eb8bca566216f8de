/*
 * model_type.h - the AI__MODEL Redis data type (encoding version 4).
 */
#ifndef REDISAI_MODEL_TYPE_H
#define REDISAI_MODEL_TYPE_H

#include "redismodule.h"

extern RedisModuleType *RAI_ModelType;

int ModelType_Register(RedisModuleCtx *ctx);

#endif
