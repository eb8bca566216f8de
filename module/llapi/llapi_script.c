/*
 * llapi_script.c - the LLAPI's script functions: TorchScript scripts built
 * without a key or read from one, run contexts, and runs, synchronous in
 * the caller's thread or queued on the script's run queue.
 *
 * A function runs as AI.SCRIPTEXECUTE runs an entry point, f(tensors,
 * keys, args) with no keys and no args, when the script declares it as
 * one (AI.SCRIPTSTORE ... ENTRY_POINTS); otherwise its Tensor and
 * List[Tensor] parameters take the inputs as AI.SCRIPTRUN binds them.
 */
#include <string.h>
#include <time.h>

#include "engine/run_queue.h"
#include "llapi/llapi_internal.h"
#include "loader/backend_loader.h"
#include "redisai/reply_texts.h"
#include "types/run_stats.h"
#include "types/script_type.h"

static long long nowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* --------------------------------- create --------------------------------- */

/* A script with no key (no AI.INFO statistics) and no entry points, on
 * devicestr (CPU, GPU, GPU:<n>). Needs Redis's global lock, as the TORCH
 * backend may be loaded and a run queue created. */
RAI_Script *RedisAI_ScriptCreate(char *devicestr, char *tag, const char *scriptdef,
                                 RAI_Error *err) {
    if (devicestr == NULL || scriptdef == NULL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_ESCRIPTCREATE,
             devicestr ? RAI_ERR_MISSING_SOURCE
                       : RAI_ERR_UNSUPPORTED_DEVICE);
        return NULL;
    }
    const RAI_BackendDescriptor *be = Backend_Require(NULL, RAI_BACKEND_TORCH, err);
    if (be == NULL) {
        Error_SetCode(err, RedisAI_ErrorCode_EBACKENDNOTLOADED);
        return NULL;
    }
    RAI_ScriptParams p = {
        .device_str = devicestr,
        .tag = tag ? tag : "",
        .tag_len = tag ? strlen(tag) : 0,
        .source = scriptdef,
        .source_len = strlen(scriptdef),
        .nentry_points = 0,
        .entry_points = NULL,
    };
    RAI_Script *s = Script_Create(NULL, &p, err);
    if (s == NULL) Error_SetCode(err, RedisAI_ErrorCode_ESCRIPTCREATE);
    return s;
}

void RedisAI_ScriptFree(RAI_Script *script, RAI_Error *err) {
    REDISMODULE_NOT_USED(err);
    Script_Release(script);
}

RAI_Script *RedisAI_ScriptGetShallowCopy(RAI_Script *script) {
    return script ? Script_Retain(script) : NULL;
}

/* Borrowed, as RedisAI_GetModelFromKeyspace. Needs Redis's global lock. */
int RedisAI_GetScriptFromKeyspace(RedisModuleCtx *ctx, RedisModuleString *keyName,
                                  RAI_Script **script, int mode, RAI_Error *err) {
    REDISMODULE_NOT_USED(mode);
    RAI_Script *s = Script_FromKey(ctx, keyName, err);
    if (s == NULL) {
        Error_SetCode(err, RedisAI_ErrorCode_ESCRIPTRUN);
        return REDISMODULE_ERR;
    }
    Script_Release(s);
    *script = s;
    return REDISMODULE_OK;
}

RedisModuleType *RedisAI_ScriptRedisType(void) {
    return RAI_ScriptType;
}

/* ------------------------------ run contexts ------------------------------ */

RAI_ScriptRunCtx *RedisAI_ScriptRunCtxCreate(RAI_Script *script, const char *fnname) {
    if (script == NULL || fnname == NULL) return NULL;
    RAI_ScriptRunCtx *sctx = RedisModule_Calloc(1, sizeof(*sctx));
    sctx->script = Script_Retain(script);
    sctx->function = RedisModule_Strdup(fnname);
    return sctx;
}

/* The Add functions take a reference to each tensor and return 1 (0
 * without a context or tensor), as 1.2. A list is only the next inputs:
 * the function's parameters decide how inputs group (see the top). */
int RedisAI_ScriptRunCtxAddTensorInput(RAI_ScriptRunCtx *sctx, RAI_Tensor *inputTensor) {
    if (sctx == NULL || inputTensor == NULL) return 0;
    LLAPIParams_Add(&sctx->inputs, NULL, Tensor_Retain(inputTensor));
    return 1;
}

int RedisAI_ScriptRunCtxAddTensorInputList(RAI_ScriptRunCtx *sctx, RAI_Tensor **inputTensors,
                                           size_t count) {
    if (sctx == NULL || (count > 0 && inputTensors == NULL)) return 0;
    for (size_t i = 0; i < count; i++) {
        if (inputTensors[i] == NULL) return 0;
    }
    for (size_t i = 0; i < count; i++) {
        LLAPIParams_Add(&sctx->inputs, NULL, Tensor_Retain(inputTensors[i]));
    }
    return 1;
}

/* The 1.2 spellings with an unused err. */
int RedisAI_ScriptRunCtxAddInput(RAI_ScriptRunCtx *sctx, RAI_Tensor *inputTensor,
                                 RAI_Error *err) {
    REDISMODULE_NOT_USED(err);
    return RedisAI_ScriptRunCtxAddTensorInput(sctx, inputTensor);
}

int RedisAI_ScriptRunCtxAddInputList(RAI_ScriptRunCtx *sctx, RAI_Tensor **inputTensors,
                                     size_t len, RAI_Error *err) {
    REDISMODULE_NOT_USED(err);
    return RedisAI_ScriptRunCtxAddTensorInputList(sctx, inputTensors, len);
}

/* One more output wanted: a run must return exactly as many tensors as
 * were asked for. */
int RedisAI_ScriptRunCtxAddOutput(RAI_ScriptRunCtx *sctx) {
    if (sctx == NULL) return 0;
    sctx->outputs = RedisModule_Realloc(sctx->outputs, sizeof(RAI_Tensor *) * (sctx->noutputs + 1));
    sctx->outputs[sctx->noutputs++] = NULL;
    return 1;
}

size_t RedisAI_ScriptRunCtxNumOutputs(RAI_ScriptRunCtx *sctx) {
    return sctx ? sctx->noutputs : 0;
}

/* Borrowed from the context (NULL before a run or out of range). */
RAI_Tensor *RedisAI_ScriptRunCtxOutputTensor(RAI_ScriptRunCtx *sctx, size_t index) {
    if (sctx == NULL || index >= sctx->noutputs) return NULL;
    return sctx->outputs[index];
}

void RedisAI_ScriptRunCtxFree(RAI_ScriptRunCtx *sctx) {
    if (sctx == NULL) return;
    LLAPIParams_Free(&sctx->inputs);
    for (size_t i = 0; i < sctx->noutputs; i++) Tensor_Release(sctx->outputs[i]);
    RedisModule_Free(sctx->outputs);
    RedisModule_Free(sctx->function);
    Script_Release(sctx->script);
    RedisModule_Free(sctx);
}

/* ---------------------------------- runs ---------------------------------- */

/* Runs in the calling thread, acting for no client: the script's
 * redis.execute and redisAI.model_execute run in DB 0 with no ACL user, as
 * in 1.2. From the main thread they work (it holds Redis's lock already);
 * another thread must not hold the lock while it runs such a script. */
int RedisAI_ScriptRun(RAI_ScriptRunCtx *sctx, RAI_Error *err) {
    if (sctx == NULL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_ESCRIPTRUN, "ERR no script run context given");
        return REDISMODULE_ERR;
    }
    RAI_Script *s = sctx->script;
    RAI_Tensor **outs = RedisModule_Calloc(sctx->noutputs ? sctx->noutputs : 1, sizeof(*outs));
    RAI_ScriptCall call = {
        .size = sizeof(RAI_ScriptCall),
        .function = sctx->function,
        .entry_point = Script_IsEntryPoint(s, sctx->function),
        .inputs = sctx->inputs.tensors,
        .ninputs = sctx->inputs.n,
        .noutputs = sctx->noutputs,
    };
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    info.key = RunStats_Key(s->stats, &info.key_len);
    long long start = nowUs();
    int rc = s->be->script_run(s->handle, &info, &call, outs, err);
    long long duration = nowUs() - start;
    for (size_t i = 0; rc == 0 && i < sctx->noutputs; i++) {
        if (outs[i] == NULL) {
            Error_SetFmt(err, RAI_ERR_SCRIPT_OUTPUT_COUNT "%s", sctx->function);
            rc = -1;
        }
    }
    if (s->stats) RunStats_AddRun(s->stats, rc == 0, duration, 0);
    if (rc != 0) {
        Error_Set(err, "ERR script run failed");
        Error_SetCode(err, RedisAI_ErrorCode_ESCRIPTRUN);
        for (size_t i = 0; i < sctx->noutputs; i++) Tensor_Release(outs[i]);
        RedisModule_Free(outs);
        return REDISMODULE_ERR;
    }
    for (size_t i = 0; i < sctx->noutputs; i++) {
        Tensor_Release(sctx->outputs[i]);
        sctx->outputs[i] = outs[i];
    }
    RedisModule_Free(outs);
    return REDISMODULE_OK;
}

/* Queues the run on the script's run queue; the callback runs on the
 * worker thread that finishes it (see llapi_dag.c). */
int RedisAI_ScriptRunAsync(RAI_ScriptRunCtx *sctx, RAI_OnFinishCB DAGAsyncFinish,
                           void *private_data) {
    if (sctx == NULL || DAGAsyncFinish == NULL) return REDISMODULE_ERR;
    RAI_OnFinishCtx *f = RedisModule_Calloc(1, sizeof(*f));
    f->kind = LLAPI_RUN_SCRIPT;
    f->cb = DAGAsyncFinish;
    f->private_data = private_data;
    f->sctx = sctx;
    Error_Init(&f->err);
    f->dag = Dag_New();
    return LLAPI_StartRun(f);
}

RAI_ScriptRunCtx *RedisAI_GetAsScriptRunCtx(RAI_OnFinishCtx *ctx, RAI_Error *err) {
    if (ctx == NULL || ctx->kind != LLAPI_RUN_SCRIPT) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EFINISHCTX, "Finish ctx is not a script run ctx");
        return NULL;
    }
    if (Error_IsSet(&ctx->err) && err && !Error_IsSet(err)) RedisAI_CloneError(err, &ctx->err);
    return ctx->sctx;
}
