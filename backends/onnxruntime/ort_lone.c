/*
 * ort_lone.c - see ort_lone.h.
 */
#include "onnxruntime/ort_lone.h"

#include <limits.h>

#include "onnxruntime/ort_allocator.h"

void ort_lone_init(OrtLone *l, const RAI_ModelSpec *spec) {
    *l = (OrtLone){0};
    pthread_mutex_init(&l->lock, NULL);
    int kept = spec->size >= offsetof(RAI_ModelSpec, blob_kept) + sizeof(int) && spec->blob_kept;
    if (kept && spec->device == RAI_DEVICE_CPU) {
        l->blob = spec->blob;
        l->blob_len = spec->blob_len;
    }
}

/* The first session's options (ort_model.c) but for the thread count and
 * the spinning. A failure is logged, not the run's: the run goes on. */
static OrtSession *build(const OrtLone *l, int threads, const char *key, int key_len) {
    const OrtApi *api = ort.api;
    OrtSessionOptions *opts = NULL;
    OrtSession *session = NULL;
    OrtStatus *st = api->CreateSessionOptions(&opts);
    long long inter = ort.host->config_get(RAI_CONFIG_INTER_OP_PARALLELISM);
    if (!st) st = api->SetIntraOpNumThreads(opts, threads);
    if (!st && inter > 0) st = api->SetInterOpNumThreads(opts, inter > INT_MAX ? INT_MAX : (int)inter);
    if (!st) st = api->SetSessionGraphOptimizationLevel(opts, ORT_ENABLE_ALL);
    if (!st) st = api->AddSessionConfigEntry(opts, "session.use_env_allocators", "1");
    if (!st) st = api->AddSessionConfigEntry(opts, "session.intra_op.allow_spinning", "0");
    if (!st) st = api->CreateSessionFromArray(ort.env, l->blob, l->blob_len, opts, &session);
    if (st) {
        ort.host->log(RAI_LOG_WARNING,
                      "ONNX Runtime: no %d-thread session for lone runs of '%.*s', they keep "
                      "the shared one: %s",
                      threads, key_len, key, api->GetErrorMessage(st));
        api->ReleaseStatus(st);
        session = NULL;
    }
    if (opts) api->ReleaseSessionOptions(opts);
    return session;
}

OrtSession *ort_lone_session(OrtLone *l, int threads, const RAI_RunInfo *info) {
    if (l->blob == NULL || threads < 1 || __atomic_load_n(&l->failed, __ATOMIC_RELAXED)) {
        return NULL;
    }
    OrtSession *s = __atomic_load_n(&l->session, __ATOMIC_ACQUIRE);
    if (s == NULL) {
        pthread_mutex_lock(&l->lock);
        s = l->session;
        if (s == NULL && !l->failed) {
            /* As the first session: its blob size, once, for its life. */
            int has_key = info->size >= offsetof(RAI_RunInfo, key_len) + sizeof(size_t) &&
                          info->key != NULL;
            const char *key = has_key ? info->key : "";
            int key_len = has_key && info->key_len < 256 ? (int)info->key_len : 0;
            l->charged = ort_allocator_charge(l->blob_len);
            if (!l->charged) {
                ort.host->log(RAI_LOG_WARNING,
                              "ONNX Runtime: no %d-thread session for lone runs of '%.*s', they "
                              "keep the shared one: BACKEND_MEMORY_LIMIT",
                              threads, key_len, key);
            }
            s = l->charged ? build(l, threads, key, key_len) : NULL;
            if (s == NULL) {
                if (l->charged) ort_allocator_discharge(l->blob_len);
                l->charged = 0;
                __atomic_store_n(&l->failed, 1, __ATOMIC_RELAXED);
            } else {
                l->threads = threads;
                __atomic_store_n(&l->session, s, __ATOMIC_RELEASE);
                ort.host->log(RAI_LOG_NOTICE,
                              "ONNX Runtime: a %d-thread session for lone runs of '%.*s'",
                              threads, key_len, key);
            }
        }
        pthread_mutex_unlock(&l->lock);
    }
    /* Built for the physical cores, which do not change: another count
     * (not asked for by this engine) runs on the shared session. */
    return s != NULL && l->threads == threads ? s : NULL;
}

void ort_lone_free(OrtLone *l) {
    if (l->session) ort.api->ReleaseSession(l->session);
    if (l->charged) ort_allocator_discharge(l->blob_len);
    pthread_mutex_destroy(&l->lock);
    l->session = NULL;
    l->charged = 0;
}
