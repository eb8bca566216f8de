/*
 * script.h - a stored TorchScript script: source, entry points, and the
 * handle the backend compiled. Reference-counted like models.
 */
#ifndef REDISAI_SCRIPT_H
#define REDISAI_SCRIPT_H

#include <stddef.h>

#include "core/error.h"
#include "redisai/backend_abi.h"
#include "redismodule.h"

struct RAI_RunQueue;
struct RAI_RunStats;

typedef struct RAI_Script {
    long refcount; /* atomic */
    const RAI_BackendDescriptor *be;
    void *handle;
    char *device_str;
    RAI_DeviceKind device;
    int64_t device_id;
    char *tag;
    size_t tag_len;
    char *source;
    size_t source_len;
    size_t nentry_points;
    char **entry_points;
    struct RAI_RunQueue *queue;
    struct RAI_RunStats *stats; /* set once stored at a key */
} RAI_Script;

typedef struct RAI_ScriptParams {
    const char *device_str;
    const char *tag;
    size_t tag_len;
    const char *source;
    size_t source_len;
    size_t nentry_points;
    const char *const *entry_points;
    /* The key, as in RAI_ModelParams (NULL: unknown). */
    const char *key;
    size_t key_len;
} RAI_ScriptParams;

/* Compiles through the TORCH backend (loaded lazily). NULL after err. */
RAI_Script *Script_Create(RedisModuleCtx *ctx, const RAI_ScriptParams *p, RAI_Error *err);
RAI_Script *Script_Retain(RAI_Script *s);
/* Main thread only once the script has stats. */
void Script_Release(RAI_Script *s);
void Script_RegisterStats(RAI_Script *s, RedisModuleString *keyname);
int Script_IsEntryPoint(const RAI_Script *s, const char *fn);

#endif
