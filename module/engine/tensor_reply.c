/*
 * tensor_reply.c - see tensor_reply.h.
 */
#include "engine/tensor_reply.h"

#include <string.h>

static int replyValues(RedisModuleCtx *ctx, RAI_Tensor *t) {
    RAI_DType dt = t->dtype;
    if (DType_Name(dt) == NULL) {
        return RedisModule_ReplyWithError(ctx, "ERR cannot get values for this data type");
    }
    RedisModule_ReplyWithArray(ctx, (long)t->len);
    for (size_t i = 0; i < t->len; i++) {
        const char *p = t->data + i * DType_ElemSize(dt);
        switch (dt.code) {
        case RAI_DTYPE_FLOAT:
            if (dt.bits == 32) {
                float f;
                memcpy(&f, p, sizeof(f));
                RedisModule_ReplyWithDouble(ctx, f);
            } else {
                double d;
                memcpy(&d, p, sizeof(d));
                RedisModule_ReplyWithDouble(ctx, d);
            }
            break;
        case RAI_DTYPE_INT: {
            long long v;
            switch (dt.bits) {
            case 8: v = *(const int8_t *)p; break;
            case 16: { int16_t x; memcpy(&x, p, 2); v = x; break; }
            case 32: { int32_t x; memcpy(&x, p, 4); v = x; break; }
            default: memcpy(&v, p, 8); break;
            }
            RedisModule_ReplyWithLongLong(ctx, v);
            break;
        }
        case RAI_DTYPE_UINT: {
            long long v;
            if (dt.bits == 8) {
                v = *(const uint8_t *)p;
            } else {
                uint16_t x;
                memcpy(&x, p, 2);
                v = x;
            }
            RedisModule_ReplyWithLongLong(ctx, v);
            break;
        }
        case RAI_DTYPE_BOOL:
            RedisModule_ReplyWithLongLong(ctx, *(const uint8_t *)p ? 1 : 0);
            break;
        case RAI_DTYPE_STRING: {
            size_t len;
            const char *s = Tensor_StringAt(t, i, &len);
            RedisModule_ReplyWithStringBuffer(ctx, s, len);
            break;
        }
        }
    }
    return REDISMODULE_OK;
}

int TensorGet_Reply(RedisModuleCtx *ctx, RAI_Tensor *t, int fmt) {
    if (!(fmt & TENSORGET_META)) {
        if (fmt & TENSORGET_VALUES) return replyValues(ctx, t);
        /* Straight from the tensor's memory: no intermediate string. */
        return RedisModule_ReplyWithStringBuffer(ctx, t->data, t->nbytes);
    }
    const char *name = DType_Name(t->dtype);
    if (name == NULL) return RedisModule_ReplyWithError(ctx, "ERR unsupported dtype");
    int extra = (fmt & (TENSORGET_BLOB | TENSORGET_VALUES)) ? 2 : 0;
    RedisModule_ReplyWithArray(ctx, 4 + extra);
    RedisModule_ReplyWithCString(ctx, "dtype");
    RedisModule_ReplyWithCString(ctx, name);
    RedisModule_ReplyWithCString(ctx, "shape");
    RedisModule_ReplyWithArray(ctx, t->ndims);
    for (int i = 0; i < t->ndims; i++) RedisModule_ReplyWithLongLong(ctx, t->dims[i]);
    if (fmt & TENSORGET_BLOB) {
        RedisModule_ReplyWithCString(ctx, "blob");
        RedisModule_ReplyWithStringBuffer(ctx, t->data, t->nbytes);
    } else if (fmt & TENSORGET_VALUES) {
        RedisModule_ReplyWithCString(ctx, "values");
        replyValues(ctx, t);
    }
    return REDISMODULE_OK;
}

