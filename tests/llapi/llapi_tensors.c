/* llapi_tensors.c: tensors through the LLAPI.
 *
 *   LLAPI.TENSORCREATE dtype ndims dims... [VALUES v...|BLOB b]   -> tensor (no key)
 *   LLAPI.TENSORSET key dtype ndims dims... [VALUES v...|BLOB b]  -> OK; the key holds it
 *   LLAPI.TENSORGET key                                           -> tensor
 *   LLAPI.KEYTYPE key               -> none | tensor | model | script | other
 *   LLAPI.TENSORCONCAT key...       -> TensorCreateByConcatenatingTensors (dim 0)
 *   LLAPI.TENSORSLICE key offset len -> TensorCreateBySlicingTensor (dim 0)
 *   LLAPI.TENSORKEEP key            -> [shallow copy is the same pointer (1/0), tensor]:
 *                                      a shallow copy outlives the deleted key
 *
 * A key is set the way RedisAI 1.2 clients (RedisGears) did: RedisModule_ModuleTypeSetValue
 * with RedisAI's tensor type and a shallow copy, the key owning that reference.
 */
#include "llapitest.h"

#include <string.h>

static int TensorCreate_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    RAI_Tensor *t = LLT_TensorFromArgs(ctx, argv + 1, argc - 1);
    if (t == NULL) return REDISMODULE_OK;
    LLT_ReplyTensor(ctx, t);
    RedisAI_TensorFree(t);
    return REDISMODULE_OK;
}

static int TensorSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    RAI_Tensor *t = LLT_TensorFromArgs(ctx, argv + 2, argc - 2);
    if (t == NULL) return REDISMODULE_OK;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int rc = RedisModule_ModuleTypeSetValue(key, RedisAI_TensorRedisType(),
                                            RedisAI_TensorGetShallowCopy(t));
    int is_tensor = RedisModule_ModuleTypeGetType(key) == RedisAI_TensorRedisType();
    RedisModule_CloseKey(key);
    RedisAI_TensorFree(t); /* the key keeps its own reference */
    if (rc != REDISMODULE_OK || !is_tensor) {
        return RedisModule_ReplyWithError(ctx, "ERR ModuleTypeSetValue did not store a tensor");
    }
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int TensorGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RAI_Tensor *t = LLT_KeyTensor(ctx, argv[1]);
    if (t != NULL) LLT_ReplyTensor(ctx, t);
    return REDISMODULE_OK;
}

static int KeyType_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    const char *kind = "other";
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        kind = "none";
    } else {
        RedisModuleType *type = RedisModule_ModuleTypeGetType(key);
        if (type != NULL && type == RedisAI_TensorRedisType()) kind = "tensor";
        else if (type != NULL && type == RedisAI_ModelRedisType()) kind = "model";
        else if (type != NULL && type == RedisAI_ScriptRedisType()) kind = "script";
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithSimpleString(ctx, kind);
}

static int TensorConcat_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    RAI_Tensor **ts = RedisModule_Alloc(sizeof(*ts) * (argc - 1));
    for (int i = 1; i < argc; i++) {
        ts[i - 1] = LLT_KeyTensor(ctx, argv[i]);
        if (ts[i - 1] == NULL) {
            RedisModule_Free(ts);
            return REDISMODULE_OK;
        }
    }
    RAI_Tensor *t = RedisAI_TensorCreateByConcatenatingTensors(ts, argc - 1);
    RedisModule_Free(ts);
    if (t == NULL) return RedisModule_ReplyWithError(ctx, "ERR concatenation returned NULL");
    LLT_ReplyTensor(ctx, t);
    RedisAI_TensorFree(t);
    return REDISMODULE_OK;
}

static int TensorSlice_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long offset, len;
    if (RedisModule_StringToLongLong(argv[2], &offset) != REDISMODULE_OK ||
        RedisModule_StringToLongLong(argv[3], &len) != REDISMODULE_OK) {
        return RedisModule_ReplyWithError(ctx, "ERR offset and len must be integers");
    }
    RAI_Tensor *src = LLT_KeyTensor(ctx, argv[1]);
    if (src == NULL) return REDISMODULE_OK;
    RAI_Tensor *t = RedisAI_TensorCreateBySlicingTensor(src, offset, len);
    if (t == NULL) return RedisModule_ReplyWithError(ctx, "ERR slicing returned NULL");
    LLT_ReplyTensor(ctx, t);
    RedisAI_TensorFree(t);
    return REDISMODULE_OK;
}

static int TensorKeep_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RAI_Tensor *t = LLT_KeyTensor(ctx, argv[1]);
    if (t == NULL) return REDISMODULE_OK;
    RAI_Tensor *copy = RedisAI_TensorGetShallowCopy(t);
    /* Deleting the key drops the key's reference: ours must keep the data alive. */
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_WRITE);
    RedisModule_DeleteKey(key);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithLongLong(ctx, copy == t);
    LLT_ReplyTensor(ctx, copy);
    RedisAI_TensorFree(copy);
    return REDISMODULE_OK;
}

int LLT_RegisterTensorCommands(RedisModuleCtx *ctx) {
    if (LLT_CreateCommand(ctx, "llapi.tensorcreate", TensorCreate_RedisCommand, "readonly", 0, 0, 0) ||
        LLT_CreateCommand(ctx, "llapi.tensorset", TensorSet_RedisCommand, "write deny-oom", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.tensorget", TensorGet_RedisCommand, "readonly", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.keytype", KeyType_RedisCommand, "readonly", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.tensorconcat", TensorConcat_RedisCommand, "readonly", 1, -1, 1) ||
        LLT_CreateCommand(ctx, "llapi.tensorslice", TensorSlice_RedisCommand, "readonly", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.tensorkeep", TensorKeep_RedisCommand, "write", 1, 1, 1)) {
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
