/*
 * memory.h - whether a write fits in the room maxmemory leaves. Redis
 * refuses a deny-oom command only before it runs, when memory is already
 * over the limit. Two writes of ours are sized later or by a number the
 * client sends instead of the bytes: the outputs an execution stores from
 * its reply callback, and a zero-filled AI.TENSORSET. Both ask here first.
 */
#ifndef REDISAI_MEMORY_H
#define REDISAI_MEMORY_H

#include <stddef.h>

#include "redismodule.h"

/* Subscribes to config changes, so that maxmemory and its policy are read
 * once per CONFIG SET instead of at every check. From OnLoad. */
void Memory_Init(RedisModuleCtx *ctx);

/* 1 when `more` new bytes must be refused: maxmemory is set and either
 * `more` alone passes it, or the policy is noeviction and used memory plus
 * `more` passes it (an evicting policy makes room at the next command, as
 * for Redis's own writes). Costs Redis's used-memory ratio, plus one INFO
 * memory after each CONFIG SET. Main thread only. */
int Memory_WouldExceed(size_t more);

#endif
