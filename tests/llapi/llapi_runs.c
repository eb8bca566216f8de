/* llapi_runs.c: models and scripts through the LLAPI, run synchronously and asynchronously.
 *
 *   LLAPI.MODELRUN model_key INPUTS n key... OUTPUTS m name...        ModelRun, caller's thread
 *   LLAPI.MODELRUN_ASYNC model_key INPUTS n key... OUTPUTS m name...  ModelRunAsync
 *   LLAPI.MODELRUN_BATCH model_key INPUTS n key... OUTPUTS m name...  ModelRun of two run
 *       contexts at once (the same inputs): [[outputs of the first], [outputs of the second]]
 *   LLAPI.MODELCREATE backend device blob [BATCHSIZE b] [ROUNDTRIP] [ASYNC]
 *       INPUTS n key... OUTPUTS m name...   ModelCreate (no key; backend by name or number),
 *       ROUNDTRIP: ModelSerialize then ModelCreate from the bytes; run sync or async
 *   LLAPI.MODELSERIALIZE model_key            -> the bytes of ModelSerialize
 *   LLAPI.SCRIPTRUN script_key fn INPUTS n key... [LIST n key...] OUTPUTS m      ScriptRun
 *   LLAPI.SCRIPTRUN_ASYNC script_key fn ... (same)                               ScriptRunAsync
 *   LLAPI.SCRIPTCREATE device source fn [ASYNC] INPUTS n key... [LIST n key...] OUTPUTS m
 *
 * Inputs are tensor keys; a model input's name is its key's name (TF needs the placeholder
 * names, the other backends ignore them). The reply is the array of output tensors, or the
 * error "<CODE> <message>". Models and scripts from the keyspace come from
 * GetModelFromKeyspace / GetScriptFromKeyspace, as AI.MODELSTORE / AI.SCRIPTSTORE left them.
 *
 * An asynchronous run blocks the client; RedisAI calls the finish callback when the run is
 * done, which recovers the run context with GetAsModelRunCtx / GetAsScriptRunCtx (and checks
 * that asking for the other kind fails with EFINISHCTX), then unblocks the client; the reply
 * is written on the main thread.
 */
#include "llapitest.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------------------------
 * Arguments: INPUTS n key... [LIST n key...] OUTPUTS m [name...]
 * ------------------------------------------------------------------------------------------ */

typedef struct IOSpec {
    int ninputs;
    RedisModuleString **inputs;
    int nlist;
    RedisModuleString **list;
    int noutputs;
    RedisModuleString **outputs; /* names, or NULL when only the count is given */
} IOSpec;

/* Reads "<keyword> n" at argv[*at] and the n arguments after it. */
static int ParseGroup(RedisModuleString **argv, int argc, int *at, const char *keyword,
                      int *n, RedisModuleString ***items) {
    long long count;
    if (*at + 1 >= argc || strcasecmp(RedisModule_StringPtrLen(argv[*at], NULL), keyword) ||
        RedisModule_StringToLongLong(argv[*at + 1], &count) != REDISMODULE_OK || count < 0 ||
        count > argc - *at - 2) {
        return REDISMODULE_ERR;
    }
    *n = (int)count;
    *items = argv + *at + 2;
    *at += 2 + (int)count;
    return REDISMODULE_OK;
}

static int ParseIO(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int at,
                   int named_outputs, IOSpec *io) {
    memset(io, 0, sizeof(*io));
    if (ParseGroup(argv, argc, &at, "INPUTS", &io->ninputs, &io->inputs) != REDISMODULE_OK) {
        goto bad;
    }
    if (at < argc && !strcasecmp(RedisModule_StringPtrLen(argv[at], NULL), "LIST") &&
        ParseGroup(argv, argc, &at, "LIST", &io->nlist, &io->list) != REDISMODULE_OK) {
        goto bad;
    }
    if (named_outputs) {
        if (ParseGroup(argv, argc, &at, "OUTPUTS", &io->noutputs, &io->outputs) != REDISMODULE_OK) {
            goto bad;
        }
    } else {
        long long m;
        if (at + 2 != argc || strcasecmp(RedisModule_StringPtrLen(argv[at], NULL), "OUTPUTS") ||
            RedisModule_StringToLongLong(argv[at + 1], &m) != REDISMODULE_OK || m < 0) {
            goto bad;
        }
        io->noutputs = (int)m;
        at += 2;
    }
    if (at == argc) return REDISMODULE_OK;
bad:
    RedisModule_ReplyWithError(ctx, "ERR expected INPUTS n key... [LIST n key...] OUTPUTS m ...");
    return REDISMODULE_ERR;
}

/* The tensors of n keys (borrowed from the keys), or NULL with an error sent. */
static RAI_Tensor **KeyTensors(RedisModuleCtx *ctx, RedisModuleString **keys, int n) {
    RAI_Tensor **ts = RedisModule_Calloc(n + 1, sizeof(*ts));
    for (int i = 0; i < n; i++) {
        ts[i] = LLT_KeyTensor(ctx, keys[i]);
        if (ts[i] == NULL) {
            RedisModule_Free(ts);
            return NULL;
        }
    }
    return ts;
}

/* getkeys-api: the key at 1 (when the command has one) and those after INPUTS and LIST. */
static void ReportKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int first_key) {
    if (first_key) RedisModule_KeyAtPos(ctx, 1);
    for (int i = 1; i + 1 < argc; i++) {
        const char *word = RedisModule_StringPtrLen(argv[i], NULL);
        long long n;
        if ((!strcasecmp(word, "INPUTS") || !strcasecmp(word, "LIST")) &&
            RedisModule_StringToLongLong(argv[i + 1], &n) == REDISMODULE_OK) {
            for (long long k = 0; k < n && i + 2 + k < argc; k++) {
                RedisModule_KeyAtPos(ctx, (int)(i + 2 + k));
            }
            i += 1 + (int)n;
        }
    }
}

/* ------------------------------------------------------------------------------------------
 * A run, its replies and its asynchronous completion
 * ------------------------------------------------------------------------------------------ */

typedef struct RunJob {
    RedisModuleBlockedClient *bc;
    RAI_ModelRunCtx *mctx;
    RAI_ScriptRunCtx *sctx;
    void *queued_ctx;      /* the run context handed to Run*Async, to compare */
    RAI_Error *err;
    int other_kind_null;   /* GetAs<other kind>RunCtx returned NULL ... */
    int other_kind_code;   /* ... with this code */
} RunJob;

static RunJob *JobCreate(void) {
    RunJob *job = RedisModule_Calloc(1, sizeof(*job));
    RedisAI_InitError(&job->err);
    return job;
}

static void JobFree(RunJob *job) {
    if (job->mctx) RedisAI_ModelRunCtxFree(job->mctx);
    if (job->sctx) RedisAI_ScriptRunCtxFree(job->sctx);
    RedisAI_FreeError(job->err);
    RedisModule_Free(job);
}

static void ReplyModelOutputs(RedisModuleCtx *ctx, RAI_ModelRunCtx *mctx) {
    size_t n = RedisAI_ModelRunCtxNumOutputs(mctx);
    RedisModule_ReplyWithArray(ctx, n);
    for (size_t i = 0; i < n; i++) LLT_ReplyTensor(ctx, RedisAI_ModelRunCtxOutputTensor(mctx, i));
}

static void ReplyScriptOutputs(RedisModuleCtx *ctx, RAI_ScriptRunCtx *sctx) {
    size_t n = RedisAI_ScriptRunCtxNumOutputs(sctx);
    RedisModule_ReplyWithArray(ctx, n);
    for (size_t i = 0; i < n; i++) LLT_ReplyTensor(ctx, RedisAI_ScriptRunCtxOutputTensor(sctx, i));
}

/* The reply of a finished run: its error, or its outputs. */
static int ReplyRun(RedisModuleCtx *ctx, RunJob *job, int rc) {
    int code = RedisAI_GetErrorCode(job->err);
    if (rc != REDISMODULE_OK || code != RedisAI_ErrorCode_OK) {
        if (code == RedisAI_ErrorCode_OK) {
            return RedisModule_ReplyWithError(ctx, "ERR the run failed but its error has code OK");
        }
        return LLT_ReplyRAIError(ctx, job->err);
    }
    if (job->mctx) ReplyModelOutputs(ctx, job->mctx);
    else ReplyScriptOutputs(ctx, job->sctx);
    return REDISMODULE_OK;
}

static int AsyncReply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    RunJob *job = RedisModule_GetBlockedClientPrivateData(ctx);
    void *got = job->mctx ? (void *)job->mctx : (void *)job->sctx;
    if (got != job->queued_ctx) {
        return RedisModule_ReplyWithError(
            ctx, "ERR GetAs*RunCtx did not return the run context given to Run*Async");
    }
    if (!job->other_kind_null || job->other_kind_code != RedisAI_ErrorCode_EFINISHCTX) {
        char msg[128];
        snprintf(msg, sizeof(msg), "ERR GetAs*RunCtx of the other kind: %s, code %s",
                 job->other_kind_null ? "NULL" : "not NULL", LLT_CodeName(job->other_kind_code));
        return RedisModule_ReplyWithError(ctx, msg);
    }
    return ReplyRun(ctx, job, REDISMODULE_OK);
}

static void AsyncFree(RedisModuleCtx *ctx, void *privdata) {
    (void)ctx;
    JobFree(privdata);
}

/* Finish callbacks, on RedisAI's run thread: only the LLAPI and UnblockClient are used. */
static void ModelRunDone(RAI_OnFinishCtx *fctx, void *private_data) {
    RunJob *job = private_data;
    RAI_Error *other;
    RedisAI_InitError(&other);
    job->other_kind_null = RedisAI_GetAsScriptRunCtx(fctx, other) == NULL;
    job->other_kind_code = RedisAI_GetErrorCode(other);
    RedisAI_FreeError(other);
    job->mctx = RedisAI_GetAsModelRunCtx(fctx, job->err);
    RedisModule_UnblockClient(job->bc, job);
}

static void ScriptRunDone(RAI_OnFinishCtx *fctx, void *private_data) {
    RunJob *job = private_data;
    RAI_Error *other;
    RedisAI_InitError(&other);
    job->other_kind_null = RedisAI_GetAsModelRunCtx(fctx, other) == NULL;
    job->other_kind_code = RedisAI_GetErrorCode(other);
    RedisAI_FreeError(other);
    job->sctx = RedisAI_GetAsScriptRunCtx(fctx, job->err);
    RedisModule_UnblockClient(job->bc, job);
}

/* Runs the job's context (job->mctx or job->sctx) now or on RedisAI's queue, and replies
 * (now, or from AsyncReply). Takes the job. */
static int StartRun(RedisModuleCtx *ctx, RunJob *job, int async) {
    if (!async) {
        int rc = job->mctx ? RedisAI_ModelRun(&job->mctx, 1, job->err)
                           : RedisAI_ScriptRun(job->sctx, job->err);
        ReplyRun(ctx, job, rc);
        JobFree(job);
        return REDISMODULE_OK;
    }
    job->bc = RedisModule_BlockClient(ctx, AsyncReply, NULL, AsyncFree, 0);
    /* From here the context belongs to RedisAI until the finish callback hands it back. */
    int rc;
    if (job->mctx) {
        job->queued_ctx = job->mctx;
        job->mctx = NULL;
        rc = RedisAI_ModelRunAsync(job->queued_ctx, ModelRunDone, job);
    } else {
        job->queued_ctx = job->sctx;
        job->sctx = NULL;
        rc = RedisAI_ScriptRunAsync(job->queued_ctx, ScriptRunDone, job);
    }
    if (rc != REDISMODULE_OK) {
        RedisModule_AbortBlock(job->bc);
        RedisModule_ReplyWithError(ctx, "ERR Run*Async refused the run");
        RedisAI_FreeError(job->err);
        RedisModule_Free(job); /* the context stays RedisAI's: it refused it, it frees it */
    }
    return REDISMODULE_OK;
}

/* ------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------ */

/* A run context on model with the IO spec's inputs (named by their keys) and outputs. */
static RAI_ModelRunCtx *ModelContext(RAI_Model *model, IOSpec *io, RAI_Tensor **inputs) {
    RAI_ModelRunCtx *mctx = RedisAI_ModelRunCtxCreate(model);
    for (int i = 0; i < io->ninputs; i++) {
        LLT_EXPECT(RedisAI_ModelRunCtxAddInput(mctx, RedisModule_StringPtrLen(io->inputs[i], NULL),
                                               inputs[i]), 1);
    }
    for (int i = 0; i < io->noutputs; i++) {
        LLT_EXPECT(RedisAI_ModelRunCtxAddOutput(mctx, RedisModule_StringPtrLen(io->outputs[i], NULL)), 1);
    }
    return mctx;
}

/* LLAPI.MODELRUN, LLAPI.MODELRUN_ASYNC and LLAPI.MODELRUN_BATCH. */
static int ModelRunGeneric(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int mode) {
    enum { SYNC, ASYNC, BATCH };
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        ReportKeys(ctx, argv, argc, 1);
        return REDISMODULE_OK;
    }
    if (argc < 6) return RedisModule_WrongArity(ctx);
    IOSpec io;
    if (ParseIO(ctx, argv, argc, 2, 1, &io) != REDISMODULE_OK) return REDISMODULE_OK;
    RAI_Tensor **inputs = KeyTensors(ctx, io.inputs, io.ninputs);
    if (inputs == NULL) return REDISMODULE_OK;

    RunJob *job = JobCreate();
    RAI_Model *model = NULL;
    if (RedisAI_GetModelFromKeyspace(ctx, argv[1], &model, REDISMODULE_READ, job->err) !=
        REDISMODULE_OK) {
        LLT_ReplyRAIError(ctx, job->err);
        JobFree(job);
        RedisModule_Free(inputs);
        return REDISMODULE_OK;
    }
    job->mctx = ModelContext(model, &io, inputs);
    if (mode != BATCH) {
        RedisModule_Free(inputs);
        return StartRun(ctx, job, mode == ASYNC);
    }
    RAI_ModelRunCtx *mctxs[2] = {job->mctx, ModelContext(model, &io, inputs)};
    RedisModule_Free(inputs);
    if (RedisAI_ModelRun(mctxs, 2, job->err) != REDISMODULE_OK) {
        LLT_ReplyRAIError(ctx, job->err);
    } else {
        RedisModule_ReplyWithArray(ctx, 2);
        ReplyModelOutputs(ctx, mctxs[0]);
        ReplyModelOutputs(ctx, mctxs[1]);
    }
    RedisAI_ModelRunCtxFree(mctxs[1]);
    JobFree(job);
    return REDISMODULE_OK;
}

static int ModelRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return ModelRunGeneric(ctx, argv, argc, 0);
}

static int ModelRunAsync_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return ModelRunGeneric(ctx, argv, argc, 1);
}

static int ModelRunBatch_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return ModelRunGeneric(ctx, argv, argc, 2);
}

static int BackendNumber(RedisModuleString *arg, long long *backend) {
    static const char *const names[] = {"TF", "TFLITE", "TORCH", "ONNX"};
    const char *s = RedisModule_StringPtrLen(arg, NULL);
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, names[i])) {
            *backend = i;
            return REDISMODULE_OK;
        }
    }
    return RedisModule_StringToLongLong(arg, backend);
}

static int ModelCreate_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        ReportKeys(ctx, argv, argc, 0);
        return REDISMODULE_OK;
    }
    if (argc < 8) return RedisModule_WrongArity(ctx);
    long long backend, batchsize = 0;
    int roundtrip = 0, async = 0, at = 4;
    if (BackendNumber(argv[1], &backend) != REDISMODULE_OK) {
        return RedisModule_ReplyWithError(ctx, "ERR backend: TF, TFLITE, TORCH, ONNX or a number");
    }
    for (; at < argc; at++) {
        const char *opt = RedisModule_StringPtrLen(argv[at], NULL);
        if (!strcasecmp(opt, "ROUNDTRIP")) {
            roundtrip = 1;
        } else if (!strcasecmp(opt, "ASYNC")) {
            async = 1;
        } else if (!strcasecmp(opt, "BATCHSIZE") && at + 1 < argc &&
                   RedisModule_StringToLongLong(argv[at + 1], &batchsize) == REDISMODULE_OK) {
            at++;
        } else {
            break;
        }
    }
    IOSpec io;
    if (ParseIO(ctx, argv, argc, at, 1, &io) != REDISMODULE_OK) return REDISMODULE_OK;
    RAI_Tensor **inputs = KeyTensors(ctx, io.inputs, io.ninputs);
    if (inputs == NULL) return REDISMODULE_OK;

    const char **in_names = RedisModule_Calloc(io.ninputs + 1, sizeof(char *));
    const char **out_names = RedisModule_Calloc(io.noutputs + 1, sizeof(char *));
    for (int i = 0; i < io.ninputs; i++) in_names[i] = RedisModule_StringPtrLen(io.inputs[i], NULL);
    for (int i = 0; i < io.noutputs; i++) out_names[i] = RedisModule_StringPtrLen(io.outputs[i], NULL);
    char device[64], tag[] = "llapi";
    snprintf(device, sizeof(device), "%s", RedisModule_StringPtrLen(argv[2], NULL));
    RAI_ModelOpts opts = {
        .batchsize = (size_t)batchsize,
        .minbatchsize = 0,
        .minbatchtimeout = 0,
        .backends_intra_op_parallelism = 0,
        .backends_inter_op_parallelism = 0,
    };
    size_t bloblen;
    const char *blob = RedisModule_StringPtrLen(argv[3], &bloblen);

    RunJob *job = JobCreate();
    RAI_Model *model = RedisAI_ModelCreate((int)backend, device, tag, opts, io.ninputs, in_names,
                                           io.noutputs, out_names, blob, bloblen, job->err);
    if (model != NULL && roundtrip) {
        char *bytes = NULL;
        size_t len = 0;
        RAI_Model *again = NULL;
        if (RedisAI_ModelSerialize(model, &bytes, &len, job->err) == REDISMODULE_OK) {
            again = RedisAI_ModelCreate((int)backend, device, tag, opts, io.ninputs, in_names,
                                        io.noutputs, out_names, bytes, len, job->err);
        }
        if (bytes) RedisModule_Free(bytes);
        RedisAI_ModelFree(model, job->err);
        model = again;
    }
    RedisModule_Free(in_names);
    RedisModule_Free(out_names);
    if (model == NULL) {
        LLT_ReplyRAIError(ctx, job->err);
        JobFree(job);
        RedisModule_Free(inputs);
        return REDISMODULE_OK;
    }
    /* Only the run context's own reference keeps the model alive during the run. */
    RAI_Model *copy = RedisAI_ModelGetShallowCopy(model);
    RedisAI_ModelFree(model, job->err);
    job->mctx = ModelContext(copy, &io, inputs);
    RedisAI_ModelFree(copy, job->err);
    RedisModule_Free(inputs);
    return StartRun(ctx, job, async);
}

static int ModelSerialize_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RAI_Error *err;
    RedisAI_InitError(&err);
    RAI_Model *model = NULL;
    char *bytes = NULL;
    size_t len = 0;
    if (RedisAI_GetModelFromKeyspace(ctx, argv[1], &model, REDISMODULE_READ, err) != REDISMODULE_OK ||
        RedisAI_ModelSerialize(model, &bytes, &len, err) != REDISMODULE_OK) {
        LLT_ReplyRAIError(ctx, err);
    } else {
        RedisModule_ReplyWithStringBuffer(ctx, bytes, len);
    }
    if (bytes) RedisModule_Free(bytes);
    RedisAI_FreeError(err);
    return REDISMODULE_OK;
}

/* ------------------------------------------------------------------------------------------
 * Scripts
 * ------------------------------------------------------------------------------------------ */

/* LLAPI.SCRIPTRUN / LLAPI.SCRIPTRUN_ASYNC: a stored script, inputs added with the calls
 * that take an error (ScriptRunCtxAddInput, ScriptRunCtxAddInputList). */
static int ScriptRunGeneric(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int async) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        ReportKeys(ctx, argv, argc, 1);
        return REDISMODULE_OK;
    }
    if (argc < 7) return RedisModule_WrongArity(ctx);
    IOSpec io;
    if (ParseIO(ctx, argv, argc, 3, 0, &io) != REDISMODULE_OK) return REDISMODULE_OK;
    RAI_Tensor **inputs = KeyTensors(ctx, io.inputs, io.ninputs);
    if (inputs == NULL) return REDISMODULE_OK;
    RAI_Tensor **list = KeyTensors(ctx, io.list, io.nlist);
    if (list == NULL) {
        RedisModule_Free(inputs);
        return REDISMODULE_OK;
    }
    RunJob *job = JobCreate();
    RAI_Script *script = NULL;
    if (RedisAI_GetScriptFromKeyspace(ctx, argv[1], &script, REDISMODULE_READ, job->err) !=
        REDISMODULE_OK) {
        goto failed;
    }
    job->sctx = RedisAI_ScriptRunCtxCreate(script, RedisModule_StringPtrLen(argv[2], NULL));
    for (int i = 0; i < io.ninputs; i++) {
        LLT_EXPECT(RedisAI_ScriptRunCtxAddInput(job->sctx, inputs[i], job->err), 1);
        if (RedisAI_GetErrorCode(job->err) != RedisAI_ErrorCode_OK) goto failed;
    }
    if (io.nlist > 0) {
        LLT_EXPECT(RedisAI_ScriptRunCtxAddInputList(job->sctx, list, io.nlist, job->err), 1);
        if (RedisAI_GetErrorCode(job->err) != RedisAI_ErrorCode_OK) goto failed;
    }
    for (int i = 0; i < io.noutputs; i++) LLT_EXPECT(RedisAI_ScriptRunCtxAddOutput(job->sctx), 1);
    RedisModule_Free(inputs);
    RedisModule_Free(list);
    return StartRun(ctx, job, async);

failed:
    LLT_ReplyRAIError(ctx, job->err);
    JobFree(job);
    RedisModule_Free(inputs);
    RedisModule_Free(list);
    return REDISMODULE_OK;
}

static int ScriptRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return ScriptRunGeneric(ctx, argv, argc, 0);
}

static int ScriptRunAsync_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return ScriptRunGeneric(ctx, argv, argc, 1);
}

/* LLAPI.SCRIPTCREATE: a script without a key, inputs added with the calls without an error
 * (ScriptRunCtxAddTensorInput, ScriptRunCtxAddTensorInputList). */
static int ScriptCreate_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        ReportKeys(ctx, argv, argc, 0);
        return REDISMODULE_OK;
    }
    if (argc < 8) return RedisModule_WrongArity(ctx);
    int at = 4, async = 0;
    if (!strcasecmp(RedisModule_StringPtrLen(argv[at], NULL), "ASYNC")) {
        async = 1;
        at++;
    }
    IOSpec io;
    if (ParseIO(ctx, argv, argc, at, 0, &io) != REDISMODULE_OK) return REDISMODULE_OK;
    RAI_Tensor **inputs = KeyTensors(ctx, io.inputs, io.ninputs);
    if (inputs == NULL) return REDISMODULE_OK;
    RAI_Tensor **list = KeyTensors(ctx, io.list, io.nlist);
    if (list == NULL) {
        RedisModule_Free(inputs);
        return REDISMODULE_OK;
    }
    char device[64], tag[] = "llapi";
    snprintf(device, sizeof(device), "%s", RedisModule_StringPtrLen(argv[1], NULL));
    RunJob *job = JobCreate();
    RAI_Script *script = RedisAI_ScriptCreate(device, tag, RedisModule_StringPtrLen(argv[2], NULL),
                                              job->err);
    if (script == NULL) {
        LLT_ReplyRAIError(ctx, job->err);
        JobFree(job);
    } else {
        /* Only the run context's own reference keeps the script alive during the run. */
        RAI_Script *copy = RedisAI_ScriptGetShallowCopy(script);
        RedisAI_ScriptFree(script, job->err);
        job->sctx = RedisAI_ScriptRunCtxCreate(copy, RedisModule_StringPtrLen(argv[3], NULL));
        RedisAI_ScriptFree(copy, job->err);
        for (int i = 0; i < io.ninputs; i++) {
            LLT_EXPECT(RedisAI_ScriptRunCtxAddTensorInput(job->sctx, inputs[i]), 1);
        }
        if (io.nlist > 0) {
            LLT_EXPECT(RedisAI_ScriptRunCtxAddTensorInputList(job->sctx, list, io.nlist), 1);
        }
        for (int i = 0; i < io.noutputs; i++) LLT_EXPECT(RedisAI_ScriptRunCtxAddOutput(job->sctx), 1);
        StartRun(ctx, job, async);
    }
    RedisModule_Free(inputs);
    RedisModule_Free(list);
    return REDISMODULE_OK;
}

int LLT_RegisterRunCommands(RedisModuleCtx *ctx) {
    /* Run commands only read keys (outputs are replied, never stored). */
    if (LLT_CreateCommand(ctx, "llapi.modelrun", ModelRun_RedisCommand, "readonly getkeys-api", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.modelrun_async", ModelRunAsync_RedisCommand, "readonly getkeys-api", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.modelrun_batch", ModelRunBatch_RedisCommand, "readonly getkeys-api", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.modelcreate", ModelCreate_RedisCommand, "readonly getkeys-api", 0, 0, 0) ||
        LLT_CreateCommand(ctx, "llapi.modelserialize", ModelSerialize_RedisCommand, "readonly", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.scriptrun", ScriptRun_RedisCommand, "readonly getkeys-api", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.scriptrun_async", ScriptRunAsync_RedisCommand, "readonly getkeys-api", 1, 1, 1) ||
        LLT_CreateCommand(ctx, "llapi.scriptcreate", ScriptCreate_RedisCommand, "readonly getkeys-api", 0, 0, 0)) {
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
