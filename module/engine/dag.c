/*
 * dag.c - the execution engine, see dag.h.
 *
 * A DAG sits in exactly one run queue at a time. A worker runs consecutive
 * ops of its own queue; when the next op belongs to another device's queue
 * the DAG moves there; when no op is left (or one failed, or the DAG timed
 * out in its queue) the worker unblocks the client. The reply callback runs
 * on the main thread: it persists outputs, replicates them, and replies.
 */
#include "engine/dag.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/inline_run.h"
#include "core/memory.h"
#include "types/run_stats.h"
#include "engine/tensor_reply.h"
#include "types/tensor_type.h"

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

void Dag_SetOpKey(RAI_DagOp *op, RedisModuleString *key) {
    const char *p = RedisModule_StringPtrLen(key, &op->key_len);
    op->key = RedisModule_Alloc(op->key_len + 1);
    memcpy(op->key, p, op->key_len);
    op->key[op->key_len] = '\0';
}

/* The key a run is for: recorded at parse time; for an op built by the
 * LLAPI, the key its model or script is stored at, if any. */
static void runInfoKey(const RAI_DagOp *op, RAI_RunInfo *info) {
    if (op->key) {
        info->key = op->key;
        info->key_len = op->key_len;
        return;
    }
    const RAI_RunStats *st = op->kind == DAG_OP_MODEL ? (op->model ? op->model->stats : NULL)
                                                      : (op->script ? op->script->stats : NULL);
    info->key = RunStats_Key(st, &info->key_len);
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

int Dag_BindKeys(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_DagOp *op, RedisModuleString **inputs,
                 size_t nin, RedisModuleString **outputs, size_t nout, RAI_Error *err) {
    op->ninputs = nin;
    op->inputs = RedisModule_Alloc(sizeof(size_t) * (nin ? nin : 1));
    op->noutputs = nout;
    op->outputs = RedisModule_Alloc(sizeof(size_t) * (nout ? nout : 1));
    for (size_t i = 0; i < nin; i++) {
        RAI_Tensor *t = Tensor_FromKey(ctx, inputs[i], err);
        if (t == NULL) return REDISMODULE_ERR;
        op->inputs[i] = Dag_AddSlot(dag, t);
    }
    for (size_t i = 0; i < nout; i++) {
        RedisModuleKey *key = RedisModule_OpenKey(ctx, outputs[i], REDISMODULE_READ);
        int bad = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY &&
                  RedisModule_ModuleTypeGetType(key) != RAI_TensorType;
        RedisModule_CloseKey(key);
        if (bad) {
            Error_Set(err, RAI_WRONGTYPE_MSG);
            return REDISMODULE_ERR;
        }
    }
    for (size_t i = 0; i < nout; i++) {
        op->outputs[i] = Dag_AddSlot(dag, NULL);
        Dag_AddPersist(dag, outputs[i], op->outputs[i]);
    }
    return REDISMODULE_OK;
}

void Dag_AddPersist(RAI_Dag *dag, RedisModuleString *key, size_t slot) {
    dag->persist =
        RedisModule_Realloc(dag->persist, sizeof(RAI_DagPersist) * (dag->npersist + 1));
    RedisModule_RetainString(NULL, key);
    dag->persist[dag->npersist++] = (RAI_DagPersist){.key = key, .slot = slot};
}

/* Main thread only for a client's DAG: slots may hold tensors that
 * reference client strings. LLAPI DAGs are freed on any thread. */
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
        if (op->key) RedisModule_Free(op->key);
        if (op->inputs) RedisModule_Free(op->inputs);
        if (op->outputs) RedisModule_Free(op->outputs);
        Error_Clear(&op->err);
    }
    for (size_t i = 0; i < dag->npersist; i++) RedisModule_FreeString(NULL, dag->persist[i].key);
    Caller_Clear(&dag->caller);
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

/* SLOWLOG, INFO COMMANDSTATS and the latency histogram of a blocking
 * command count the background time Redis is told about here, on top of
 * the main thread's (as RedisAI 1.2 does). Only the backend run is
 * measured, not the wait in a queue. A DAG is worked on by one worker at a
 * time, so Start/End pairs of one blocked client never overlap; End comes
 * before the DAG is unblocked or moved to another queue, after which the
 * blocked client is no longer ours to touch. */
static void measureStart(RAI_Dag *dag) {
    if (dag->bc && RedisModule_BlockedClientMeasureTimeStart) {
        RedisModule_BlockedClientMeasureTimeStart(dag->bc);
    }
}

static void measureEnd(RAI_Dag *dag) {
    if (dag->bc && RedisModule_BlockedClientMeasureTimeEnd) {
        RedisModule_BlockedClientMeasureTimeEnd(dag->bc);
    }
}

size_t Dag_OpInputBytes(const RAI_Dag *dag, const RAI_DagOp *op) {
    size_t n = 0;
    for (size_t i = 0; i < op->ninputs; i++) {
        const RAI_Tensor *t = dag->slots[op->inputs[i]];
        if (t) n += t->nbytes;
    }
    return n;
}

/* What the next inline-run decision of this model goes by (inline_run.c). */
static void recordRun(const RAI_Dag *dag, RAI_DagOp *op) {
    if (op->kind != DAG_OP_MODEL) return;
    __atomic_store_n(&op->model->last_run_us, op->duration_us, __ATOMIC_RELAXED);
    __atomic_store_n(&op->model->last_run_in_bytes, (long long)Dag_OpInputBytes(dag, op),
                     __ATOMIC_RELAXED);
}

static void runOp(RAI_Dag *dag, RAI_DagOp *op, int worker_index) {
    RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * (op->ninputs ? op->ninputs : 1));
    RAI_Tensor **outs = RedisModule_Calloc(op->noutputs ? op->noutputs : 1, sizeof(RAI_Tensor *));
    for (size_t i = 0; i < op->ninputs; i++) ins[i] = dag->slots[op->inputs[i]];
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = worker_index};
    runInfoKey(op, &info);
    /* Redis's interval encloses duration_us: SLOWLOG >= AI.INFO's figure. */
    measureStart(dag);
    long long start = nowUs();
    /* A script's redis.execute / redisAI.model_execute act for the caller. */
    const RAI_Caller *prev = Caller_SetCurrent(&dag->caller);
    int rc = callBackend(op, &info, ins, outs);
    Caller_SetCurrent(prev);
    op->duration_us = nowUs() - start;
    measureEnd(dag);
    recordRun(dag, op);
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

/* The DAG is done (or failed, or timed out): its client gets the reply on
 * the main thread, or an LLAPI DAG's on_finish runs here. */
static void finish(RAI_Dag *dag) {
    if (dag->on_finish) {
        dag->on_finish(dag);
    } else {
        RedisModule_UnblockClient(dag->bc, dag);
    }
}

static RAI_RunQueue *opQueue(RAI_DagOp *op, RAI_RunQueue *current) {
    return op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT ? op->queue : current;
}

/* TIMEOUT counts from enqueue and is checked before each op (spec 9.7);
 * a running op is never interrupted. Unblocks the client when it fires. */
static int timedOut(RAI_Dag *dag) {
    if (dag->timeout_ms <= 0 || nowMs() - dag->enqueued_ms < dag->timeout_ms) return 0;
    dag->timed_out = 1;
    finish(dag);
    return 1;
}

/* Runs ops from next_op while they belong to q; then moves the DAG to the
 * next op's queue, or finishes it. */
static void runFrom(RAI_Dag *dag, RAI_RunQueue *q) {
    while (dag->next_op < dag->nops) {
        RAI_DagOp *op = &dag->ops[dag->next_op];
        RAI_RunQueue *want = opQueue(op, q);
        if (want != q) {
            RunQueue_Push(want, dag);
            return;
        }
        if (timedOut(dag)) return;
        if (op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT) {
            runOp(dag, op, RunQueue_WorkerIndex());
        } else {
            op->state = DAG_OP_DONE;
        }
        dag->next_op++;
        if (op->state == DAG_OP_FAILED) break;
    }
    finish(dag);
}

/* ------------------------------ auto-batching ----------------------------- */

RAI_DagOp *Dag_BatchableOp(RAI_Dag *dag) {
    if (dag->next_op >= dag->nops) return NULL;
    RAI_DagOp *op = &dag->ops[dag->next_op];
    if (op->kind != DAG_OP_MODEL || op->model->batchsize <= 0 || op->ninputs == 0) return NULL;
    for (size_t i = 0; i < op->ninputs; i++) {
        RAI_Tensor *t = dag->slots[op->inputs[i]];
        if (t == NULL || t->ndims == 0) return NULL;
    }
    return op;
}

long long Dag_BatchDim(RAI_Dag *dag) {
    RAI_DagOp *op = &dag->ops[dag->next_op];
    long long d0 = dag->slots[op->inputs[0]]->dims[0];
    for (size_t i = 1; i < op->ninputs; i++) {
        if (dag->slots[op->inputs[i]]->dims[0] != d0) return -1;
    }
    return d0;
}

int Dag_BatchCompatible(RAI_Dag *a, RAI_Dag *b) {
    RAI_DagOp *x = Dag_BatchableOp(a), *y = Dag_BatchableOp(b);
    if (!x || !y || x->model != y->model || x->ninputs != y->ninputs) return 0;
    for (size_t i = 0; i < x->ninputs; i++) {
        RAI_Tensor *s = a->slots[x->inputs[i]], *t = b->slots[y->inputs[i]];
        if (s->ndims != t->ndims || s->dtype.code != t->dtype.code || s->dtype.bits != t->dtype.bits) {
            return 0;
        }
        for (int d = 1; d < s->ndims; d++) {
            if (s->dims[d] != t->dims[d]) return 0;
        }
    }
    return 1;
}

/* Along dim 0: the i-th input of every DAG's batched op, in DAG order. */
static RAI_Tensor *concatInputs(RAI_Dag **dags, size_t n, size_t i) {
    RAI_Tensor **column = RedisModule_Alloc(sizeof(RAI_Tensor *) * n);
    for (size_t k = 0; k < n; k++) {
        column[k] = dags[k]->slots[dags[k]->ops[dags[k]->next_op].inputs[i]];
    }
    RAI_Tensor *out = Tensor_ConcatRows(column, n);
    RedisModule_Free(column);
    return out;
}

static void failBatch(RAI_Dag **dags, size_t n, const char *msg) {
    for (size_t k = 0; k < n; k++) {
        RAI_DagOp *op = &dags[k]->ops[dags[k]->next_op];
        Error_Set(&op->err, msg);
        op->state = DAG_OP_FAILED;
        dags[k]->next_op++;
        finish(dags[k]); /* a failed op ends the DAG */
    }
}

void Dag_RunBatch(RAI_Dag **dags, size_t n, RAI_RunQueue *q) {
    size_t live = 0;
    for (size_t k = 0; k < n; k++) {
        if (!timedOut(dags[k])) dags[live++] = dags[k];
    }
    n = live;
    if (n == 0) return;
    if (n == 1) return runFrom(dags[0], q);

    RAI_DagOp *op0 = &dags[0]->ops[dags[0]->next_op];
    /* Copied: once a DAG goes on (or fails) the main thread may free it, op0
     * included, while this worker still releases the batch's tensors. */
    const size_t ninputs = op0->ninputs, noutputs = op0->noutputs;
    long long *rows = RedisModule_Alloc(sizeof(long long) * n);
    long long total = 0;
    for (size_t k = 0; k < n; k++) total += rows[k] = Dag_BatchDim(dags[k]);
    RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * ninputs);
    RAI_Tensor **outs = RedisModule_Calloc(noutputs ? noutputs : 1, sizeof(RAI_Tensor *));
    for (size_t i = 0; i < ninputs; i++) ins[i] = concatInputs(dags, n, i);

    /* The batch runs for several requests, possibly through different keys
     * of one model: the first op's key names it. */
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    runInfoKey(op0, &info);
    RAI_Error err;
    Error_Init(&err);
    RAI_Model *m = op0->model;
    /* Each request of the batch waited for the whole run: each is told it. */
    for (size_t k = 0; k < n; k++) measureStart(dags[k]);
    long long start = nowUs();
    int rc = m->be->model_run(m->handle, &info, ins, ninputs, outs, noutputs, &err);
    long long duration = nowUs() - start;
    for (size_t k = 0; k < n; k++) measureEnd(dags[k]);
    for (size_t j = 0; rc == 0 && j < noutputs; j++) {
        if (outs[j] == NULL) {
            Error_Set(&err, "ERR Model did not generate the expected number of outputs");
            rc = -1;
        } else if (outs[j]->ndims == 0 || outs[j]->dims[0] != total) {
            Error_Set(&err, "ERR Model did not generate the expected batch size");
            rc = -1;
        }
    }
    if (rc != 0) {
        Error_Set(&err, "ERR model run failed");
        failBatch(dags, n, Error_Message(&err));
    } else {
        long long from = 0;
        for (size_t k = 0; k < n; k++) {
            RAI_DagOp *op = &dags[k]->ops[dags[k]->next_op];
            for (size_t j = 0; j < op->noutputs; j++) {
                dags[k]->slots[op->outputs[j]] = Tensor_SliceRows(outs[j], from, rows[k]);
            }
            from += rows[k];
            op->duration_us = duration; /* spec 10: each gets the batch's time */
            op->state = DAG_OP_DONE;
            dags[k]->next_op++;
            runFrom(dags[k], q);
        }
    }
    Error_Clear(&err);
    for (size_t i = 0; i < ninputs; i++) Tensor_Release(ins[i]);
    for (size_t j = 0; j < noutputs; j++) Tensor_Release(outs[j]);
    RedisModule_Free(ins);
    RedisModule_Free(outs);
    RedisModule_Free(rows);
}

/* ------------------------------ main thread ------------------------------- */

static const RAI_DagOp *firstFailure(const RAI_Dag *dag) {
    for (size_t i = 0; i < dag->nops; i++) {
        if (dag->ops[i].state == DAG_OP_FAILED) return &dag->ops[i];
    }
    return NULL;
}

/* Whether key can take a tensor: empty or a tensor already. A client may
 * have written another type there while the DAG ran. */
static int persistTargetOk(RedisModuleCtx *ctx, RedisModuleString *keyname) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    int ok = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY ||
             RedisModule_ModuleTypeGetType(key) == RAI_TensorType;
    RedisModule_CloseKey(key);
    return ok;
}

/* Stores every PERSIST target, or none: every key is checked first, and so
 * is the room maxmemory leaves for the outputs' copies into Redis's
 * allocator. Redis refused the command before it ran if memory was over
 * the limit then; this refuses what would pass it now (noeviction), so
 * clients running in parallel cannot push far past the limit. */
static int persistAll(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    size_t more = 0;
    for (size_t i = 0; i < dag->npersist; i++) {
        RAI_Tensor *t = dag->slots[dag->persist[i].slot];
        if (t == NULL) continue;
        if (!persistTargetOk(ctx, dag->persist[i].key)) {
            Error_Set(err, RAI_WRONGTYPE_MSG);
            return REDISMODULE_ERR;
        }
        more += Tensor_ForeignBytes(t);
    }
    if (dag->npersist > 0 && Memory_WouldExceed(more)) {
        Error_Set(err, RAI_OOM_MSG);
        return REDISMODULE_ERR;
    }
    for (size_t i = 0; i < dag->npersist; i++) {
        size_t slot = dag->persist[i].slot;
        RAI_Tensor *t = dag->slots[slot];
        if (t == NULL) continue;
        /* Copy once per slot, and let the backend's memory go now. */
        dag->slots[slot] = Tensor_ForKeyspace(t);
        Tensor_Release(t);
        if (Tensor_StoreAndReplicate(ctx, dag->persist[i].key, dag->slots[slot], err) !=
            REDISMODULE_OK) {
            return REDISMODULE_ERR; /* not reached: the keys were checked above */
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
void Dag_UpdateStats(RAI_Dag *dag) {
    for (size_t i = 0; i < dag->nops; i++) {
        RAI_DagOp *op = &dag->ops[i];
        RAI_RunStats *s = op->kind == DAG_OP_MODEL    ? op->model->stats
                          : op->kind == DAG_OP_SCRIPT ? op->script->stats
                                                      : NULL;
        if (s == NULL || op->state == DAG_OP_PENDING) continue;
        long long samples = 0;
        if (op->state == DAG_OP_DONE && op->kind == DAG_OP_MODEL && op->noutputs > 0) {
            RAI_Tensor *t = dag->slots[op->outputs[0]];
            if (t && t->ndims > 0) samples = t->dims[0];
        }
        RunStats_AddRun(s, op->state == DAG_OP_DONE, op->duration_us, samples);
    }
}

/* Stores the outputs and replies: from the reply callback of a blocked
 * client, or at once after an inline run. */
static int replyDag(RedisModuleCtx *ctx, RAI_Dag *dag) {
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

static int Dag_ReplyCallback(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    return replyDag(ctx, RedisModule_GetBlockedClientPrivateData(ctx));
}

/* Runs after the reply callback, or alone when the client went away: the
 * runs happened either way, so they are counted here. */
static void Dag_FreeCallback(RedisModuleCtx *ctx, void *privdata) {
    REDISMODULE_NOT_USED(ctx);
    RAI_Dag *dag = privdata;
    if (!dag->timed_out) Dag_UpdateStats(dag);
    Dag_Free(dag);
    InlineRun_QueuedEnd();
}

int Dag_RefuseIfCannotBlock(RedisModuleCtx *ctx) {
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA)) {
        RedisModule_ReplyWithError(
            ctx, "ERR Cannot run RedisAI command within a transaction or a LUA script");
        return 1;
    }
    /* RedisModule_Call's client (a script's redis.execute, another module)
     * may not block: Redis asserts it did not and aborts otherwise. */
    if (flags & REDISMODULE_CTX_FLAGS_DENY_BLOCKING) {
        const char *name =
            RedisModule_GetCurrentCommandName ? RedisModule_GetCurrentCommandName(ctx) : NULL;
        char upper[64];
        size_t i = 0;
        for (; name && name[i] && i < sizeof(upper) - 1; i++) {
            upper[i] = (char)toupper((unsigned char)name[i]);
        }
        upper[i] = '\0';
        char msg[192];
        snprintf(msg, sizeof(msg), DAG_WOULD_BLOCK_FMT, i ? upper : "this command");
        RedisModule_ReplyWithError(ctx, msg);
        return 1;
    }
    return 0;
}

void Dag_CaptureCaller(RedisModuleCtx *ctx, RAI_Dag *dag) {
    if (dag->caller.known) return;
    /* Blocking commands are refused where the caller is not knowable (Lua,
     * module calls): a DAG that got here comes from a connection. */
    Caller_Capture(ctx, &dag->caller);
}

/* The queue of the first model or script op, else the CPU queue. */
static RAI_RunQueue *firstQueue(RAI_Dag *dag, RAI_Error *err) {
    for (size_t i = 0; i < dag->nops; i++) {
        if (dag->ops[i].kind == DAG_OP_MODEL || dag->ops[i].kind == DAG_OP_SCRIPT) {
            return dag->ops[i].queue;
        }
    }
    return RunQueue_Ensure("CPU", err);
}

/* The DAG's one model op on this thread, no queue, no blocked client
 * (InlineRun_Decide allowed it): the same run, reply and statistics as from
 * a worker. worker_index is the one the backend is told. */
static void runInline(RedisModuleCtx *ctx, RAI_Dag *dag, int worker_index) {
    runOp(dag, &dag->ops[0], worker_index);
    replyDag(ctx, dag);
    Dag_UpdateStats(dag);
    Dag_Free(dag);
}

int Dag_Start(RedisModuleCtx *ctx, RAI_Dag *dag) {
    RAI_Error err;
    Error_Init(&err);
    RAI_RunQueue *first = firstQueue(dag, &err);
    if (first == NULL) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        Dag_Free(dag);
        return REDISMODULE_OK;
    }
    if (InlineRun_Decide(dag, first)) {
        runInline(ctx, dag, RunQueue_Threads(first));
        return REDISMODULE_OK;
    }
    Dag_CaptureCaller(ctx, dag);
    dag->bc = RedisModule_BlockClient(ctx, Dag_ReplyCallback, NULL, Dag_FreeCallback, 0);
    InlineRun_QueuedStart();
    dag->enqueued_ms = nowMs();
    RunQueue_Push(first, dag);
    return REDISMODULE_OK;
}

int Dag_Enqueue(RAI_Dag *dag, RAI_Error *err) {
    /* The CPU queue exists from load on, so this never creates one. */
    RAI_RunQueue *first = firstQueue(dag, err);
    if (first == NULL) return REDISMODULE_ERR;
    dag->enqueued_ms = nowMs();
    RunQueue_Push(first, dag);
    return REDISMODULE_OK;
}
