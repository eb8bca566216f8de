/*
 * dag_run.c - running a DAG's ops on a run-queue worker, see dag_run.h.
 *
 * A DAG sits in exactly one run queue at a time. A worker runs consecutive
 * ops of its own queue; when the next op belongs to another device's queue
 * the DAG moves there; when no op is left (or one failed, or the DAG timed
 * out in its queue) the worker unblocks the client, whose reply callback
 * runs on the main thread (dag_reply.c).
 */
#include "engine/dag_run.h"

#include <string.h>

#include "core/clock.h"
#include "core/messages.h"
#include "engine/blocked_time.h"
#include "redisai/reply_texts.h"
#include "types/model.h"
#include "types/run_stats.h"
#include "types/script.h"

/* The key a run is for: recorded at parse time; for an op built by the
 * LLAPI, the key its model or script is stored at, if any. */
void Dag_RunInfoKey(const RAI_DagOp *op, RAI_RunInfo *info) {
    if (op->key) {
        info->key = op->key;
        info->key_len = op->key_len;
        return;
    }
    const RAI_RunStats *st = op->kind == DAG_OP_MODEL ? (op->model ? op->model->stats : NULL)
                                                      : (op->script ? op->script->stats : NULL);
    info->key = RunStats_Key(st, &info->key_len);
}

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
 * measured, not the wait in a queue, and only once the command that
 * blocked the client has returned (blocked_time.h): the logged time never
 * exceeds the client's round trip. A DAG is worked on by one worker at a
 * time, so Start/End pairs of one blocked client never overlap; End comes
 * before the DAG is unblocked or moved to another queue, after which the
 * blocked client is no longer ours to touch. */
void Dag_MeasureStart(RAI_Dag *dag) {
    BlockedTime_RunStart(&dag->blocked_time);
}

void Dag_MeasureEnd(RAI_Dag *dag) {
    BlockedTime_RunEnd(&dag->blocked_time);
}

/* What the next inline-run decision of this model goes by (inline_run.c). */
static void recordRun(const RAI_Dag *dag, RAI_DagOp *op) {
    if (op->kind != DAG_OP_MODEL) return;
    __atomic_store_n(&op->model->last_run_us, op->duration_us, __ATOMIC_RELAXED);
    __atomic_store_n(&op->model->last_run_in_bytes, (long long)Dag_OpInputBytes(dag, op),
                     __ATOMIC_RELAXED);
}

void Dag_RunOp(RAI_Dag *dag, RAI_DagOp *op, int worker_index) {
    /* Most ops have a few inputs and outputs: no allocation for them. */
    RAI_Tensor *small_ins[8], *small_outs[8] = {0};
    RAI_Tensor **ins = op->ninputs <= 8 ? small_ins
                                        : RedisModule_Alloc(sizeof(RAI_Tensor *) * op->ninputs);
    RAI_Tensor **outs = op->noutputs <= 8
                            ? small_outs
                            : RedisModule_Calloc(op->noutputs, sizeof(RAI_Tensor *));
    for (size_t i = 0; i < op->ninputs; i++) ins[i] = dag->slots[op->inputs[i]];
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = worker_index};
    Dag_RunInfoKey(op, &info);
    /* Redis's interval encloses duration_us: SLOWLOG >= AI.INFO's figure. */
    Dag_MeasureStart(dag);
    long long start = Clock_NowUs();
    /* A script's redis.execute / redisAI.model_execute act for the caller. */
    const RAI_Caller *prev = Caller_SetCurrent(&dag->caller);
    int rc = callBackend(op, &info, ins, outs);
    Caller_SetCurrent(prev);
    op->duration_us = Clock_NowUs() - start;
    Dag_MeasureEnd(dag);
    recordRun(dag, op);
    for (size_t i = 0; rc == 0 && i < op->noutputs; i++) {
        if (outs[i] == NULL) {
            if (op->kind == DAG_OP_MODEL) {
                Error_Set(&op->err, RAI_ERR_OUTPUT_COUNT);
            } else {
                Error_SetFmt(&op->err, RAI_ERR_SCRIPT_OUTPUT_COUNT "%s",
                             op->function);
            }
            rc = -1;
        }
    }
    if (rc != 0) {
        Error_Set(&op->err, RAI_ERR_RUN_FAILED);
        for (size_t i = 0; i < op->noutputs; i++) Tensor_Release(outs[i]);
        op->state = DAG_OP_FAILED;
    } else {
        for (size_t i = 0; i < op->noutputs; i++) dag->slots[op->outputs[i]] = outs[i];
        op->state = DAG_OP_DONE;
    }
    if (ins != small_ins) RedisModule_Free(ins);
    if (outs != small_outs) RedisModule_Free(outs);
}

/* The DAG is done (or failed, or timed out): its client gets the reply on
 * the main thread, or an LLAPI DAG's on_finish runs here. */
void Dag_Finish(RAI_Dag *dag) {
    if (dag->on_finish) {
        dag->on_finish(dag);
    } else {
        RedisModule_UnblockClient(dag->bc, dag);
    }
}

static RAI_RunQueue *opQueue(RAI_DagOp *op, RAI_RunQueue *current) {
    return op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT ? op->queue : current;
}

/* TIMEOUT counts from enqueue and is checked before each op (docs/commands.md, AI.DAGEXECUTE);
 * a running op is never interrupted. Unblocks the client when it fires. */
int Dag_TimedOut(RAI_Dag *dag) {
    if (dag->timeout_ms <= 0 || Clock_NowMs() - dag->enqueued_ms < dag->timeout_ms) return 0;
    dag->timed_out = 1;
    Dag_Finish(dag);
    return 1;
}

/* Runs ops from next_op while they belong to q; then moves the DAG to the
 * next op's queue, or finishes it. */
void Dag_RunFrom(RAI_Dag *dag, RAI_RunQueue *q) {
    while (dag->next_op < dag->nops) {
        RAI_DagOp *op = &dag->ops[dag->next_op];
        RAI_RunQueue *want = opQueue(op, q);
        if (want != q) {
            RunQueue_Push(want, dag);
            return;
        }
        if (Dag_TimedOut(dag)) return;
        if (op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT) {
            Dag_RunOp(dag, op, RunQueue_WorkerIndex());
        } else {
            op->state = DAG_OP_DONE;
        }
        dag->next_op++;
        if (op->state == DAG_OP_FAILED) break;
    }
    Dag_Finish(dag);
}
