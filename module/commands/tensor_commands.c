/*
 * tensor_commands.c - AI.TENSORSET and AI.TENSORGET (docs/commands.md, "Tensors").
 * Error checks run in the order docs/commands.md lists them, each with its exact text.
 */
#include "commands/tensor_commands.h"

#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "core/memory.h"
#include "core/messages.h"
#include "engine/tensor_reply.h"
#include "types/tensor_type.h"

/* Zero-filled tensors are the one form whose size the client does not
 * send: cap the bytes they cost so that a typo in a shape cannot exhaust
 * memory, and (Memory_WouldExceed) keep them inside the room maxmemory
 * leaves. */
#define ZERO_FILL_MAX_BYTES (4ULL << 30)

/* What a zero-filled tensor of n elements costs: its data, and for STRING
 * one NUL and one 8-byte offset per element. Returns 0 on overflow. */
static int zeroFillBytes(RAI_DType dt, size_t n, size_t *bytes) {
    size_t per = DType_IsString(dt) ? 1 + sizeof(uint64_t) : DType_ElemSize(dt);
    return !__builtin_mul_overflow(n, per, bytes);
}

/* --------------------------------- parsing -------------------------------- */

/* Range rules of docs/commands.md, "Data types", including the signed QUIRK: the check
 * casts to unsigned, so negatives are refused for every INTn. */
static int parseValue(RAI_DType dt, RedisModuleString *s, char *dst) {
    if (dt.code == RAI_DTYPE_FLOAT) {
        double d;
        if (RedisModule_StringToDouble(s, &d) != REDISMODULE_OK) return 0;
        if (dt.bits == 32) {
            float f = (float)d;
            memcpy(dst, &f, sizeof(f));
        } else {
            memcpy(dst, &d, sizeof(d));
        }
        return 1;
    }
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK) return 0;
    unsigned long long max;
    switch (dt.code) {
    case RAI_DTYPE_INT: max = (1ULL << (dt.bits - 1)) - 1; break;
    case RAI_DTYPE_UINT: max = dt.bits == 64 ? ~0ULL : (1ULL << dt.bits) - 1; break;
    case RAI_DTYPE_BOOL: max = 1; break;
    default: return 0;
    }
    if ((unsigned long long)v > max) return 0;
    switch (dt.bits) {
    case 8: { int8_t x = (int8_t)v; memcpy(dst, &x, 1); break; }
    case 16: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
    case 32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &v, 8); break;
    }
    return 1;
}

static RAI_Tensor *parseStringValues(const int64_t *dims, int ndims, RedisModuleString **vals,
                                     size_t n, RAI_Error *err) {
    const char **elems = RedisModule_Alloc(sizeof(char *) * (n ? n : 1));
    size_t *lens = RedisModule_Alloc(sizeof(size_t) * (n ? n : 1));
    RAI_Tensor *t = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(vals[i], &len);
        if (len == 0) {
            /* 1.2 read out of bounds here; refuse instead. */
            Error_Set(err, "ERR invalid value");
            goto done;
        }
        const char *nul = memchr(s, '\0', len);
        if (nul && nul != s + len - 1) {
            Error_Set(err, "ERR C-string value contains null character");
            goto done;
        }
        elems[i] = s;
        lens[i] = nul ? len - 1 : len;
    }
    t = Tensor_NewStrings(dims, ndims, elems, lens);
done:
    RedisModule_Free(elems);
    RedisModule_Free(lens);
    return t;
}

static RAI_Tensor *parseBlob(RAI_DType dt, const int64_t *dims, int ndims, size_t n,
                             RedisModuleString *blob, RAI_Error *err) {
    size_t len;
    const char *data = RedisModule_StringPtrLen(blob, &len);
    if (DType_IsString(dt)) {
        uint64_t *offsets;
        if (!Tensor_StringOffsets(data, len, n, &offsets)) {
            Error_Set(err, "ERR Number of string elements in data blob does not match tensor length");
            return NULL;
        }
        return Tensor_NewHeld(dt, dims, ndims, blob, offsets);
    }
    if (len != n * DType_ElemSize(dt)) {
        Error_Set(err, "ERR data length does not match tensor shape and type");
        return NULL;
    }
    if (dt.code == RAI_DTYPE_BOOL) {
        /* QUIRK (docs/commands.md, "Data types"): 1.2's check skips the last byte. */
        for (size_t i = 0; i + 1 < len; i++) {
            if ((unsigned char)data[i] > 1) {
                Error_Set(err, "ERR BOOL tensor elements must be 0 or 1");
                return NULL;
            }
        }
    }
    return Tensor_NewHeld(dt, dims, ndims, blob, NULL);
}

RAI_Tensor *TensorSet_Parse(RedisModuleString **argv, int argc, int internal, RAI_Error *err) {
    size_t tlen;
    const char *tok = RedisModule_StringPtrLen(argv[0], &tlen);
    RAI_DType dt;
    if (!DType_Parse(tok, tlen, &dt) && !(internal && DType_ParseInternal(tok, tlen, &dt))) {
        Error_Set(err, "ERR invalid data type");
        return NULL;
    }
    int64_t *dims = RedisModule_Alloc(sizeof(int64_t) * (argc > 0 ? argc : 1));
    int ndims = 0;
    int i = 1;
    RAI_Tensor *t = NULL;
    size_t n = 1;
    for (; i < argc; i++) {
        if (Args_TokenIs(argv[i], "BLOB") || Args_TokenIs(argv[i], "VALUES")) break;
        long long d;
        if (RedisModule_StringToLongLong(argv[i], &d) != REDISMODULE_OK || d < (internal ? 0 : 1) ||
            __builtin_mul_overflow(n, (size_t)d, &n)) {
            Error_Set(err, "ERR invalid or negative value found in tensor shape");
            goto done;
        }
        dims[ndims++] = d;
    }
    size_t elem = DType_ElemSize(dt) ? DType_ElemSize(dt) : 1;
    if (i == argc) {
        size_t nbytes;
        if (!zeroFillBytes(dt, n, &nbytes) || nbytes > ZERO_FILL_MAX_BYTES) {
            Error_Set(err, "ERR tensor too large to create without data");
            goto done;
        }
        /* Redis refused the command if memory was already over the limit;
         * this refuses what would pass it (the client sent only a shape).
         * Not for the master link and the AOF, which Redis does not refuse
         * either: a replica must not diverge, nor a restart fail. */
        if (!internal && Memory_WouldExceed(nbytes)) {
            Error_Set(err, RAI_OOM_MSG);
            goto done;
        }
        t = DType_IsString(dt) ? Tensor_NewEmptyStrings(dims, ndims)
                               : Tensor_New(dt, dims, ndims, 1);
        goto done;
    }
    int rest = argc - i - 1;
    if (Args_TokenIs(argv[i], "BLOB")) {
        if (rest != 1) {
            Error_Set(err, "ERR a single binary string should come after the BLOB argument in "
                           "'AI.TENSORSET' command");
            goto done;
        }
        t = parseBlob(dt, dims, ndims, n, argv[i + 1], err);
        goto done;
    }
    if ((size_t)rest != n) {
        Error_Set(err, "ERR wrong number of values was given in 'AI.TENSORSET' command");
        goto done;
    }
    if (DType_IsString(dt)) {
        t = parseStringValues(dims, ndims, argv + i + 1, n, err);
        goto done;
    }
    t = Tensor_New(dt, dims, ndims, 0);
    for (size_t k = 0; k < n; k++) {
        if (!parseValue(dt, argv[i + 1 + k], t->data + k * elem)) {
            Error_Set(err, "ERR invalid value");
            Tensor_Release(t);
            t = NULL;
            goto done;
        }
    }
done:
    RedisModule_Free(dims);
    return t;
}

int TensorGet_ParseFormat(RedisModuleString **argv, int argc, RAI_Error *err) {
    int fmt = 0;
    for (int i = 0; i < argc; i++) {
        if (Args_TokenIs(argv[i], "META")) {
            fmt |= TENSORGET_META;
        } else if (Args_TokenIs(argv[i], "BLOB")) {
            fmt |= TENSORGET_BLOB;
        } else if (Args_TokenIs(argv[i], "VALUES")) {
            fmt |= TENSORGET_VALUES;
        } else {
            Error_Set(err, "ERR unsupported data format");
            return -1;
        }
    }
    if ((fmt & TENSORGET_BLOB) && (fmt & TENSORGET_VALUES)) {
        Error_Set(err, "ERR both BLOB and VALUES specified");
        return -1;
    }
    return fmt ? fmt : (TENSORGET_META | TENSORGET_BLOB);
}

/* --------------------------------- commands ------------------------------- */

/* AI.TENSORSET key type [dim ...] [BLOB data | VALUES v ...] */
int TensorSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) != RAI_TensorType) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, RAI_WRONGTYPE_MSG);
    }
    RAI_Error err;
    Error_Init(&err);
    RAI_Tensor *t = TensorSet_Parse(argv + 2, argc - 2, 0, &err);
    /* What replication and AOF rewrite write (Tensor_SetArgs) must load.
     * Asked only after a refusal: the context flags cost more than a parse. */
    if (t == NULL && (RedisModule_GetContextFlags(ctx) &
                      (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING))) {
        Error_Clear(&err);
        t = TensorSet_Parse(argv + 2, argc - 2, 1, &err);
    }
    if (t == NULL) {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    RedisModule_ModuleTypeSetValue(key, RAI_TensorType, t);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* AI.TENSORGET key [META] [BLOB | VALUES] */
int TensorGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2 || argc > 4) return RedisModule_WrongArity(ctx);
    RAI_Error err;
    Error_Init(&err);
    RAI_Tensor *t = Tensor_FromKey(ctx, argv[1], &err);
    int fmt = t ? TensorGet_ParseFormat(argv + 2, argc - 2, &err) : -1;
    if (fmt < 0) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
    } else {
        TensorGet_Reply(ctx, t, fmt);
    }
    Error_Clear(&err);
    Tensor_Release(t);
    return REDISMODULE_OK;
}
