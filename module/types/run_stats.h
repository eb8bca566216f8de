/*
 * run_stats.h - per-key execution statistics (AI.INFO, docs/commands.md): the
 * entries and their table. One entry
 * per stored model or script, owned by that object and indexed by key name
 * in a global table that spans all databases, as in RedisAI 1.2. A re-store
 * at the same key indexes the new object's entry; the old one goes with its
 * object. The counters are atomic and the table has its own lock: LLAPI
 * runs count from other threads, and an LLAPI client may drop the last
 * reference to a model (freeing its entry) on its own thread.
 */
#ifndef REDISAI_RUN_STATS_H
#define REDISAI_RUN_STATS_H

#include "redisai/backend_abi.h"
#include "redismodule.h"

typedef struct RAI_RunStats {
    RedisModuleString *key;
    int is_script;
    RAI_BackendKind backend;
    char *device;
    char *tag;
    size_t tag_len;
    long long duration_us;
    long long samples;
    long long calls;
    long long errors;
} RAI_RunStats;

void RunStats_Init(void);
/* A fresh, zeroed entry for key, indexed in place of any earlier one. */
RAI_RunStats *RunStats_Register(RedisModuleString *key, int is_script, RAI_BackendKind backend,
                                const char *device, const char *tag, size_t tag_len);
/* Drops the entry (and its index, if it is still the indexed one). */
void RunStats_Free(RAI_RunStats *s);
/* The key s is registered under, "" (and *len 0) when s is NULL: what
 * RAI_RunInfo.key says for a model or script run outside a DAG op. */
const char *RunStats_Key(const RAI_RunStats *s, size_t *len);
/* One run: ok, its time, and (models) its samples. Any thread. */
void RunStats_AddRun(RAI_RunStats *s, int ok, long long duration_us, long long samples);
/* AI.INFO's RESETSTAT: the counters back to 0. */
void RunStats_Reset(RAI_RunStats *s);

/* Readers of entries (commands/info_commands.c) hold the table's lock, so
 * that an entry cannot be freed under them by a release on another thread. */
void RunStats_Lock(void);
void RunStats_Unlock(void);
/* The entry indexed under key, or NULL. Lock held. */
RAI_RunStats *RunStats_Find(RedisModuleString *key);
/* Calls fn on every entry, in key order. Lock held. */
void RunStats_ForEach(void (*fn)(RAI_RunStats *s, void *arg), void *arg);

#endif
