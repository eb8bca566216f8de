/*
 * script.c - script construction and reference counting, see script.h.
 */
#include "types/script.h"

#include <string.h>

#include "core/device.h"
#include "core/messages.h"
#include "loader/backend_loader.h"
#include "redisai/reply_texts.h"
#include "types/run_stats.h"
#include "types/stored.h"

RAI_Script *Script_Create(RedisModuleCtx *ctx, const RAI_ScriptParams *p, RAI_Error *err) {
    const RAI_BackendDescriptor *be = Backend_Get(ctx, RAI_BACKEND_TORCH);
    if (be == NULL) {
        Error_Set(err, RAI_ERR_LOAD_BACKEND);
        return NULL;
    }
    if (!Backend_HasScripts(be)) {
        Error_Set(err, "ERR the loaded TORCH backend does not support scripts");
        return NULL;
    }
    RAI_DeviceKind kind;
    int64_t id;
    if (!Device_ParseLoose(p->device_str, &kind, &id)) {
        Error_Set(err, RAI_ERR_UNSUPPORTED_DEVICE);
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
    struct RAI_RunQueue *queue = Stored_QueueFor(p->device_str, err);
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
        .tag = Stored_CopyBytes(p->tag, p->tag_len),
        .tag_len = p->tag_len,
        .source = Stored_CopyBytes(p->source, p->source_len),
        .source_len = p->source_len,
        .nentry_points = p->nentry_points,
        .entry_points = Stored_CopyNames(p->nentry_points, p->entry_points),
        .queue = queue,
    };
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
    Stored_FreeNames(s->nentry_points, s->entry_points);
    RedisModule_Free(s->device_str);
    RedisModule_Free(s->tag);
    RedisModule_Free(s->source);
    RedisModule_Free(s);
}

void Script_RegisterStats(RAI_Script *s, RedisModuleString *keyname) {
    RunStats_Free(s->stats);
    s->stats = RunStats_Register(keyname, 1, RAI_BACKEND_TORCH, s->device_str, s->tag, s->tag_len);
}

int Script_IsEntryPoint(const RAI_Script *s, const char *fn) {
    for (size_t i = 0; i < s->nentry_points; i++) {
        if (!strcmp(s->entry_points[i], fn)) return 1;
    }
    return 0;
}
