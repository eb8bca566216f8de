/*
 * tensor_commands.h - AI.TENSORSET and AI.TENSORGET, with their argument
 * parsers exposed so that DAG operations reuse them unchanged.
 */
#ifndef REDISAI_TENSOR_COMMANDS_H
#define REDISAI_TENSOR_COMMANDS_H

#include "core/error.h"
#include "core/tensor.h"
#include "redismodule.h"

/* argv[0] is the dtype token: `type [dim ...] [BLOB b | VALUES v ...]`.
 * internal (commands from the master link or the AOF) also accepts what
 * replication writes for tensors no client could send: unnamed dtypes
 * (DType_InternalName) and dims of 0. */
RAI_Tensor *TensorSet_Parse(RedisModuleString **argv, int argc, int internal, RAI_Error *err);
/* argv are the format tokens after the key: TENSORGET_* bits
 * (engine/tensor_reply.h), or -1 after err. */
int TensorGet_ParseFormat(RedisModuleString **argv, int argc, RAI_Error *err);

int TensorSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int TensorGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
