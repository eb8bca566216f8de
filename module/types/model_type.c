/*
 * model_type.c - type methods of AI__MODEL. RDB layout, encoding version 4,
 * RedisAI 1.2's (docs/persistence.md, "Model"): U backend, Buf* device, Str tag,
 * U batchsize, U minbatchsize, U minbatchtimeout, U n_in, Buf* name x n_in,
 * U n_out, Buf* name x n_out, U blob length, U chunk count, Buf chunk x count.
 * A model stored with `BACKEND <name>` carries the name inside its device
 * field, after the device's NUL (rdb_io.h), where 1.2 does not look. Older
 * encodings: v0 saved the tag as a Buf* and the blob as one Buf, v0 and v1
 * had no minbatchtimeout; v5, which earlier builds of this module wrote, has
 * the name as a Buf* field of its own after the device (empty: none).
 * Loading rebuilds the model through its backend (the named one, else the
 * kind's default when it is missing here), loading the backend lazily.
 */
#include "types/model_type.h"

#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/device.h"
#include "core/messages.h"
#include "loader/backend_loader.h"
#include "types/aof_args.h"
#include "types/digest_io.h"
#include "types/model.h"
#include "types/rdb_io.h"
#include "types/stored.h"
#include "types/tensor_type.h"

RedisModuleType *RAI_ModelType = NULL;

/* What an encoding holds, before the model is rebuilt from it. */
typedef struct ModelFields {
    RAI_BackendKind backend;
    char *device;
    char *backend_name; /* NULL: none */
    char *tag;
    size_t tag_len;
    long long batchsize;
    long long minbatchsize;
    long long minbatchtimeout;
    size_t ninputs;
    char **inputs;
    size_t noutputs;
    char **outputs;
    char *blob;
    size_t blob_len;
} ModelFields;

static void freeFields(ModelFields *f) {
    if (f->device) RedisModule_Free(f->device);
    if (f->backend_name) RedisModule_Free(f->backend_name);
    if (f->tag) RedisModule_Free(f->tag);
    Stored_FreeNames(f->ninputs, f->inputs);
    Stored_FreeNames(f->noutputs, f->outputs);
    if (f->blob) RedisModule_Free(f->blob);
}

/* v1 and later: U total length, U chunk count, the chunks. Both numbers
 * come from the payload and may be anything (2^62, 2^64-2): nothing is
 * allocated from them. The blob grows with the chunks Redis actually read
 * (each a string of the payload), and their sum must be the total. */
static int loadChunkedBlob(RedisModuleIO *io, ModelFields *f) {
    uint64_t total = RedisModule_LoadUnsigned(io);
    uint64_t nchunks = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || total > SIZE_MAX - 1 || nchunks > total + 1) {
        return 0;
    }
    size_t off = 0, cap = 0;
    for (uint64_t i = 0; i < nchunks; i++) {
        size_t len = 0;
        char *chunk = RedisModule_LoadStringBuffer(io, &len);
        if (RedisModule_IsIOError(io) || chunk == NULL || len > total - off) {
            if (chunk) RedisModule_Free(chunk);
            return 0;
        }
        if (f->blob == NULL && nchunks == 1) {
            f->blob = chunk; /* the common case: one chunk, kept as read */
            off = len;
            break;
        }
        if (off + len > cap) {
            cap = off + len > 2 * cap ? off + len : 2 * cap;
            if (cap > total) cap = total;
            f->blob = RedisModule_Realloc(f->blob, cap ? cap : 1);
        }
        memcpy(f->blob + off, chunk, len);
        off += len;
        RedisModule_Free(chunk);
    }
    if (f->blob == NULL) f->blob = RedisModule_Alloc(1);
    f->blob_len = off;
    return off == total;
}

/* v5's own name field: a Buf* name, empty for none. Those builds never put a
 * name in the device field, so a value with both is not theirs. */
static int loadV5Name(RedisModuleIO *io, ModelFields *f) {
    size_t len = 0;
    char *name = RdbIO_LoadCString(io, &len);
    if (name == NULL) return 0;
    if (len == 0) {
        RedisModule_Free(name);
        return 1;
    }
    if (strlen(name) != len || f->backend_name != NULL) {
        RedisModule_Free(name);
        return 0;
    }
    f->backend_name = name;
    return 1;
}

static int loadFields(RedisModuleIO *io, int encver, ModelFields *f) {
    f->backend = (RAI_BackendKind)RedisModule_LoadUnsigned(io);
    if (!RdbIO_LoadDevice(io, "AI__MODEL", &f->device, &f->backend_name)) return 0;
    if (encver >= 5 && !loadV5Name(io, f)) return 0;
    f->tag = encver >= 1 ? RdbIO_LoadBytes(io, &f->tag_len) : RdbIO_LoadCString(io, &f->tag_len);
    f->batchsize = (long long)RedisModule_LoadUnsigned(io);
    f->minbatchsize = (long long)RedisModule_LoadUnsigned(io);
    if (encver >= 2) f->minbatchtimeout = (long long)RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || f->device == NULL || f->tag == NULL) return 0;
    f->inputs = RdbIO_LoadNames(io, &f->ninputs);
    if (f->inputs == NULL) return 0;
    f->outputs = RdbIO_LoadNames(io, &f->noutputs);
    if (f->outputs == NULL) return 0;
    if (encver >= 1) return loadChunkedBlob(io, f);
    f->blob = RedisModule_LoadStringBuffer(io, &f->blob_len);
    return f->blob != NULL && !RedisModule_IsIOError(io);
}

static void *ModelRdbLoad(RedisModuleIO *io, int encver) {
    if (RdbIO_RefuseNewer(io, "AI__MODEL", encver)) return NULL;
    RAI_Model *m = NULL;
    ModelFields f = {0};
    RAI_DeviceKind kind;
    int64_t id;
    RAI_Error err;
    Error_Init(&err);

    if (!loadFields(io, encver, &f) || (unsigned)f.backend >= RAI_BACKEND_KINDS ||
        f.batchsize < 0 || f.minbatchsize < 0 || f.minbatchtimeout < 0 ||
        f.minbatchsize > f.batchsize ||
        !Device_ParseLoose(f.device, &kind, &id)) {
        goto ioerr;
    }
    /* Separately, so that the log gives the reason (file, dlerror text). A
     * named model finds its backend, or falls back to the default, in
     * Model_Create. */
    if (f.backend_name == NULL && Backend_Require(NULL, f.backend, &err) == NULL) {
        RedisModule_LogIOError(io, "warning", "Failed loading AI__MODEL %s: the %s backend: %s",
                               RdbIO_KeyName(io), Backend_KindName(f.backend),
                               Error_Message(&err));
        goto ioerr;
    }
    RAI_ModelParams p = {
        .backend = f.backend,
        .device_str = f.device,
        .device = kind,
        .device_id = id,
        .tag = f.tag,
        .tag_len = f.tag_len,
        .batchsize = f.batchsize,
        .minbatchsize = f.minbatchsize,
        .minbatchtimeout = f.minbatchtimeout,
        .ninputs = f.ninputs,
        .inputs = (const char *const *)f.inputs,
        .noutputs = f.noutputs,
        .outputs = (const char *const *)f.outputs,
        .backend_name = f.backend_name,
        .name_fallback = 1, /* refusing would fail the whole RDB load */
    };
    const RedisModuleString *loading = RedisModule_GetKeyNameFromIO(io);
    if (loading) p.key = RedisModule_StringPtrLen(loading, &p.key_len);
    m = Model_Create(NULL, &p, f.blob, f.blob_len, &err);
    f.blob = NULL;
    if (m == NULL) {
        RedisModule_LogIOError(io, "warning",
                               "Failed loading AI__MODEL %s: the %s backend could not rebuild it: %s",
                               RdbIO_KeyName(io), Backend_KindName(f.backend),
                               Error_Message(&err));
        goto ioerr;
    }
    const RedisModuleString *keyname = RedisModule_GetKeyNameFromIO(io);
    if (keyname) Model_RegisterStats(m, (RedisModuleString *)keyname);
    goto done;

ioerr:
    RdbIO_LogShortRead(io, "a model", encver);
done:
    Error_Clear(&err);
    freeFields(&f);
    return m;
}

static void ModelRdbSave(RedisModuleIO *io, void *value) {
    RAI_Model *m = value;
    size_t chunk = (size_t)rai_config.model_chunk_size;
    size_t nchunks = Model_ChunkCount(m->blob_len, chunk);
    RedisModule_SaveUnsigned(io, m->backend);
    RdbIO_SaveDevice(io, m->device_str, m->backend_name);
    RedisModule_SaveStringBuffer(io, m->tag, m->tag_len);
    RedisModule_SaveUnsigned(io, m->batchsize);
    RedisModule_SaveUnsigned(io, m->minbatchsize);
    RedisModule_SaveUnsigned(io, m->minbatchtimeout);
    RedisModule_SaveUnsigned(io, m->ninputs);
    for (size_t i = 0; i < m->ninputs; i++) RdbIO_SaveCString(io, m->inputs[i]);
    RedisModule_SaveUnsigned(io, m->noutputs);
    for (size_t i = 0; i < m->noutputs; i++) RdbIO_SaveCString(io, m->outputs[i]);
    RedisModule_SaveUnsigned(io, m->blob_len);
    RedisModule_SaveUnsigned(io, nchunks);
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * chunk;
        size_t len = i + 1 < nchunks ? chunk : m->blob_len - off;
        RedisModule_SaveStringBuffer(io, m->blob + off, len);
    }
}

/* The fields ModelRdbSave writes, in its order; the blob as one buffer,
 * whatever the chunk size (each server's own). */
static void ModelDigest(RedisModuleDigest *md, void *value) {
    RAI_Model *m = value;
    RedisModule_DigestAddLongLong(md, m->backend);
    DigestIO_AddCString(md, m->device_str);
    DigestIO_AddOptCString(md, m->backend_name);
    RedisModule_DigestAddStringBuffer(md, m->tag, m->tag_len);
    RedisModule_DigestAddLongLong(md, m->batchsize);
    RedisModule_DigestAddLongLong(md, m->minbatchsize);
    RedisModule_DigestAddLongLong(md, m->minbatchtimeout);
    DigestIO_AddNames(md, m->ninputs, m->inputs);
    DigestIO_AddNames(md, m->noutputs, m->outputs);
    RedisModule_DigestAddStringBuffer(md, m->blob, m->blob_len);
    RedisModule_DigestEndSequence(md);
}

static void ModelAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Model *m = value;
    size_t chunk = (size_t)rai_config.model_chunk_size;
    size_t nchunks = Model_ChunkCount(m->blob_len, chunk);
    AofArgs a;
    AofArgs_Init(&a, aof);
    AofArgs_Key(&a, key);
    AofArgs_Str(&a, Backend_KindName(m->backend));
    AofArgs_Str(&a, m->device_str);
    /* Only for a named model: AOF files without names replay on older
     * servers. */
    if (m->backend_name) {
        AofArgs_Str(&a, "BACKEND");
        AofArgs_Str(&a, m->backend_name);
    }
    AofArgs_Str(&a, "TAG");
    AofArgs_Bytes(&a, m->tag, m->tag_len);
    AofArgs_Str(&a, "BATCHSIZE");
    AofArgs_Int(&a, m->batchsize);
    AofArgs_Str(&a, "MINBATCHSIZE");
    AofArgs_Int(&a, m->minbatchsize);
    AofArgs_Str(&a, "MINBATCHTIMEOUT");
    AofArgs_Int(&a, m->minbatchtimeout);
    if (m->backend == RAI_BACKEND_TF) {
        AofArgs_Str(&a, "INPUTS");
        AofArgs_Names(&a, m->ninputs, m->inputs, 1);
        AofArgs_Str(&a, "OUTPUTS");
        AofArgs_Names(&a, m->noutputs, m->outputs, 1);
    }
    AofArgs_Str(&a, "BLOB");
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * chunk;
        size_t len = i + 1 < nchunks ? chunk : m->blob_len - off;
        AofArgs_Bytes(&a, m->blob + off, len);
    }
    AofArgs_Emit(&a, aof, "AI.MODELSTORE");
}

RAI_Model *Model_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err) {
    RAI_Model *m = Stored_ValueAt(ctx, keyname, RAI_ModelType, RAI_ERR_MODEL_KEY_EMPTY, err);
    return m ? Model_Retain(m) : NULL;
}

static void ModelFree(void *value) {
    Model_Release(value);
}

static size_t ModelMemUsage(const void *value) {
    const RAI_Model *m = value;
    return sizeof(*m) + m->blob_len + m->tag_len +
           (m->backend_name ? strlen(m->backend_name) + 1 : 0);
}

int ModelType_Register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = ModelRdbLoad,
        .rdb_save = ModelRdbSave,
        .aof_rewrite = ModelAofRewrite,
        .digest = ModelDigest,
        .mem_usage = ModelMemUsage,
        .free = ModelFree,
    };
    RAI_ModelType = RedisModule_CreateDataType(ctx, "AI__MODEL", RAI_ENC_VER, &methods);
    return RAI_ModelType ? REDISMODULE_OK : REDISMODULE_ERR;
}
