/*
 * model_type.h - the AI__MODEL Redis data type (encoding version 4).
 */
#ifndef REDISAI_MODEL_TYPE_H
#define REDISAI_MODEL_TYPE_H

#include "core/error.h"
#include "redismodule.h"
#include "types/model.h"

extern RedisModuleType *RAI_ModelType;

int ModelType_Register(RedisModuleCtx *ctx);
/* Reads the model at keyname (a new reference), or NULL after err:
 * `ERR model key is empty` or WRONGTYPE. */
RAI_Model *Model_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err);

#endif
