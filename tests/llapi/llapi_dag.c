/* llapi_dag.c: DAGs through the LLAPI, built op by op or parsed from a string.
 *
 *   LLAPI.DAGRUN model_key script_key tensor_key fn [FAIL|RETRY]
 *       a = the tensor at tensor_key (DAGLoadTensor), b = 2 everywhere, same shape, made with
 *       the tensor API (DAGAddTensorSet); c = model(a, b) (DAGCreateModelRunOp); d =
 *       script fn(a, c) (DAGCreateScriptRunOp); DAGAddTensorGet c and d. FAIL gives the
 *       model only `a`, so DAGAddRunOp refuses it. Reply [DAGNumOps, [c, d], what a second
 *       DAGRun of the same DAG answered] or the DAG's error. RETRY adds the model op with
 *       only `a` and no output, then again after adding `b`, then again after adding `c`
 *       (the refused op stays usable), and replies the two refusals as a fourth element.
 *       On the way an op is made and dropped with DAGRunOpFree.
 *   LLAPI.DAGSTRING dag key...
 *       Each key's tensor is loaded under the key's name, then DAGAddOpsFromString(dag)
 *       (an empty dag adds nothing: DAGRun must refuse an empty DAG). Same reply.
 *
 * DAGRun is asynchronous: the client is blocked, the finish callback (RedisAI's thread)
 * reads DAGRunError / DAGGetError / DAGNumOutputs / DAGOutputTensor and unblocks it; the
 * reply and DAGFree happen on the main thread.
 */
#include "llapitest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct DagJob {
    RedisModuleBlockedClient *bc;
    RAI_DAGRunCtx *run;
    size_t numops;
    int failed;
    RAI_Error *err;
    size_t noutputs;
    RAI_Tensor **outputs;
    int try_rerun;   /* LLAPI.DAGRUN: DAGRun again once started, which must be refused */
    char rerun[256]; /* that refusal, "<CODE> <message>" */
    int retried;     /* LLAPI.DAGRUN RETRY: ... */
    char refused[2][256]; /* ... DAGAddRunOp's refusals, "<CODE> <message>" */
} DagJob;

static DagJob *DagJobCreate(void) {
    DagJob *job = RedisModule_Calloc(1, sizeof(*job));
    RedisAI_InitError(&job->err);
    job->run = RedisAI_DAGRunCtxCreate();
    return job;
}

static void DagJobFree(DagJob *job) {
    for (size_t i = 0; i < job->noutputs; i++) {
        if (job->outputs[i]) RedisAI_TensorFree(job->outputs[i]);
    }
    RedisModule_Free(job->outputs);
    RedisAI_DAGFree(job->run);
    RedisAI_FreeError(job->err);
    RedisModule_Free(job);
}

/* On RedisAI's run thread: keep what the reply needs, then unblock. */
static void DagDone(RAI_OnFinishCtx *fctx, void *private_data) {
    DagJob *job = private_data;
    job->failed = RedisAI_DAGRunError(fctx);
    if (job->failed) {
        RedisAI_CloneError(job->err, RedisAI_DAGGetError(fctx));
    } else {
        job->noutputs = RedisAI_DAGNumOutputs(fctx);
        job->outputs = RedisModule_Calloc(job->noutputs + 1, sizeof(RAI_Tensor *));
        for (size_t i = 0; i < job->noutputs; i++) {
            const RAI_Tensor *t = RedisAI_DAGOutputTensor(fctx, i);
            job->outputs[i] = t ? RedisAI_TensorGetShallowCopy((RAI_Tensor *)t) : NULL;
        }
    }
    RedisModule_UnblockClient(job->bc, job);
}

static int DagReply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    DagJob *job = RedisModule_GetBlockedClientPrivateData(ctx);
    if (job->failed) {
        if (RedisAI_GetErrorCode(job->err) == RedisAI_ErrorCode_OK) {
            return RedisModule_ReplyWithError(ctx, "ERR DAGRunError set but DAGGetError is OK");
        }
        return LLT_ReplyRAIError(ctx, job->err);
    }
    RedisModule_ReplyWithArray(ctx, 2 + job->try_rerun + job->retried);
    RedisModule_ReplyWithLongLong(ctx, (long long)job->numops);
    RedisModule_ReplyWithArray(ctx, job->noutputs);
    for (size_t i = 0; i < job->noutputs; i++) {
        if (job->outputs[i]) LLT_ReplyTensor(ctx, job->outputs[i]);
        else RedisModule_ReplyWithNull(ctx);
    }
    if (job->try_rerun) RedisModule_ReplyWithSimpleString(ctx, job->rerun);
    if (job->retried) {
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithSimpleString(ctx, job->refused[0]);
        RedisModule_ReplyWithSimpleString(ctx, job->refused[1]);
    }
    return REDISMODULE_OK;
}

static void DagFreePrivdata(RedisModuleCtx *ctx, void *privdata) {
    (void)ctx;
    DagJobFree(privdata);
}

/* Counts the ops, starts the DAG and replies later; or replies DAGRun's refusal now. */
static int StartDag(RedisModuleCtx *ctx, DagJob *job) {
    job->numops = RedisAI_DAGNumOps(job->run);
    job->bc = RedisModule_BlockClient(ctx, DagReply, NULL, DagFreePrivdata, 0);
    if (RedisAI_DAGRun(job->run, DagDone, job, job->err) != REDISMODULE_OK) {
        RedisModule_AbortBlock(job->bc);
        LLT_ReplyRAIError(ctx, job->err);
        DagJobFree(job);
        return REDISMODULE_OK;
    }
    /* Still on the main thread: the DAG may be running or done, but not freed (that waits
     * for the reply). A second DAGRun must be refused, never queue the DAG twice. */
    if (job->try_rerun) {
        RAI_Error *again;
        RedisAI_InitError(&again);
        if (RedisAI_DAGRun(job->run, DagDone, job, again) == REDISMODULE_OK) {
            RedisModule_Log(ctx, "warning", "llapitest: a second DAGRun was accepted");
            abort(); /* the callback would unblock the client twice */
        }
        const char *msg = RedisAI_GetErrorOneLine(again);
        snprintf(job->rerun, sizeof(job->rerun), "%s %s",
                 LLT_CodeName(RedisAI_GetErrorCode(again)), msg ? msg : "");
        RedisAI_FreeError(again);
    }
    return REDISMODULE_OK;
}

/* A tensor of t's type and shape, every element 2, made with the tensor API. */
static RAI_Tensor *Twos(RAI_Tensor *t) {
    uint32_t raw = (uint32_t)RedisAI_TensorDataType(t);
    uint8_t code = raw & 0xff, bits = (raw >> 8) & 0xff;
    const char *dtype = code == 2 && bits == 32 ? "FLOAT" : code == 2 && bits == 64 ? "DOUBLE" : NULL;
    if (dtype == NULL) return NULL;
    long long dims[8];
    int ndims = RedisAI_TensorNumDims(t);
    if (ndims > 8) return NULL;
    for (int i = 0; i < ndims; i++) dims[i] = RedisAI_TensorDim(t, i);
    RAI_Tensor *twos = RedisAI_TensorCreate(dtype, dims, ndims);
    for (long long i = 0; twos && i < (long long)RedisAI_TensorLength(twos); i++) {
        RedisAI_TensorSetValueFromDouble(twos, i, 2.0);
    }
    return twos;
}

/* "<CODE> <message>" of err into out, and err cleared for the next call. */
static void TakeError(RAI_Error *err, char *out, size_t len) {
    const char *msg = RedisAI_GetErrorOneLine(err);
    snprintf(out, len, "%s %s", LLT_CodeName(RedisAI_GetErrorCode(err)), msg ? msg : "");
    RedisAI_ClearError(err);
}

/* RETRY: mop, with `a` as its only input and no output, is refused twice (first for its
 * inputs, then, once `b` is there, for its outputs) and accepted once `c` is there. */
static int AddModelOpRetrying(DagJob *job, RAI_DAGRunOp *mop) {
    const char *more[2] = {"b", "c"};
    for (int i = 0; i < 2; i++) {
        if (RedisAI_DAGAddRunOp(job->run, mop, job->err) == REDISMODULE_OK) {
            snprintf(job->refused[i], sizeof(job->refused[i]), "accepted");
            return REDISMODULE_OK; /* the reply shows it: the DAG then lacks b or c */
        }
        TakeError(job->err, job->refused[i], sizeof(job->refused[i]));
        if (i == 0) LLT_EXPECT(RedisAI_DAGRunOpAddInput(mop, more[i]), REDISMODULE_OK);
        else LLT_EXPECT(RedisAI_DAGRunOpAddOutput(mop, more[i]), REDISMODULE_OK);
    }
    return RedisAI_DAGAddRunOp(job->run, mop, job->err);
}

static int DagRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5 && argc != 6) return RedisModule_WrongArity(ctx);
    const char *last = argc == 6 ? RedisModule_StringPtrLen(argv[5], NULL) : "";
    int fail = !strcasecmp(last, "FAIL"), retry = !strcasecmp(last, "RETRY");
    if (argc == 6 && !fail && !retry) {
        return RedisModule_ReplyWithError(ctx, "ERR the last argument can be FAIL or RETRY");
    }
    RAI_Tensor *a = LLT_KeyTensor(ctx, argv[3]);
    if (a == NULL) return REDISMODULE_OK;
    RAI_Tensor *b = Twos(a);
    if (b == NULL) return RedisModule_ReplyWithError(ctx, "ERR the tensor must be FLOAT or DOUBLE");

    DagJob *job = DagJobCreate();
    RAI_Model *model = NULL;
    RAI_Script *script = NULL;
    if (RedisAI_GetModelFromKeyspace(ctx, argv[1], &model, REDISMODULE_READ, job->err) != REDISMODULE_OK ||
        RedisAI_GetScriptFromKeyspace(ctx, argv[2], &script, REDISMODULE_READ, job->err) != REDISMODULE_OK) {
        RedisAI_TensorFree(b);
        LLT_ReplyRAIError(ctx, job->err);
        DagJobFree(job);
        return REDISMODULE_OK;
    }
    /* An op made and dropped: the DAG never sees it. */
    RAI_DAGRunOp *unused = RedisAI_DAGCreateModelRunOp(model);
    LLT_EXPECT(RedisAI_DAGRunOpAddInput(unused, "a"), REDISMODULE_OK);
    RedisAI_DAGRunOpFree(unused);

    LLT_EXPECT(RedisAI_DAGLoadTensor(job->run, "a", a), REDISMODULE_OK);
    LLT_EXPECT(RedisAI_DAGAddTensorSet(job->run, "b", b), REDISMODULE_OK);
    RedisAI_TensorFree(b); /* the DAG holds its own reference */

    RAI_DAGRunOp *mop = RedisAI_DAGCreateModelRunOp(model);
    LLT_EXPECT(RedisAI_DAGRunOpAddInput(mop, "a"), REDISMODULE_OK);
    if (!fail && !retry) LLT_EXPECT(RedisAI_DAGRunOpAddInput(mop, "b"), REDISMODULE_OK);
    if (!retry) LLT_EXPECT(RedisAI_DAGRunOpAddOutput(mop, "c"), REDISMODULE_OK);
    RAI_DAGRunOp *sop = RedisAI_DAGCreateScriptRunOp(script, RedisModule_StringPtrLen(argv[4], NULL));
    LLT_EXPECT(RedisAI_DAGRunOpAddInput(sop, "a"), REDISMODULE_OK);
    LLT_EXPECT(RedisAI_DAGRunOpAddInput(sop, "c"), REDISMODULE_OK);
    LLT_EXPECT(RedisAI_DAGRunOpAddOutput(sop, "d"), REDISMODULE_OK);
    job->retried = retry;
    int added = retry ? AddModelOpRetrying(job, mop) : RedisAI_DAGAddRunOp(job->run, mop, job->err);
    if (added != REDISMODULE_OK) {
        RedisAI_DAGRunOpFree(mop);
        RedisAI_DAGRunOpFree(sop);
        goto refused;
    }
    if (RedisAI_DAGAddRunOp(job->run, sop, job->err) != REDISMODULE_OK) {
        RedisAI_DAGRunOpFree(sop);
        goto refused;
    }
    LLT_EXPECT(RedisAI_DAGAddTensorGet(job->run, "c"), REDISMODULE_OK);
    LLT_EXPECT(RedisAI_DAGAddTensorGet(job->run, "d"), REDISMODULE_OK);
    job->try_rerun = 1;
    return StartDag(ctx, job);

refused:
    LLT_ReplyRAIError(ctx, job->err);
    DagJobFree(job);
    return REDISMODULE_OK;
}

static int DagString_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    for (int i = 2; i < argc; i++) {
        if (LLT_KeyTensor(ctx, argv[i]) == NULL) return REDISMODULE_OK;
    }
    DagJob *job = DagJobCreate();
    for (int i = 2; i < argc; i++) {
        LLT_EXPECT(RedisAI_DAGLoadTensor(job->run, RedisModule_StringPtrLen(argv[i], NULL),
                                         LLT_KeyTensor(ctx, argv[i])),
                   REDISMODULE_OK);
    }
    size_t len;
    const char *dag = RedisModule_StringPtrLen(argv[1], &len);
    if (len > 0 && RedisAI_DAGAddOpsFromString(job->run, dag, job->err) != REDISMODULE_OK) {
        LLT_ReplyRAIError(ctx, job->err);
        DagJobFree(job);
        return REDISMODULE_OK;
    }
    return StartDag(ctx, job);
}

int LLT_RegisterDagCommands(RedisModuleCtx *ctx) {
    if (LLT_CreateCommand(ctx, "llapi.dagrun", DagRun_RedisCommand, "readonly", 1, 3, 1) ||
        LLT_CreateCommand(ctx, "llapi.dagstring", DagString_RedisCommand, "readonly", 2, -1, 1)) {
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
