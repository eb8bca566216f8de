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

#include "core/async_run.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/messages.h"
#include "core/run_gate.h"
#include "engine/blocked_time.h"
#include "engine/completion.h"
#include "engine/dag_park.h"
#include "engine/run_threads.h"
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

/* After the backend answered (rc, outs): the op's outputs in the DAG's
 * slots, or the op failed. The caller owns the array outs. */
static void opAnswered(RAI_Dag *dag, RAI_DagOp *op, long long start, int rc, RAI_Tensor **outs) {
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
    /* Scripts keep their backend's threads (Torch's, set per thread). */
    RAI_ThreadChoice threads =
        op->kind == DAG_OP_MODEL ? RunThreads_Choose(op->model) : (RAI_ThreadChoice){0};
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo),
                        .worker_index = worker_index,
                        .intra_op_threads = threads.intra_op_threads};
    Dag_RunInfoKey(op, &info);
    /* Redis's interval encloses duration_us: SLOWLOG >= AI.INFO's figure. */
    Dag_MeasureStart(dag);
    long long start = Clock_NowUs();
    /* A script's redis.execute / redisAI.model_execute act for the caller. */
    const RAI_Caller *prev = Caller_SetCurrent(&dag->caller);
    RunThreads_Begin(threads);
    int rc = callBackend(op, &info, ins, outs);
    RunThreads_End(threads);
    Caller_SetCurrent(prev);
    opAnswered(dag, op, start, rc, outs);
    if (op->kind == DAG_OP_MODEL && rc == 0) RunThreads_Ran(op->model, threads, op->duration_us);
    if (ins != small_ins) RedisModule_Free(ins);
    if (outs != small_outs) RedisModule_Free(outs);
}

/* A model run handed off (core/async_run.h): what its answer needs. */
typedef struct OpInFlight {
    RAI_Dag *dag;
    RAI_DagOp *op;
    RAI_RunQueue *q;
    long long start;
} OpInFlight;

/* The answer of a run in flight, on the worker that handed it off: the
 * DAG goes on from the next op, as after a run waited for. */
static void opInFlightDone(void *ctx, int rc, RAI_Tensor **outputs) {
    OpInFlight *f = ctx;
    RAI_DagOp *op = f->op;
    if (rc == ASYNC_RUN_NOT_STARTED) {
        Dag_MeasureEnd(f->dag);
        RunQueue_PushFront(f->q, f->dag);
        RedisModule_Free(f);
        return;
    }
    RAI_Tensor **outs = RedisModule_Calloc(op->noutputs ? op->noutputs : 1, sizeof(RAI_Tensor *));
    for (size_t i = 0; rc == 0 && i < op->noutputs; i++) outs[i] = outputs[i];
    opAnswered(f->dag, op, f->start, rc, outs);
    RedisModule_Free(outs);
    RAI_Dag *dag = f->dag;
    RAI_RunQueue *q = f->q;
    RedisModule_Free(f);
    dag->next_op++;
    if (op->state == DAG_OP_FAILED) {
        Dag_Finish(dag);
    } else {
        Dag_RunFrom(dag, q);
    }
}

/* Whether a model op can be handed off: its backend takes runs in flight,
 * this thread may (a worker at its loop's level), and the model does not
 * batch (a batch gathers the requests that queue while a run is waited
 * for: an auto-batched model keeps that). */
static int canHandOff(const RAI_DagOp *op) {
    const AsyncRun_Ops *async = AsyncRun_Get();
    return op->kind == DAG_OP_MODEL && async != NULL && AsyncRun_Allowed() &&
           op->model->batchsize <= 0 && async->accepts(op->model->be);
}

void Dag_SettleInFlight(void) {
    const AsyncRun_Ops *async = AsyncRun_Get();
    if (async == NULL || !AsyncRun_Allowed() || async->pending() == 0) return;
    while (async->pending() > 0) async->wait(-1, -1);
}

/* Hands a model op off (canHandOff): the answer goes on with the DAG. A
 * refused hand-off is the op's failure, as a run that failed. */
static void handOff(RAI_Dag *dag, RAI_DagOp *op, RAI_RunQueue *q) {
    const AsyncRun_Ops *async = AsyncRun_Get();
    RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * (op->ninputs ? op->ninputs : 1));
    for (size_t i = 0; i < op->ninputs; i++) ins[i] = dag->slots[op->inputs[i]];
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    Dag_RunInfoKey(op, &info);
    OpInFlight *f = RedisModule_Alloc(sizeof(*f));
    *f = (OpInFlight){.dag = dag, .op = op, .q = q};
    Dag_MeasureStart(dag);
    f->start = Clock_NowUs();
    async->spin_hint(RunQueue_FewClients() ? rai_config.worker_spin_us : 0);
    int rc = async->submit(op->model->handle, &info, ins, op->ninputs, op->noutputs,
                           opInFlightDone, f, &op->err);
    RedisModule_Free(ins);
    if (rc != 0) opInFlightDone(f, -1, NULL);
}

/* The DAG is done (or failed, or timed out): its client is answered at the
 * main thread's next pass (engine/completion.h), or an LLAPI DAG's
 * on_finish runs here. Either way the DAG is no longer this thread's. */
void Dag_Finish(RAI_Dag *dag) {
    if (dag->on_finish) {
        dag->on_finish(dag);
    } else {
        Completion_Push(dag->bc, dag);
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

/* Passes the ops from next_op that run nothing (their slots were filled at
 * parse time or are read at reply time): 1 when a model or script op is left. */
static int passToNextRun(RAI_Dag *dag) {
    for (; dag->next_op < dag->nops; dag->next_op++) {
        RAI_DagOp *op = &dag->ops[dag->next_op];
        if (op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT) return 1;
        op->state = DAG_OP_DONE;
    }
    return 0;
}

/* See dag_run.h. Two passes: every finished member is on the completion
 * path before a member with more to run is queued, where another worker
 * could start it at once. A member goes on from its own queue's head
 * (RunQueue_PushFront): it was taken before the DAGs pushed since, as a
 * DAG that runs alone goes on at once, and its next op may batch again. */
void Dag_ContinueBatch(RAI_Dag **dags, size_t n, RAI_RunQueue *q) {
    size_t left = 0;
    for (size_t k = 0; k < n; k++) {
        RAI_Dag *dag = dags[k];
        /* TIMEOUT is checked before each op, as in Dag_RunFrom. */
        if (dag->next_op < dag->nops && Dag_TimedOut(dag)) continue;
        if (passToNextRun(dag)) {
            dags[left++] = dag;
        } else {
            Dag_Finish(dag);
        }
    }
    for (size_t k = 0; k < left; k++) {
        RAI_RunQueue *want = dags[k]->ops[dags[k]->next_op].queue;
        if (want == q) {
            RunQueue_PushFront(q, dags[k]);
        } else {
            RunQueue_Push(want, dags[k]);
        }
    }
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
        int run_op = op->kind == DAG_OP_MODEL || op->kind == DAG_OP_SCRIPT;
        int hand = run_op && canHandOff(op);
        /* A run this worker waits for, and a TIMEOUT, come after the runs it
         * has in flight, as they would have in its queue: their answers
         * first (their clients are answered first), then the check. */
        if ((run_op && !hand) || dag->timeout_ms > 0) Dag_SettleInFlight();
        if (Dag_TimedOut(dag)) return;
        long long retry_ms = -1;
        if (run_op && RunGate_Parks() && Dag_Parked(dag, Clock_NowMs(), &retry_ms)) {
            RunQueue_PushFront(q, dag); /* parked there: Batch_Take skips it */
            return;
        }
        dag->park_since_ms = 0;
        if (hand) {
            handOff(dag, op, q);
            return;
        }
        if (run_op) {
            Dag_RunOp(dag, op, RunQueue_WorkerIndex());
        } else {
            op->state = DAG_OP_DONE;
        }
        dag->next_op++;
        if (op->state == DAG_OP_FAILED) break;
    }
    Dag_Finish(dag);
}
