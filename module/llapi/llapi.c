/*
 * llapi.c - the LLAPI's registration (see llapi_internal.h). Every function
 * of REDISAI_LLAPI_FUNCTIONS is checked against the header's type and
 * exported under its own name by iterating that one list, so no name can be
 * missed or misspelt.
 */
#include "llapi/llapi_internal.h"

/* The definition of each function has exactly the header's type. */
#define LLAPI_CHECK(ret, name, params)                                            \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), name##_fn),   \
                   #name " does not match include/redisai/llapi.h");
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
