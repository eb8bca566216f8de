/* llapi_impl_module.c: the module `llapiimpl`, a second client of RedisAI's LLAPI for
 * tests/lowlevel_api/test_llapi_impl.py: what the implementation promises beyond the calls
 * themselves
 * (tests/llapi/ covers every function).
 *
 *   LLAPIIMPL.THREADS model a b nthreads nruns [UNFIT]
 *       nthreads threads of this module run the model synchronously nruns times each, with
 *       Redis's lock released; UNFIT: every second run of each thread gives only `a`, so it
 *       must fail -> [runs that succeeded, runs whose output was a + b (FLOAT), runs that
 *       failed]
 *   LLAPIIMPL.LATELOAD model a b [NOLOAD]
 *       a DAG string that reads x and y is added BEFORE x and y are loaded; a bad string added
 *       in between must leave the DAG as it was; y loaded twice is refused. NOLOAD: y is never
 *       loaded, so DAGRun must fail. -> [ops after the bad string, the bad string's code,
 *       second load's rc, the output's values]
 *   LLAPIIMPL.EARLYFREE model a b
 *       DAGRun, then DAGFree at once, before the run ends; the callback still reads the output
 *       -> [the callback ran on Redis's main thread (0/1), the output's values]
 *   LLAPIIMPL.SCRIPTSYNC script fn a
 *       ScriptRun on the main thread of a function that calls redis.execute -> its output's
 *       values
 */
#define REDISAI_LLAPI_CLIENT_IMPL
/* The LLAPI header's old path, kept for existing clients: a one-line include
 * of redisai/llapi.h. This module uses it so that the old path is built. */
#include "redisai_llapi.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

static pthread_t main_thread;

static int replyError(RedisModuleCtx *ctx, RAI_Error *err) {
    char buf[512];
    snprintf(buf, sizeof(buf), "E%d %s", (int)RedisAI_GetErrorCode(err),
             RedisAI_GetErrorOneLine(err) ? RedisAI_GetErrorOneLine(err) : "(none)");
    return RedisModule_ReplyWithError(ctx, buf);
}

/* The tensor at a key, borrowed; NULL after an error reply. */
static RAI_Tensor *keyTensor(RedisModuleCtx *ctx, RedisModuleString *name) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ);
    RAI_Tensor *t = NULL;
    if (RedisModule_ModuleTypeGetType(key) == RedisAI_TensorRedisType()) {
        t = RedisModule_ModuleTypeGetValue(key);
    } else {
        RedisModule_ReplyWithError(ctx, "ERR not a tensor key");
    }
    RedisModule_CloseKey(key);
    return t;
}

static void replyValues(RedisModuleCtx *ctx, const RAI_Tensor *ct) {
    RAI_Tensor *t = (RAI_Tensor *)ct;
    if (t == NULL) {
        RedisModule_ReplyWithNull(ctx);
        return;
    }
    size_t n = RedisAI_TensorLength(t);
    RedisModule_ReplyWithArray(ctx, (long)n);
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        RedisAI_TensorGetValueAsDouble(t, (long long)i, &v);
        RedisModule_ReplyWithDouble(ctx, v);
    }
}

/* ----------------------------------- THREADS ----------------------------------- */

typedef struct ThreadJob {
    RAI_Model *model; /* a reference */
    RAI_Tensor *a, *b; /* references */
    int nthreads, nruns;
    int unfit;               /* every second run without b */
    int ok, correct, failed; /* atomic */
    RedisModuleBlockedClient *bc;
} ThreadJob;

static void *runner(void *arg) {
    ThreadJob *job = arg;
    for (int r = 0; r < job->nruns; r++) {
        RAI_Error *err;
        RedisAI_InitError(&err);
        RAI_ModelRunCtx *mctx = RedisAI_ModelRunCtxCreate(job->model);
        RedisAI_ModelRunCtxAddInput(mctx, "a", job->a);
        if (!job->unfit || r % 2 == 0) RedisAI_ModelRunCtxAddInput(mctx, "b", job->b);
        RedisAI_ModelRunCtxAddOutput(mctx, "c");
        if (RedisAI_ModelRun(&mctx, 1, err) != REDISMODULE_OK) {
            __atomic_add_fetch(&job->failed, 1, __ATOMIC_RELAXED);
        } else {
            __atomic_add_fetch(&job->ok, 1, __ATOMIC_RELAXED);
            RAI_Tensor *c = RedisAI_ModelRunCtxOutputTensor(mctx, 0);
            size_t n = RedisAI_TensorLength(c);
            int same = n == RedisAI_TensorLength(job->a);
            for (size_t i = 0; same && i < n; i++) {
                double x, y, z;
                same = RedisAI_TensorGetValueAsDouble(job->a, (long long)i, &x) &&
                       RedisAI_TensorGetValueAsDouble(job->b, (long long)i, &y) &&
                       RedisAI_TensorGetValueAsDouble(c, (long long)i, &z) && x + y == z;
            }
            if (same) __atomic_add_fetch(&job->correct, 1, __ATOMIC_RELAXED);
        }
        RedisAI_ModelRunCtxFree(mctx);
        RedisAI_FreeError(err);
    }
    return NULL;
}

/* Starts the runners and waits for them, off Redis's main thread. */
static void *supervisor(void *arg) {
    ThreadJob *job = arg;
    pthread_t threads[64];
    for (int i = 0; i < job->nthreads; i++) pthread_create(&threads[i], NULL, runner, job);
    for (int i = 0; i < job->nthreads; i++) pthread_join(threads[i], NULL);
    RedisModule_UnblockClient(job->bc, job);
    return NULL;
}

static int threadsReply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    ThreadJob *job = RedisModule_GetBlockedClientPrivateData(ctx);
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, job->ok);
    RedisModule_ReplyWithLongLong(ctx, job->correct);
    RedisModule_ReplyWithLongLong(ctx, job->failed);
    return REDISMODULE_OK;
}

static void threadsFree(RedisModuleCtx *ctx, void *privdata) {
    REDISMODULE_NOT_USED(ctx);
    ThreadJob *job = privdata;
    RAI_Error *err;
    RedisAI_InitError(&err);
    RedisAI_ModelFree(job->model, err);
    RedisAI_FreeError(err);
    RedisAI_TensorFree(job->a);
    RedisAI_TensorFree(job->b);
    RedisModule_Free(job);
}

static int Threads_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 6 && argc != 7) return RedisModule_WrongArity(ctx);
    int unfit = argc == 7 && !strcasecmp(RedisModule_StringPtrLen(argv[6], NULL), "UNFIT");
    if (argc == 7 && !unfit) {
        return RedisModule_ReplyWithError(ctx, "ERR the last argument can be UNFIT");
    }
    long long nthreads, nruns;
    if (RedisModule_StringToLongLong(argv[4], &nthreads) != REDISMODULE_OK || nthreads < 1 ||
        nthreads > 64 || RedisModule_StringToLongLong(argv[5], &nruns) != REDISMODULE_OK ||
        nruns < 1) {
        return RedisModule_ReplyWithError(ctx, "ERR bad counts");
    }
    RAI_Tensor *a = keyTensor(ctx, argv[2]);
    if (a == NULL) return REDISMODULE_OK;
    RAI_Tensor *b = keyTensor(ctx, argv[3]);
    if (b == NULL) return REDISMODULE_OK;
    RAI_Error *err;
    RedisAI_InitError(&err);
    RAI_Model *model;
    if (RedisAI_GetModelFromKeyspace(ctx, argv[1], &model, REDISMODULE_READ, err) != REDISMODULE_OK) {
        replyError(ctx, err);
        RedisAI_FreeError(err);
        return REDISMODULE_OK;
    }
    RedisAI_FreeError(err);
    ThreadJob *job = RedisModule_Calloc(1, sizeof(*job));
    /* Our own references: the threads run without Redis's lock, past the key's life. */
    job->model = RedisAI_ModelGetShallowCopy(model);
    job->a = RedisAI_TensorGetShallowCopy(a);
    job->b = RedisAI_TensorGetShallowCopy(b);
    job->nthreads = (int)nthreads;
    job->nruns = (int)nruns;
    job->unfit = unfit;
    job->bc = RedisModule_BlockClient(ctx, threadsReply, NULL, threadsFree, 0);
    pthread_t t;
    pthread_create(&t, NULL, supervisor, job);
    pthread_detach(t);
    return REDISMODULE_OK;
}

/* ------------------------------------ DAGs -------------------------------------- */

typedef struct DagJob {
    RAI_DAGRunCtx *run;
    RedisModuleBlockedClient *bc;
    RAI_Tensor *out; /* a reference, taken in the callback */
    RAI_Error *err;
    int on_main;
    long long numops, bad_code, second_load;
    int free_early;
} DagJob;

static void dagDone(RAI_OnFinishCtx *fctx, void *private_data) {
    DagJob *job = private_data;
    job->on_main = pthread_equal(pthread_self(), main_thread);
    if (RedisAI_DAGRunError(fctx)) {
        RedisAI_CloneError(job->err, RedisAI_DAGGetError(fctx));
    } else if (RedisAI_DAGNumOutputs(fctx) == 1) {
        job->out = RedisAI_TensorGetShallowCopy((RAI_Tensor *)RedisAI_DAGOutputTensor(fctx, 0));
    }
    RedisModule_UnblockClient(job->bc, job);
}

static int dagReply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    DagJob *job = RedisModule_GetBlockedClientPrivateData(ctx);
    if (RedisAI_GetErrorCode(job->err) != RedisAI_ErrorCode_OK) return replyError(ctx, job->err);
    if (job->free_early) {
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithLongLong(ctx, job->on_main);
    } else {
        RedisModule_ReplyWithArray(ctx, 4);
        RedisModule_ReplyWithLongLong(ctx, job->numops);
        RedisModule_ReplyWithLongLong(ctx, job->bad_code);
        RedisModule_ReplyWithLongLong(ctx, job->second_load);
    }
    replyValues(ctx, job->out);
    return REDISMODULE_OK;
}

static void dagJobFree(DagJob *job) {
    if (job->run) RedisAI_DAGFree(job->run);
    if (job->out) RedisAI_TensorFree(job->out);
    RedisAI_FreeError(job->err);
    RedisModule_Free(job);
}

static void dagFree(RedisModuleCtx *ctx, void *privdata) {
    REDISMODULE_NOT_USED(ctx);
    dagJobFree(privdata);
}

static DagJob *dagJob(void) {
    DagJob *job = RedisModule_Calloc(1, sizeof(*job));
    job->run = RedisAI_DAGRunCtxCreate();
    RedisAI_InitError(&job->err);
    return job;
}

static int startDag(RedisModuleCtx *ctx, DagJob *job) {
    job->bc = RedisModule_BlockClient(ctx, dagReply, NULL, dagFree, 0);
    if (RedisAI_DAGRun(job->run, dagDone, job, job->err) != REDISMODULE_OK) {
        RedisModule_AbortBlock(job->bc);
        replyError(ctx, job->err);
        dagJobFree(job);
        return REDISMODULE_OK;
    }
    if (job->free_early) {
        /* Before the run can have ended? Not guaranteed, and not needed: freed now or at
         * its end, the callback must see the DAG whole either way. */
        RedisAI_DAGFree(job->run);
        job->run = NULL;
    }
    return REDISMODULE_OK;
}

static int LateLoad_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4 && argc != 5) return RedisModule_WrongArity(ctx);
    int noload = argc == 5 && !strcasecmp(RedisModule_StringPtrLen(argv[4], NULL), "NOLOAD");
    RAI_Tensor *a = keyTensor(ctx, argv[2]);
    if (a == NULL) return REDISMODULE_OK;
    RAI_Tensor *b = keyTensor(ctx, argv[3]);
    if (b == NULL) return REDISMODULE_OK;
    DagJob *job = dagJob();
    char dag[512];
    snprintf(dag, sizeof(dag), "|> AI.MODELEXECUTE %s INPUTS 2 x y OUTPUTS 1 z |> AI.TENSORGET z",
             RedisModule_StringPtrLen(argv[1], NULL));
    if (RedisAI_DAGAddOpsFromString(job->run, dag, job->err) != REDISMODULE_OK) {
        replyError(ctx, job->err);
        dagJobFree(job);
        return REDISMODULE_OK;
    }
    /* a valid first op, then an unknown one: nothing of it may stay */
    if (RedisAI_DAGAddOpsFromString(job->run, "|> AI.TENSORGET z |> AI.NOSUCHCOMMAND z",
                                    job->err) == REDISMODULE_OK) {
        dagJobFree(job);
        return RedisModule_ReplyWithError(ctx, "ERR the bad string was accepted");
    }
    job->bad_code = RedisAI_GetErrorCode(job->err);
    RedisAI_ClearError(job->err);
    job->numops = (long long)RedisAI_DAGNumOps(job->run);
    if (!noload) {
        RedisAI_DAGLoadTensor(job->run, "y", b);
        job->second_load = RedisAI_DAGLoadTensor(job->run, "y", b);
    }
    RedisAI_DAGLoadTensor(job->run, "x", a);
    return startDag(ctx, job);
}

static int EarlyFree_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    RAI_Tensor *a = keyTensor(ctx, argv[2]);
    if (a == NULL) return REDISMODULE_OK;
    RAI_Tensor *b = keyTensor(ctx, argv[3]);
    if (b == NULL) return REDISMODULE_OK;
    DagJob *job = dagJob();
    job->free_early = 1;
    RAI_Model *model;
    if (RedisAI_GetModelFromKeyspace(ctx, argv[1], &model, REDISMODULE_READ, job->err) !=
        REDISMODULE_OK) {
        replyError(ctx, job->err);
        dagJobFree(job);
        return REDISMODULE_OK;
    }
    RedisAI_DAGLoadTensor(job->run, "a", a);
    RedisAI_DAGLoadTensor(job->run, "b", b);
    RAI_DAGRunOp *op = RedisAI_DAGCreateModelRunOp(model);
    RedisAI_DAGRunOpAddInput(op, "a");
    RedisAI_DAGRunOpAddInput(op, "b");
    RedisAI_DAGRunOpAddOutput(op, "c");
    if (RedisAI_DAGAddRunOp(job->run, op, job->err) != REDISMODULE_OK) {
        RedisAI_DAGRunOpFree(op);
        replyError(ctx, job->err);
        dagJobFree(job);
        return REDISMODULE_OK;
    }
    RedisAI_DAGAddTensorGet(job->run, "c");
    return startDag(ctx, job);
}

/* ------------------------------------ SCRIPTSYNC -------------------------------- */

static int ScriptSync_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    RAI_Tensor *a = keyTensor(ctx, argv[3]);
    if (a == NULL) return REDISMODULE_OK;
    RAI_Error *err;
    RedisAI_InitError(&err);
    RAI_Script *script;
    if (RedisAI_GetScriptFromKeyspace(ctx, argv[1], &script, REDISMODULE_READ, err) !=
        REDISMODULE_OK) {
        replyError(ctx, err);
        RedisAI_FreeError(err);
        return REDISMODULE_OK;
    }
    RAI_ScriptRunCtx *sctx = RedisAI_ScriptRunCtxCreate(script, RedisModule_StringPtrLen(argv[2], NULL));
    RedisAI_ScriptRunCtxAddTensorInput(sctx, a);
    RedisAI_ScriptRunCtxAddOutput(sctx);
    if (RedisAI_ScriptRun(sctx, err) != REDISMODULE_OK) {
        replyError(ctx, err);
    } else {
        replyValues(ctx, RedisAI_ScriptRunCtxOutputTensor(sctx, 0));
    }
    RedisAI_ScriptRunCtxFree(sctx);
    RedisAI_FreeError(err);
    return REDISMODULE_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv,
                                                          int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    if (RedisModule_Init(ctx, "llapiimpl", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) {
        return REDISMODULE_ERR;
    }
    const char *missing = NULL;
    if (RedisAI_Initialize(ctx, &missing) != REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "llapiimpl: RedisAI's LLAPI is not available (%s)",
                        missing ? missing : "?");
        return REDISMODULE_ERR;
    }
    main_thread = pthread_self();
    if (RedisModule_CreateCommand(ctx, "llapiimpl.threads", Threads_RedisCommand, "readonly", 1, 3, 1) ||
        RedisModule_CreateCommand(ctx, "llapiimpl.lateload", LateLoad_RedisCommand, "readonly", 1, 3, 1) ||
        RedisModule_CreateCommand(ctx, "llapiimpl.earlyfree", EarlyFree_RedisCommand, "readonly", 1, 3, 1) ||
        RedisModule_CreateCommand(ctx, "llapiimpl.scriptsync", ScriptSync_RedisCommand, "write", 1, 1, 1)) {
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
