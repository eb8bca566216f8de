/*
 * tensor_type.c - type methods of AI_TENSOR. RDB layout, encoding version 4
 * (spec 17): U dtype code, U bits, S ndims, S dim x ndims, Buf data, and for
 * STRING tensors U start offset x length. Older encodings are refused with a
 * log line (they held device fields this implementation never wrote).
 */
#include "tensor_type.h"

#include <string.h>

#include "tensor.h"
#include "tensor_commands.h"

RedisModuleType *RAI_TensorType = NULL;

static void *TensorRdbLoad(RedisModuleIO *io, int encver) {
    if (encver != RAI_ENC_VER) {
        RedisModule_LogIOError(io, "warning",
                               "AI_TENSOR encoding version %d is not supported (only %d)", encver,
                               RAI_ENC_VER);
        return NULL;
    }
    RAI_DType dt;
    dt.code = (uint8_t)RedisModule_LoadUnsigned(io);
    dt.bits = (uint8_t)RedisModule_LoadUnsigned(io);
    int64_t ndims = RedisModule_LoadSigned(io);
    if (RedisModule_IsIOError(io) || ndims < 0 || ndims > 1 << 16) goto ioerr;
    int64_t *dims = RedisModule_Alloc(sizeof(int64_t) * (ndims ? ndims : 1));
    for (int64_t i = 0; i < ndims; i++) dims[i] = RedisModule_LoadSigned(io);
    size_t nbytes = 0;
    char *data = RedisModule_LoadStringBuffer(io, &nbytes);
    if (RedisModule_IsIOError(io)) {
        RedisModule_Free(dims);
        if (data) RedisModule_Free(data);
        goto ioerr;
    }
    uint64_t *offsets = NULL;
    size_t len = Tensor_ShapeLength(dims, (int)ndims);
    if (DType_IsString(dt)) {
        offsets = RedisModule_Alloc(sizeof(uint64_t) * (len ? len : 1));
        for (size_t i = 0; i < len; i++) offsets[i] = RedisModule_LoadUnsigned(io);
        if (RedisModule_IsIOError(io)) {
            RedisModule_Free(offsets);
            RedisModule_Free(dims);
            RedisModule_Free(data);
            goto ioerr;
        }
    }
    RAI_Tensor *t = Tensor_NewOwned(dt, dims, (int)ndims, data, nbytes, offsets);
    RedisModule_Free(dims);
    return t;
ioerr:
    RedisModule_LogIOError(io, "warning", "Experienced a short read while reading a tensor from RDB");
    return NULL;
}

static void TensorRdbSave(RedisModuleIO *io, void *value) {
    RAI_Tensor *t = value;
    RedisModule_SaveUnsigned(io, t->dtype.code);
    RedisModule_SaveUnsigned(io, t->dtype.bits);
    RedisModule_SaveSigned(io, t->ndims);
    for (int i = 0; i < t->ndims; i++) RedisModule_SaveSigned(io, t->dims[i]);
    RedisModule_SaveStringBuffer(io, t->data, t->nbytes);
    if (DType_IsString(t->dtype)) {
        for (size_t i = 0; i < t->len; i++) RedisModule_SaveUnsigned(io, t->offsets[i]);
    }
}

static void TensorAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Tensor *t = value;
    RedisModuleCtx *ctx = RedisModule_GetContextFromIO(aof);
    int argc;
    RedisModuleString **args = Tensor_SetArgs(ctx, key, t, &argc);
    if (args == NULL) {
        RedisModule_LogIOError(aof, "warning", "tensor %s has a dtype with no name; not rewritten",
                               RedisModule_StringPtrLen(key, NULL));
        return;
    }
    /* args[0] is the key itself. */
    RedisModule_EmitAOF(aof, "AI.TENSORSET", "vcb", args, (size_t)argc, "BLOB", t->data, t->nbytes);
    Tensor_FreeSetArgs(ctx, args, argc);
}

static void TensorFree(void *value) {
    Tensor_Release(value);
}

static size_t TensorMemUsage(const void *value) {
    const RAI_Tensor *t = value;
    size_t n = sizeof(*t) + sizeof(int64_t) * t->ndims + t->nbytes;
    if (t->offsets) n += sizeof(uint64_t) * t->len;
    return n;
}

int TensorType_Register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = TensorRdbLoad,
        .rdb_save = TensorRdbSave,
        .aof_rewrite = TensorAofRewrite,
        .mem_usage = TensorMemUsage,
        .free = TensorFree,
    };
    RAI_TensorType = RedisModule_CreateDataType(ctx, "AI_TENSOR", RAI_ENC_VER, &methods);
    return RAI_TensorType ? REDISMODULE_OK : REDISMODULE_ERR;
}
