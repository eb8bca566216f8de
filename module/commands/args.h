/*
 * args.h - small helpers for reading command arguments.
 */
#ifndef REDISAI_ARGS_H
#define REDISAI_ARGS_H

#include <strings.h>

#include "redismodule.h"

/* Keywords match case-insensitively, as everywhere in RedisAI (docs/commands.md, "Conventions"). */
static inline int Args_TokenIs(RedisModuleString *s, const char *word) {
    return !strcasecmp(RedisModule_StringPtrLen(s, NULL), word);
}

#endif
