/*
 * tensor_reply.h - a tensor as RESP: AI.TENSORGET's reply, and a DAG's
 * TENSORGET op in the DAG's reply (engine/dag_reply.c): one code for both.
 */
#ifndef REDISAI_TENSOR_REPLY_H
#define REDISAI_TENSOR_REPLY_H

#include "core/tensor.h"
#include "redismodule.h"

/* Bits of a TENSORGET format. */
#define TENSORGET_META 1
#define TENSORGET_BLOB 2
#define TENSORGET_VALUES 4

/* Replies with t in format fmt; one reply, possibly an error. */
int TensorGet_Reply(RedisModuleCtx *ctx, RAI_Tensor *t, int fmt);

#endif
