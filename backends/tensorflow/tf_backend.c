/*
 * tf_backend.c - the TensorFlow backend: entry point, descriptor, and the
 * model lifecycle (import a GraphDef, run it in a session, free it).
 *
 * One TF_Session per model. TF_SessionRun is thread-safe, so every worker of
 * a queue runs the same session at once; nothing here is mutated after
 * model_create returns.
 */
#define _GNU_SOURCE /* sched_getaffinity, in backend_threads.h */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/backend_threads.h"
#include "common/rai_entry.h"
#include "common/rai_run.h"
#include "redisai/backend_abi.h"
#include "redisai/reply_texts.h"
#include "tensorflow/c/c_api.h"
#include "tensorflow/tf_convert.h"

#ifndef REDISAI_BACKEND_VARIANT
#define REDISAI_BACKEND_VARIANT "cpu"
#endif

static const RAI_HostApi *host;

/* RunOptions { inter_op_thread_pool: -1 }: run the graph's ops in the
 * calling worker thread instead of handing each one to TF's inter-op pool.
 * Our workers are already a thread pool per device; for small graphs the
 * hand-offs cost more than the ops. Used unless INTER_OP_PARALLELISM was
 * set, which asks for TF's own pool. Intra-op threads work either way. */
static const uint8_t inline_run_options_bytes[] = {
    0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
static TF_Buffer inline_run_options_buf = {
    .data = inline_run_options_bytes,
    .length = sizeof(inline_run_options_bytes),
};
static TF_Buffer *const inline_run_options = &inline_run_options_buf;

/* A session fixes its intra-op threads when it is created. The engine tells
 * each run the threads it may use (RAI_RunInfo.intra_op_threads,
 * engine/thread_policy.h): the session's count under load, one per
 * physical core for a lone heavy run. For that count a CPU model gets a
 * second session over the same graph, opened at the first run that asks
 * for it (so only models that run alone and long pay its kernels' memory),
 * logged once with its thread count; one that cannot be opened is not tried
 * again, and the runs stay on the first. */
typedef struct TFModel {
    TF_Graph *graph;
    TF_Session *session;
    size_t ninputs;
    size_t noutputs;
    TF_Output *inputs; /* ninputs ports, then noutputs ports, one allocation */
    TF_Output *outputs;
    RAI_DeviceKind device;
    int threads; /* session's intra-op threads */
    pthread_mutex_t lone_lock;
    TF_Session *lone; /* atomic: opened once, under lone_lock */
    int lone_threads; /* set before lone */
    int lone_failed;  /* atomic */
} TFModel;

/* ---------------------------------------------------------------------- */
/* ConfigProto, encoded by hand: the C API takes only serialized protos and
 * the wheel ships no protobuf C runtime. Field numbers are from
 * tensorflow/core/protobuf/config.proto. TF_SetConfig replaces the whole
 * config, so every setting goes into one message. */

typedef struct ProtoBuf {
    uint8_t bytes[128];
    size_t len;
} ProtoBuf;

static void proto_varint(ProtoBuf *p, uint64_t v) {
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p->bytes[p->len++] = b | (v ? 0x80 : 0);
    } while (v);
}

static void proto_bytes(ProtoBuf *p, const void *data, size_t len) {
    memcpy(p->bytes + p->len, data, len);
    p->len += len;
}

/* int32 fields: the parser would silently truncate a larger varint. */
static void proto_int32_field(ProtoBuf *p, uint8_t tag, long long v) {
    if (v > INT32_MAX) {
        v = INT32_MAX;
    }
    p->bytes[p->len++] = tag;
    proto_varint(p, (uint64_t)v);
}

static void session_config(ProtoBuf *p, RAI_DeviceKind device, int64_t device_id, int intra) {
    p->len = 0;
    if (device == RAI_DEVICE_CPU) {
        /* device_count {key: "GPU" value: 0}, as RedisAI did: a CPU model
         * never grabs a GPU. */
        static const uint8_t no_gpu[] = {0x0a, 0x07, 0x0a, 0x03, 'G', 'P', 'U', 0x10, 0x00};
        proto_bytes(p, no_gpu, sizeof(no_gpu));
    }
    /* INTRA_OP_PARALLELISM, or the default of backend_threads.h from the
     * core count (TF's own is one thread per core, against Redis's main
     * thread and the queue's workers); the lone session's count for it. */
    proto_int32_field(p, 0x10, intra); /* intra_op_parallelism_threads = 2 */
    long long inter = host->config_get(RAI_CONFIG_INTER_OP_PARALLELISM);
    if (inter > 0) {
        proto_int32_field(p, 0x28, inter); /* inter_op_parallelism_threads = 5 */
    }
    if (device == RAI_DEVICE_GPU) {
        /* gpu_options = 6 { allow_growth = 4: true; visible_device_list = 5 }:
         * without allow_growth the first model takes the whole GPU. */
        char id[24] = "";
        size_t idlen = 0;
        if (device_id >= 0) {
            idlen = (size_t)snprintf(id, sizeof(id), "%lld", (long long)device_id);
        }
        p->bytes[p->len++] = 0x32;
        p->bytes[p->len++] = (uint8_t)(2 + (idlen ? 2 + idlen : 0));
        p->bytes[p->len++] = 0x20;
        p->bytes[p->len++] = 0x01;
        if (idlen) {
            p->bytes[p->len++] = 0x2a;
            p->bytes[p->len++] = (uint8_t)idlen;
            proto_bytes(p, id, idlen);
        }
    }
}

/* ---------------------------------------------------------------------- */

/* "op" or "op:k". A TF op name cannot contain ':', so a digit suffix after
 * the last ':' is always an output index. */
static int find_port(TF_Graph *graph, const char *name, TF_Output *port) {
    TF_Operation *op = TF_GraphOperationByName(graph, name);
    long index = 0;
    if (!op) {
        const char *colon = strrchr(name, ':');
        if (!colon || colon == name || colon[1] == '\0' || strlen(colon + 1) > 9) {
            return 0;
        }
        for (const char *c = colon + 1; *c; c++) {
            if (*c < '0' || *c > '9') {
                return 0;
            }
            index = index * 10 + (*c - '0');
        }
        char *opname = host->strdup(name);
        if (!opname) {
            return 0;
        }
        opname[colon - name] = '\0';
        op = TF_GraphOperationByName(graph, opname);
        host->free(opname);
    }
    if (!op || index >= TF_OperationNumOutputs(op)) {
        return 0;
    }
    *port = (TF_Output){.oper = op, .index = (int)index};
    return 1;
}

static void close_session(TF_Session *session) {
    TF_Status *status = TF_NewStatus();
    TF_CloseSession(session, status);
    if (TF_GetCode(status) != TF_OK) {
        host->log(RAI_LOG_WARNING, "TF: closing a session failed: %s", TF_Message(status));
    }
    TF_DeleteSession(session, status);
    TF_DeleteStatus(status);
}

static void tf_model_free(void *handle) {
    TFModel *m = handle;
    if (!m) {
        return;
    }
    if (m->lone) {
        close_session(m->lone);
    }
    if (m->session) {
        close_session(m->session);
    }
    pthread_mutex_destroy(&m->lone_lock);
    if (m->graph) {
        TF_DeleteGraph(m->graph);
    }
    host->free(m->inputs);
    host->free(m);
}

static int session_has_gpu(TF_Session *session, TF_Status *status) {
    TF_DeviceList *list = TF_SessionListDevices(session, status);
    if (TF_GetCode(status) != TF_OK) {
        return 0;
    }
    int found = 0;
    int n = TF_DeviceListCount(list);
    for (int i = 0; i < n && !found; i++) {
        const char *type = TF_DeviceListType(list, i, status);
        found = TF_GetCode(status) == TF_OK && strcmp(type, "GPU") == 0;
    }
    TF_DeleteDeviceList(list);
    return found;
}

/* Imports the graph of spec's blob into m and finds its named inputs
 * (placeholders) and outputs. 1, or 0 after err. */
static int import_graph(TFModel *m, const RAI_ModelSpec *spec, TF_Status *status,
                        RAI_Error *err) {
    m->graph = TF_NewGraph();
    /* The blob is only read during the import: no copy needed. */
    TF_Buffer graphdef = {.data = spec->blob, .length = spec->blob_len};
    TF_ImportGraphDefOptions *iopts = TF_NewImportGraphDefOptions();
    TF_GraphImportGraphDef(m->graph, &graphdef, iopts, status);
    TF_DeleteImportGraphDefOptions(iopts);
    if (TF_GetCode(status) != TF_OK) {
        host->error_set(err, "%s", TF_Message(status));
        return 0;
    }
    for (size_t i = 0; i < spec->ninputs; i++) {
        const char *name = spec->inputs[i];
        if (!find_port(m->graph, name, &m->inputs[i]) ||
            strcmp(TF_OperationOpType(m->inputs[i].oper), "Placeholder") != 0) {
            host->error_set(err, "ERR Input node named \"%s\" not found in TF graph.", name);
            return 0;
        }
    }
    for (size_t i = 0; i < spec->noutputs; i++) {
        const char *name = spec->outputs[i];
        if (!find_port(m->graph, name, &m->outputs[i])) {
            host->error_set(err, "ERR Output node named \"%s\" not found in TF graph", name);
            return 0;
        }
    }
    return 1;
}

/* A session over m's graph on spec's device. 1, or 0 after err. */
static int open_session(TFModel *m, const RAI_ModelSpec *spec, TF_Status *status,
                        RAI_Error *err) {
    ProtoBuf config;
    long long intra = rai_intra_op_threads(host);
    m->threads = intra > INT32_MAX ? INT32_MAX : (int)intra;
    m->device = spec->device;
    session_config(&config, spec->device, spec->device_id, m->threads);
    TF_SessionOptions *sopts = TF_NewSessionOptions();
    TF_SetConfig(sopts, config.bytes, config.len, status);
    if (TF_GetCode(status) == TF_OK) {
        m->session = TF_NewSession(m->graph, sopts, status);
    }
    TF_DeleteSessionOptions(sopts);
    if (TF_GetCode(status) != TF_OK) {
        m->session = NULL;
        host->error_set(err, "%s", TF_Message(status));
        return 0;
    }
    if (spec->device == RAI_DEVICE_GPU && !session_has_gpu(m->session, status)) {
        host->error_set(err, "ERR GPU requested but TF couldn't find CUDA");
        return 0;
    }
    return 1;
}

/* Opens the lone session (see TFModel). Lone lock held. */
static void open_lone(TFModel *m, int threads, const RAI_RunInfo *info) {
    int has_key = info->size >= offsetof(RAI_RunInfo, key_len) + sizeof(size_t) && info->key;
    const char *key = has_key ? info->key : "";
    int key_len = has_key && info->key_len < 256 ? (int)info->key_len : 0;
    ProtoBuf config;
    session_config(&config, RAI_DEVICE_CPU, -1, threads);
    TF_Status *status = TF_NewStatus();
    TF_SessionOptions *sopts = TF_NewSessionOptions();
    TF_Session *s = NULL;
    TF_SetConfig(sopts, config.bytes, config.len, status);
    if (TF_GetCode(status) == TF_OK) {
        s = TF_NewSession(m->graph, sopts, status);
    }
    TF_DeleteSessionOptions(sopts);
    if (TF_GetCode(status) != TF_OK || s == NULL) {
        host->log(RAI_LOG_WARNING,
                  "TensorFlow: no %d-thread session for lone runs of '%.*s', they keep the "
                  "shared one: %s",
                  threads, key_len, key, TF_Message(status));
        __atomic_store_n(&m->lone_failed, 1, __ATOMIC_RELAXED);
    } else {
        m->lone_threads = threads;
        __atomic_store_n(&m->lone, s, __ATOMIC_RELEASE);
        host->log(RAI_LOG_NOTICE, "TensorFlow: a %d-thread session for lone runs of '%.*s'",
                  threads, key_len, key);
    }
    TF_DeleteStatus(status);
}

/* The session for this run: the lone one when the engine asks a count
 * other than the first session's (ABI 1.6), opened now if it is the
 * first such run; else the first. */
static TF_Session *run_session(TFModel *m, const RAI_RunInfo *info) {
    int want = info && info->size >= RAI_RUN_INFO_SIZE_1_6 ? info->intra_op_threads : 0;
    if (want <= 0 || want == m->threads || m->device != RAI_DEVICE_CPU ||
        __atomic_load_n(&m->lone_failed, __ATOMIC_RELAXED)) {
        return m->session;
    }
    TF_Session *s = __atomic_load_n(&m->lone, __ATOMIC_ACQUIRE);
    if (s == NULL) {
        pthread_mutex_lock(&m->lone_lock);
        if (m->lone == NULL && !m->lone_failed) {
            open_lone(m, want, info);
        }
        s = m->lone;
        pthread_mutex_unlock(&m->lone_lock);
    }
    /* Opened for the physical cores, which do not change. */
    return s != NULL && m->lone_threads == want ? s : m->session;
}

static void *tf_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err) {
    (void)names; /* TF keeps the names the user gave. */
    if (spec->size < sizeof(*spec)) {
        host->error_set(err, "ERR model spec too old for the TF backend");
        return NULL;
    }
    if (spec->device != RAI_DEVICE_CPU && spec->device != RAI_DEVICE_GPU) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_DEVICE);
        return NULL;
    }
    TF_Status *status = TF_NewStatus();
    TFModel *m = host->calloc(1, sizeof(*m));
    if (m) {
        pthread_mutex_init(&m->lone_lock, NULL);
        m->ninputs = spec->ninputs;
        m->noutputs = spec->noutputs;
        m->inputs = host->calloc(spec->ninputs + spec->noutputs + 1, sizeof(TF_Output));
    }
    if (!m || !m->inputs) {
        host->error_set(err, "ERR out of memory creating a TF model");
        goto fail;
    }
    m->outputs = m->inputs + spec->ninputs;
    if (!import_graph(m, spec, status, err) || !open_session(m, spec, status, err)) {
        goto fail;
    }
    TF_DeleteStatus(status);
    return m;

fail:
    TF_DeleteStatus(status);
    tf_model_free(m);
    return NULL;
}

static int tf_model_run(void *handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                        size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    TFModel *m = handle;
    /* The core checks counts before queueing; this guards the arrays below. */
    if (RAI_CheckRunCounts(host, err, ninputs, m->ninputs, noutputs, m->noutputs) != 0) {
        return -1;
    }

    int rc = -1;
    TF_Status *status = TF_NewStatus();
    TF_Tensor **in = host->calloc(ninputs + noutputs + 1, sizeof(*in));
    TF_Tensor **out = in + ninputs;
    if (!in) {
        host->error_set(err, "ERR out of memory running a TF model");
        goto done;
    }

    for (size_t i = 0; i < ninputs; i++) {
        in[i] = tf_tensor_from_core(inputs[i], err);
        if (!in[i]) {
            goto done;
        }
    }

    TF_Buffer *run_options =
        host->config_get(RAI_CONFIG_INTER_OP_PARALLELISM) > 0 ? NULL : inline_run_options;
    TF_SessionRun(run_session(m, info), run_options, m->inputs, in, (int)ninputs, m->outputs, out, (int)noutputs,
                  NULL, 0, NULL, status);
    if (TF_GetCode(status) != TF_OK) {
        /* TF's own text, e.g. "Incompatible shapes: [2,2] vs. [3] ...". */
        host->error_set(err, "%s", TF_Message(status));
        goto done;
    }

    for (size_t i = 0; i < noutputs; i++) {
        if (!out[i]) {
            host->error_set(err, RAI_ERR_OUTPUT_COUNT);
            goto done;
        }
        TF_Tensor *tft = out[i];
        out[i] = NULL; /* tf_tensor_to_core owns it from here, on every path */
        outputs[i] = tf_tensor_to_core(tft, err);
        if (!outputs[i]) {
            goto done; /* outputs already made are the core's to release */
        }
    }
    rc = 0;

done:
    if (in) {
        for (size_t i = 0; i < ninputs + noutputs; i++) {
            if (in[i]) {
                TF_DeleteTensor(in[i]);
            }
        }
        host->free(in);
    }
    TF_DeleteStatus(status);
    return rc;
}

/* ---------------------------------------------------------------------- */

/* The ABI and kind, read by the core from the file before dlopen. */
RAI_BACKEND_ABI_NOTE(RAI_BACKEND_TF);

static RAI_BackendDescriptor descriptor = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_BackendDescriptor),
    .kind = RAI_BACKEND_TF,
    .framework = "TensorFlow",
    .framework_version = NULL, /* TF_Version(), known only at run time */
    .variant = REDISAI_BACKEND_VARIANT,
    .model_create = tf_model_create,
    .model_free = tf_model_free,
    .model_run = tf_model_run,
};

RAI_BACKEND_ENTRY(h, errbuf, errlen) {
    if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_0, "backend", NULL, errbuf, errlen) != 0) {
        return NULL;
    }
    host = h;
    tf_tensor_init(h);
    descriptor.framework_version = TF_Version();
    return &descriptor;
}
