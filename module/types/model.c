/*
 * model.c - model construction and reference counting, see model.h.
 */
#include "types/model.h"

#include <string.h>

#include "core/messages.h"
#include "loader/backend_loader.h"
#include "types/run_stats.h"
#include "types/stored.h"

static long fallback_models; /* atomic */

long Model_FallbackCount(void) {
    return __atomic_load_n(&fallback_models, __ATOMIC_RELAXED);
}

/* The named backend's descriptor. When it cannot be had and p allows it,
 * the kind's default's, with *fallback set and a warning naming the key,
 * the backend wanted and the one used; else NULL after err. */
static const RAI_BackendDescriptor *namedBackend(RedisModuleCtx *ctx, const RAI_ModelParams *p,
                                                 int *fallback, RAI_Error *err) {
    RAI_Error why;
    Error_Init(&why);
    const RAI_LoadedBackend *lb = Backend_ResolveName(ctx, p->backend, p->backend_name, &why);
    const RAI_BackendDescriptor *be = lb ? lb->desc : NULL;
    if (lb == NULL && !p->name_fallback) {
        Error_Set(err, Error_Message(&why));
    } else if (lb == NULL) {
        be = Backend_Get(ctx, p->backend);
        const RAI_LoadedBackend *def = Backend_Loaded(p->backend);
        if (be && def) {
            *fallback = 1;
            RedisModule_Log(ctx, "warning",
                            "Model %.*s wants the %s backend %s, which cannot be used here (%s): "
                            "built on the kind's default backend %s instead, the name kept",
                            (int)(p->key ? p->key_len : 0), p->key ? p->key : "",
                            Backend_KindName(p->backend), p->backend_name, Error_Message(&why),
                            def->name);
        } else {
            be = NULL;
            Error_Set(err, RAI_ERR_LOAD_BACKEND);
        }
    }
    Error_Clear(&why);
    return be;
}

/* The backend the model is built on: the named one (or, where allowed, the
 * kind's default), else the kind's default, loaded if needed. NULL after err. */
static const RAI_BackendDescriptor *pickBackend(RedisModuleCtx *ctx, const RAI_ModelParams *p,
                                                int *fallback, RAI_Error *err) {
    if (p->backend_name) return namedBackend(ctx, p, fallback, err);
    const RAI_BackendDescriptor *be = Backend_Get(ctx, p->backend);
    if (be == NULL) Error_Set(err, RAI_ERR_LOAD_BACKEND);
    return be;
}

/* Names the backend found in the model replace the user's (taken over);
 * else the model keeps copies of the user's. */
static void takeNames(RAI_Model *m, const RAI_ModelParams *p, const RAI_ModelNames *found) {
    if (found->inputs) {
        m->ninputs = found->ninputs;
        m->inputs = found->inputs;
    } else {
        m->ninputs = p->ninputs;
        m->inputs = Stored_CopyNames(p->ninputs, p->inputs);
    }
    if (found->outputs) {
        m->noutputs = found->noutputs;
        m->outputs = found->outputs;
    } else {
        m->noutputs = p->noutputs;
        m->outputs = Stored_CopyNames(p->noutputs, p->outputs);
    }
}

RAI_Model *Model_Create(RedisModuleCtx *ctx, const RAI_ModelParams *p, char *blob,
                        size_t blob_len, RAI_Error *err) {
    int fallback = 0;
    const RAI_BackendDescriptor *be = pickBackend(ctx, p, &fallback, err);
    if (be == NULL) {
        RedisModule_Free(blob);
        return NULL;
    }
    RAI_ModelSpec spec = {
        .size = sizeof(RAI_ModelSpec),
        .device_str = p->device_str,
        .device = p->device,
        .device_id = p->device_id,
        .blob = blob,
        .blob_len = blob_len,
        .ninputs = p->ninputs,
        .inputs = p->inputs,
        .noutputs = p->noutputs,
        .outputs = p->outputs,
        .key = p->key ? p->key : "",
        .key_len = p->key ? p->key_len : 0,
        /* Freed after model_free (Backend_ModelFree), with the model. */
        .blob_kept = 1,
    };
    RAI_ModelNames names = {0};
    void *handle = be->model_create(&spec, &names, err);
    if (handle == NULL) Error_Set(err, "ERR backend could not create the model");
    /* The queue only once the backend took the model (as 1.2): a store refused
     * by the backend (e.g. GPU without CUDA) must leave no queue behind. */
    struct RAI_RunQueue *queue = handle ? Stored_QueueFor(p->device_str, err) : NULL;
    if (queue == NULL) {
        Stored_FreeNames(names.ninputs, names.inputs);
        Stored_FreeNames(names.noutputs, names.outputs);
        if (handle) {
            Backend_ModelFree(be, handle, blob);
        } else {
            RedisModule_Free(blob);
        }
        return NULL;
    }
    RAI_Model *m = RedisModule_Calloc(1, sizeof(*m));
    *m = (RAI_Model){
        .refcount = 1,
        .backend = p->backend,
        .be = be,
        .handle = handle,
        .device_str = RedisModule_Strdup(p->device_str),
        .device = p->device,
        .device_id = p->device_id,
        .tag = Stored_CopyBytes(p->tag, p->tag_len),
        .tag_len = p->tag_len,
        .batchsize = p->batchsize,
        .minbatchsize = p->minbatchsize,
        .minbatchtimeout = p->minbatchtimeout,
        .blob = blob,
        .blob_len = blob_len,
        .queue = queue,
        .backend_name = p->backend_name ? RedisModule_Strdup(p->backend_name) : NULL,
        .on_fallback = fallback,
        .last_run_us = -1,
        .recent_work_us = -1,
        .last_run_in_bytes = -1,
    };
    if (fallback) __atomic_add_fetch(&fallback_models, 1, __ATOMIC_RELAXED);
    Backend_CountUse(m->be, 0, +1);
    takeNames(m, p, &names);
    return m;
}

RAI_Model *Model_Retain(RAI_Model *m) {
    __atomic_add_fetch(&m->refcount, 1, __ATOMIC_RELAXED);
    return m;
}

void Model_Release(RAI_Model *m) {
    if (m == NULL) return;
    if (__atomic_sub_fetch(&m->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    Backend_ModelFree(m->be, m->handle, m->blob);
    Backend_CountUse(m->be, 0, -1);
    RunStats_Free(m->stats);
    Stored_FreeNames(m->ninputs, m->inputs);
    Stored_FreeNames(m->noutputs, m->outputs);
    if (m->on_fallback) __atomic_sub_fetch(&fallback_models, 1, __ATOMIC_RELAXED);
    RedisModule_Free(m->backend_name);
    RedisModule_Free(m->device_str);
    RedisModule_Free(m->tag);
    RedisModule_Free(m);
}

void Model_RegisterStats(RAI_Model *m, RedisModuleString *keyname) {
    RunStats_Free(m->stats);
    m->stats = RunStats_Register(keyname, 0, m->backend, m->device_str, m->tag, m->tag_len);
}

size_t Model_ChunkCount(size_t blob_len, size_t chunk) {
    return blob_len / chunk + 1;
}
