/* llapi_test_module.c: the module `llapitest`, a client of RedisAI's low-level API.
 *
 * OnLoad fetches all of RedisAI's exported functions with RedisAI_Initialize (the header's
 * own fetcher) and refuses to load, naming the missing function, when redisai.so is not
 * loaded yet or lacks one. This file holds what the other files share (error and tensor
 * replies, argument parsing) and the two commands about the API itself: LLAPI.CHECK and
 * LLAPI.ERRORS. Tensors, model and script runs, and DAGs have a file each.
 */
#define REDISAI_LLAPI_CLIENT_IMPL
#include "llapitest.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* How many of the header's functions RedisAI_Initialize found (all of them, or OnLoad fails). */
static int fetched_functions;

/* Calls whose return value was not the promised one (LLT_EXPECT). Main thread only. */
static long long unexpected_returns;

void LLT_Expect(long long got, long long want, const char *what) {
    if (got == want) return;
    unexpected_returns++;
    RedisModule_Log(NULL, "warning", "llapitest: %s returned %lld, expected %lld", what, got, want);
}

/* ------------------------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------------------------ */

static const char *const code_names[] = {
    [RedisAI_ErrorCode_OK] = "OK",
    [RedisAI_ErrorCode_EMODELIMPORT] = "EMODELIMPORT",
    [RedisAI_ErrorCode_EMODELCONFIGURE] = "EMODELCONFIGURE",
    [RedisAI_ErrorCode_EMODELCREATE] = "EMODELCREATE",
    [RedisAI_ErrorCode_EMODELRUN] = "EMODELRUN",
    [RedisAI_ErrorCode_EMODELSERIALIZE] = "EMODELSERIALIZE",
    [RedisAI_ErrorCode_EMODELFREE] = "EMODELFREE",
    [RedisAI_ErrorCode_ESCRIPTIMPORT] = "ESCRIPTIMPORT",
    [RedisAI_ErrorCode_ESCRIPTCONFIGURE] = "ESCRIPTCONFIGURE",
    [RedisAI_ErrorCode_ESCRIPTCREATE] = "ESCRIPTCREATE",
    [RedisAI_ErrorCode_ESCRIPTRUN] = "ESCRIPTRUN",
    [RedisAI_ErrorCode_EUNSUPPORTEDBACKEND] = "EUNSUPPORTEDBACKEND",
    [RedisAI_ErrorCode_EBACKENDNOTLOADED] = "EBACKENDNOTLOADED",
    [RedisAI_ErrorCode_ESCRIPTFREE] = "ESCRIPTFREE",
    [RedisAI_ErrorCode_ETENSORSET] = "ETENSORSET",
    [RedisAI_ErrorCode_ETENSORGET] = "ETENSORGET",
    [RedisAI_ErrorCode_EDAGBUILDER] = "EDAGBUILDER",
    [RedisAI_ErrorCode_EDAGRUN] = "EDAGRUN",
    [RedisAI_ErrorCode_EFINISHCTX] = "EFINISHCTX",
};

const char *LLT_CodeName(int code) {
    static char other[32]; /* main thread only */
    if (code >= 0 && code < (int)(sizeof(code_names) / sizeof(code_names[0]))) {
        return code_names[code];
    }
    snprintf(other, sizeof(other), "E%d", code);
    return other;
}

static int ReplyErrorf(RedisModuleCtx *ctx, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return RedisModule_ReplyWithError(ctx, buf);
}

int LLT_ReplyRAIError(RedisModuleCtx *ctx, RAI_Error *err) {
    const char *msg = RedisAI_GetErrorOneLine(err);
    return ReplyErrorf(ctx, "%s %s", LLT_CodeName(RedisAI_GetErrorCode(err)), msg ? msg : "");
}

/* DLPack's DLDataType, as RedisAI_TensorDataType returns it in the low 32 bits. */
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLType;

static DLType TensorType(RAI_Tensor *t) {
    uint32_t raw = (uint32_t)RedisAI_TensorDataType(t);
    DLType dt;
    memcpy(&dt, &raw, sizeof(dt));
    return dt;
}

enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2 };

void LLT_ReplyTensor(RedisModuleCtx *ctx, RAI_Tensor *t) {
    int ndims = RedisAI_TensorNumDims(t);
    DLType dt = TensorType(t);
    long long len = (long long)RedisAI_TensorLength(t);

    RedisModule_ReplyWithArray(ctx, 8);
    RedisModule_ReplyWithArray(ctx, ndims);
    for (int i = 0; i < ndims; i++) RedisModule_ReplyWithLongLong(ctx, RedisAI_TensorDim(t, i));
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, dt.code);
    RedisModule_ReplyWithLongLong(ctx, dt.bits);
    RedisModule_ReplyWithLongLong(ctx, dt.lanes);
    RedisModule_ReplyWithLongLong(ctx, len);
    RedisModule_ReplyWithLongLong(ctx, (long long)RedisAI_TensorDataSize(t));
    RedisModule_ReplyWithLongLong(ctx, (long long)RedisAI_TensorByteSize(t));
    RedisModule_ReplyWithStringBuffer(ctx, RedisAI_TensorData(t), RedisAI_TensorByteSize(t));
    /* The values one by one, through the getter that fits the type. */
    RedisModule_ReplyWithArray(ctx, len);
    for (long long i = 0; i < len; i++) {
        if (dt.code == DL_FLOAT) {
            double v = 0;
            RedisAI_TensorGetValueAsDouble(t, i, &v);
            RedisModule_ReplyWithDouble(ctx, v);
        } else {
            long long v = 0;
            RedisAI_TensorGetValueAsLongLong(t, i, &v);
            RedisModule_ReplyWithLongLong(ctx, v);
        }
    }
    /* What both getters return for element 0 (one of them is the wrong kind). */
    RedisModule_ReplyWithArray(ctx, 2);
    double d = 0;
    long long l = 0;
    RedisModule_ReplyWithLongLong(ctx, len ? RedisAI_TensorGetValueAsDouble(t, 0, &d) : -1);
    RedisModule_ReplyWithLongLong(ctx, len ? RedisAI_TensorGetValueAsLongLong(t, 0, &l) : -1);
}

RAI_Tensor *LLT_KeyTensor(RedisModuleCtx *ctx, RedisModuleString *name) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        ReplyErrorf(ctx, "ERR tensor key is empty: %s", RedisModule_StringPtrLen(name, NULL));
        return NULL;
    }
    if (RedisModule_ModuleTypeGetType(key) != RedisAI_TensorRedisType()) {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return NULL;
    }
    RAI_Tensor *t = RedisModule_ModuleTypeGetValue(key);
    RedisModule_CloseKey(key);
    return t;
}

RAI_Tensor *LLT_TensorFromArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long ndims;
    if (argc < 2 || RedisModule_StringToLongLong(argv[1], &ndims) != REDISMODULE_OK ||
        ndims < 0 || ndims > 8 || argc < 2 + ndims) {
        RedisModule_ReplyWithError(ctx, "ERR expected: dtype ndims dims... [VALUES v...|BLOB b]");
        return NULL;
    }
    long long dims[8];
    for (int i = 0; i < ndims; i++) {
        if (RedisModule_StringToLongLong(argv[2 + i], &dims[i]) != REDISMODULE_OK) {
            RedisModule_ReplyWithError(ctx, "ERR bad dimension");
            return NULL;
        }
    }
    RAI_Tensor *t = RedisAI_TensorCreate(RedisModule_StringPtrLen(argv[0], NULL), dims, (int)ndims);
    if (t == NULL) {
        ReplyErrorf(ctx, "ERR TensorCreate returned NULL for %s",
                    RedisModule_StringPtrLen(argv[0], NULL));
        return NULL;
    }
    int at = 2 + (int)ndims;
    if (at == argc) return t;
    const char *mode = RedisModule_StringPtrLen(argv[at], NULL);
    if (!strcasecmp(mode, "BLOB") && argc == at + 2) {
        size_t len;
        const char *blob = RedisModule_StringPtrLen(argv[at + 1], &len);
        if (len != RedisAI_TensorByteSize(t)) {
            RedisAI_TensorFree(t);
            RedisModule_ReplyWithError(ctx, "ERR blob size differs from TensorByteSize");
            return NULL;
        }
        int rc = RedisAI_TensorSetData(t, blob, len);
        if (rc != 1) {
            /* A refusal (BOOL bytes other than 0 and 1) must leave the data as it was. */
            const char *data = RedisAI_TensorData(t);
            size_t zeros = 0;
            while (zeros < len && data[zeros] == 0) zeros++;
            RedisAI_TensorFree(t);
            ReplyErrorf(ctx, "ERR TensorSetData returned %d, the data %s", rc,
                        zeros == len ? "unchanged" : "changed");
            return NULL;
        }
        return t;
    }
    if (!strcasecmp(mode, "VALUES") && argc - at - 1 == (int)RedisAI_TensorLength(t)) {
        int is_float = TensorType(t).code == DL_FLOAT;
        for (int i = 0; i < argc - at - 1; i++) {
            RedisModuleString *v = argv[at + 1 + i];
            double d;
            long long l;
            int ok = is_float ? RedisModule_StringToDouble(v, &d) == REDISMODULE_OK
                              : RedisModule_StringToLongLong(v, &l) == REDISMODULE_OK;
            /* The setters answer 1 when they stored the value (RedisAI 1.2). */
            if (ok) {
                ok = is_float ? RedisAI_TensorSetValueFromDouble(t, i, d)
                              : RedisAI_TensorSetValueFromLongLong(t, i, l);
            }
            if (!ok) {
                RedisAI_TensorFree(t);
                ReplyErrorf(ctx, "ERR cannot set value %d", i);
                return NULL;
            }
        }
        return t;
    }
    RedisAI_TensorFree(t);
    RedisModule_ReplyWithError(ctx, "ERR expected VALUES (one per element) or BLOB b");
    return NULL;
}

int LLT_CreateCommand(RedisModuleCtx *ctx, const char *name, RedisModuleCmdFunc fn,
                      const char *flags, int first, int last, int step) {
    if (RedisModule_CreateCommand(ctx, name, fn, flags, first, last, step) == REDISMODULE_ERR) {
        RedisModule_Log(ctx, "warning", "llapitest: cannot create command %s", name);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

/* ------------------------------------------------------------------------------------------
 * LLAPI.CHECK: [RedisAI_GetLLAPIVersion(), functions fetched, functions in the header,
 *               calls that returned what they should not (LLT_EXPECT)]
 * ------------------------------------------------------------------------------------------ */

static int Check_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, RedisAI_GetLLAPIVersion());
    RedisModule_ReplyWithLongLong(ctx, fetched_functions);
    RedisModule_ReplyWithLongLong(ctx, REDISAI_LLAPI_FUNCTION_COUNT);
    RedisModule_ReplyWithLongLong(ctx, unexpected_returns);
    return REDISMODULE_OK;
}

/* ------------------------------------------------------------------------------------------
 * LLAPI.ERRORS device source: ScriptCreate on a source that must not compile, then the
 * error object's life: [code, GetError, GetErrorOneLine, the clone's code, the clone's
 * GetError, code after ClearError, GetError after ClearError (null if NULL)].
 * ------------------------------------------------------------------------------------------ */

static void ReplyCString(RedisModuleCtx *ctx, const char *s) {
    if (s == NULL) {
        RedisModule_ReplyWithNull(ctx);
    } else {
        RedisModule_ReplyWithStringBuffer(ctx, s, strlen(s));
    }
}

static int Errors_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RAI_Error *err = NULL, *clone = NULL;
    if (RedisAI_InitError(&err) != REDISMODULE_OK || RedisAI_InitError(&clone) != REDISMODULE_OK) {
        if (err) RedisAI_FreeError(err);
        return RedisModule_ReplyWithError(ctx, "ERR InitError failed");
    }
    int fresh = RedisAI_GetErrorCode(err);
    char device[64];
    snprintf(device, sizeof(device), "%s", RedisModule_StringPtrLen(argv[1], NULL));
    char tag[] = "llapi-errors";
    RAI_Script *script = RedisAI_ScriptCreate(device, tag, RedisModule_StringPtrLen(argv[2], NULL), err);
    if (script != NULL || fresh != RedisAI_ErrorCode_OK) {
        if (script) RedisAI_ScriptFree(script, err);
        RedisAI_FreeError(err);
        RedisAI_FreeError(clone);
        return ReplyErrorf(ctx, "ERR expected a fresh error (code %d) and a failed ScriptCreate",
                           fresh);
    }
    RedisModule_ReplyWithArray(ctx, 7);
    RedisModule_ReplyWithSimpleString(ctx, LLT_CodeName(RedisAI_GetErrorCode(err)));
    ReplyCString(ctx, RedisAI_GetError(err));
    ReplyCString(ctx, RedisAI_GetErrorOneLine(err));
    RedisAI_CloneError(clone, err);
    RedisAI_ClearError(err);
    RedisModule_ReplyWithSimpleString(ctx, LLT_CodeName(RedisAI_GetErrorCode(clone)));
    ReplyCString(ctx, RedisAI_GetError(clone));
    RedisModule_ReplyWithSimpleString(ctx, LLT_CodeName(RedisAI_GetErrorCode(err)));
    ReplyCString(ctx, RedisAI_GetError(err));
    RedisAI_FreeError(err);
    RedisAI_FreeError(clone);
    return REDISMODULE_OK;
}

/* ------------------------------------------------------------------------------------------
 * OnLoad
 * ------------------------------------------------------------------------------------------ */

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                             RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "llapitest", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) {
        return REDISMODULE_ERR;
    }
    const char *missing = "?";
    if (RedisAI_Initialize(ctx, &missing) != REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning",
                        "llapitest: RedisAI's low-level API is not available (%s not found or "
                        "not version %d): load redisai.so before this module",
                        missing, REDISAI_LLAPI_VERSION);
        return REDISMODULE_ERR;
    }
#define COUNT_FETCHED(ret, name, params) fetched_functions += (name != NULL);
    REDISAI_LLAPI_FUNCTIONS(COUNT_FETCHED)
#undef COUNT_FETCHED
    RedisModule_Log(ctx, "notice", "llapitest: %d RedisAI LLAPI functions, version %d",
                    fetched_functions, RedisAI_GetLLAPIVersion());

    if (LLT_CreateCommand(ctx, "llapi.check", Check_RedisCommand, "readonly fast", 0, 0, 0) ||
        LLT_CreateCommand(ctx, "llapi.errors", Errors_RedisCommand, "readonly", 0, 0, 0) ||
        LLT_RegisterTensorCommands(ctx) != REDISMODULE_OK ||
        LLT_RegisterRunCommands(ctx) != REDISMODULE_OK ||
        LLT_RegisterDagCommands(ctx) != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
