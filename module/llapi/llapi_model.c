/*
 * llapi_model.c - the LLAPI's model functions: models built without a key
 * or read from one, run contexts, and runs, synchronous in the caller's
 * thread or queued on the model's run queue.
 */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/messages.h"
#include "engine/run_queue.h"
#include "llapi/llapi_internal.h"
#include "loader/backend_loader.h"
#include "redisai/reply_texts.h"
#include "types/model_type.h"
#include "types/run_stats.h"

static long long nowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* --------------------------------- create --------------------------------- */

/* MODELSTORE's checks of the batching options. */
static const char *checkOpts(const RAI_ModelOpts *o) {
    if (o->batchsize > LLONG_MAX || o->minbatchsize > LLONG_MAX || o->minbatchtimeout > LLONG_MAX) {
        return RAI_ERR_BATCHSIZE;
    }
    if (o->minbatchsize > 0 && o->batchsize == 0) {
        return RAI_ERR_MINBATCH_WITHOUT_BATCH;
    }
    if (o->minbatchsize > o->batchsize) return RAI_MINBATCH_TOO_LARGE_MSG;
    if (o->minbatchtimeout > 0 && o->minbatchsize == 0) {
        return "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE";
    }
    return NULL;
}

/* A model with no key (so no AI.INFO statistics), built as AI.MODELSTORE
 * builds one: backend 0 (TF), 1 (TFLITE), 2 (TORCH) or 3 (ONNX), loaded on
 * first use (EBACKENDNOTLOADED, with the reason, when that fails;
 * EUNSUPPORTEDBACKEND for any other number); TF needs its input and output
 * names. The per-model parallelism options
 * are ignored: the backends use the module's load-time settings. Needs
 * Redis's global lock (a command, or a thread holding it), as a backend
 * may be loaded and a run queue created. */
RAI_Model *RedisAI_ModelCreate(int backend, char *devicestr, char *tag, RAI_ModelOpts opts,
                               size_t ninputs, const char **inputs, size_t noutputs,
                               const char **outputs, const char *modeldef, size_t modellen,
                               RAI_Error *err) {
    if (backend < RAI_BACKEND_TF || backend > RAI_BACKEND_ONNX) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EUNSUPPORTEDBACKEND, RAI_ERR_UNSUPPORTED_BACKEND);
        return NULL;
    }
    RAI_ModelParams p = {
        .backend = (RAI_BackendKind)backend,
        .device_str = devicestr,
        .tag = tag ? tag : "",
        .tag_len = tag ? strlen(tag) : 0,
        .batchsize = (long long)opts.batchsize,
        .minbatchsize = (long long)opts.minbatchsize,
        .minbatchtimeout = (long long)opts.minbatchtimeout,
        .ninputs = ninputs,
        .inputs = inputs,
        .noutputs = noutputs,
        .outputs = outputs,
    };
    if (devicestr == NULL || !Device_ParseStrict(devicestr, &p.device, &p.device_id)) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELCREATE, RAI_ERR_INVALID_DEVICE);
        return NULL;
    }
    const char *bad = checkOpts(&opts);
    if (bad == NULL && backend == RAI_BACKEND_TF && (ninputs == 0 || inputs == NULL)) {
        bad = RAI_ERR_TF_INPUTS_NOT_SPECIFIED;
    }
    if (bad == NULL && backend == RAI_BACKEND_TF && (noutputs == 0 || outputs == NULL)) {
        bad = RAI_ERR_TF_OUTPUTS_NOT_SPECIFIED;
    }
    if (bad == NULL && ((ninputs && inputs == NULL) || (noutputs && outputs == NULL))) {
        bad = "ERR input or output names missing";
    }
    if (bad == NULL && (modeldef == NULL || modellen == 0)) {
        bad = RAI_ERR_MISSING_BLOB;
    }
    if (bad) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELCREATE, bad);
        return NULL;
    }
    if (Backend_Require(NULL, p.backend, err) == NULL) {
        Error_SetCode(err, RedisAI_ErrorCode_EBACKENDNOTLOADED);
        return NULL;
    }
    char *blob = RedisModule_Alloc(modellen);
    memcpy(blob, modeldef, modellen);
    RAI_Model *m = Model_Create(NULL, &p, blob, modellen, err);
    if (m == NULL) Error_SetCode(err, RedisAI_ErrorCode_EMODELCREATE);
    return m;
}

/* Drops one reference (the model goes with the last one). */
void RedisAI_ModelFree(RAI_Model *model, RAI_Error *err) {
    REDISMODULE_NOT_USED(err);
    Model_Release(model);
}

RAI_Model *RedisAI_ModelGetShallowCopy(RAI_Model *model) {
    return model ? Model_Retain(model) : NULL;
}

/* The model at keyName, borrowed: valid while the key holds it (take a
 * reference with RedisAI_ModelGetShallowCopy to keep it longer). Needs
 * Redis's global lock. */
int RedisAI_GetModelFromKeyspace(RedisModuleCtx *ctx, RedisModuleString *keyName,
                                 RAI_Model **model, int mode, RAI_Error *err) {
    REDISMODULE_NOT_USED(mode); /* a lookup: READ and WRITE find the same */
    RAI_Model *m = Model_FromKey(ctx, keyName, err);
    if (m == NULL) {
        Error_SetCode(err, RedisAI_ErrorCode_EMODELRUN);
        return REDISMODULE_ERR;
    }
    /* Borrowed: the key keeps its own reference. */
    Model_Release(m);
    *model = m;
    return REDISMODULE_OK;
}

/* A copy of the blob the model was built from, to be freed with
 * RedisModule_Free. */
int RedisAI_ModelSerialize(RAI_Model *model, char **buffer, size_t *len, RAI_Error *err) {
    if (model == NULL || buffer == NULL || len == NULL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELSERIALIZE, "ERR no model to serialize");
        return REDISMODULE_ERR;
    }
    *buffer = RedisModule_Alloc(model->blob_len ? model->blob_len : 1);
    memcpy(*buffer, model->blob, model->blob_len);
    *len = model->blob_len;
    return REDISMODULE_OK;
}

RedisModuleType *RedisAI_ModelRedisType(void) {
    return RAI_ModelType;
}

/* ------------------------------ run contexts ------------------------------ */

RAI_ModelRunCtx *RedisAI_ModelRunCtxCreate(RAI_Model *model) {
    if (model == NULL) return NULL;
    RAI_ModelRunCtx *mctx = RedisModule_Calloc(1, sizeof(*mctx));
    mctx->model = Model_Retain(model);
    return mctx;
}

/* Takes a reference to the tensor. The name selects the TF graph input it
 * feeds (one of the model's INPUTS); Torch and ONNX take inputs in the
 * order they are added. Returns 1 (0 without a context or tensor), as 1.2. */
int RedisAI_ModelRunCtxAddInput(RAI_ModelRunCtx *mctx, const char *inputName,
                                RAI_Tensor *inputTensor) {
    if (mctx == NULL || inputTensor == NULL) return 0;
    LLAPIParams_Add(&mctx->inputs, inputName, Tensor_Retain(inputTensor));
    return 1;
}

/* The name selects the TF graph output; others take outputs in order. */
int RedisAI_ModelRunCtxAddOutput(RAI_ModelRunCtx *mctx, const char *outputName) {
    if (mctx == NULL) return 0;
    LLAPIParams_Add(&mctx->outputs, outputName, NULL);
    return 1;
}

size_t RedisAI_ModelRunCtxNumOutputs(RAI_ModelRunCtx *mctx) {
    return mctx ? mctx->outputs.n : 0;
}

/* Borrowed from the context (NULL before a run or out of range). */
RAI_Tensor *RedisAI_ModelRunCtxOutputTensor(RAI_ModelRunCtx *mctx, size_t index) {
    if (mctx == NULL || index >= mctx->outputs.n) return NULL;
    return mctx->outputs.tensors[index];
}

void RedisAI_ModelRunCtxFree(RAI_ModelRunCtx *mctx) {
    if (mctx == NULL) return;
    LLAPIParams_Free(&mctx->inputs);
    LLAPIParams_Free(&mctx->outputs);
    Model_Release(mctx->model);
    RedisModule_Free(mctx);
}

/* ---------------------------------- runs ---------------------------------- */

/* Gives mctx its outputs: outs are the model's, in the model's order. */
static void setOutputs(RAI_ModelRunCtx *mctx, RAI_Tensor **outs, const size_t *out_index) {
    for (size_t k = 0; k < mctx->outputs.n; k++) {
        Tensor_Release(mctx->outputs.tensors[k]);
        mctx->outputs.tensors[k] = Tensor_Retain(outs[out_index[k]]);
    }
}

typedef struct SyncRun {
    long long n;
    size_t nin, nout;
    RAI_Tensor ***ins;  /* per context, model order */
    size_t **out_index; /* per context */
    long long *rows;    /* per context: dim 0 of its inputs (batches) */
} SyncRun;

static void freeSyncRun(SyncRun *r) {
    for (long long k = 0; k < r->n; k++) {
        RedisModule_Free(r->ins[k]);
        RedisModule_Free(r->out_index[k]);
    }
    RedisModule_Free(r->ins);
    RedisModule_Free(r->out_index);
    RedisModule_Free(r->rows);
}

/* Checks the contexts and orders their inputs; for a batch, that they
 * share a model and the count of outputs, and that each context's inputs
 * agree on dim 0. */
static int prepare(RAI_ModelRunCtx **mctxs, SyncRun *r, RAI_Error *err) {
    RAI_Model *m = mctxs[0]->model;
    r->nin = m->ninputs;
    r->nout = mctxs[0]->outputs.n;
    r->ins = RedisModule_Calloc((size_t)r->n, sizeof(RAI_Tensor **));
    r->out_index = RedisModule_Calloc((size_t)r->n, sizeof(size_t *));
    r->rows = RedisModule_Calloc((size_t)r->n, sizeof(long long));
    for (long long k = 0; k < r->n; k++) {
        RAI_ModelRunCtx *c = mctxs[k];
        if (c == NULL || c->model != m || c->outputs.n != r->nout) {
            LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN,
                 "ERR the run contexts of one batch must have the same model and outputs");
            return REDISMODULE_ERR;
        }
        r->ins[k] = RedisModule_Alloc(sizeof(RAI_Tensor *) * (r->nin ? r->nin : 1));
        r->out_index[k] = RedisModule_Alloc(sizeof(size_t) * (r->nout ? r->nout : 1));
        if (LLAPI_ModelOrder(c, r->ins[k], r->out_index[k], err) != REDISMODULE_OK) {
            return REDISMODULE_ERR;
        }
        if (r->n == 1) continue;
        for (size_t i = 0; i < r->nin; i++) {
            const RAI_Tensor *t = r->ins[k][i];
            if (t->ndims == 0 || (i > 0 && t->dims[0] != r->rows[k])) {
                LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN,
                     "ERR the inputs of a batched run must share their first dimension");
                return REDISMODULE_ERR;
            }
            r->rows[k] = t->dims[0];
        }
    }
    return REDISMODULE_OK;
}

/* A run that failed, once per context, each on its model's AI.INFO (a
 * model without a key has none). */
static void countFailed(RAI_ModelRunCtx **mctxs, long long n) {
    for (long long k = 0; k < n; k++) {
        RAI_RunStats *s = mctxs[k] ? mctxs[k]->model->stats : NULL;
        if (s) RunStats_AddRun(s, 0, 0, 0);
    }
}

/* Runs in the calling thread. With n > 1 the contexts (same model) run as
 * one batch, as 1.2 does: each input concatenated along dim 0 across the
 * contexts, each output sliced back. A model stored at a key counts in
 * its AI.INFO like a command's run (one call per context; a failure, the
 * contexts' own included, is an error of each). ONNX refuses
 * synchronous runs, as in 1.2 (MODEL_EXECUTION_TIMEOUT guards its queue
 * runs only). */
int RedisAI_ModelRun(RAI_ModelRunCtx **mctxs, long long n, RAI_Error *err) {
    if (mctxs == NULL || n < 1 || mctxs[0] == NULL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN, "ERR no model run context given");
        return REDISMODULE_ERR;
    }
    RAI_Model *m = mctxs[0]->model;
    SyncRun r = {.n = n};
    RAI_Tensor **ins = NULL, **outs = NULL;
    int rc = REDISMODULE_ERR;
    if (prepare(mctxs, &r, err) != REDISMODULE_OK) goto done;

    long long total = 0;
    ins = RedisModule_Calloc(r.nin ? r.nin : 1, sizeof(RAI_Tensor *));
    outs = RedisModule_Calloc(r.nout ? r.nout : 1, sizeof(RAI_Tensor *));
    for (size_t i = 0; i < r.nin; i++) {
        if (n == 1) {
            ins[i] = Tensor_Retain(r.ins[0][i]);
            continue;
        }
        RAI_Tensor **column = RedisModule_Alloc(sizeof(RAI_Tensor *) * (size_t)n);
        for (long long k = 0; k < n; k++) column[k] = r.ins[k][i];
        ins[i] = Tensor_ConcatRows(column, (size_t)n);
        RedisModule_Free(column);
        if (ins[i] == NULL) {
            LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN,
                 "ERR the inputs of a batched run differ in type or shape");
            goto done;
        }
    }
    for (long long k = 0; k < n; k++) total += r.rows[k];

    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    info.key = RunStats_Key(m->stats, &info.key_len);
    long long start = nowUs();
    int run = m->be->model_run(m->handle, &info, ins, r.nin, outs, r.nout, err);
    long long duration = nowUs() - start;
    for (size_t j = 0; run == 0 && j < r.nout; j++) {
        if (outs[j] == NULL) {
            Error_Set(err, RAI_ERR_OUTPUT_COUNT);
            run = -1;
        } else if (n > 1 && (outs[j]->ndims == 0 || outs[j]->dims[0] != total)) {
            Error_Set(err, RAI_ERR_BATCH_SIZE);
            run = -1;
        }
    }
    if (run != 0) {
        Error_Set(err, RAI_ERR_RUN_FAILED);
        Error_SetCode(err, RedisAI_ErrorCode_EMODELRUN);
        goto done;
    }
    long long from = 0;
    RAI_Tensor **part = RedisModule_Calloc(r.nout ? r.nout : 1, sizeof(RAI_Tensor *));
    for (long long k = 0; k < n; k++) {
        for (size_t j = 0; j < r.nout; j++) {
            part[j] = n == 1 ? Tensor_Retain(outs[j]) : Tensor_SliceRows(outs[j], from, r.rows[k]);
        }
        from += r.rows[k];
        setOutputs(mctxs[k], part, r.out_index[k]);
        if (m->stats) {
            long long samples = r.nout > 0 && part[0]->ndims > 0 ? part[0]->dims[0] : 0;
            RunStats_AddRun(m->stats, 1, duration, samples);
        }
        for (size_t j = 0; j < r.nout; j++) Tensor_Release(part[j]);
    }
    RedisModule_Free(part);
    rc = REDISMODULE_OK;

done:
    if (rc != REDISMODULE_OK) countFailed(mctxs, n);
    for (size_t i = 0; ins && i < r.nin; i++) Tensor_Release(ins[i]);
    for (size_t j = 0; outs && j < r.nout; j++) Tensor_Release(outs[j]);
    RedisModule_Free(ins);
    RedisModule_Free(outs);
    freeSyncRun(&r);
    return rc;
}

/* Queues the run on the model's run queue, where it batches with the
 * commands' runs of the same model; callback runs on the worker thread
 * that finishes it (see llapi_dag.c). REDISMODULE_ERR (and no callback)
 * only without a context or callback. */
int RedisAI_ModelRunAsync(RAI_ModelRunCtx *mctxs, RAI_OnFinishCB DAGAsyncFinish,
                          void *private_data) {
    if (mctxs == NULL || DAGAsyncFinish == NULL) return REDISMODULE_ERR;
    RAI_OnFinishCtx *f = RedisModule_Calloc(1, sizeof(*f));
    f->kind = LLAPI_RUN_MODEL;
    f->cb = DAGAsyncFinish;
    f->private_data = private_data;
    f->mctx = mctxs;
    Error_Init(&f->err);
    f->dag = Dag_New();
    return LLAPI_StartRun(f);
}

/* In the callback of ModelRunAsync: the run's context, its outputs set;
 * err gets the run's error, if any. */
RAI_ModelRunCtx *RedisAI_GetAsModelRunCtx(RAI_OnFinishCtx *ctx, RAI_Error *err) {
    if (ctx == NULL || ctx->kind != LLAPI_RUN_MODEL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EFINISHCTX, "Finish ctx is not a model run ctx");
        return NULL;
    }
    if (Error_IsSet(&ctx->err) && err && !Error_IsSet(err)) RedisAI_CloneError(err, &ctx->err);
    return ctx->mctx;
}
