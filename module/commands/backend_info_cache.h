/*
 * backend_info_cache.h - the lines each backend's own `info` gave last,
 * for Redis's crash report (docs/info.md, "In a crash report").
 *
 * A backend's info may be a round trip to its backend host (isolated) or a
 * call into a framework that may be what crashed; a crash report runs in a
 * signal handler, maybe with the host stopped or the lock it needs held.
 * So the report never calls a backend: it prints what INFO (and, for
 * in-process backends, the load) collected, with the time it was taken.
 */
#ifndef REDISAI_BACKEND_INFO_CACHE_H
#define REDISAI_BACKEND_INFO_CACHE_H

#include "loader/backend_loader.h"
#include "redismodule.h"

/* Calls b's info: every line goes to ctx (NULL: nowhere) and is kept as
 * the kind's last info, replacing the one before. Main thread, never in a
 * crash report. */
void BackendInfoCache_Collect(RedisModuleInfoCtx *ctx, const RAI_LoadedBackend *b);

/* BackendInfoCache_Collect(NULL, b) for each kind's default backend that
 * runs in-process (isolated ones wait for INFO: no host round trip at
 * load). After load-time arguments and AI.CONFIG LOADBACKEND. */
void BackendInfoCache_CollectInProcess(void);

/* The kept lines of b's kind, then <field_prefix>_info_taken_at with the
 * UTC time they were taken ("never" when none were, or they came from
 * another backend of the kind); nothing for a backend without info. Only
 * reads memory: for a crash report. */
void BackendInfoCache_Print(RedisModuleInfoCtx *ctx, const RAI_LoadedBackend *b,
                            const char *field_prefix);

#endif
