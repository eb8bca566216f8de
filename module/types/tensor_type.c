/*
 * tensor_type.c - type methods of AI_TENSOR. RDB layout, encoding version 4
 * (docs/persistence.md): U dtype code, U bits, S ndims, S dim x ndims, Buf data, and for
 * STRING tensors U start offset x length. Versions 0-3 (RedisAI before
 * STRING tensors) held DLPack fields: U device type, U device id, U bits,
 * U code, U lanes, U ndims, U shape x ndims, U strides x ndims, U byte
 * offset, Buf data; the device and strides are dropped (tensors in the
 * keyspace are dense and on the CPU).
 */
#include "types/tensor_type.h"

#include <stdint.h>
#include <string.h>

#include "core/messages.h"
#include "core/tensor.h"
#include "types/digest_io.h"

RedisModuleType *RAI_TensorType = NULL;

#define MAX_NDIMS (1 << 16)

/* What an encoding holds, before it is checked and made a tensor. */
typedef struct TensorFields {
    RAI_DType dtype;
    int64_t ndims;
    int64_t *dims;
    char *data;
    size_t nbytes;
    uint64_t *offsets; /* STRING only */
} TensorFields;

static void freeFields(TensorFields *f) {
    if (f->dims) RedisModule_Free(f->dims);
    if (f->data) RedisModule_Free(f->data);
    if (f->offsets) RedisModule_Free(f->offsets);
}

/* Reads n numbers of the payload into a new array that grows with what is
 * actually read: n comes from the payload and is not trusted for an
 * allocation. NULL on a read error (an array of 1 for n = 0). */
static void *loadNumbers(RedisModuleIO *io, uint64_t n, int is_signed) {
    size_t cap = 8;
    uint64_t *v = RedisModule_Alloc(cap * sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = is_signed ? (uint64_t)RedisModule_LoadSigned(io) : RedisModule_LoadUnsigned(io);
        if (RedisModule_IsIOError(io)) {
            RedisModule_Free(v);
            return NULL;
        }
        if (i == cap) {
            cap *= 2;
            v = RedisModule_Realloc(v, cap * sizeof(uint64_t));
        }
        v[i] = x;
    }
    return v;
}

static int loadDims(RedisModuleIO *io, TensorFields *f) {
    if (RedisModule_IsIOError(io) || f->ndims < 0 || f->ndims > MAX_NDIMS) return 0;
    f->dims = loadNumbers(io, (uint64_t)f->ndims, 1);
    return f->dims != NULL;
}

static int loadV4(RedisModuleIO *io, TensorFields *f) {
    f->dtype.code = (uint8_t)RedisModule_LoadUnsigned(io);
    f->dtype.bits = (uint8_t)RedisModule_LoadUnsigned(io);
    f->ndims = RedisModule_LoadSigned(io);
    if (!loadDims(io, f)) return 0;
    f->data = RedisModule_LoadStringBuffer(io, &f->nbytes);
    if (RedisModule_IsIOError(io) || f->data == NULL) return 0;
    if (!DType_IsString(f->dtype)) return 1;
    size_t len = 1;
    for (int64_t i = 0; i < f->ndims; i++) {
        if (f->dims[i] < 0 || (f->dims[i] && len > SIZE_MAX / (size_t)f->dims[i])) return 0;
        len *= (size_t)f->dims[i];
    }
    if (len > f->nbytes) return 0; /* each element holds at least its NUL */
    f->offsets = loadNumbers(io, len, 0);
    return f->offsets != NULL;
}

static int loadV0(RedisModuleIO *io, TensorFields *f) {
    RedisModule_LoadUnsigned(io); /* device type */
    RedisModule_LoadUnsigned(io); /* device id */
    f->dtype.bits = (uint8_t)RedisModule_LoadUnsigned(io);
    f->dtype.code = (uint8_t)RedisModule_LoadUnsigned(io);
    uint64_t lanes = RedisModule_LoadUnsigned(io);
    f->ndims = (int64_t)RedisModule_LoadUnsigned(io);
    if (lanes != 1 || !loadDims(io, f)) return 0;
    for (int64_t i = 0; i < f->ndims; i++) RedisModule_LoadUnsigned(io); /* strides */
    RedisModule_LoadUnsigned(io); /* byte offset */
    f->data = RedisModule_LoadStringBuffer(io, &f->nbytes);
    /* STRING tensors came with encoding 4. */
    return !RedisModule_IsIOError(io) && !DType_IsString(f->dtype);
}

/* A payload must describe a tensor the commands can read: a storable
 * dtype, data of exactly the shape's size, STRING elements NUL-terminated. */
static int fieldsValid(const TensorFields *f) {
    if (!DType_IsStorable(f->dtype)) return 0;
    size_t len = 1;
    for (int64_t i = 0; i < f->ndims; i++) {
        if (f->dims[i] < 0) return 0;
        if (f->dims[i] && len > SIZE_MAX / (size_t)f->dims[i]) return 0;
        len *= (size_t)f->dims[i];
    }
    if (!DType_IsString(f->dtype)) return len <= SIZE_MAX / DType_ElemSize(f->dtype) &&
                                          f->nbytes == len * DType_ElemSize(f->dtype);
    if (len == 0) return f->nbytes == 0;
    if (f->nbytes == 0 || f->data[f->nbytes - 1] != '\0' || f->offsets[0] != 0) return 0;
    for (size_t i = 1; i < len; i++) {
        uint64_t o = f->offsets[i];
        if (o <= f->offsets[i - 1] || o >= f->nbytes || f->data[o - 1] != '\0') return 0;
    }
    return 1;
}

/* ----------------------------- keyspace access ---------------------------- */

RAI_Tensor *Tensor_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    RAI_Tensor *t = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        Error_Set(err, "ERR tensor key is empty or in a different shard");
    } else if (RedisModule_ModuleTypeGetType(key) != RAI_TensorType) {
        Error_Set(err, RAI_WRONGTYPE_MSG);
    } else {
        t = Tensor_Retain(RedisModule_ModuleTypeGetValue(key));
    }
    RedisModule_CloseKey(key);
    return t;
}

RedisModuleString **Tensor_SetArgs(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                   RAI_Tensor *t, int *argc) {
    char internal[DTYPE_INTERNAL_NAME_MAX];
    const char *name = DType_Name(t->dtype);
    if (name == NULL) {
        DType_InternalName(t->dtype, internal);
        name = internal;
    }
    int n = 2 + t->ndims;
    RedisModuleString **args = RedisModule_Alloc(sizeof(*args) * n);
    int k = 0;
    args[k++] = RedisModule_CreateStringFromString(ctx, keyname);
    args[k++] = RedisModule_CreateString(ctx, name, strlen(name));
    for (int i = 0; i < t->ndims; i++) {
        args[k++] = RedisModule_CreateStringFromLongLong(ctx, t->dims[i]);
    }
    *argc = k;
    return args;
}

void Tensor_FreeSetArgs(RedisModuleCtx *ctx, RedisModuleString **args, int argc) {
    for (int i = 0; i < argc; i++) RedisModule_FreeString(ctx, args[i]);
    RedisModule_Free(args);
}

/* The strings every replicated output repeats (its dtype's name, small
 * dimensions), made once and shared: RM_Replicate's "v" takes a reference
 * to each, where building them cost an allocation and a free per string
 * per output (docs/performance.md, "The module's own CPU"). Replication
 * runs on the main thread or under the GIL: no lock. */
#define SHARED_DIMS 1024
static RedisModuleString *shared_dims[SHARED_DIMS];
static struct {
    RAI_DType dt;
    RedisModuleString *name;
} shared_dtypes[16];
static size_t nshared_dtypes = 0;

static RedisModuleString *sharedDType(RAI_DType dt) {
    for (size_t i = 0; i < nshared_dtypes; i++) {
        if (shared_dtypes[i].dt.code == dt.code && shared_dtypes[i].dt.bits == dt.bits) {
            return shared_dtypes[i].name;
        }
    }
    const char *name = DType_Name(dt);
    /* Unnamed dtypes (rare) are not kept: the caller makes their name. */
    if (name == NULL || nshared_dtypes == sizeof(shared_dtypes) / sizeof(shared_dtypes[0])) {
        return NULL;
    }
    RedisModuleString *s = RedisModule_CreateString(NULL, name, strlen(name));
    shared_dtypes[nshared_dtypes].dt = dt;
    shared_dtypes[nshared_dtypes].name = s;
    nshared_dtypes++;
    return s;
}

static int isSharedDim(int64_t d) {
    return d >= 0 && d < SHARED_DIMS;
}

static RedisModuleString *sharedDim(int64_t d) {
    if (shared_dims[d] == NULL) shared_dims[d] = RedisModule_CreateStringFromLongLong(NULL, d);
    return shared_dims[d];
}

/* Replicates `AI.TENSORSET key DTYPE d1 .. dn BLOB data`, the same command
 * Tensor_SetArgs spells for the AOF: keyname itself (the client's string,
 * which RM_Replicate only references), the shared strings above and one
 * string of the data (as format "b" would make); only a dtype or a
 * dimension outside the shared ones is made and freed here. */
static void replicateSet(RedisModuleCtx *ctx, RedisModuleString *keyname, const RAI_Tensor *t) {
    static RedisModuleString *blob_word = NULL;
    if (blob_word == NULL) blob_word = RedisModule_CreateString(NULL, "BLOB", 4);
    RedisModuleString *small[16];
    int n = 4 + t->ndims;
    RedisModuleString **args =
        n <= (int)(sizeof(small) / sizeof(small[0])) ? small : RedisModule_Alloc(sizeof(*args) * n);
    args[0] = keyname;
    RedisModuleString *dtype = sharedDType(t->dtype);
    if (dtype == NULL) {
        char internal[DTYPE_INTERNAL_NAME_MAX];
        const char *name = DType_Name(t->dtype);
        if (name == NULL) {
            DType_InternalName(t->dtype, internal);
            name = internal;
        }
        args[1] = RedisModule_CreateString(ctx, name, strlen(name));
    } else {
        args[1] = dtype;
    }
    for (int i = 0; i < t->ndims; i++) {
        args[2 + i] = isSharedDim(t->dims[i]) ? sharedDim(t->dims[i])
                                              : RedisModule_CreateStringFromLongLong(ctx, t->dims[i]);
    }
    args[n - 2] = blob_word;
    /* A held string is only referenced: no copy of the data. */
    args[n - 1] = t->held ? t->held : RedisModule_CreateString(ctx, t->data, t->nbytes);
    /* Format "v" makes Redis grow its argv (a realloc) for every call; a
     * fixed format of n strings does not: spelled out for the usual ranks. */
    switch (n) {
    case 5:
        RedisModule_Replicate(ctx, "AI.TENSORSET", "sssss", args[0], args[1], args[2], args[3],
                              args[4]);
        break;
    case 6:
        RedisModule_Replicate(ctx, "AI.TENSORSET", "ssssss", args[0], args[1], args[2], args[3],
                              args[4], args[5]);
        break;
    case 7:
        RedisModule_Replicate(ctx, "AI.TENSORSET", "sssssss", args[0], args[1], args[2], args[3],
                              args[4], args[5], args[6]);
        break;
    case 8:
        RedisModule_Replicate(ctx, "AI.TENSORSET", "ssssssss", args[0], args[1], args[2],
                              args[3], args[4], args[5], args[6], args[7]);
        break;
    default:
        RedisModule_Replicate(ctx, "AI.TENSORSET", "v", args, (size_t)n);
        break;
    }
    if (!t->held) RedisModule_FreeString(ctx, args[n - 1]);
    if (dtype == NULL) RedisModule_FreeString(ctx, args[1]);
    for (int i = 0; i < t->ndims; i++) {
        if (!isSharedDim(t->dims[i])) RedisModule_FreeString(ctx, args[2 + i]);
    }
    if (args != small) RedisModule_Free(args);
}

RedisModuleKey *Tensor_OpenForStore(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                    RAI_Error *err) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) != RAI_TensorType) {
        RedisModule_CloseKey(key);
        Error_Set(err, RAI_WRONGTYPE_MSG);
        return NULL;
    }
    return key;
}

void Tensor_StoreOpened(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname,
                        RAI_Tensor *t) {
    t = Tensor_ForKeyspace(t);
    /* A tensor already there with no TTL: its value is swapped in place.
     * RM_ModuleTypeSetValue would delete the key's entry and add it again
     * (a dictionary delete and insert, the key's name copied) for the same
     * result. A key with a TTL is set anew, which drops the TTL as
     * before. Closing the key signals it modified (WATCH) either way. */
    void *old = NULL;
    if (RedisModule_ModuleTypeReplaceValue != NULL &&
        RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE &&
        RedisModule_GetExpire(key) == REDISMODULE_NO_EXPIRE &&
        RedisModule_ModuleTypeReplaceValue(key, RAI_TensorType, t, &old) == REDISMODULE_OK) {
        Tensor_Release(old);
        /* The re-add fired Redis 7's "new" key event on every overwrite:
         * so does this (a no-op unless notify-keyspace-events has "n",
         * and on servers without the event). */
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_NEW, "new", keyname);
    } else {
        RedisModule_ModuleTypeSetValue(key, RAI_TensorType, t);
    }
    RedisModule_CloseKey(key);
    replicateSet(ctx, keyname, t);
}

int Tensor_StoreAndReplicate(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Tensor *t,
                             RAI_Error *err) {
    RedisModuleKey *key = Tensor_OpenForStore(ctx, keyname, err);
    if (key == NULL) return REDISMODULE_ERR;
    Tensor_StoreOpened(ctx, key, keyname, t);
    return REDISMODULE_OK;
}

/* ------------------------------- type methods ----------------------------- */

static void *TensorRdbLoad(RedisModuleIO *io, int encver) {
    if (RdbIO_RefuseNewer(io, "AI_TENSOR", encver)) return NULL;
    TensorFields f = {0};
    /* v4's layout is also v5's (earlier builds wrote 5 for every type; it
     * only added a model field). */
    int ok = encver >= 4 ? loadV4(io, &f) : loadV0(io, &f);
    if (!ok || !fieldsValid(&f)) {
        freeFields(&f);
        RdbIO_LogShortRead(io, "a tensor", encver);
        return NULL;
    }
    RAI_Tensor *t = Tensor_NewOwned(f.dtype, f.dims, (int)f.ndims, f.data, f.nbytes, f.offsets);
    RedisModule_Free(f.dims);
    return t;
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

/* The fields TensorRdbSave writes, in its order. */
static void TensorDigest(RedisModuleDigest *md, void *value) {
    RAI_Tensor *t = value;
    RedisModule_DigestAddLongLong(md, t->dtype.code);
    RedisModule_DigestAddLongLong(md, t->dtype.bits);
    RedisModule_DigestAddLongLong(md, t->ndims);
    for (int i = 0; i < t->ndims; i++) RedisModule_DigestAddLongLong(md, t->dims[i]);
    RedisModule_DigestAddStringBuffer(md, t->data, t->nbytes);
    if (DType_IsString(t->dtype)) {
        /* One buffer, as the data is: host order, like the RDB's numbers. */
        RedisModule_DigestAddStringBuffer(md, (const char *)t->offsets,
                                          t->len * sizeof(t->offsets[0]));
    }
    RedisModule_DigestEndSequence(md);
}

static void TensorAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Tensor *t = value;
    RedisModuleCtx *ctx = RedisModule_GetContextFromIO(aof);
    int argc;
    RedisModuleString **args = Tensor_SetArgs(ctx, key, t, &argc);
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
        .digest = TensorDigest,
        .mem_usage = TensorMemUsage,
        .free = TensorFree,
    };
    RAI_TensorType = RedisModule_CreateDataType(ctx, "AI_TENSOR", RAI_ENC_VER, &methods);
    return RAI_TensorType ? REDISMODULE_OK : REDISMODULE_ERR;
}
