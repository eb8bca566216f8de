/*
 * tensor_commands.h - AI.TENSORSET and AI.TENSORGET, with their argument
 * parsers exposed so that DAG operations reuse them unchanged.
 */
#ifndef REDISAI_TENSOR_COMMANDS_H
#define REDISAI_TENSOR_COMMANDS_H

#include "core/error.h"
#include "redismodule.h"
#include "core/tensor.h"

/* Bits of a TENSORGET format. */
#define TENSORGET_META 1
#define TENSORGET_BLOB 2
#define TENSORGET_VALUES 4

/* argv[0] is the dtype token: `type [dim ...] [BLOB b | VALUES v ...]`.
 * internal (commands from the master link or the AOF) also accepts what
 * replication writes for tensors no client could send: unnamed dtypes
 * (DType_InternalName) and dims of 0. */
RAI_Tensor *TensorSet_Parse(RedisModuleString **argv, int argc, int internal, RAI_Error *err);
/* argv are the format tokens after the key; returns -1 after err. */
int TensorGet_ParseFormat(RedisModuleString **argv, int argc, RAI_Error *err);
/* Replies with t in format fmt; one reply, possibly an error. */
int TensorGet_Reply(RedisModuleCtx *ctx, RAI_Tensor *t, int fmt);

/* Opens key for reading and returns its tensor, or NULL after an error in
 * err (missing key, or WRONGTYPE). */
RAI_Tensor *Tensor_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err);
/* Stores t at keyname and replicates it as AI.TENSORSET ... BLOB. The key
 * takes a new reference to t, or to a copy in Redis's allocator when t's
 * data was adopted from a backend (Tensor_ForKeyspace). Returns
 * REDISMODULE_ERR after err (WRONGTYPE). */
int Tensor_StoreAndReplicate(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Tensor *t,
                             RAI_Error *err);
/* Argument vector `key DTYPE d1 .. dn` for replication and AOF, to which
 * callers append "BLOB" and the data as a buffer (format "vcb"), so the
 * bytes are not copied into a string first. Unnamed dtypes are spelled
 * as DType_InternalName says. Caller frees with Tensor_FreeSetArgs. */
RedisModuleString **Tensor_SetArgs(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                   RAI_Tensor *t, int *argc);
void Tensor_FreeSetArgs(RedisModuleCtx *ctx, RedisModuleString **args, int argc);

int TensorSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int TensorGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
