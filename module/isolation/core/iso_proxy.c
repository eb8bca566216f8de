/*
 * iso_proxy.c - the descriptor of an isolated backend (docs/isolation.md,
 * "How it works"). Each slot's descriptor has
 * the proxy's functions: creates and frees go over the slot's control
 * connection, runs over the calling thread's channel (iso_channel.c). The
 * ABI's create functions take no context, so each slot has its own
 * trampolines, made by a macro: static, explicit, no code generated at run
 * time.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "core/run_gate.h"
#include "isolation/core/iso_channel.h"
#include "isolation/core/iso_control.h"
#include "isolation/core/iso_handle.h"
#include "isolation/core/iso_pipeline.h"
#include "isolation/core/iso_restart.h"
#include "isolation/core/iso_spawn.h"

#define ISO_INFO_TIMEOUT_MS 500

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

static int modelRun(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                    size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

/* Every isolated model's runs can be in flight (iso_pipeline.c). */
static int acceptsAsync(const RAI_BackendDescriptor *be) {
    return be->model_run == modelRun;
}

/* run_gate.h: a run of an isolated model or script waits for its host in
 * its queue, parked, not on a worker. */
static long long notBefore(const RAI_BackendDescriptor *be, void *handle, long long since_ms,
                           long long now_ms) {
    if (be->model_run != modelRun || handle == NULL) return 0;
    return IsoChan_NotBefore(handle, since_ms, now_ms);
}

static AsyncRun_Ops async_ops = {
    .max_in_flight = ISO_PIPELINE_DEPTH,
    .accepts = acceptsAsync,
    .submit = IsoPipeline_Submit,
    .pending = IsoPipeline_Pending,
    .spin_hint = IsoPipeline_SpinHint,
    .wait = IsoPipeline_Wait,
};

void Iso_Init(RedisModuleCtx *ctx, const RAI_HostApi *api) {
    (void)ctx;
    Iso_SetApi(api);
    /* REDISAI_ISOLATED_IN_FLIGHT (0 to ISO_PIPELINE_DEPTH) lowers the bound
     * for a comparison; 0 makes workers wait for each run, as before runs
     * could be in flight (bench/bench_isolation_async.py measures both). */
    const char *env = getenv("REDISAI_ISOLATED_IN_FLIGHT");
    long want = env && *env ? strtol(env, NULL, 10) : ISO_PIPELINE_DEPTH;
    if (want > ISO_PIPELINE_DEPTH) want = ISO_PIPELINE_DEPTH;
    async_ops.max_in_flight = want > 0 ? (size_t)want : 0;
    AsyncRun_Register(want > 0 ? &async_ops : NULL);
    RunGate_Register(notBefore);
    /* REDISAI_ISOLATED_RING=0: every message on the channels' sockets, as
     * before the ring (the same kind of comparison; not a setting). */
    const char *ring = getenv("REDISAI_ISOLATED_RING");
    IsoChan_UseRing(!(ring && !strcmp(ring, "0")));
    IsoChan_SetRetire(IsoPipeline_FailAll);
    IsoControl_SetHooks(&(IsoControlHooks){
        .channels_down = IsoChannel_ShutdownAll,
        .schedule_restart = IsoRestart_Schedule,
    });
    Iso_HostPath();
}

/* A create on the main thread finds its host restarting, or the restarted
 * host still re-creating the slot's models (its control connection serves
 * one create at a time, and those can take seconds): refused at once, as a
 * run is, rather than waited for on Redis's main thread (slot->mu held).
 * The create in progress may be of a model deleted meanwhile, no longer in
 * the slot's list: a create another thread waits for counts too. err may
 * be NULL: -1 says it all. */
static int refuseUnlessReady(IsoSlot *s, RAI_Error *err) {
    int ready = s->state == ISO_READY;
    for (IsoHandle *h = s->handles; ready && h; h = h->next) {
        if (h->state == ISO_H_RECREATING) ready = 0;
    }
    for (IsoPending *p = s->pending; ready && p; p = p->next) {
        if (p->type == ISO_MSG_MODEL_CREATE || p->type == ISO_MSG_SCRIPT_CREATE) ready = 0;
    }
    if (ready) return 0;
    if (err) {
        Error_SetFmt(err, RAI_ERR_HOST_RESTARTING_FMT, Backend_KindName(s->kind), s->last_exit);
    }
    return -1;
}

static void *createHandle(IsoSlot *s, int is_script, const char *key, size_t key_len,
                          const char *device_str, int device, int64_t device_id, const char *blob,
                          size_t blob_len, size_t nin, const char *const *in, size_t nout,
                          const char *const *out, RAI_ModelNames *names, RAI_Error *err) {
    IsoHandle *h = IsoHandle_New(s, is_script, key, key_len, device_str, device, device_id, blob,
                                 blob_len, nin, in, nout, out, err);
    if (h == NULL) return NULL;
    pthread_mutex_lock(&s->mu);
    int ready = refuseUnlessReady(s, err);
    pthread_mutex_unlock(&s->mu);
    if (ready != 0) {
        IsoHandle_Free(h);
        return NULL;
    }
    uint64_t gen = 0;
    int rc = IsoHandle_CreateInHost(s, h, names, &gen, err);
    if (rc == -2) {
        char reason[300];
        snprintf(reason, sizeof(reason), "killed after the create of %s took over %lld ms", h->key,
                 rai_config.backend_start_timeout);
        IsoControl_KillWithReason(s, gen, reason, "killed_create_timeout");
    }
    if (rc < 0) {
        pthread_mutex_lock(&s->mu);
        IsoControl_ExitError(s, gen, "creating", h->key, err);
        pthread_mutex_unlock(&s->mu);
    }
    if (rc != 1) {
        IsoHandle_Free(h);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    h->state = ISO_H_LIVE;
    h->generation = gen;
    if (s->generation != gen) h->state = ISO_H_RECREATING; /* died right after: rebuild it */
    if (s->handles_tail) {
        s->handles_tail->next = h;
    } else {
        s->handles = h;
    }
    s->handles_tail = h;
    pthread_mutex_unlock(&s->mu);
    return h;
}

/* model_free / script_free: never waits. The host's free is queued for the
 * supervisor to send (iso_control.c), never a blocking send on this thread.
 * A handle the restarter is building (busy) is unlinked and marked
 * freed; the restarter frees it, in the host too, when its create ends
 * (iso_restart.c). */
static void freeHandleOf(void *p) {
    IsoHandle *h = p;
    if (h == NULL) return;
    IsoSlot *s = h->slot;
    pthread_mutex_lock(&s->mu);
    IsoHandle *prev = NULL;
    for (IsoHandle *it = s->handles; it; prev = it, it = it->next) {
        if (it != h) continue;
        if (prev) {
            prev->next = h->next;
        } else {
            s->handles = h->next;
        }
        if (s->handles_tail == h) s->handles_tail = prev;
        break;
    }
    if (h->busy) {
        h->freed = 1;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    int live = h->state == ISO_H_LIVE;
    uint64_t gen = h->generation;
    pthread_mutex_unlock(&s->mu);
    if (live) IsoHandle_FreeInHost(s, h, gen);
    IsoHandle_Free(h);
}

void Iso_ModelFree(void *handle, char *blob) {
    IsoHandle *h = handle;
    if (h == NULL) {
        RedisModule_Free(blob);
        return;
    }
    h->owned_blob = blob; /* a re-create in progress reads it: freed with h */
    freeHandleOf(h);
}

/* --- the descriptor's members ------------------------------------------------------ */

static void *modelCreate(IsoSlot *s, const RAI_ModelSpec *spec, RAI_ModelNames *names,
                         RAI_Error *err) {
    int has_key = spec->size >= offsetof(RAI_ModelSpec, key_len) + sizeof(size_t) && spec->key;
    return createHandle(s, 0, has_key ? spec->key : "", has_key ? spec->key_len : 0,
                        spec->device_str, spec->device, spec->device_id, spec->blob,
                        spec->blob_len, spec->ninputs, spec->inputs, spec->noutputs,
                        spec->outputs, names, err);
}

static void *scriptCreate(IsoSlot *s, const RAI_ScriptSpec *spec, RAI_Error *err) {
    int has_key = spec->size >= offsetof(RAI_ScriptSpec, key_len) + sizeof(size_t) && spec->key;
    return createHandle(s, 1, has_key ? spec->key : "", has_key ? spec->key_len : 0,
                        spec->device_str, spec->device, spec->device_id, spec->source,
                        spec->source_len, spec->nentry_points, spec->entry_points, 0, NULL, NULL,
                        err);
}

static int modelRun(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                    size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    return IsoChannel_ModelRun(model, info, inputs, ninputs, outputs, noutputs, err);
}

static int scriptRun(void *script, const RAI_RunInfo *info, const RAI_ScriptCall *call,
                     RAI_Tensor **outputs, RAI_Error *err) {
    return IsoChannel_ScriptRun(script, info, call, outputs, err);
}

static void slotInfo(IsoSlot *s, void *ctx, void (*add)(void *, const char *, const char *)) {
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U64(&b, (uint64_t)Iso_Api()->run_queue_count());
    IsoMsg m;
    /* Not while the restarter re-creates models: the host serves its
     * control connection one request at a time, and INFO on Redis's main
     * thread would wait behind a create. Its own fields are left out then,
     * as while it restarts. */
    pthread_mutex_lock(&s->mu);
    int ready = refuseUnlessReady(s, NULL) == 0;
    pthread_mutex_unlock(&s->mu);
    int rc = ready ? IsoControl_Request(s, ISO_MSG_INFO, &b, NULL, 0, ISO_INFO_TIMEOUT_MS, &m) : -1;
    IsoBuf_Free(&b);
    if (rc != 1) return;
    if (m.h.type == ISO_MSG_INFO_REPLY) {
        IsoReader r;
        IsoReader_Init(&r, m.payload, m.payload_len);
        uint64_t peak, user, sys;
        uint32_t n = 0;
        IsoReader_U64(&r, &peak);
        IsoReader_U64(&r, &user);
        IsoReader_U64(&r, &sys);
        IsoReader_Count(&r, &n, ISO_NAMES_MAX, 8);
        for (uint32_t i = 0; i < n && r.why == NULL; i++) {
            char *field = NULL, *value = NULL;
            IsoReader_StrDup(&r, &field, NULL, 256);
            IsoReader_StrDup(&r, &value, NULL, 4096);
            if (r.why == NULL) add(ctx, field, value);
            free(field);
            free(value);
        }
    }
    IsoMsg_Free(&m);
}

#define ISO_TRAMPOLINES(i)                                                                    \
    static void *modelCreate_##i(const RAI_ModelSpec *spec, RAI_ModelNames *names,            \
                                 RAI_Error *err) {                                            \
        return modelCreate(iso_slots[i], spec, names, err);                                   \
    }                                                                                         \
    static void *scriptCreate_##i(const RAI_ScriptSpec *spec, RAI_Error *err) {               \
        return scriptCreate(iso_slots[i], spec, err);                                         \
    }                                                                                         \
    static void info_##i(void *ctx, void (*add)(void *, const char *, const char *)) {        \
        slotInfo(iso_slots[i], ctx, add);                                                     \
    }

ISO_TRAMPOLINES(0)
ISO_TRAMPOLINES(1)
ISO_TRAMPOLINES(2)
ISO_TRAMPOLINES(3)
ISO_TRAMPOLINES(4)
ISO_TRAMPOLINES(5)
ISO_TRAMPOLINES(6)
ISO_TRAMPOLINES(7)
ISO_TRAMPOLINES(8)
ISO_TRAMPOLINES(9)
ISO_TRAMPOLINES(10)
ISO_TRAMPOLINES(11)
ISO_TRAMPOLINES(12)
ISO_TRAMPOLINES(13)
ISO_TRAMPOLINES(14)
ISO_TRAMPOLINES(15)

#define ISO_ROW(i) {modelCreate_##i, scriptCreate_##i, info_##i}
static const struct {
    void *(*model_create)(const RAI_ModelSpec *, RAI_ModelNames *, RAI_Error *);
    void *(*script_create)(const RAI_ScriptSpec *, RAI_Error *);
    void (*info)(void *, void (*)(void *, const char *, const char *));
} trampolines[ISO_MAX_HOSTS] = {ISO_ROW(0),  ISO_ROW(1),  ISO_ROW(2),  ISO_ROW(3),
                                ISO_ROW(4),  ISO_ROW(5),  ISO_ROW(6),  ISO_ROW(7),
                                ISO_ROW(8),  ISO_ROW(9),  ISO_ROW(10), ISO_ROW(11),
                                ISO_ROW(12), ISO_ROW(13), ISO_ROW(14), ISO_ROW(15)};

/* --- loading ------------------------------------------------------------------------- */

/* A free slot's index, or -1 when all ISO_MAX_HOSTS are taken. */
static int freeSlot(void) {
    pthread_mutex_lock(&slots_mu);
    int index = -1;
    for (int i = 0; i < ISO_MAX_HOSTS && index < 0; i++) {
        if (iso_slots[i] == NULL) index = i;
    }
    pthread_mutex_unlock(&slots_mu);
    return index;
}

static IsoSlot *newSlot(int index, RAI_BackendKind kind, const char *name, const char *real,
                        const char *shown) {
    IsoSlot *s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->mu, NULL);
    s->index = index;
    s->kind = kind;
    s->name = strdup(name);
    s->real = strdup(real);
    s->shown = strdup(shown);
    s->ctl = s->pidfd = -1;
    s->generation = 1;
    s->state = ISO_STARTING;
    snprintf(s->last_exit, sizeof(s->last_exit), "none");
    snprintf(s->last_exit_token, sizeof(s->last_exit_token), "none");
    return s;
}

/* A first start that failed: never restarted; the supervisor reaps the host
 * (killed here if it still runs) before the slot leaves the table, so no
 * zombie and no descriptor of it is left behind. The slot object is never
 * freed (the supervisor may still hold it); its index is free again. */
static void retire(IsoSlot *s) {
    pthread_mutex_lock(&s->mu);
    s->retired = 1;
    if (s->ctl >= 0) IsoSpawn_Kill(s);
    long long until = Iso_NowMs() + 5000;
    while (s->ctl >= 0 && Iso_NowMs() < until) Iso_CondWaitMs(s, 50);
    pthread_mutex_unlock(&s->mu);
    __atomic_store_n(&iso_slots[s->index], NULL, __ATOMIC_RELEASE);
}

/* The proxy's descriptor of a READY slot: the host's facts, the proxy's
 * members (scripts and info only when the host's backend has them). */
static void describe(IsoSlot *s) {
    int i = s->index;
    s->desc = (RAI_BackendDescriptor){
        .abi_major = RAI_ABI_MAJOR,
        .abi_minor = RAI_ABI_MINOR,
        .size = sizeof(RAI_BackendDescriptor),
        .kind = s->kind,
        .framework = s->framework,
        .framework_version = s->version,
        .variant = s->variant,
        .model_create = trampolines[i].model_create,
        .model_free = freeHandleOf,
        .model_run = modelRun,
        .script_create = s->has_scripts ? trampolines[i].script_create : NULL,
        .script_free = s->has_scripts ? freeHandleOf : NULL,
        .script_run = s->has_scripts ? scriptRun : NULL,
        .info = s->has_info ? trampolines[i].info : NULL,
    };
}

const RAI_BackendDescriptor *Iso_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *name,
                                      const char *real, const char *shown, RAI_Error *err) {
    int index = freeSlot();
    if (index < 0) {
        Error_SetFmt(err, "%s: at most %d isolated backends can be loaded", shown, ISO_MAX_HOSTS);
        return NULL;
    }
    IsoSlot *s = newSlot(index, kind, name, real, shown);
    if (s == NULL) {
        Error_SetFmt(err, "%s: out of memory", shown);
        return NULL;
    }
    IsoControl_StartThreads();

    char why[512];
    long long t0 = Iso_NowMs();
    if (IsoSpawn_Start(s, why, sizeof(why)) != 0) {
        Error_SetFmt(err, "%s: cannot start its backend host: %s", shown, why);
        free(s->name);
        free(s->real);
        free(s->shown);
        free(s);
        return NULL;
    }
    /* Published before the hello so that the supervisor routes its reply. */
    __atomic_store_n(&iso_slots[index], s, __ATOMIC_RELEASE);
    IsoControl_Wake();
    if (IsoControl_Hello(s, why, sizeof(why)) != 0) {
        Error_SetFmt(err, "%s: isolated load failed: %s", shown, why);
        retire(s);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->state = ISO_READY;
    s->ready_since_ms = Iso_NowMs();
    describe(s);
    pthread_mutex_unlock(&s->mu);
    IsoRestart_Start(s);
    RedisModule_Log(ctx, "notice",
                    "%s backend %s isolated in pid %d (%s %s, %s), started in %lld ms",
                    Backend_KindName(kind), name, (int)s->pid, s->framework, s->version, s->variant,
                    Iso_NowMs() - t0);
    return &s->desc;
}

void Iso_Shutdown(void) {
    for (int i = 0; i < ISO_MAX_HOSTS; i++) {
        IsoSlot *s = iso_slots[i];
        if (s == NULL) continue;
        pthread_mutex_lock(&s->mu);
        s->retired = 1; /* no restart while Redis goes down */
        pthread_mutex_unlock(&s->mu);
        IsoBuf b;
        IsoBuf_Init(&b);
        IsoControl_Send(s, ISO_MSG_SHUTDOWN, &b);
        IsoBuf_Free(&b);
    }
    long long until = Iso_NowMs() + 2000;
    for (int i = 0; i < ISO_MAX_HOSTS; i++) {
        IsoSlot *s = iso_slots[i];
        if (s == NULL) continue;
        pthread_mutex_lock(&s->mu);
        while (s->ctl >= 0 && Iso_NowMs() < until) Iso_CondWaitMs(s, 50);
        if (s->ctl >= 0) IsoSpawn_Kill(s);
        pthread_mutex_unlock(&s->mu);
    }
}
