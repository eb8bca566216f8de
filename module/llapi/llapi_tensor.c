/*
 * llapi_tensor.c - the LLAPI's tensor functions. A tensor made here is the
 * core's RAI_Tensor: reference-counted (atomically, so any thread may take
 * or drop a reference), and usable as a run input or stored by the client
 * under a key of RedisAI_TensorRedisType().
 *
 * As in 1.2, the functions that take no RAI_Error report success as 1 and
 * failure as 0 (TensorSetData, TensorSetValueFrom*, TensorGetValueAs*).
 */
#include <stdint.h>
#include <string.h>

#include "llapi/llapi_internal.h"
#include "types/tensor_type.h"

/* --------------------------------- helpers -------------------------------- */

/* ---------------------------------- create -------------------------------- */

/* A tensor of dataTypeStr ("FLOAT", "INT64", ... "STRING", any case) and
 * shape dims, its data zero-filled (STRING: empty strings). NULL for an
 * unknown dtype, a negative dim or a size that overflows. */
RAI_Tensor *RedisAI_TensorCreate(const char *dataTypeStr, long long *dims, int ndims) {
    RAI_DType dt;
    if (dataTypeStr == NULL || !DType_Parse(dataTypeStr, strlen(dataTypeStr), &dt)) return NULL;
    if (ndims < 0 || (ndims > 0 && dims == NULL)) return NULL;
    int64_t *shape = RedisModule_Alloc(sizeof(int64_t) * (ndims ? ndims : 1));
    size_t len = 1, elem = DType_IsString(dt) ? 1 : DType_ElemSize(dt);
    int ok = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) ok = 0;
        shape[i] = dims[i];
        if (ok && dims[i] > 0 && len > SIZE_MAX / 2 / elem / (size_t)dims[i]) ok = 0;
        if (ok) len *= (size_t)dims[i];
    }
    RAI_Tensor *t = NULL;
    if (ok) t = DType_IsString(dt) ? Tensor_NewEmptyStrings(shape, ndims) : Tensor_New(dt, shape, ndims, 1);
    RedisModule_Free(shape);
    return t;
}

/* Along dim 0; NULL when the dtypes or the other dims differ. */
RAI_Tensor *RedisAI_TensorCreateByConcatenatingTensors(RAI_Tensor **ts, long long n) {
    if (n <= 0) return NULL;
    return Tensor_ConcatRows(ts, (size_t)n);
}

/* Rows offset .. offset+len-1 along dim 0, copied; NULL when out of range. */
RAI_Tensor *RedisAI_TensorCreateBySlicingTensor(RAI_Tensor *t, long long offset, long long len) {
    return Tensor_SliceRows(t, offset, len);
}

/* ---------------------------------- read ---------------------------------- */

size_t RedisAI_TensorLength(RAI_Tensor *t) {
    return t->len;
}

size_t RedisAI_TensorDataSize(RAI_Tensor *t) {
    return t->dtype.bits / 8;
}

/* DLPack's DLDataType {uint8 code; uint8 bits; uint16 lanes}, lanes 1, in
 * the low 32 bits, where a client declared with 1.2's DLDataType return
 * reads it. */
size_t RedisAI_TensorDataType(RAI_Tensor *t) {
    return (size_t)t->dtype.code | (size_t)t->dtype.bits << 8 | (size_t)1 << 16;
}

int RedisAI_TensorNumDims(RAI_Tensor *t) {
    return t->ndims;
}

/* -1 when dim is out of range. */
long long RedisAI_TensorDim(RAI_Tensor *t, int dim) {
    if (dim < 0 || dim >= t->ndims) return -1;
    return t->dims[dim];
}

size_t RedisAI_TensorByteSize(RAI_Tensor *t) {
    return t->nbytes;
}

char *RedisAI_TensorData(RAI_Tensor *t) {
    return t->data;
}

RedisModuleType *RedisAI_TensorRedisType(void) {
    return RAI_TensorType;
}

/* ------------------------------- references ------------------------------- */

RAI_Tensor *RedisAI_TensorGetShallowCopy(RAI_Tensor *t) {
    return t ? Tensor_Retain(t) : NULL;
}

void RedisAI_TensorFree(RAI_Tensor *t) {
    Tensor_Release(t);
}

/* ---------------------------------- write --------------------------------- */

/* Replaces a STRING tensor's data with blob (len elements, each ending in
 * NUL), in memory of its own. */
static int setStrings(RAI_Tensor *t, const char *data, size_t len) {
    uint64_t *offsets;
    if (!Tensor_StringOffsets(data, len, t->len, &offsets)) return 0;
    char *copy = RedisModule_Alloc(len);
    memcpy(copy, data, len);
    if (t->held) {
        RedisModule_FreeString(NULL, t->held);
        t->held = NULL;
    } else if (t->deleter) {
        t->deleter(t->deleter_ctx);
        t->deleter = NULL;
    } else {
        RedisModule_Free(t->data);
    }
    if (t->offsets) RedisModule_Free(t->offsets);
    t->data = copy;
    t->nbytes = len;
    t->offsets = offsets;
    return 1;
}

/* 1 when every byte is 0 or 1, as a BOOL element must be. Unlike
 * AI.TENSORSET's check (1.2's quirk: the last byte skipped), 1.2's
 * TensorSetData checks them all. */
static int boolBytes(const char *data, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)data[i] > 1) return 0;
    }
    return 1;
}

/* Copies len bytes to the start of the data: 0 (nothing copied) when len
 * exceeds it, or for BOOL bytes other than 0 and 1. A STRING tensor takes
 * a blob of exactly its element count of NUL-terminated strings. */
int RedisAI_TensorSetData(RAI_Tensor *tensor, const char *data, size_t len) {
    if (tensor == NULL || (data == NULL && len > 0)) return 0;
    if (DType_IsString(tensor->dtype)) return setStrings(tensor, data, len);
    if (len > tensor->nbytes) return 0;
    if (tensor->dtype.code == RAI_DTYPE_BOOL && !boolBytes(data, len)) return 0;
    if (len) memcpy(tensor->data, data, len);
    return 1;
}

static int inRange(const RAI_Tensor *t, long long i) {
    return t != NULL && i >= 0 && (size_t)i < t->len && !DType_IsString(t->dtype);
}

/* INT, UINT and BOOL tensors; 0 for others or an index out of range. */
int RedisAI_TensorSetValueFromLongLong(RAI_Tensor *tensor, long long i, long long val) {
    if (!inRange(tensor, i)) return 0;
    void *p = tensor->data;
    switch (tensor->dtype.code) {
    case RAI_DTYPE_INT:
        switch (tensor->dtype.bits) {
        case 8: ((int8_t *)p)[i] = (int8_t)val; return 1;
        case 16: ((int16_t *)p)[i] = (int16_t)val; return 1;
        case 32: ((int32_t *)p)[i] = (int32_t)val; return 1;
        case 64: ((int64_t *)p)[i] = (int64_t)val; return 1;
        }
        return 0;
    case RAI_DTYPE_UINT:
        switch (tensor->dtype.bits) {
        case 8: ((uint8_t *)p)[i] = (uint8_t)val; return 1;
        case 16: ((uint16_t *)p)[i] = (uint16_t)val; return 1;
        case 32: ((uint32_t *)p)[i] = (uint32_t)val; return 1;
        case 64: ((uint64_t *)p)[i] = (uint64_t)val; return 1;
        }
        return 0;
    case RAI_DTYPE_BOOL:
        ((uint8_t *)p)[i] = val != 0;
        return 1;
    }
    return 0;
}

/* FLOAT and DOUBLE tensors; 0 for others or an index out of range. */
int RedisAI_TensorSetValueFromDouble(RAI_Tensor *tensor, long long i, double val) {
    if (!inRange(tensor, i) || tensor->dtype.code != RAI_DTYPE_FLOAT) return 0;
    switch (tensor->dtype.bits) {
    case 32: ((float *)tensor->data)[i] = (float)val; return 1;
    case 64: ((double *)tensor->data)[i] = val; return 1;
    }
    return 0;
}

int RedisAI_TensorGetValueAsDouble(RAI_Tensor *t, long long i, double *val) {
    if (!inRange(t, i) || t->dtype.code != RAI_DTYPE_FLOAT || val == NULL) return 0;
    switch (t->dtype.bits) {
    case 32: *val = ((const float *)t->data)[i]; return 1;
    case 64: *val = ((const double *)t->data)[i]; return 1;
    }
    return 0;
}

int RedisAI_TensorGetValueAsLongLong(RAI_Tensor *t, long long i, long long *val) {
    if (!inRange(t, i) || val == NULL) return 0;
    const void *p = t->data;
    switch (t->dtype.code) {
    case RAI_DTYPE_INT:
        switch (t->dtype.bits) {
        case 8: *val = ((const int8_t *)p)[i]; return 1;
        case 16: *val = ((const int16_t *)p)[i]; return 1;
        case 32: *val = ((const int32_t *)p)[i]; return 1;
        case 64: *val = ((const int64_t *)p)[i]; return 1;
        }
        return 0;
    case RAI_DTYPE_UINT:
        switch (t->dtype.bits) {
        case 8: *val = ((const uint8_t *)p)[i]; return 1;
        case 16: *val = ((const uint16_t *)p)[i]; return 1;
        case 32: *val = ((const uint32_t *)p)[i]; return 1;
        case 64: *val = (long long)((const uint64_t *)p)[i]; return 1;
        }
        return 0;
    case RAI_DTYPE_BOOL:
        *val = ((const uint8_t *)p)[i];
        return 1;
    }
    return 0;
}
