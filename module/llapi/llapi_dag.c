/*
 * llapi_dag.c - the LLAPI's DAGs, and the completion of every queued LLAPI
 * run (ModelRunAsync, ScriptRunAsync, DAGRun).
 *
 * A DAG is built into the engine's own RAI_Dag as the client adds to it:
 * loaded tensors, TENSORSET and TENSORGET ops, model and script ops, and
 * ops parsed from AI.DAGEXECUTE's syntax by the DAG commands' parser. As in
 * 1.2, a tensor the client loads is visible to every op, whenever it was
 * loaded: a name read before anything wrote it waits for a load, and
 * RedisAI_DAGRun fails (EDAGBUILDER) if none came. The outputs are the
 * TENSORGET ops' tensors, in their order.
 *
 * Queued runs go through the run queues with the commands' DAGs (same
 * workers, auto-batching and AI.INFO statistics). The client's callback
 * runs on the worker thread that finishes the run, as in 1.2 (a client may
 * block its own command waiting for it). Statistics are counted before
 * the callback runs.
 */
#include <ctype.h>
#include <string.h>

#include "core/clock.h"
#include "core/messages.h"
#include "llapi/llapi_internal.h"
#include "redisai/reply_texts.h"
#include "types/run_stats.h"

/* ------------------------------ finish context ---------------------------- */

struct RAI_DAGRunCtx {
    RAI_OnFinishCtx finish; /* first: a DAG's finish context is its run context */
    DagNames names;
    RedisModuleDict *loaded; /* names given to RedisAI_DAGLoadTensor */
    RAI_DAGRunOp **ops;      /* added ops, freed with the DAG */
    size_t nops;
    int state; /* atomic: DAG_BUILDING, DAG_RUNNING, DAG_DONE, DAG_FREE_PENDING */
};

enum { DAG_BUILDING, DAG_RUNNING, DAG_DONE, DAG_FREE_PENDING };

struct RAI_DAGRunOp {
    RAI_DagOpKind kind;
    RAI_Model *model;   /* a reference */
    RAI_Script *script; /* a reference */
    char *function;
    LLAPI_Params inputs;  /* names only */
    LLAPI_Params outputs; /* names only */
    int added;            /* owned by a DAG from then on */
};

static void freeDagRunCtx(RAI_DAGRunCtx *r);

static const RAI_DagOp *firstFailure(const RAI_Dag *dag) {
    for (size_t i = 0; i < dag->nops; i++) {
        if (dag->ops[i].state == DAG_OP_FAILED) return &dag->ops[i];
    }
    return NULL;
}

/* The results the callback reads: the first failure and its code. */
static void collectError(RAI_OnFinishCtx *f) {
    RAI_Dag *dag = f->dag;
    const RAI_DagOp *failed = firstFailure(dag);
    if (failed) {
        Error_Set(&f->err, Error_Message(&failed->err));
        Error_SetCode(&f->err, failed->kind == DAG_OP_SCRIPT  ? RedisAI_ErrorCode_ESCRIPTRUN
                               : failed->kind == DAG_OP_MODEL ? RedisAI_ErrorCode_EMODELRUN
                                                              : RedisAI_ErrorCode_EDAGRUN);
    } else if (dag->timed_out) {
        LLAPI_Fail(&f->err, RedisAI_ErrorCode_EDAGRUN, "ERR DAG timed out");
    }
}

static void collectOutputs(RAI_OnFinishCtx *f) {
    RAI_Dag *dag = f->dag;
    if (Error_IsSet(&f->err) || dag->nops == 0) return;
    RAI_DagOp *op = &dag->ops[0];
    if (f->kind == LLAPI_RUN_MODEL) {
        RAI_ModelRunCtx *mctx = f->mctx;
        for (size_t k = 0; k < mctx->outputs.n; k++) {
            Tensor_Release(mctx->outputs.tensors[k]);
            mctx->outputs.tensors[k] = Tensor_Retain(dag->slots[op->outputs[f->out_index[k]]]);
        }
    } else if (f->kind == LLAPI_RUN_SCRIPT) {
        RAI_ScriptRunCtx *sctx = f->sctx;
        for (size_t k = 0; k < sctx->noutputs; k++) {
            Tensor_Release(sctx->outputs[k]);
            sctx->outputs[k] = Tensor_Retain(dag->slots[op->outputs[k]]);
        }
    }
}

static void freeFinishCtx(RAI_OnFinishCtx *f) {
    Dag_Free(f->dag);
    Error_Clear(&f->err);
    if (f->out_index) RedisModule_Free(f->out_index);
    RedisModule_Free(f);
}

/* Position of name among names[0..n-1], or -1. */
static long indexOf(char **names, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (names[i] && !strcmp(names[i], name)) return (long)i;
    }
    return -1;
}

/* Maps what the context holds to the model's order: ins[j] is the tensor
 * for the model's input j, out_index[k] the model output the context's
 * output k receives. TF places each named input and output by its name;
 * the other backends (and unnamed entries) by position. */
int LLAPI_ModelOrder(RAI_ModelRunCtx *mctx, RAI_Tensor **ins, size_t *out_index,
                     RAI_Error *err) {
    const RAI_Model *m = mctx->model;
    if (mctx->inputs.n != m->ninputs) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN,
             RAI_ERR_INPUT_KEYS);
        return REDISMODULE_ERR;
    }
    if (m->noutputs != 0 && mctx->outputs.n != m->noutputs) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EMODELRUN,
             RAI_ERR_OUTPUT_KEYS);
        return REDISMODULE_ERR;
    }
    int by_name = m->backend == RAI_BACKEND_TF;
    for (size_t i = 0; i < mctx->inputs.n; i++) ins[i] = NULL;
    for (size_t i = 0; i < mctx->inputs.n; i++) {
        const char *name = mctx->inputs.names[i];
        long j = by_name && name ? indexOf(m->inputs, m->ninputs, name) : (long)i;
        if (j < 0 || ins[j] != NULL) {
            Error_SetFmt(err, "ERR %s is not an input of the model, or is given twice", name);
            Error_SetCode(err, RedisAI_ErrorCode_EMODELRUN);
            return REDISMODULE_ERR;
        }
        ins[j] = mctx->inputs.tensors[i];
    }
    for (size_t k = 0; k < mctx->outputs.n; k++) {
        const char *name = mctx->outputs.names[k];
        long j = by_name && name ? indexOf(m->outputs, m->noutputs, name) : (long)k;
        for (size_t q = 0; j >= 0 && q < k; q++) {
            if (out_index[q] == (size_t)j) j = -1;
        }
        if (j < 0) {
            Error_SetFmt(err, "ERR %s is not an output of the model, or is asked twice", name);
            Error_SetCode(err, RedisAI_ErrorCode_EMODELRUN);
            return REDISMODULE_ERR;
        }
        out_index[k] = (size_t)j;
    }
    return REDISMODULE_OK;
}

/* A model run whose context did not fit the model ran no op: it counts as
 * a failed run all the same, as a run the backend refuses does (and as
 * RedisAI 1.2 counted it). */
static void countUnfit(const RAI_OnFinishCtx *f) {
    if (!f->unfit) return;
    RAI_RunStats *s = f->mctx->model->stats;
    if (s) RunStats_AddRun(s, 0, 0, 0);
}

/* dag->on_finish of every LLAPI run, on the worker thread that ends it. */
static void onFinish(RAI_Dag *dag) {
    RAI_OnFinishCtx *f = dag->on_finish_data;
    Dag_UpdateStats(dag);
    countUnfit(f);
    collectError(f);
    collectOutputs(f);
    f->cb(f, f->private_data);
    if (f->kind != LLAPI_RUN_DAG) {
        freeFinishCtx(f);
        return;
    }
    /* A DAG is the client's to free; if it asked while the run was in
     * flight, it is freed now. */
    RAI_DAGRunCtx *r = (RAI_DAGRunCtx *)f;
    int running = DAG_RUNNING;
    if (!__atomic_compare_exchange_n(&r->state, &running, DAG_DONE, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        freeDagRunCtx(r);
    }
}

/* Queues the run's DAG. The empty DAG of an unfit model run goes through
 * its model's queue, where the run would have gone, so that it fails in
 * turn with the model's other runs. */
static int enqueue(RAI_OnFinishCtx *f, RAI_Error *err) {
    if (!f->unfit) return Dag_Enqueue(f->dag, err);
    f->dag->enqueued_ms = Clock_NowMs();
    RunQueue_Push(f->mctx->model->queue, f->dag);
    return REDISMODULE_OK;
}

int LLAPI_StartRun(RAI_OnFinishCtx *f) {
    RAI_Dag *dag = f->dag;
    /* A context that cannot run fails through the callback, as a backend
     * error would, and counts as a failed run (countUnfit). */
    if (f->kind == LLAPI_RUN_MODEL) {
        RAI_ModelRunCtx *mctx = f->mctx;
        RAI_Model *m = mctx->model;
        RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * (m->ninputs ? m->ninputs : 1));
        f->out_index = RedisModule_Alloc(sizeof(size_t) * (mctx->outputs.n ? mctx->outputs.n : 1));
        f->unfit = LLAPI_ModelOrder(mctx, ins, f->out_index, &f->err) != REDISMODULE_OK;
        if (!f->unfit) {
            RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_MODEL);
            op->model = Model_Retain(m);
            op->queue = m->queue;
            op->ninputs = m->ninputs;
            op->inputs = RedisModule_Alloc(sizeof(size_t) * (op->ninputs ? op->ninputs : 1));
            for (size_t i = 0; i < op->ninputs; i++) {
                op->inputs[i] = Dag_AddSlot(dag, Tensor_Retain(ins[i]));
            }
            /* the model's outputs, in its order (list outputs: as asked) */
            op->noutputs = m->noutputs ? m->noutputs : mctx->outputs.n;
            op->outputs = RedisModule_Alloc(sizeof(size_t) * (op->noutputs ? op->noutputs : 1));
            for (size_t j = 0; j < op->noutputs; j++) op->outputs[j] = Dag_AddSlot(dag, NULL);
        }
        RedisModule_Free(ins);
    } else {
        RAI_ScriptRunCtx *sctx = f->sctx;
        RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_SCRIPT);
        op->script = Script_Retain(sctx->script);
        op->queue = sctx->script->queue;
        op->function = RedisModule_Strdup(sctx->function);
        op->entry_point = Script_IsEntryPoint(sctx->script, sctx->function);
        op->ninputs = sctx->inputs.n;
        op->inputs = RedisModule_Alloc(sizeof(size_t) * (op->ninputs ? op->ninputs : 1));
        for (size_t i = 0; i < op->ninputs; i++) {
            op->inputs[i] = Dag_AddSlot(dag, Tensor_Retain(sctx->inputs.tensors[i]));
        }
        op->noutputs = sctx->noutputs;
        op->outputs = RedisModule_Alloc(sizeof(size_t) * (op->noutputs ? op->noutputs : 1));
        for (size_t j = 0; j < op->noutputs; j++) op->outputs[j] = Dag_AddSlot(dag, NULL);
    }
    dag->on_finish = onFinish;
    dag->on_finish_data = f;
    RAI_Error err;
    Error_Init(&err);
    if (enqueue(f, &err) != REDISMODULE_OK) {
        Error_Clear(&err);
        freeFinishCtx(f);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

/* ---------------------------- reading the results ------------------------- */

/* The count of TENSORGET ops (0 for a model or script run). */
size_t RedisAI_DAGNumOutputs(RAI_OnFinishCtx *finish_ctx) {
    size_t n = 0;
    RAI_Dag *dag = finish_ctx->dag;
    for (size_t i = 0; i < dag->nops; i++) n += dag->ops[i].kind == DAG_OP_TENSORGET;
    return n;
}

/* The tensor of the index-th TENSORGET, borrowed from the DAG: valid until
 * RedisAI_DAGFree (take a reference to keep it). NULL out of range, or
 * when the DAG failed before producing it. */
const RAI_Tensor *RedisAI_DAGOutputTensor(RAI_OnFinishCtx *finish_ctx, size_t index) {
    RAI_Dag *dag = finish_ctx->dag;
    for (size_t i = 0; i < dag->nops; i++) {
        RAI_DagOp *op = &dag->ops[i];
        if (op->kind != DAG_OP_TENSORGET) continue;
        if (index-- == 0) return op->state == DAG_OP_DONE ? dag->slots[op->inputs[0]] : NULL;
    }
    return NULL;
}

/* 1 when the run failed, else 0. */
int RedisAI_DAGRunError(RAI_OnFinishCtx *finish_ctx) {
    return Error_IsSet(&finish_ctx->err);
}

/* The run's error (code OK and no message when it succeeded), owned by
 * the finish context. */
const RAI_Error *RedisAI_DAGGetError(RAI_OnFinishCtx *finish_ctx) {
    return &finish_ctx->err;
}

/* --------------------------------- building ------------------------------- */

RAI_DAGRunCtx *RedisAI_DAGRunCtxCreate(void) {
    RAI_DAGRunCtx *r = RedisModule_Calloc(1, sizeof(*r));
    r->finish.kind = LLAPI_RUN_DAG;
    r->finish.dag = Dag_New();
    Error_Init(&r->finish.err);
    r->names.slots = RedisModule_CreateDict(NULL);
    r->names.unresolved = RedisModule_CreateDict(NULL);
    r->loaded = RedisModule_CreateDict(NULL);
    r->state = DAG_BUILDING;
    return r;
}

static int building(RAI_DAGRunCtx *r) {
    return r != NULL && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == DAG_BUILDING;
}

RAI_DAGRunOp *RedisAI_DAGCreateModelRunOp(RAI_Model *model) {
    if (model == NULL) return NULL;
    RAI_DAGRunOp *op = RedisModule_Calloc(1, sizeof(*op));
    op->kind = DAG_OP_MODEL;
    op->model = Model_Retain(model);
    return op;
}

RAI_DAGRunOp *RedisAI_DAGCreateScriptRunOp(RAI_Script *script, const char *func_name) {
    if (script == NULL || func_name == NULL) return NULL;
    RAI_DAGRunOp *op = RedisModule_Calloc(1, sizeof(*op));
    op->kind = DAG_OP_SCRIPT;
    op->script = Script_Retain(script);
    op->function = RedisModule_Strdup(func_name);
    return op;
}

/* Input and output tensor names, local to the DAG. */
int RedisAI_DAGRunOpAddInput(RAI_DAGRunOp *DAGOp, const char *input) {
    if (DAGOp == NULL || input == NULL || DAGOp->added) return REDISMODULE_ERR;
    LLAPIParams_Add(&DAGOp->inputs, input, NULL);
    return REDISMODULE_OK;
}

int RedisAI_DAGRunOpAddOutput(RAI_DAGRunOp *DAGOp, const char *output) {
    if (DAGOp == NULL || output == NULL || DAGOp->added) return REDISMODULE_ERR;
    LLAPIParams_Add(&DAGOp->outputs, output, NULL);
    return REDISMODULE_OK;
}

/* Frees an op that was not added to a DAG (an added one is the DAG's). */
void RedisAI_DAGRunOpFree(RAI_DAGRunOp *dagOp) {
    if (dagOp == NULL || dagOp->added) return;
    Model_Release(dagOp->model);
    Script_Release(dagOp->script);
    if (dagOp->function) RedisModule_Free(dagOp->function);
    LLAPIParams_Free(&dagOp->inputs);
    LLAPIParams_Free(&dagOp->outputs);
    RedisModule_Free(dagOp);
}

static size_t resolve(RAI_DAGRunCtx *r, const char *name) {
    size_t slot;
    DagNames_Resolve(r->finish.dag, &r->names, name, strlen(name), &slot); /* never fails */
    return slot;
}

static void bind(RAI_DAGRunCtx *r, RAI_DagOp *op, const LLAPI_Params *in, const LLAPI_Params *out) {
    RAI_Dag *dag = r->finish.dag;
    op->ninputs = in->n;
    op->inputs = RedisModule_Alloc(sizeof(size_t) * (in->n ? in->n : 1));
    for (size_t i = 0; i < in->n; i++) op->inputs[i] = resolve(r, in->names[i]);
    op->noutputs = out->n;
    op->outputs = RedisModule_Alloc(sizeof(size_t) * (out->n ? out->n : 1));
    for (size_t i = 0; i < out->n; i++) {
        op->outputs[i] = Dag_AddSlot(dag, NULL);
        DagNames_Set(&r->names, out->names[i], strlen(out->names[i]), op->outputs[i]);
    }
}

/* RedisAI 1.2's texts for a model op's counts, whole: clients compare them
 * (the commands' own say "given as INPUTS here"). */
#define DAG_ERR_INPUT_KEYS "Number of keys given as INPUTS does not match model definition"
#define DAG_ERR_OUTPUT_KEYS "Number of keys given as OUTPUTS does not match model definition"

/* Adds the op; the DAG owns it from then on (freed by RedisAI_DAGFree). A
 * model op must name as many inputs and outputs as the model has; a
 * refused op stays the client's, to complete and add again. */
int RedisAI_DAGAddRunOp(RAI_DAGRunCtx *run_info, RAI_DAGRunOp *DAGop, RAI_Error *err) {
    if (!building(run_info) || DAGop == NULL || DAGop->added) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER,
             "ERR the op cannot be added: no op, an op added already, or a DAG already run");
        return REDISMODULE_ERR;
    }
    if (DAGop->kind == DAG_OP_MODEL) {
        const RAI_Model *m = DAGop->model;
        if (DAGop->inputs.n != m->ninputs) {
            LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER, DAG_ERR_INPUT_KEYS);
            return REDISMODULE_ERR;
        }
        if (m->noutputs != 0 && DAGop->outputs.n != m->noutputs) {
            LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER, DAG_ERR_OUTPUT_KEYS);
            return REDISMODULE_ERR;
        }
    }
    RAI_DagOp *op = Dag_AddOp(run_info->finish.dag, DAGop->kind);
    if (DAGop->kind == DAG_OP_MODEL) {
        op->model = Model_Retain(DAGop->model);
        op->queue = DAGop->model->queue;
    } else {
        op->script = Script_Retain(DAGop->script);
        op->queue = DAGop->script->queue;
        op->function = RedisModule_Strdup(DAGop->function);
        op->entry_point = Script_IsEntryPoint(DAGop->script, DAGop->function);
    }
    bind(run_info, op, &DAGop->inputs, &DAGop->outputs);
    DAGop->added = 1;
    run_info->ops = RedisModule_Realloc(run_info->ops, sizeof(RAI_DAGRunOp *) * (run_info->nops + 1));
    run_info->ops[run_info->nops++] = DAGop;
    return REDISMODULE_OK;
}

/* A tensor the DAG's ops read under t_name (a reference is taken).
 * REDISMODULE_ERR when t_name was loaded already. */
int RedisAI_DAGLoadTensor(RAI_DAGRunCtx *run_info, const char *t_name, RAI_Tensor *tensor) {
    if (!building(run_info) || t_name == NULL || tensor == NULL) return REDISMODULE_ERR;
    size_t len = strlen(t_name);
    if (RedisModule_DictSetC(run_info->loaded, (void *)t_name, len, (void *)1) != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    RAI_Dag *dag = run_info->finish.dag;
    DagNames *names = &run_info->names;
    void *waiting = RedisModule_DictGetC(names->unresolved, (void *)t_name, len, NULL);
    size_t slot;
    int produced = RedisModule_DictGetC(names->slots, (void *)t_name, len, NULL) != NULL;
    if (waiting) {
        /* ops added earlier read it */
        slot = (size_t)(uintptr_t)waiting - 1;
        dag->slots[slot] = Tensor_Retain(tensor);
        RedisModule_DictDelC(names->unresolved, (void *)t_name, len, NULL);
    } else if (!produced) {
        slot = Dag_AddSlot(dag, Tensor_Retain(tensor));
    } else {
        return REDISMODULE_OK; /* every reader comes after an op that writes it */
    }
    if (!produced) DagNames_Set(names, t_name, len, slot);
    return REDISMODULE_OK;
}

/* A TENSORSET op: t_name holds the tensor (a reference) from here on. */
int RedisAI_DAGAddTensorSet(RAI_DAGRunCtx *run_info, const char *t_name, RAI_Tensor *tensor) {
    if (!building(run_info) || t_name == NULL || tensor == NULL) return REDISMODULE_ERR;
    RAI_Dag *dag = run_info->finish.dag;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_TENSORSET);
    op->noutputs = 1;
    op->outputs = RedisModule_Alloc(sizeof(size_t));
    op->outputs[0] = Dag_AddSlot(dag, Tensor_Retain(tensor));
    DagNames_Set(&run_info->names, t_name, strlen(t_name), op->outputs[0]);
    return REDISMODULE_OK;
}

/* A TENSORGET op: t_name as it is at this point becomes the next output. */
int RedisAI_DAGAddTensorGet(RAI_DAGRunCtx *run_info, const char *t_name) {
    if (!building(run_info) || t_name == NULL) return REDISMODULE_ERR;
    RAI_DagOp *op = Dag_AddOp(run_info->finish.dag, DAG_OP_TENSORGET);
    op->ninputs = 1;
    op->inputs = RedisModule_Alloc(sizeof(size_t));
    op->inputs[0] = resolve(run_info, t_name);
    return REDISMODULE_OK;
}

/* Splits at spaces (tabs and newlines too) into new strings. */
static RedisModuleString **tokenize(const char *s, int *argc) {
    size_t cap = 8;
    int n = 0;
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * cap);
    while (*s) {
        while (*s && isspace((unsigned char)*s)) s++;
        const char *start = s;
        while (*s && !isspace((unsigned char)*s)) s++;
        if (s == start) break;
        if ((size_t)n == cap) {
            cap *= 2;
            argv = RedisModule_Realloc(argv, sizeof(*argv) * cap);
        }
        argv[n++] = RedisModule_CreateString(NULL, start, (size_t)(s - start));
    }
    *argc = n;
    return argv;
}

/* Ops in AI.DAGEXECUTE's syntax, each after `|>` (the first too): AI.
 * TENSORSET, AI.TENSORGET, AI.MODELEXECUTE, AI.SCRIPTEXECUTE and 1.2's
 * AI.MODELRUN, AI.SCRIPTRUN; models and scripts are read from DB 0 now
 * (so this needs Redis's global lock). On error (EDAGBUILDER) the DAG is
 * left as it was. */
int RedisAI_DAGAddOpsFromString(RAI_DAGRunCtx *run_info, const char *dag, RAI_Error *err) {
    if (!building(run_info)) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER, "ERR the DAG was already run");
        return REDISMODULE_ERR;
    }
    int argc;
    RedisModuleString **argv = tokenize(dag ? dag : "", &argc);
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(NULL);
    /* A trial parse first, on a scratch DAG, so that an error leaves the
     * client's DAG unchanged; the real one then reads the same keys under
     * the same lock and cannot fail. */
    RAI_Dag *scratch = Dag_New();
    DagNames scratch_names = {.slots = RedisModule_CreateDict(NULL),
                              .unresolved = RedisModule_CreateDict(NULL)};
    int rc = Dag_ParseLLAPIOps(ctx, scratch, &scratch_names, argv, argc, err);
    Dag_Free(scratch);
    RedisModule_FreeDict(NULL, scratch_names.slots);
    RedisModule_FreeDict(NULL, scratch_names.unresolved);
    if (rc == REDISMODULE_OK) {
        rc = Dag_ParseLLAPIOps(ctx, run_info->finish.dag, &run_info->names, argv, argc, err);
    }
    if (rc != REDISMODULE_OK) Error_SetCode(err, RedisAI_ErrorCode_EDAGBUILDER);
    RedisModule_FreeThreadSafeContext(ctx);
    for (int i = 0; i < argc; i++) RedisModule_FreeString(NULL, argv[i]);
    RedisModule_Free(argv);
    return rc;
}

/* Every op: TENSORSET, TENSORGET, model and script ops (not loads). */
size_t RedisAI_DAGNumOps(RAI_DAGRunCtx *run_info) {
    return run_info ? run_info->finish.dag->nops : 0;
}

/* ---------------------------------- running -------------------------------- */

/* Queues the DAG; the callback gets its finish context (this run context)
 * on the worker thread that ends it. The DAG stays the client's: free it
 * with RedisAI_DAGFree once the callback ran (earlier, it is freed when
 * the run ends). */
int RedisAI_DAGRun(RAI_DAGRunCtx *run_info, RAI_OnFinishCB DAGAsyncFinish, void *private_data,
                   RAI_Error *err) {
    if (!building(run_info)) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGRUN, "ERR the DAG was already run");
        return REDISMODULE_ERR;
    }
    if (DAGAsyncFinish == NULL) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGRUN, "ERR no callback given to run the DAG");
        return REDISMODULE_ERR;
    }
    RAI_Dag *dag = run_info->finish.dag;
    if (dag->nops == 0) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER, RAI_ERR_DAG_EMPTY);
        return REDISMODULE_ERR;
    }
    if (RedisModule_DictSize(run_info->names.unresolved) > 0) {
        LLAPI_Fail(err, RedisAI_ErrorCode_EDAGBUILDER, RAI_ERR_DAG_INPUT_NOT_FOUND);
        return REDISMODULE_ERR;
    }
    run_info->finish.cb = DAGAsyncFinish;
    run_info->finish.private_data = private_data;
    dag->on_finish = onFinish;
    dag->on_finish_data = &run_info->finish;
    __atomic_store_n(&run_info->state, DAG_RUNNING, __ATOMIC_RELEASE);
    if (Dag_Enqueue(dag, err) != REDISMODULE_OK) {
        Error_SetCode(err, RedisAI_ErrorCode_EDAGRUN);
        __atomic_store_n(&run_info->state, DAG_BUILDING, __ATOMIC_RELEASE);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

static void freeDagRunCtx(RAI_DAGRunCtx *r) {
    Dag_Free(r->finish.dag);
    Error_Clear(&r->finish.err);
    RedisModule_FreeDict(NULL, r->names.slots);
    RedisModule_FreeDict(NULL, r->names.unresolved);
    RedisModule_FreeDict(NULL, r->loaded);
    for (size_t i = 0; i < r->nops; i++) {
        r->ops[i]->added = 0;
        RedisAI_DAGRunOpFree(r->ops[i]);
    }
    RedisModule_Free(r->ops);
    RedisModule_Free(r);
}

/* Frees the DAG, its ops and its outputs. While its run is in flight the
 * DAG is freed when the run ends instead. */
void RedisAI_DAGFree(RAI_DAGRunCtx *run_info) {
    if (run_info == NULL) return;
    int running = DAG_RUNNING;
    if (__atomic_compare_exchange_n(&run_info->state, &running, DAG_FREE_PENDING, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return;
    }
    freeDagRunCtx(run_info);
}
