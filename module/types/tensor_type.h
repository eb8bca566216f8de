/*
 * tensor_type.h - the AI_TENSOR Redis data type (encoding version 4).
 */
#ifndef REDISAI_TENSOR_TYPE_H
#define REDISAI_TENSOR_TYPE_H

#include "core/error.h"
#include "core/tensor.h"
#include "redismodule.h"
#include "types/rdb_io.h"

extern RedisModuleType *RAI_TensorType;

int TensorType_Register(RedisModuleCtx *ctx);

/* Opens key for reading and returns its tensor, or NULL after an error in
 * err (missing key, or WRONGTYPE). */
RAI_Tensor *Tensor_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err);
/* Stores t at keyname and replicates it as AI.TENSORSET ... BLOB. The key
 * takes a new reference to t, or to a copy in Redis's allocator when t's
 * data was adopted from a backend (Tensor_ForKeyspace). Returns
 * REDISMODULE_ERR after err (WRONGTYPE). */
int Tensor_StoreAndReplicate(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Tensor *t,
                             RAI_Error *err);
/* Tensor_StoreAndReplicate in two steps, for a caller that must check more
 * between the key's type and the store (dag_reply.c) without opening the
 * key twice: keyname opened for writing, or NULL after err (WRONGTYPE);
 * then the store and its replication, which close the key. Main thread. */
RedisModuleKey *Tensor_OpenForStore(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                    RAI_Error *err);
void Tensor_StoreOpened(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname,
                        RAI_Tensor *t);
/* Argument vector `key DTYPE d1 .. dn` for replication and AOF, to which
 * callers append "BLOB" and the data as a buffer (format "vcb"), so the
 * bytes are not copied into a string first. Unnamed dtypes are spelled
 * as DType_InternalName says. Caller frees with Tensor_FreeSetArgs. */
RedisModuleString **Tensor_SetArgs(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                   RAI_Tensor *t, int *argc);
void Tensor_FreeSetArgs(RedisModuleCtx *ctx, RedisModuleString **args, int argc);

#endif
