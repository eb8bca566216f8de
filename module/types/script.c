/*
 * script.c - script construction and reference counting, see script.h.
 */
#include "types/script.h"

#include <string.h>

#include "loader/backend_loader.h"
#include "core/device.h"
#include "engine/run_queue.h"
#include "types/run_stats.h"
#include "types/script_type.h"

RAI_Script *Script_Create(RedisModuleCtx *ctx, const RAI_ScriptParams *p, RAI_Error *err) {
    const RAI_BackendDescriptor *be = Backend_Get(ctx, RAI_BACKEND_TORCH);
    if (be == NULL) {
        Error_Set(err, "ERR Could not load backend");
        return NULL;
    }
    if (!Backend_HasScripts(be)) {
        Error_Set(err, "ERR the loaded TORCH backend does not support scripts");
        return NULL;
    }
    RAI_DeviceKind kind;
    int64_t id;
    if (!Device_ParseLoose(p->device_str, &kind, &id)) {
        Error_Set(err, "ERR unsupported device");
        return NULL;
    }
    RAI_ScriptSpec spec = {
        .size = sizeof(RAI_ScriptSpec),
        .device_str = p->device_str,
        .device = kind,
        .device_id = id,
        .source = p->source,
        .source_len = p->source_len,
        .nentry_points = p->nentry_points,
        .entry_points = p->entry_points,
        .key = p->key ? p->key : "",
        .key_len = p->key ? p->key_len : 0,
    };
    void *handle = be->script_create(&spec, err);
    if (handle == NULL) {
        Error_Set(err, "ERR backend could not create the script");
        return NULL;
    }
    /* The queue only once the backend took the script (see Model_Create). */
    RAI_RunQueue *queue = RunQueue_Ensure(p->device_str, err);
    if (queue == NULL) {
        be->script_free(handle);
        return NULL;
    }
    RAI_Script *s = RedisModule_Calloc(1, sizeof(*s));
    *s = (RAI_Script){
        .refcount = 1,
        .be = be,
        .handle = handle,
        .device_str = RedisModule_Strdup(p->device_str),
        .device = kind,
        .device_id = id,
        .tag = RedisModule_Alloc(p->tag_len + 1),
        .tag_len = p->tag_len,
        .source = RedisModule_Alloc(p->source_len + 1),
        .source_len = p->source_len,
        .nentry_points = p->nentry_points,
        .entry_points = RedisModule_Alloc(sizeof(char *) * (p->nentry_points ? p->nentry_points : 1)),
        .queue = queue,
    };
    memcpy(s->tag, p->tag, p->tag_len);
    s->tag[p->tag_len] = '\0';
    memcpy(s->source, p->source, p->source_len);
    s->source[p->source_len] = '\0';
    for (size_t i = 0; i < p->nentry_points; i++) {
        s->entry_points[i] = RedisModule_Strdup(p->entry_points[i]);
    }
    Backend_CountUse(s->be, 1, +1);
    return s;
}

RAI_Script *Script_Retain(RAI_Script *s) {
    __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
    return s;
}

void Script_Release(RAI_Script *s) {
    if (s == NULL) return;
    if (__atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    s->be->script_free(s->handle);
    Backend_CountUse(s->be, 1, -1);
    RunStats_Free(s->stats);
    for (size_t i = 0; i < s->nentry_points; i++) RedisModule_Free(s->entry_points[i]);
    RedisModule_Free(s->entry_points);
    RedisModule_Free(s->device_str);
    RedisModule_Free(s->tag);
    RedisModule_Free(s->source);
    RedisModule_Free(s);
}

void Script_RegisterStats(RAI_Script *s, RedisModuleString *keyname) {
    RunStats_Free(s->stats);
    s->stats = RunStats_Register(keyname, 1, RAI_BACKEND_TORCH, s->device_str, s->tag, s->tag_len);
}

RAI_Script *Script_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    RAI_Script *s = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        Error_Set(err, "ERR script key is empty");
    } else if (RedisModule_ModuleTypeGetType(key) != RAI_ScriptType) {
        Error_Set(err, RAI_WRONGTYPE_MSG);
    } else {
        s = Script_Retain(RedisModule_ModuleTypeGetValue(key));
    }
    RedisModule_CloseKey(key);
    return s;
}

int Script_IsEntryPoint(const RAI_Script *s, const char *fn) {
    for (size_t i = 0; i < s->nentry_points; i++) {
        if (!strcmp(s->entry_points[i], fn)) return 1;
    }
    return 0;
}
