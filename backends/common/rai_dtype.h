/*
 * rai_dtype.h - every element type a backend converts, as the core's
 * (code, bits) pair, listed once.
 *
 * A backend keeps only its framework's column: an int array of
 * RAI_DTYPE_ID_COUNT entries, indexed by RAI_DTypeId, holding the
 * framework's enum value for each type (RAI_DTYPE_NO_TYPE where the
 * framework has none). The two lookups below go through that column both
 * ways. The core's tensor layer names only some of these types; the rest
 * (half, bfloat16, uint32/64) still travel as BLOB.
 */
#ifndef REDISAI_RAI_DTYPE_H
#define REDISAI_RAI_DTYPE_H

#include "redisai/backend_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum RAI_DTypeId {
    RAI_DTYPE_ID_FLOAT32 = 0,
    RAI_DTYPE_ID_FLOAT64,
    RAI_DTYPE_ID_FLOAT16,
    RAI_DTYPE_ID_BFLOAT16,
    RAI_DTYPE_ID_INT8,
    RAI_DTYPE_ID_INT16,
    RAI_DTYPE_ID_INT32,
    RAI_DTYPE_ID_INT64,
    RAI_DTYPE_ID_UINT8,
    RAI_DTYPE_ID_UINT16,
    RAI_DTYPE_ID_UINT32,
    RAI_DTYPE_ID_UINT64,
    RAI_DTYPE_ID_BOOL,
    RAI_DTYPE_ID_STRING,
    RAI_DTYPE_ID_COUNT
} RAI_DTypeId;

/* A column's entry for a type the framework cannot hold. */
#define RAI_DTYPE_NO_TYPE (-1)

/* 1 and the framework's type of dt in *out; 0 when dt is not in the list or
 * the framework has no such type. */
int RAI_DTypeToFramework(const int *column, RAI_DType dt, int *out);

/* 1 and the core's pair for the framework's type in *out; 0 when the
 * column does not hold it. */
int RAI_DTypeFromFramework(const int *column, int type, RAI_DType *out);

#ifdef __cplusplus
}
#endif

#endif /* REDISAI_RAI_DTYPE_H */
