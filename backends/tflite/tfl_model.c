/*
 * tfl_model.c - TFLITE models as RedisAI 1.2 serves them: inputs and outputs
 * by position in the model's subgraph, named after its tensors; a run's
 * shapes resize the model (batching); types checked before LiteRT sees them.
 *
 * A compiled model run by two threads at once returns wrong outputs, so a
 * model keeps a pool of compiled instances: a run takes an idle one or
 * compiles another (about 0.1 ms, ~100 KB), and gives it back after. The
 * pool grows to the number of threads that ran the model at once and no
 * further (docs/backends.md, "TFLITE": measured against one lock per model).
 */
#define _GNU_SOURCE
#include "tflite/tfl_model.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backend_threads.h"
#include "common/rai_dtype.h"
#include "common/rai_run.h"
#include "tflite/tfl_check.h"
#include "tflite/tfl_instance.h"

TflBackend tflb;

/* 1.2's texts. */
#define TFL_TYPE_MISMATCH "Input tensor type doesn't match the type expected by the model definition"
#define TFL_LOAD_FAILED "Failed to load model from buffer"
#define TFL_CONSTRUCT_FAILED "Failed to construct interpreter"
#define TFL_RESIZE_FAILED "Failed to resize input tensors"
#define TFL_INVOKE_FAILED "Failed to invoke TfLite"

/* How long a new model's trial in the validator may take. */
#define TFL_CHECK_TIMEOUT_MS 30000

/* LiteRT's column of rai_dtype.h: the types 1.2's TFLite exchanged, and
 * double. float16 has no tensor type here (1.2 refused it too). */
static const int column[RAI_DTYPE_ID_COUNT] = {
    [RAI_DTYPE_ID_FLOAT32] = TFL_TYPE_FLOAT32,  [RAI_DTYPE_ID_FLOAT64] = TFL_TYPE_FLOAT64,
    [RAI_DTYPE_ID_FLOAT16] = RAI_DTYPE_NO_TYPE, [RAI_DTYPE_ID_BFLOAT16] = RAI_DTYPE_NO_TYPE,
    [RAI_DTYPE_ID_INT8] = TFL_TYPE_INT8,        [RAI_DTYPE_ID_INT16] = TFL_TYPE_INT16,
    [RAI_DTYPE_ID_INT32] = TFL_TYPE_INT32,      [RAI_DTYPE_ID_INT64] = TFL_TYPE_INT64,
    [RAI_DTYPE_ID_UINT8] = TFL_TYPE_UINT8,      [RAI_DTYPE_ID_UINT16] = RAI_DTYPE_NO_TYPE,
    [RAI_DTYPE_ID_UINT32] = RAI_DTYPE_NO_TYPE,  [RAI_DTYPE_ID_UINT64] = RAI_DTYPE_NO_TYPE,
    [RAI_DTYPE_ID_BOOL] = TFL_TYPE_BOOL,        [RAI_DTYPE_ID_STRING] = RAI_DTYPE_NO_TYPE,
};

typedef struct TflRaiModel {
    char *blob; /* LiteRT reads the model from here for as long as it lives */
    size_t len;
    TflModel model;
    TflIface io;
    int threads;
    pthread_mutex_t mu;
    TflInstance *idle;
} TflRaiModel;

static atomic_size_t instance_count, model_count;

size_t tfl_instances(void) {
    return atomic_load(&instance_count);
}

size_t tfl_models(void) {
    return atomic_load(&model_count);
}

static void freeModel(TflRaiModel *m) {
    while (m->idle) {
        TflInstance *next = m->idle->next;
        TflInstance_Free(m->idle);
        atomic_fetch_sub(&instance_count, 1);
        m->idle = next;
    }
    TflIface_Free(&m->io);
    if (m->model) tfl.DestroyModel(m->model);
    tflb.host->free(m->blob);
    pthread_mutex_destroy(&m->mu);
    tflb.host->free(m);
}

static char **names(const TflPort *ports, size_t n) {
    char **out = tflb.host->calloc(n ? n : 1, sizeof(char *));
    if (out == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = tflb.host->strdup(ports[i].name);
        if (out[i] == NULL) {
            for (size_t k = 0; k < i; k++) tflb.host->free(out[k]);
            tflb.host->free(out);
            return NULL;
        }
    }
    return out;
}

/* Every port's type must be one a tensor can carry, or no run could work. */
static int checkTypes(const TflIface *io, RAI_Error *err) {
    for (size_t p = 0; p < io->nin; p++) {
        RAI_DType dt;
        if (!RAI_DTypeFromFramework(column, io->in[p].type, &dt)) {
            tflb.host->error_set(err, io->in[p].type == TFL_TYPE_FLOAT16
                                          ? "Float16 not currently supported as input tensor data type"
                                          : "Unsupported input data type");
            return -1;
        }
    }
    for (size_t p = 0; p < io->nout; p++) {
        RAI_DType dt;
        if (!RAI_DTypeFromFramework(column, io->out[p].type, &dt)) {
            tflb.host->error_set(err, io->out[p].type == TFL_TYPE_FLOAT16
                                          ? "Float16 not currently supported as output tensor data type"
                                          : "Unsupported output data type");
            return -1;
        }
    }
    return 0;
}

void *tfl_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *out, RAI_Error *err) {
    const RAI_HostApi *h = tflb.host;
    char why[1024] = "";
    if (spec->device != RAI_DEVICE_CPU) {
        h->error_set(err, "Failed to set GPU delegate (this TFLITE backend runs on the CPU only)");
        return NULL;
    }
    if (spec->blob_len == 0) {
        h->error_set(err, TFL_LOAD_FAILED);
        return NULL;
    }
    if (TflCheck_Model(tflb.checker, Tfl_LibraryPath(), spec->blob, spec->blob_len,
                       TFL_CHECK_TIMEOUT_MS, why, sizeof(why)) != 0) {
        h->error_set(err, "%s", why);
        return NULL;
    }
    TflRaiModel *m = h->calloc(1, sizeof(*m));
    if (m == NULL || (m->blob = h->alloc(spec->blob_len)) == NULL) {
        h->free(m);
        h->error_set(err, "ERR out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    memcpy(m->blob, spec->blob, spec->blob_len);
    m->len = spec->blob_len;
    m->threads = (int)rai_intra_op_threads(h);
    atomic_fetch_add(&model_count, 1);
    if (tfl.CreateModelFromBuffer(tflb.env, m->blob, m->len, &m->model) != 0) {
        m->model = NULL;
        h->error_set(err, TFL_LOAD_FAILED);
        goto fail;
    }
    if (TflIface_Read(m->model, &m->io, why, sizeof(why)) != 0) {
        h->error_set(err, TFL_LOAD_FAILED " (%s)", why);
        goto fail;
    }
    if (checkTypes(&m->io, err) != 0) goto fail;
    /* One instance now: a model that does not compile is refused at store. */
    m->idle = TflInstance_Create(tflb.env, m->model, &m->io, m->threads, why, sizeof(why));
    if (m->idle == NULL) {
        h->error_set(err, TFL_CONSTRUCT_FAILED " (%s)", why);
        goto fail;
    }
    atomic_fetch_add(&instance_count, 1);
    out->inputs = names(m->io.in, m->io.nin);
    out->outputs = names(m->io.out, m->io.nout);
    if (out->inputs == NULL || out->outputs == NULL) {
        for (size_t i = 0; out->inputs && i < m->io.nin; i++) h->free(out->inputs[i]);
        for (size_t i = 0; out->outputs && i < m->io.nout; i++) h->free(out->outputs[i]);
        h->free(out->inputs);
        h->free(out->outputs);
        out->inputs = out->outputs = NULL;
        h->error_set(err, "ERR out of memory");
        goto fail;
    }
    out->ninputs = m->io.nin;
    out->noutputs = m->io.nout;
    return m;

fail:
    atomic_fetch_sub(&model_count, 1);
    freeModel(m);
    return NULL;
}

void tfl_model_free(void *model) {
    if (model == NULL) return;
    atomic_fetch_sub(&model_count, 1);
    freeModel(model);
}

static TflInstance *takeInstance(TflRaiModel *m, char *why, size_t whylen) {
    pthread_mutex_lock(&m->mu);
    TflInstance *in = m->idle;
    if (in) m->idle = in->next;
    pthread_mutex_unlock(&m->mu);
    if (in) return in;
    in = TflInstance_Create(tflb.env, m->model, &m->io, m->threads, why, whylen);
    if (in) atomic_fetch_add(&instance_count, 1);
    return in;
}

static void giveBack(TflRaiModel *m, TflInstance *in) {
    pthread_mutex_lock(&m->mu);
    in->next = m->idle;
    m->idle = in;
    pthread_mutex_unlock(&m->mu);
}

/* An instance a run failed on is not given back: LiteRT may have left it
 * half-resized. The next run compiles a fresh one. */
static void discard(TflInstance *in) {
    TflInstance_Free(in);
    atomic_fetch_sub(&instance_count, 1);
}

static int checkInput(const TflRaiModel *m, size_t p, RAI_Tensor *t, RAI_Error *err) {
    const RAI_HostApi *h = tflb.host;
    int want = m->io.in[p].type, have = -1;
    if (!RAI_DTypeToFramework(column, h->tensor_dtype(t), &have) || have != want) {
        h->error_set(err, TFL_TYPE_MISMATCH);
        return -1;
    }
    return 0;
}

/* How a run's input shapes map onto the model's: the model's own shapes
 * (one run), or a batch of n of them along the first dimension when the
 * model's first dimension is 1 (n runs, one row each: RedisAI 1.2 resized
 * the interpreter instead, which LiteRT 2.3.0 cannot do safely). 0 with
 * *rows (0: one run as is), or -1 after error_set. */
static int planRows(const TflRaiModel *m, const TflInstance *in, RAI_Tensor *const *inputs,
                    size_t *rows, RAI_Error *err) {
    const RAI_HostApi *h = tflb.host;
    int same = 1, batch = 1;
    int64_t n = -1;
    for (size_t p = 0; p < m->io.nin; p++) {
        const TflLayout *l = &in->in_layout[m->io.in[p].sig];
        int rank = h->tensor_ndims(inputs[p]);
        const int64_t *dims = h->tensor_dims(inputs[p]);
        if (rank != TFL_LAYOUT_RANK(l)) {
            same = batch = 0;
            break;
        }
        for (int d = 0; d < rank; d++) {
            if (dims[d] != l->dims[d]) same = 0;
            if (d > 0 && dims[d] != l->dims[d]) batch = 0;
        }
        if (rank == 0 || l->dims[0] != 1 || (n >= 0 && dims[0] != n)) batch = 0;
        if (rank > 0) n = dims[0];
    }
    if (same) {
        *rows = 0;
        return 0;
    }
    for (size_t p = 0; batch && p < m->io.nout; p++) {
        const TflLayout *l = &in->out_layout[m->io.out[p].sig];
        if (TFL_LAYOUT_RANK(l) == 0 || l->dims[0] != 1) batch = 0;
    }
    if (!batch || n < 1) {
        h->error_set(err, TFL_RESIZE_FAILED " (the model takes its inputs in the shapes it was "
                                            "converted with, or a batch of them along a first "
                                            "dimension of 1)");
        return -1;
    }
    *rows = (size_t)n;
    return 0;
}

static int runOnce(TflRaiModel *m, TflInstance *in, RAI_Tensor *const *inputs, size_t row,
                   size_t rows, RAI_Error *err) {
    const RAI_HostApi *h = tflb.host;
    char why[1024] = "";
    for (size_t p = 0; p < m->io.nin; p++) {
        size_t i = m->io.in[p].sig;
        const char *data = h->tensor_data(inputs[p]);
        memcpy(in->in_mem[i], data + (rows ? row * in->in_bytes[i] : 0), in->in_bytes[i]);
    }
    if (TflInstance_Run(in, why, sizeof(why)) != 0) {
        h->error_set(err, TFL_INVOKE_FAILED " (%s)", why);
        return -1;
    }
    return 0;
}

int tfl_model_run(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                  size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    (void)info;
    TflRaiModel *m = model;
    const RAI_HostApi *h = tflb.host;
    char why[1024] = "";
    if (RAI_CheckRunCounts(h, err, ninputs, m->io.nin, noutputs, m->io.nout) != 0) return -1;
    for (size_t p = 0; p < ninputs; p++) {
        if (checkInput(m, p, inputs[p], err) != 0) return -1;
    }
    TflInstance *in = takeInstance(m, why, sizeof(why));
    if (in == NULL) {
        h->error_set(err, TFL_CONSTRUCT_FAILED " (%s)", why);
        return -1;
    }
    size_t rows = 0;
    if (planRows(m, in, inputs, &rows, err) != 0) {
        giveBack(m, in);
        return -1;
    }
    for (size_t p = 0; p < noutputs; p++) {
        size_t i = m->io.out[p].sig;
        const TflLayout *l = &in->out_layout[i];
        int64_t dims[TFL_MAX_RANK];
        int rank = TFL_LAYOUT_RANK(l);
        for (int d = 0; d < rank; d++) dims[d] = l->dims[d];
        if (rows) dims[0] = (int64_t)rows;
        RAI_DType dt;
        RAI_DTypeFromFramework(column, m->io.out[p].type, &dt);
        outputs[p] = h->tensor_create(dt, dims, rank);
        if (outputs[p] == NULL) {
            h->error_set(err, "ERR could not create an output tensor");
            goto fail;
        }
    }
    for (size_t row = 0; row < (rows ? rows : 1); row++) {
        if (runOnce(m, in, inputs, row, rows, err) != 0) goto fail;
        for (size_t p = 0; p < noutputs; p++) {
            size_t i = m->io.out[p].sig;
            memcpy((char *)h->tensor_data(outputs[p]) + row * in->out_bytes[i], in->out_mem[i],
                   in->out_bytes[i]);
        }
    }
    giveBack(m, in);
    return 0;

fail:
    /* The core releases the outputs made so far. */
    discard(in);
    return -1;
}
