/*
 * aof_args.h - the argument vector of the command an AOF rewrite emits for
 * a model or a script (AI.MODELSTORE / AI.SCRIPTSTORE ...), built up one
 * argument at a time and emitted with RedisModule_EmitAOF.
 */
#ifndef REDISAI_AOF_ARGS_H
#define REDISAI_AOF_ARGS_H

#include <stddef.h>

#include "redismodule.h"

typedef struct AofArgs {
    RedisModuleCtx *ctx;
    RedisModuleString **v;
    size_t n, cap;
} AofArgs;

void AofArgs_Init(AofArgs *a, RedisModuleIO *aof);
void AofArgs_Key(AofArgs *a, RedisModuleString *key);
void AofArgs_Str(AofArgs *a, const char *s); /* NUL-terminated */
void AofArgs_Bytes(AofArgs *a, const char *p, size_t len);
void AofArgs_Int(AofArgs *a, long long v);
/* A NUL-terminated name list: n names (a count before them when with_count). */
void AofArgs_Names(AofArgs *a, size_t n, char *const *names, int with_count);
/* Emits `cmd <args>` to the AOF and frees the arguments. */
void AofArgs_Emit(AofArgs *a, RedisModuleIO *aof, const char *cmd);

#endif
