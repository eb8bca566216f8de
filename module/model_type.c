/*
 * model_type.c - type methods of AI__MODEL. RDB layout, encoding version 4
 * (spec 17): U backend, Buf* device, Str tag, U batchsize, U minbatchsize,
 * U minbatchtimeout, U n_in, Buf* name x n_in, U n_out, Buf* name x n_out,
 * U blob length, U chunk count, Buf chunk x count. Loading rebuilds the
 * model through its backend, loading the backend lazily if needed.
 */
#include "model_type.h"

#include <string.h>

#include "backend_loader.h"
#include "config.h"
#include "device.h"
#include "model.h"
#include "tensor_type.h"

RedisModuleType *RAI_ModelType = NULL;

static void saveCString(RedisModuleIO *io, const char *s) {
    RedisModule_SaveStringBuffer(io, s, strlen(s) + 1);
}

/* Loads a Buf* string (saved with its NUL) as an allocated C string. */
static char *loadCString(RedisModuleIO *io) {
    size_t len = 0;
    char *buf = RedisModule_LoadStringBuffer(io, &len);
    if (buf == NULL) return NULL;
    if (len == 0 || buf[len - 1] != '\0') {
        char *s = RedisModule_Alloc(len + 1);
        memcpy(s, buf, len);
        s[len] = '\0';
        RedisModule_Free(buf);
        return s;
    }
    return buf;
}

static void freeStrings(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (v[i]) RedisModule_Free(v[i]);
    }
    RedisModule_Free(v);
}

static void *ModelRdbLoad(RedisModuleIO *io, int encver) {
    if (encver != RAI_ENC_VER) {
        RedisModule_LogIOError(io, "warning",
                               "AI__MODEL encoding version %d is not supported (only %d)", encver,
                               RAI_ENC_VER);
        return NULL;
    }
    RAI_Model *m = NULL;
    char *device = NULL, *blob = NULL;
    char **inputs = NULL, **outputs = NULL;
    size_t nin = 0, nout = 0, tag_len = 0;
    RedisModuleString *tag = NULL;
    RAI_Error err;
    Error_Init(&err);

    RAI_BackendKind backend = (RAI_BackendKind)RedisModule_LoadUnsigned(io);
    device = loadCString(io);
    tag = RedisModule_LoadString(io);
    long long batchsize = (long long)RedisModule_LoadUnsigned(io);
    long long minbatchsize = (long long)RedisModule_LoadUnsigned(io);
    long long minbatchtimeout = (long long)RedisModule_LoadUnsigned(io);
    nin = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || nin > 1 << 20) goto ioerr;
    inputs = RedisModule_Calloc(nin ? nin : 1, sizeof(char *));
    for (size_t i = 0; i < nin; i++) inputs[i] = loadCString(io);
    nout = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || nout > 1 << 20) goto ioerr;
    outputs = RedisModule_Calloc(nout ? nout : 1, sizeof(char *));
    for (size_t i = 0; i < nout; i++) outputs[i] = loadCString(io);
    size_t blob_len = RedisModule_LoadUnsigned(io);
    size_t nchunks = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io)) goto ioerr;
    blob = RedisModule_Alloc(blob_len ? blob_len : 1);
    size_t off = 0;
    for (size_t i = 0; i < nchunks; i++) {
        size_t len = 0;
        char *chunk = RedisModule_LoadStringBuffer(io, &len);
        if (RedisModule_IsIOError(io) || off + len > blob_len) {
            if (chunk) RedisModule_Free(chunk);
            goto ioerr;
        }
        memcpy(blob + off, chunk, len);
        off += len;
        RedisModule_Free(chunk);
    }
    if (off != blob_len || (unsigned)backend >= RAI_BACKEND_KINDS || device == NULL) goto ioerr;

    RAI_DeviceKind kind;
    int64_t id;
    if (!Device_ParseLoose(device, &kind, &id)) goto ioerr;
    const char *tagp = RedisModule_StringPtrLen(tag, &tag_len);
    RAI_ModelParams p = {
        .backend = backend,
        .device_str = device,
        .device = kind,
        .device_id = id,
        .tag = tagp,
        .tag_len = tag_len,
        .batchsize = batchsize,
        .minbatchsize = minbatchsize,
        .minbatchtimeout = minbatchtimeout,
        .ninputs = nin,
        .inputs = (const char *const *)inputs,
        .noutputs = nout,
        .outputs = (const char *const *)outputs,
    };
    m = Model_Create(NULL, &p, blob, blob_len, &err);
    blob = NULL;
    if (m == NULL) {
        RedisModule_LogIOError(io, "warning", "could not rebuild a %s model from RDB: %s",
                               Backend_KindName(backend), Error_Message(&err));
        goto ioerr;
    }
    const RedisModuleString *keyname = RedisModule_GetKeyNameFromIO(io);
    if (keyname) Model_RegisterStats(m, (RedisModuleString *)keyname);
    goto done;

ioerr:
    RedisModule_LogIOError(io, "warning", "Experienced a short read while reading a model from RDB");
done:
    Error_Clear(&err);
    if (device) RedisModule_Free(device);
    if (tag) RedisModule_FreeString(NULL, tag);
    if (inputs) freeStrings(inputs, nin);
    if (outputs) freeStrings(outputs, nout);
    if (blob) RedisModule_Free(blob);
    return m;
}

static void ModelRdbSave(RedisModuleIO *io, void *value) {
    RAI_Model *m = value;
    size_t chunk = (size_t)rai_config.model_chunk_size;
    size_t nchunks = Model_ChunkCount(m->blob_len, chunk);
    RedisModule_SaveUnsigned(io, m->backend);
    saveCString(io, m->device_str);
    RedisModule_SaveStringBuffer(io, m->tag, m->tag_len);
    RedisModule_SaveUnsigned(io, m->batchsize);
    RedisModule_SaveUnsigned(io, m->minbatchsize);
    RedisModule_SaveUnsigned(io, m->minbatchtimeout);
    RedisModule_SaveUnsigned(io, m->ninputs);
    for (size_t i = 0; i < m->ninputs; i++) saveCString(io, m->inputs[i]);
    RedisModule_SaveUnsigned(io, m->noutputs);
    for (size_t i = 0; i < m->noutputs; i++) saveCString(io, m->outputs[i]);
    RedisModule_SaveUnsigned(io, m->blob_len);
    RedisModule_SaveUnsigned(io, nchunks);
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * chunk;
        size_t len = i + 1 < nchunks ? chunk : m->blob_len - off;
        RedisModule_SaveStringBuffer(io, m->blob + off, len);
    }
}

static void ModelAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Model *m = value;
    RedisModuleCtx *ctx = RedisModule_GetContextFromIO(aof);
    size_t chunk = (size_t)rai_config.model_chunk_size;
    size_t nchunks = Model_ChunkCount(m->blob_len, chunk);
    size_t max = 16 + m->ninputs + m->noutputs + nchunks;
    RedisModuleString **args = RedisModule_Alloc(sizeof(*args) * max);
    size_t n = 0;
    args[n++] = RedisModule_CreateStringFromString(ctx, key);
    args[n++] = RedisModule_CreateString(ctx, Backend_KindName(m->backend),
                                         strlen(Backend_KindName(m->backend)));
    args[n++] = RedisModule_CreateString(ctx, m->device_str, strlen(m->device_str));
    args[n++] = RedisModule_CreateString(ctx, "TAG", 3);
    args[n++] = RedisModule_CreateString(ctx, m->tag, m->tag_len);
    args[n++] = RedisModule_CreateString(ctx, "BATCHSIZE", 9);
    args[n++] = RedisModule_CreateStringFromLongLong(ctx, m->batchsize);
    args[n++] = RedisModule_CreateString(ctx, "MINBATCHSIZE", 12);
    args[n++] = RedisModule_CreateStringFromLongLong(ctx, m->minbatchsize);
    args[n++] = RedisModule_CreateString(ctx, "MINBATCHTIMEOUT", 15);
    args[n++] = RedisModule_CreateStringFromLongLong(ctx, m->minbatchtimeout);
    if (m->backend == RAI_BACKEND_TF) {
        args[n++] = RedisModule_CreateString(ctx, "INPUTS", 6);
        args[n++] = RedisModule_CreateStringFromLongLong(ctx, (long long)m->ninputs);
        for (size_t i = 0; i < m->ninputs; i++) {
            args[n++] = RedisModule_CreateString(ctx, m->inputs[i], strlen(m->inputs[i]));
        }
        args[n++] = RedisModule_CreateString(ctx, "OUTPUTS", 7);
        args[n++] = RedisModule_CreateStringFromLongLong(ctx, (long long)m->noutputs);
        for (size_t i = 0; i < m->noutputs; i++) {
            args[n++] = RedisModule_CreateString(ctx, m->outputs[i], strlen(m->outputs[i]));
        }
    }
    args[n++] = RedisModule_CreateString(ctx, "BLOB", 4);
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * chunk;
        size_t len = i + 1 < nchunks ? chunk : m->blob_len - off;
        args[n++] = RedisModule_CreateString(ctx, m->blob + off, len);
    }
    RedisModule_EmitAOF(aof, "AI.MODELSTORE", "v", args, n);
    for (size_t i = 0; i < n; i++) RedisModule_FreeString(ctx, args[i]);
    RedisModule_Free(args);
}

static void ModelFree(void *value) {
    Model_Release(value);
}

static size_t ModelMemUsage(const void *value) {
    const RAI_Model *m = value;
    return sizeof(*m) + m->blob_len + m->tag_len;
}

int ModelType_Register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = ModelRdbLoad,
        .rdb_save = ModelRdbSave,
        .aof_rewrite = ModelAofRewrite,
        .mem_usage = ModelMemUsage,
        .free = ModelFree,
    };
    RAI_ModelType = RedisModule_CreateDataType(ctx, "AI__MODEL", RAI_ENC_VER, &methods);
    return RAI_ModelType ? REDISMODULE_OK : REDISMODULE_ERR;
}
