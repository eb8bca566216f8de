/*
 * ort_model.c - ONNX models: build an OrtSession from the blob, run it,
 * free it.
 *
 * One OrtSession per model. OrtApi::Run is thread-safe, so every worker of
 * a queue runs the same session at once; the model is never mutated after
 * model_create returns, and everything a run creates (its OrtRunOptions,
 * its input and output values) belongs to that run alone. A lone heavy run
 * runs a second session with more threads (ort_lone.h).
 */
#define _GNU_SOURCE /* sched_getaffinity, in backend_threads.h */
#include "onnxruntime/ort_model.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/backend_threads.h"
#include "common/rai_run.h"
#include "onnxruntime/ort_allocator.h"
#include "onnxruntime/ort_env.h"
#include "onnxruntime/ort_external.h"
#include "onnxruntime/ort_lone.h"
#include "onnxruntime/ort_tensor.h"
#include "onnxruntime/ort_watchdog.h"
#include "redisai/reply_texts.h"

typedef struct OrtModel {
    OrtSession *session;
    size_t ninputs;
    size_t noutputs;
    /* ninputs input names, then noutputs output names, in the session's
     * order: the order inputs and outputs are bound in. The array is the
     * host's; the names come from the counting allocator and are held as
     * long as the session, as 1.2 held them (INFO counts them). */
    char **names;
    /* The blob size charged to the allocator's count, when charged is 1. */
    size_t blob_len;
    int charged;
    /* The session's intra-op threads, and the second session for runs the
     * engine gives another count (ort_lone.h). */
    int threads;
    OrtLone lone;
} OrtModel;

/* ---------------------------------------------------------------------- */
/* Session options */

static int int_option(long long v) {
    return v > INT_MAX ? INT_MAX : (int)v;
}

static int cuda_available(void) {
    char **providers = NULL;
    int n = 0;
    OrtStatus *status = ort.api->GetAvailableProviders(&providers, &n);
    if (status) {
        ort.api->ReleaseStatus(status);
        return 0;
    }
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        found = strcmp(providers[i], "CUDAExecutionProvider") == 0;
    }
    ort_discard(ort.api->ReleaseAvailableProviders(providers, n));
    return found;
}

/* The V2 options start from ORT's defaults; the V1 struct would need every
 * member spelled out (a zeroed gpu_mem_limit means no memory at all). */
static int append_cuda(OrtSessionOptions *opts, int64_t device_id, RAI_Error *err) {
    const OrtApi *api = ort.api;
    if (!cuda_available()) {
        ort.host->error_set(err, "ERR GPU requested but ONNX couldn't find CUDA");
        return 0;
    }
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)(device_id >= 0 ? device_id : 0));
    const char *keys[] = {"device_id"};
    const char *values[] = {id};
    OrtCUDAProviderOptionsV2 *cuda = NULL;
    int ok = !ort_failed(api->CreateCUDAProviderOptions(&cuda), err) &&
             !ort_failed(api->UpdateCUDAProviderOptions(cuda, keys, values, 1), err) &&
             !ort_failed(api->SessionOptionsAppendExecutionProvider_CUDA_V2(opts, cuda), err);
    if (cuda) {
        api->ReleaseCUDAProviderOptions(cuda);
    }
    return ok;
}

static OrtSessionOptions *session_options(const RAI_ModelSpec *spec, RAI_Error *err) {
    const OrtApi *api = ort.api;
    OrtSessionOptions *opts = NULL;
    if (ort_failed(api->CreateSessionOptions(&opts), err)) {
        return NULL;
    }
    /* INTRA_OP_PARALLELISM, or the default of backend_threads.h from the
     * core count (ORT's own, one thread per physical core, spins against
     * Redis's main thread). 1 runs every node in the calling worker and
     * starts no pool at all. */
    int intra = int_option(rai_intra_op_threads(ort.host));
    if (ort_failed(api->SetIntraOpNumThreads(opts, intra), err)) {
        goto fail;
    }
    long long inter = ort.host->config_get(RAI_CONFIG_INTER_OP_PARALLELISM);
    if (inter > 0 && ort_failed(api->SetInterOpNumThreads(opts, int_option(inter)), err)) {
        goto fail;
    }
    if (ort_failed(api->SetSessionGraphOptimizationLevel(opts, ORT_ENABLE_ALL), err)) {
        goto fail;
    }
    /* CPU memory from the counting allocator (ort_allocator.h), not from a
     * per-session arena. */
    if (ort_failed(api->AddSessionConfigEntry(opts, "session.use_env_allocators", "1"), err)) {
        goto fail;
    }
    if (spec->device == RAI_DEVICE_GPU && !append_cuda(opts, spec->device_id, err)) {
        goto fail;
    }
    return opts;

fail:
    api->ReleaseSessionOptions(opts);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Names */

/* Frees the n names of the counting allocator in names (NULL entries are
 * names not asked for yet), not the array. */
static void free_session_names(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++) {
        if (names[i]) {
            ort_discard(ort.api->AllocatorFree(ort_allocator_get(), names[i]));
            names[i] = NULL;
        }
    }
}

/* Asks the session for its input names, then its output names, into
 * names (ninputs + noutputs entries, NULL): ORT allocates each one through
 * the counting allocator, which may refuse it (BACKEND_MEMORY_LIMIT, the
 * text after prefix). Returns 0 after err, the names made so far left in
 * names for free_session_names. */
static int session_names(const OrtModel *m, char **names, RAI_Error *err, const char *prefix) {
    const OrtApi *api = ort.api;
    OrtAllocator *alloc = ort_allocator_get();
    for (size_t i = 0; i < m->ninputs + m->noutputs; i++) {
        OrtStatus *status =
            i < m->ninputs
                ? api->SessionGetInputName(m->session, i, alloc, &names[i])
                : api->SessionGetOutputName(m->session, i - m->ninputs, alloc, &names[i]);
        if (ort_failed_limit(status, err, prefix)) {
            names[i] = NULL;
            return 0;
        }
    }
    return 1;
}

static int read_names(OrtModel *m, RAI_Error *err) {
    const OrtApi *api = ort.api;
    if (ort_failed(api->SessionGetInputCount(m->session, &m->ninputs), err) ||
        ort_failed(api->SessionGetOutputCount(m->session, &m->noutputs), err)) {
        return 0;
    }
    size_t total = m->ninputs + m->noutputs;
    m->names = ort.host->calloc(total ? total : 1, sizeof(*m->names));
    if (!m->names) {
        ort.host->error_set(err, "ERR out of memory creating an ONNX model");
        return 0;
    }
    return session_names(m, m->names, err, ORT_INIT_EXCEPTION_PREFIX);
}

static void free_names(char **names, size_t n) {
    if (!names) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ort.host->free(names[i]);
    }
    ort.host->free(names);
}

static char **copy_names(char *const *names, size_t n) {
    char **out = ort.host->calloc(n ? n : 1, sizeof(*out));
    if (!out) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = ort.host->strdup(names[i]);
        if (!out[i]) {
            free_names(out, i);
            return NULL;
        }
    }
    return out;
}

/* The core takes ownership of its own copies, so it is given none unless
 * both lists could be made. */
static int export_names(const OrtModel *m, RAI_ModelNames *names, RAI_Error *err) {
    char **inputs = copy_names(m->names, m->ninputs);
    char **outputs = copy_names(m->names + m->ninputs, m->noutputs);
    if (!inputs || !outputs) {
        free_names(inputs, m->ninputs);
        free_names(outputs, m->noutputs);
        ort.host->error_set(err, "ERR out of memory creating an ONNX model");
        return 0;
    }
    *names = (RAI_ModelNames){
        .ninputs = m->ninputs,
        .inputs = inputs,
        .noutputs = m->noutputs,
        .outputs = outputs,
    };
    return 1;
}

/* ---------------------------------------------------------------------- */
/* Lifecycle */

void ort_model_free(void *handle) {
    OrtModel *m = handle;
    if (!m) {
        return;
    }
    free_session_names(m->names, m->ninputs + m->noutputs);
    ort.host->free(m->names);
    if (m->session) {
        ort.api->ReleaseSession(m->session);
    }
    if (m->charged) {
        ort_allocator_discharge(m->blob_len);
    }
    ort_lone_free(&m->lone);
    ort.host->free(m);
}

void *ort_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    if (spec->size < sizeof(*spec)) {
        host->error_set(err, "ERR model spec too old for the ONNX backend");
        return NULL;
    }
    if (spec->device != RAI_DEVICE_CPU && spec->device != RAI_DEVICE_GPU) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_DEVICE);
        return NULL;
    }
    /* Before ORT parses anything: it would stat and read the files. */
    if (ort_has_external_data(spec->blob, spec->blob_len)) {
        host->error_set(err, "Initializer tensors with external data is not allowed.");
        return NULL;
    }

    OrtSessionOptions *opts = NULL;
    OrtModel *m = host->calloc(1, sizeof(*m));
    if (!m) {
        host->error_set(err, "ERR out of memory creating an ONNX model");
        goto fail;
    }
    ort_lone_init(&m->lone, spec);
    m->threads = int_option(rai_intra_op_threads(host));
    /* ORT 1.32 keeps the initializers of an in-memory model with its own
     * allocator, not the environment's: the session is charged its blob
     * size as one allocation (1.2 counted one for the model's bytes),
     * which bounds what it can hold, for as long as it lives. No second
     * copy of the blob is kept just to be counted. */
    if (!ort_allocator_charge(spec->blob_len)) {
        host->error_set(err, ORT_INIT_EXCEPTION_PREFIX ORT_MEMORY_LIMIT_TEXT);
        goto fail;
    }
    m->blob_len = spec->blob_len;
    m->charged = 1;
    opts = session_options(spec, err);
    if (!opts) {
        goto fail;
    }
    /* ORT copies what it needs from the blob: the core's copy is not
     * referenced after this call. */
    if (ort_failed_limit(ort.api->CreateSessionFromArray(ort.env, spec->blob, spec->blob_len,
                                                         opts, &m->session),
                         err, ORT_INIT_EXCEPTION_PREFIX)) {
        /* e.g. "No graph was found in the protobuf." */
        m->session = NULL;
        goto fail;
    }
    if (!read_names(m, err) || !export_names(m, names, err)) {
        goto fail;
    }
    ort.api->ReleaseSessionOptions(opts);
    return m;

fail:
    if (opts) {
        ort.api->ReleaseSessionOptions(opts);
    }
    ort_model_free(m);
    return NULL;
}

/* What one run allocates: its values (ninputs inputs, then noutputs
 * outputs), its names in the same order, its options. */
typedef struct OrtRun {
    size_t n;
    OrtValue **values;
    char **names;
    OrtRunOptions *options;
} OrtRun;

static void run_release(OrtRun *r) {
    for (size_t i = 0; r->values && i < r->n; i++) {
        if (r->values[i]) {
            ort.api->ReleaseValue(r->values[i]);
        }
    }
    free_session_names(r->names, r->n);
    if (r->options) {
        ort.api->ReleaseRunOptions(r->options);
    }
    ort.host->free(r->values);
    ort.host->free(r->names);
}

/* The run's arrays, its input values and its names. As in 1.2, the names
 * are asked of the session for each run, through the counting allocator:
 * INFO counts them allocated, and freed when the run ends. */
static int run_prepare(const OrtModel *m, OrtRun *r, RAI_Tensor *const *inputs, size_t ninputs,
                       RAI_Error *err) {
    r->n = m->ninputs + m->noutputs;
    r->values = ort.host->calloc(r->n + 1, sizeof(*r->values));
    r->names = ort.host->calloc(r->n + 1, sizeof(*r->names));
    if (!r->values || !r->names) {
        ort.host->error_set(err, "ERR out of memory running an ONNX model");
        return 0;
    }
    for (size_t i = 0; i < ninputs; i++) {
        r->values[i] = ort_tensor_from_core(inputs[i], err);
        if (!r->values[i]) {
            return 0;
        }
    }
    /* Per run, never shared: the watchdog terminates exactly this run. */
    return session_names(m, r->names, err, "") &&
           !ort_failed(ort.api->CreateRunOptions(&r->options), err);
}

/* Hands the run's outputs to the core. 0 after err: outputs already made
 * are the core's to release. */
static int run_outputs(OrtRun *r, size_t ninputs, RAI_Tensor *const *inputs,
                       RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    for (size_t i = 0; i < noutputs; i++) {
        OrtValue *value = r->values[ninputs + i];
        r->values[ninputs + i] = NULL; /* ort_tensor_to_core owns it from here, on every path */
        if (!value) {
            ort.host->error_set(err, RAI_ERR_OUTPUT_COUNT);
            return 0;
        }
        outputs[i] = ort_tensor_to_core(value, inputs, ninputs, err);
        if (!outputs[i]) {
            return 0;
        }
    }
    return 1;
}

int ort_model_run(void *handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                  size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    OrtModel *m = handle;
    /* The core checks counts before queueing; this guards the arrays below. */
    if (RAI_CheckRunCounts(host, err, ninputs, m->ninputs, noutputs, m->noutputs) != 0) {
        return -1;
    }
    /* As in RedisAI 1.2: MODEL_EXECUTION_TIMEOUT is kept for runs of the
     * core's worker threads only. */
    if (info->size < sizeof(*info) || info->worker_index < 0) {
        host->error_set(err,
                        "Cannot execute onnxruntime model synchronously, use async execution instead");
        return -1;
    }

    int rc = -1;
    OrtWatchedRun watch;
    OrtRun r = {0};
    if (!run_prepare(m, &r, inputs, ninputs, err)) {
        goto done;
    }
    long long timeout_ms = host->config_get(RAI_CONFIG_MODEL_EXECUTION_TIMEOUT);
    if (timeout_ms > 0 && !ort_watchdog_watch(&watch, r.options, timeout_ms, err)) {
        goto done;
    }
    /* The engine's count for this run (ABI 1.6); the session's own when it
     * says none or the same. */
    int want = info->size >= RAI_RUN_INFO_SIZE_1_6 ? info->intra_op_threads : 0;
    OrtSession *lone =
        want > 0 && want != m->threads ? ort_lone_session(&m->lone, want, info) : NULL;
    /* ORT's own texts, e.g. "Unexpected input data type. Actual: ...",
     * "Exiting due to terminate flag being set to true." */
    OrtStatus *status = ort.api->Run(lone ? lone : m->session, r.options, (const char *const *)r.names,
                                     (const OrtValue *const *)r.values, ninputs,
                                     (const char *const *)(r.names + ninputs), noutputs,
                                     r.values + ninputs);
    if (timeout_ms > 0) {
        ort_watchdog_unwatch(&watch);
    }
    if (!ort_failed_limit(status, err, "") &&
        run_outputs(&r, ninputs, inputs, outputs, noutputs, err)) {
        rc = 0;
    }

done:
    run_release(&r);
    return rc;
}
