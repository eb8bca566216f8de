/*
 * llapi.c - the LLAPI's registration, its errors and its version (see
 * llapi.h). Every function of REDISAI_LLAPI_FUNCTIONS is checked against
 * the header's type and exported under its own name by iterating that one
 * list, so no name can be missed or misspelt.
 */
#include "llapi/llapi_internal.h"

#include <string.h>

/* The definition of each function has exactly the header's type. */
#define LLAPI_CHECK(ret, name, params)                                            \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), name##_fn),   \
                   #name " does not match include/redisai_llapi.h");
REDISAI_LLAPI_FUNCTIONS(LLAPI_CHECK)
#undef LLAPI_CHECK

#define LLAPI_COUNT(ret, name, params) +1
_Static_assert(0 REDISAI_LLAPI_FUNCTIONS(LLAPI_COUNT) == REDISAI_LLAPI_FUNCTION_COUNT,
               "REDISAI_LLAPI_FUNCTION_COUNT is not the length of the list");
#undef LLAPI_COUNT

int LLAPI_Register(RedisModuleCtx *ctx) {
    if (RedisModule_ExportSharedAPI == NULL) {
        RedisModule_Log(ctx, "warning", "this Redis cannot export the RedisAI LLAPI");
        return REDISMODULE_ERR;
    }
#define LLAPI_EXPORT(ret, name, params)                                          \
    if (RedisModule_ExportSharedAPI(ctx, #name, (void *)name) != REDISMODULE_OK) { \
        RedisModule_Log(ctx, "warning", "could not export %s", #name);           \
        return REDISMODULE_ERR;                                                  \
    }
    REDISAI_LLAPI_FUNCTIONS(LLAPI_EXPORT)
#undef LLAPI_EXPORT
    return REDISMODULE_OK;
}

void LLAPI_Fail(RAI_Error *err, int code, const char *msg) {
    Error_Set(err, msg);
    Error_SetCode(err, code);
}

int RedisAI_GetLLAPIVersion(void) {
    return REDISAI_LLAPI_VERSION;
}

/* --------------------------------- errors --------------------------------- */

int RedisAI_InitError(RAI_Error **err) {
    *err = RedisModule_Alloc(sizeof(RAI_Error));
    Error_Init(*err);
    return REDISMODULE_OK;
}

void RedisAI_ClearError(RAI_Error *err) {
    if (err) Error_Clear(err);
}

void RedisAI_FreeError(RAI_Error *err) {
    if (err == NULL) return;
    Error_Clear(err);
    RedisModule_Free(err);
}

/* NULL while no error is set, as in 1.2. Our messages never hold a
 * newline (Error_Set turns CR/LF into spaces), so the one-line form is the
 * same text. */
const char *RedisAI_GetError(RAI_Error *err) {
    return err ? err->msg : NULL;
}

const char *RedisAI_GetErrorOneLine(RAI_Error *err) {
    return err ? err->msg : NULL;
}

RedisAI_ErrorCode RedisAI_GetErrorCode(RAI_Error *err) {
    return err ? (RedisAI_ErrorCode)err->code : RedisAI_ErrorCode_OK;
}

/* dest becomes a copy of src (1.2 overwrote dest; we free what it held). */
void RedisAI_CloneError(RAI_Error *dest, const RAI_Error *src) {
    if (dest == NULL || dest == src) return;
    Error_Clear(dest);
    if (src == NULL || src->msg == NULL) return;
    dest->msg = RedisModule_Strdup(src->msg);
    dest->code = src->code;
}

/* --------------------------- run context params --------------------------- */

void LLAPIParams_Add(LLAPI_Params *p, const char *name, RAI_Tensor *t) {
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 4;
        p->names = RedisModule_Realloc(p->names, sizeof(char *) * p->cap);
        p->tensors = RedisModule_Realloc(p->tensors, sizeof(RAI_Tensor *) * p->cap);
    }
    p->names[p->n] = name ? RedisModule_Strdup(name) : NULL;
    p->tensors[p->n] = t;
    p->n++;
}

void LLAPIParams_Free(LLAPI_Params *p) {
    for (size_t i = 0; i < p->n; i++) {
        if (p->names[i]) RedisModule_Free(p->names[i]);
        Tensor_Release(p->tensors[i]);
    }
    RedisModule_Free(p->names);
    RedisModule_Free(p->tensors);
    *p = (LLAPI_Params){0};
}
