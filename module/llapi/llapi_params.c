/*
 * llapi_params.c - the growable tensor lists of model and script run
 * contexts (LLAPI_Params).
 */
#include "llapi/llapi_internal.h"

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
