/*
 * tensor.h - the tensor: a reference-counted, row-major block of elements of
 * one dtype. Its data is owned in one of three ways: allocated by us, held
 * from a RedisModuleString (TENSORSET BLOB stores the client's bytes without
 * copying them), or adopted from a backend with a deleter (outputs stay in
 * the framework's memory while a DAG passes them on). Tensors in the
 * keyspace never hold adopted memory: Tensor_ForKeyspace copies it once as
 * it enters, so Redis counts every byte a key holds. STRING tensors keep
 * NUL-terminated elements back to back, with the start offset of each.
 */
#ifndef REDISAI_TENSOR_H
#define REDISAI_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "redisai/backend_abi.h"
#include "redismodule.h"

struct RAI_Tensor {
    long refcount; /* atomic */
    RAI_DType dtype;
    int ndims;
    int64_t *dims;
    size_t len; /* elements */
    char *data;
    size_t nbytes;
    uint64_t *offsets; /* STRING: start of element i in data */
    RedisModuleString *held; /* data points into this string */
    void (*deleter)(void *ctx); /* data was adopted */
    void *deleter_ctx;
};

/* dtype tokens of docs/commands.md, "Data types"; returns 0 when unknown. */
int DType_Parse(const char *s, size_t len, RAI_DType *out);
/* The token of a dtype, or NULL when the tensor layer cannot name it. */
const char *DType_Name(RAI_DType dt);
size_t DType_ElemSize(RAI_DType dt); /* 0 for STRING */
int DType_IsString(RAI_DType dt);
/* Whether tensors of dt may live in the keyspace and the RDB: the named
 * dtypes, and the other fixed-width ones backends produce (float16 from
 * Torch, uint32 from ONNX, ...), which TENSORGET serves as BLOB only. */
int DType_IsStorable(RAI_DType dt);

/* How replication and the AOF spell a storable dtype with no name:
 * "_DTYPE<code>_<bits>". AI.TENSORSET accepts it from the master link and
 * the AOF only, so clients still see AI.TENSORSET's errors. */
#define DTYPE_INTERNAL_NAME_MAX 32
void DType_InternalName(RAI_DType dt, char *buf);
int DType_ParseInternal(const char *s, size_t len, RAI_DType *out);

/* Product of dims (1 for a 0-d tensor). */
size_t Tensor_ShapeLength(const int64_t *dims, int ndims);
/* The same for dims from outside (an isolated backend's host): 0 when a dim
 * is negative or the product overflows, else 1 with the length in *n. */
int Tensor_CheckedLength(const int64_t *dims, int ndims, size_t *n);

/* Uninitialised data (or zero-filled when zero != 0). Not for STRING. */
RAI_Tensor *Tensor_New(RAI_DType dt, const int64_t *dims, int ndims, int zero);
/* A STRING tensor of n empty strings. */
RAI_Tensor *Tensor_NewEmptyStrings(const int64_t *dims, int ndims);
/* Takes ownership of data (RedisModule_Alloc'd) and offsets (may be NULL). */
RAI_Tensor *Tensor_NewOwned(RAI_DType dt, const int64_t *dims, int ndims, char *data,
                            size_t nbytes, uint64_t *offsets);
/* Keeps a reference to s; data points at its bytes. offsets may be NULL. */
RAI_Tensor *Tensor_NewHeld(RAI_DType dt, const int64_t *dims, int ndims, RedisModuleString *s,
                           uint64_t *offsets);
/* Not for STRING: returns NULL (adopted memory carries no offsets). */
RAI_Tensor *Tensor_NewAdopted(RAI_DType dt, const int64_t *dims, int ndims, void *data,
                              size_t nbytes, void (*deleter)(void *), void *deleter_ctx);
RAI_Tensor *Tensor_NewStrings(const int64_t *dims, int ndims, const char *const *elems,
                              const size_t *lens);

/* A new reference to t's contents whose every byte comes from Redis's
 * allocator: t itself unless its data was adopted from a backend, else an
 * owned copy (t is left as it is). For whatever is stored under a key. */
RAI_Tensor *Tensor_ForKeyspace(RAI_Tensor *t);
/* Bytes Tensor_ForKeyspace would copy: nbytes when adopted, else 0. */
size_t Tensor_ForeignBytes(const RAI_Tensor *t);

RAI_Tensor *Tensor_Retain(RAI_Tensor *t);
/* Must run on the main thread when the tensor may hold a RedisModuleString:
 * the engine releases tensors from the main thread for that reason. */
void Tensor_Release(RAI_Tensor *t);

const char *Tensor_StringAt(const RAI_Tensor *t, size_t i, size_t *len);
/* Fills offsets from a STRING blob; returns 0 unless the blob ends in NUL
 * and holds exactly n elements. */
int Tensor_StringOffsets(const char *blob, size_t nbytes, size_t n, uint64_t **offsets);

/* Along dim 0, copied (STRING offsets moved): used by auto-batching and
 * the LLAPI. NULL when the tensors do not fit together (dtype, dims past
 * the first) or the rows are out of range. */
RAI_Tensor *Tensor_ConcatRows(RAI_Tensor **ts, size_t n);
RAI_Tensor *Tensor_SliceRows(RAI_Tensor *t, long long offset, long long len);

#endif
