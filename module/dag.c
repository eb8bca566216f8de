/*
 * dag.c - the execution engine, see dag.h.
 *
 * A DAG sits in exactly one run queue at a time. A worker runs consecutive
 * ops of its own queue; when the next op belongs to another device's queue
 * the DAG moves there; when no op is left (or one failed, or the DAG timed
 * out in its queue) the worker unblocks the client. The reply callback runs
 * on the main thread: it persists outputs, replicates them, and replies.
 */
#include "dag.h"

#include <string.h>
#include <time.h>

#include "run_stats.h"
#include "tensor_commands.h"

static long long nowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static long long nowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* ------------------------------ construction ------------------------------ */

RAI_Dag *Dag_New(void) {
    return RedisModule_Calloc(1, sizeof(RAI_Dag));
}

size_t Dag_AddSlot(RAI_Dag *dag, RAI_Tensor *t) {
    dag->slots = RedisModule_Realloc(dag->slots, sizeof(RAI_Tensor *) * (dag->nslots + 1));
    dag->slots[dag->nslots] = t;
    return dag->nslots++;
}

RAI_DagOp *Dag_AddOp(RAI_Dag *dag, RAI_DagOpKind kind) {
    dag->ops = RedisModule_Realloc(dag->ops, sizeof(RAI_DagOp) * (dag->nops + 1));
    RAI_DagOp *op = &dag->ops[dag->nops++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    Error_Init(&op->err);
    return op;
}

void Dag_CopyStrings(RAI_StringList *list, RedisModuleString **argv, size_t n) {
    list->n = n;
    list->items = RedisModule_Alloc(sizeof(char *) * (n ? n : 1));
    list->lens = RedisModule_Alloc(sizeof(size_t) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        const char *p = RedisModule_StringPtrLen(argv[i], &list->lens[i]);
        list->items[i] = RedisModule_Alloc(list->lens[i] + 1);
        memcpy(list->items[i], p, list->lens[i]);
        list->items[i][list->lens[i]] = '\0';
    }
}

static void freeStrings(RAI_StringList *list) {
    for (size_t i = 0; i < list->n; i++) RedisModule_Free(list->items[i]);
    if (list->items) RedisModule_Free(list->items);
    if (list->lens) RedisModule_Free(list->lens);
}

void Dag_AddPersist(RAI_Dag *dag, RedisModuleString *key, size_t slot) {
    dag->persist =
        RedisModule_Realloc(dag->persist, sizeof(RAI_DagPersist) * (dag->npersist + 1));
    RedisModule_RetainString(NULL, key);
    dag->persist[dag->npersist++] = (RAI_DagPersist){.key = key, .slot = slot};
}

/* Main thread only: slots may hold tensors that reference client strings. */
void Dag_Free(RAI_Dag *dag) {
    if (dag == NULL) return;
    for (size_t i = 0; i < dag->nslots; i++) Tensor_Release(dag->slots[i]);
    for (size_t i = 0; i < dag->nops; i++) {
        RAI_DagOp *op = &dag->ops[i];
        Model_Release(op->model);
        Script_Release(op->script);
        if (op->function) RedisModule_Free(op->function);
        freeStrings(&op->keys);
        freeStrings(&op->args);
        if (op->inputs) RedisModule_Free(op->inputs);
        if (op->outputs) RedisModule_Free(op->outputs);
        Error_Clear(&op->err);
    }
    for (size_t i = 0; i < dag->npersist; i++) RedisModule_FreeString(NULL, dag->persist[i].key);
    RedisModule_Free(dag->slots);
    RedisModule_Free(dag->ops);
    RedisModule_Free(dag->persist);
    RedisModule_Free(dag);
}

/* -------------------------------- workers --------------------------------- */

static int callBackend(RAI_DagOp *op, const RAI_RunInfo *info, RAI_Tensor **ins,
                       RAI_Tensor **outs) {
    if (op->kind == DAG_OP_MODEL) {
        RAI_Model *m = op->model;
        return m->be->model_run(m->handle, info, ins, op->ninputs, outs, op->noutputs, &op->err);
    }
    RAI_Script *s = op->script;
    RAI_ScriptCall call = {
        .size = sizeof(RAI_ScriptCall),
        .function = op->function,
        .entry_point = op->entry_point,
        .inputs = ins,
        .ninputs = op->ninputs,
        .keys = (const char *const *)op->keys.items,
        .key_lens = op->keys.lens,
        .nkeys = op->keys.n,
        .args = (const char *const *)op->args.items,
        .arg_lens = op->args.lens,
        .nargs = op->args.n,
        .noutputs = op->noutputs,
    };
    return s->be->script_run(s->handle, info, &call, outs, &op->err);
}

static void runOp(RAI_Dag *dag, RAI_DagOp *op) {
    RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * (op->ninputs ? op->ninputs : 1));
    RAI_Tensor **outs = RedisModule_Calloc(op->noutputs ? op->noutputs : 1, sizeof(RAI_Tensor *));
    for (size_t i = 0; i < op->ninputs; i++) ins[i] = dag->slots[op->inputs[i]];
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    long long start = nowUs();
    int rc = callBackend(op, &info, ins, outs);
    op->duration_us = nowUs() - start;
    for (size_t i = 0; rc == 0 && i < op->noutputs; i++) {
        if (outs[i] == NULL) {
            if (op->kind == DAG_OP_MODEL) {
                Error_Set(&op->err, "ERR Model did not generate the expected number of outputs");
            } else {
                Error_SetFmt(&op->err, "Function returned unexpected number of outputs - %s",
                             op->function);
            }
            rc = -1;
        }
    }
    if (rc != 0) {
        Error_Set(&op->err, "ERR model run failed");
        for (size_t i = 0; i < op->noutputs; i++) Tensor_Release(outs[i]);
        op->state = DAG_OP_FAILED;
    } else {
        for (size_t i = 0; i < op->noutputs; i++) dag->slots[op->outputs[i]] = outs[i];
        op->state = DAG_OP_DONE;
    }
    RedisModule_Free(ins);
    RedisModule_Free(outs);
}

static RAI_RunQueue *opQueue(RAI_DagOp *op, RAI_RunQueue *current) {
    return op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT ? op->queue : current;
}

void Dag_RunStep(RAI_Dag *dag, RAI_RunQueue *q) {
    if (dag->timeout_ms > 0 && nowMs() - dag->enqueued_ms >= dag->timeout_ms) {
        dag->timed_out = 1;
        RedisModule_UnblockClient(dag->bc, dag);
        return;
    }
    while (dag->next_op < dag->nops) {
        RAI_DagOp *op = &dag->ops[dag->next_op];
        RAI_RunQueue *want = opQueue(op, q);
        if (want != q) {
            RunQueue_Push(want, dag);
            return;
        }
        if (op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT) {
            runOp(dag, op);
        } else {
            op->state = DAG_OP_DONE;
        }
        dag->next_op++;
        if (op->state == DAG_OP_FAILED) break;
    }
    RedisModule_UnblockClient(dag->bc, dag);
}

/* ------------------------------ main thread ------------------------------- */

static const RAI_DagOp *firstFailure(const RAI_Dag *dag) {
    for (size_t i = 0; i < dag->nops; i++) {
        if (dag->ops[i].state == DAG_OP_FAILED) return &dag->ops[i];
    }
    return NULL;
}

/* Stores every PERSIST target; stops at the first that cannot be written. */
static int persistAll(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    for (size_t i = 0; i < dag->npersist; i++) {
        RAI_Tensor *t = dag->slots[dag->persist[i].slot];
        if (t == NULL) continue;
        if (Tensor_StoreAndReplicate(ctx, dag->persist[i].key, t, err) != REDISMODULE_OK) {
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}

static void replyOp(RedisModuleCtx *ctx, RAI_Dag *dag, size_t i) {
    RAI_DagOp *op = &dag->ops[i];
    if (op->state == DAG_OP_FAILED) {
        RedisModule_ReplyWithError(ctx, Error_Message(&op->err));
    } else if (op->state != DAG_OP_DONE) {
        RedisModule_ReplyWithSimpleString(ctx, "NA");
    } else if (op->kind == DAG_OP_TENSORGET) {
        RAI_Tensor *t = dag->slots[op->inputs[0]];
        if (t == NULL) {
            RedisModule_ReplyWithSimpleString(ctx, "NA");
        } else {
            TensorGet_Reply(ctx, t, op->fmt);
        }
    } else {
        RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
}

/* spec 10: on success calls, run time and (models) dim 0 of output 0; on
 * error calls and errors; ops that never ran count nothing. */
static void updateStats(RAI_Dag *dag) {
    for (size_t i = 0; i < dag->nops; i++) {
        RAI_DagOp *op = &dag->ops[i];
        RAI_RunStats *s = op->kind == DAG_OP_MODEL    ? op->model->stats
                          : op->kind == DAG_OP_SCRIPT ? op->script->stats
                                                      : NULL;
        if (s == NULL || op->state == DAG_OP_PENDING) continue;
        s->calls++;
        if (op->state == DAG_OP_FAILED) {
            s->errors++;
            continue;
        }
        s->duration_us += op->duration_us;
        if (op->kind == DAG_OP_MODEL && op->noutputs > 0) {
            RAI_Tensor *t = dag->slots[op->outputs[0]];
            if (t && t->ndims > 0) s->samples += t->dims[0];
        }
    }
}

static int Dag_ReplyCallback(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    RAI_Dag *dag = RedisModule_GetBlockedClientPrivateData(ctx);
    if (dag->timed_out) return RedisModule_ReplyWithSimpleString(ctx, "TIMEDOUT");

    const RAI_DagOp *failed = firstFailure(dag);
    RAI_Error err;
    Error_Init(&err);
    int persisted = failed ? REDISMODULE_OK : persistAll(ctx, dag, &err);

    if (dag->single_op) {
        if (failed) {
            RedisModule_ReplyWithError(ctx, Error_Message(&failed->err));
        } else if (persisted != REDISMODULE_OK) {
            RedisModule_ReplyWithError(ctx, Error_Message(&err));
        } else {
            RedisModule_ReplyWithSimpleString(ctx, "OK");
        }
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    RedisModule_ReplyWithArray(ctx, (long)dag->nops + (persisted != REDISMODULE_OK));
    for (size_t i = 0; i < dag->nops; i++) replyOp(ctx, dag, i);
    if (persisted != REDISMODULE_OK) RedisModule_ReplyWithError(ctx, Error_Message(&err));
    Error_Clear(&err);
    return REDISMODULE_OK;
}

/* Runs after the reply callback, or alone when the client went away: the
 * runs happened either way, so they are counted here. */
static void Dag_FreeCallback(RedisModuleCtx *ctx, void *privdata) {
    REDISMODULE_NOT_USED(ctx);
    RAI_Dag *dag = privdata;
    if (!dag->timed_out) updateStats(dag);
    Dag_Free(dag);
}

int Dag_RefuseIfCannotBlock(RedisModuleCtx *ctx) {
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA)) {
        RedisModule_ReplyWithError(
            ctx, "ERR Cannot run RedisAI command within a transaction or a LUA script");
        return 1;
    }
    return 0;
}

int Dag_Start(RedisModuleCtx *ctx, RAI_Dag *dag) {
    RAI_RunQueue *first = NULL;
    for (size_t i = 0; i < dag->nops && first == NULL; i++) {
        if (dag->ops[i].kind == DAG_OP_MODEL || dag->ops[i].kind == DAG_OP_SCRIPT) {
            first = dag->ops[i].queue;
        }
    }
    if (first == NULL) {
        RAI_Error err;
        Error_Init(&err);
        first = RunQueue_Ensure("CPU", &err);
        if (first == NULL) {
            RedisModule_ReplyWithError(ctx, Error_Message(&err));
            Error_Clear(&err);
            Dag_Free(dag);
            return REDISMODULE_OK;
        }
    }
    dag->bc = RedisModule_BlockClient(ctx, Dag_ReplyCallback, NULL, Dag_FreeCallback, 0);
    dag->enqueued_ms = nowMs();
    RunQueue_Push(first, dag);
    return REDISMODULE_OK;
}
