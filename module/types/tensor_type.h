/*
 * tensor_type.h - the AI_TENSOR Redis data type (encoding version 4).
 */
#ifndef REDISAI_TENSOR_TYPE_H
#define REDISAI_TENSOR_TYPE_H

#include "types/rdb_io.h"
#include "redismodule.h"

extern RedisModuleType *RAI_TensorType;

int TensorType_Register(RedisModuleCtx *ctx);

#endif
