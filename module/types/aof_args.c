/*
 * aof_args.c - see aof_args.h.
 */
#include "types/aof_args.h"

#include <string.h>

void AofArgs_Init(AofArgs *a, RedisModuleIO *aof) {
    *a = (AofArgs){.ctx = RedisModule_GetContextFromIO(aof), .cap = 16};
    a->v = RedisModule_Alloc(sizeof(*a->v) * a->cap);
}

static void push(AofArgs *a, RedisModuleString *s) {
    if (a->n == a->cap) {
        a->cap *= 2;
        a->v = RedisModule_Realloc(a->v, sizeof(*a->v) * a->cap);
    }
    a->v[a->n++] = s;
}

void AofArgs_Key(AofArgs *a, RedisModuleString *key) {
    push(a, RedisModule_CreateStringFromString(a->ctx, key));
}

void AofArgs_Str(AofArgs *a, const char *s) {
    push(a, RedisModule_CreateString(a->ctx, s, strlen(s)));
}

void AofArgs_Bytes(AofArgs *a, const char *p, size_t len) {
    push(a, RedisModule_CreateString(a->ctx, p, len));
}

void AofArgs_Int(AofArgs *a, long long v) {
    push(a, RedisModule_CreateStringFromLongLong(a->ctx, v));
}

void AofArgs_Names(AofArgs *a, size_t n, char *const *names, int with_count) {
    if (with_count) AofArgs_Int(a, (long long)n);
    for (size_t i = 0; i < n; i++) AofArgs_Str(a, names[i]);
}

void AofArgs_Emit(AofArgs *a, RedisModuleIO *aof, const char *cmd) {
    RedisModule_EmitAOF(aof, cmd, "v", a->v, a->n);
    for (size_t i = 0; i < a->n; i++) RedisModule_FreeString(a->ctx, a->v[i]);
    RedisModule_Free(a->v);
    *a = (AofArgs){0};
}
