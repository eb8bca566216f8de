/*
 * batch.c - auto-batching (docs/commands.md, AI.MODELSTORE's BATCHSIZE):
 * the run queues' policy (RunQueue_SetPolicy). Batch_Take picks, under the
 * queue's lock, the next DAG with the queued DAGs that batch with it;
 * Batch_Run runs them as one model run, inputs concatenated along dim 0
 * and outputs sliced back; then each DAG is finished, or queued again for
 * its next op, before any of them runs on (dag_run.c).
 */
#include "engine/batch.h"

#include <string.h>

#include "core/async_run.h"
#include "core/clock.h"
#include "core/messages.h"
#include "engine/dag_park.h"
#include "engine/dag_run.h"
#include "redisai/reply_texts.h"
#include "types/model.h"

static RAI_DagOp *batchableOp(RAI_Dag *dag) {
    if (dag->next_op >= dag->nops) return NULL;
    RAI_DagOp *op = &dag->ops[dag->next_op];
    if (op->kind != DAG_OP_MODEL || op->model->batchsize <= 0 || op->ninputs == 0) return NULL;
    for (size_t i = 0; i < op->ninputs; i++) {
        RAI_Tensor *t = dag->slots[op->inputs[i]];
        if (t == NULL || t->ndims == 0) return NULL;
    }
    return op;
}

static long long batchDim(RAI_Dag *dag) {
    RAI_DagOp *op = &dag->ops[dag->next_op];
    long long d0 = dag->slots[op->inputs[0]]->dims[0];
    for (size_t i = 1; i < op->ninputs; i++) {
        if (dag->slots[op->inputs[i]]->dims[0] != d0) return -1;
    }
    return d0;
}

static int batchCompatible(RAI_Dag *a, RAI_Dag *b) {
    RAI_DagOp *x = batchableOp(a), *y = batchableOp(b);
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
        Dag_Finish(dags[k]); /* a failed op ends the DAG */
    }
}

/* A batch's run: what its answer needs (the DAGs copied: the worker's
 * array is reused for the next take while the run is in flight). */
typedef struct BatchRun {
    RAI_Dag **dags;
    size_t n;
    long long *rows;
    long long total;
    size_t noutputs;
    RAI_RunQueue *q;
    long long start;
    RAI_Error err;
} BatchRun;

static void freeBatchRun(BatchRun *b) {
    Error_Clear(&b->err);
    RedisModule_Free(b->dags);
    RedisModule_Free(b->rows);
    RedisModule_Free(b);
}

/* The model answered the batch (rc, outs): every DAG gets its rows, then each
 * is finished or queued for its next op (Dag_ContinueBatch), or every DAG
 * fails with the run's error. Releases outs' tensors. */
static void batchAnswered(BatchRun *b, int rc, RAI_Tensor **outs) {
    long long duration = Clock_NowUs() - b->start;
    for (size_t k = 0; k < b->n; k++) Dag_MeasureEnd(b->dags[k]);
    for (size_t j = 0; rc == 0 && j < b->noutputs; j++) {
        if (outs[j] == NULL) {
            Error_Set(&b->err, RAI_ERR_OUTPUT_COUNT);
            rc = -1;
        } else if (outs[j]->ndims == 0 || outs[j]->dims[0] != b->total) {
            Error_Set(&b->err, RAI_ERR_BATCH_SIZE);
            rc = -1;
        }
    }
    if (rc != 0) {
        Error_Set(&b->err, RAI_ERR_RUN_FAILED);
        failBatch(b->dags, b->n, Error_Message(&b->err));
    } else {
        long long from = 0;
        for (size_t k = 0; k < b->n; k++) {
            RAI_Dag *dag = b->dags[k];
            RAI_DagOp *op = &dag->ops[dag->next_op];
            for (size_t j = 0; j < op->noutputs; j++) {
                dag->slots[op->outputs[j]] = Tensor_SliceRows(outs[j], from, b->rows[k]);
            }
            from += b->rows[k];
            op->duration_us = duration; /* AI.INFO: each gets the batch's time */
            op->state = DAG_OP_DONE;
            dag->next_op++;
        }
        Dag_ContinueBatch(b->dags, b->n, b->q);
    }
    for (size_t j = 0; outs && j < b->noutputs; j++) Tensor_Release(outs[j]);
}

static void batchInFlightDone(void *ctx, int rc, RAI_Tensor **outputs) {
    BatchRun *b = ctx;
    if (rc == ASYNC_RUN_NOT_STARTED) {
        /* Back where they were, in their order, to be batched again. */
        for (size_t k = 0; k < b->n; k++) {
            Dag_MeasureEnd(b->dags[k]);
            RunQueue_PushFront(b->q, b->dags[k]);
        }
        freeBatchRun(b);
        return;
    }
    batchAnswered(b, rc, rc == 0 ? outputs : NULL);
    freeBatchRun(b);
}

void Batch_Run(RAI_Dag **dags, size_t n, RAI_RunQueue *q) {
    /* A batch is waited for (batched models are not handed off): after the
     * runs this worker has in flight, and so are the TIMEOUT checks. */
    if (n > 1) Dag_SettleInFlight();
    size_t live = 0;
    for (size_t k = 0; k < n; k++) {
        if (!Dag_TimedOut(dags[k])) dags[live++] = dags[k];
    }
    n = live;
    if (n == 0) return;
    if (n == 1) return Dag_RunFrom(dags[0], q);

    RAI_DagOp *op0 = &dags[0]->ops[dags[0]->next_op];
    /* Copied: once a DAG goes on (or fails) the main thread may free it, op0
     * included, while this worker still releases the batch's tensors. */
    const size_t ninputs = op0->ninputs, noutputs = op0->noutputs;
    BatchRun *b = RedisModule_Alloc(sizeof(*b));
    *b = (BatchRun){
        .dags = RedisModule_Alloc(sizeof(RAI_Dag *) * n),
        .n = n,
        .rows = RedisModule_Alloc(sizeof(long long) * n),
        .noutputs = noutputs,
        .q = q,
    };
    Error_Init(&b->err);
    memcpy(b->dags, dags, sizeof(RAI_Dag *) * n);
    for (size_t k = 0; k < n; k++) b->total += b->rows[k] = batchDim(dags[k]);
    RAI_Tensor **ins = RedisModule_Alloc(sizeof(RAI_Tensor *) * ninputs);
    for (size_t i = 0; i < ninputs; i++) ins[i] = concatInputs(dags, n, i);

    /* The batch runs for several requests, possibly through different keys
     * of one model: the first op's key names it. */
    RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
    Dag_RunInfoKey(op0, &info);
    RAI_Model *m = op0->model;
    /* Each request of the batch waited for the whole run: each is told it. */
    for (size_t k = 0; k < n; k++) Dag_MeasureStart(dags[k]);
    b->start = Clock_NowUs();
    const AsyncRun_Ops *async = AsyncRun_Get();
    if (async && AsyncRun_Allowed() && async->accepts(m->be)) {
        /* Handed off: the inputs were copied for the host, the answer
         * finishes the batch on this worker (batchInFlightDone). */
        if (async->submit(m->handle, &info, ins, ninputs, noutputs, batchInFlightDone, b,
                          &b->err) != 0) {
            batchInFlightDone(b, -1, NULL);
        }
    } else {
        RAI_Tensor **outs = RedisModule_Calloc(noutputs ? noutputs : 1, sizeof(RAI_Tensor *));
        int rc = m->be->model_run(m->handle, &info, ins, ninputs, outs, noutputs, &b->err);
        batchAnswered(b, rc, outs);
        freeBatchRun(b);
        RedisModule_Free(outs);
    }
    for (size_t i = 0; i < ninputs; i++) Tensor_Release(ins[i]);
    RedisModule_Free(ins);
}

static size_t takeAlone(RAI_RunQueue *q, RAI_QueueItem *prev, RAI_QueueItem *it, RAI_Dag **batch) {
    batch[0] = RunQueue_ItemDag(it);
    RunQueue_Unlink(q, prev, it);
    return 1;
}

/* A DAG held for MINBATCHSIZE keeps its TIMEOUT: once it has passed the DAG
 * is taken alone, so the engine answers +TIMEDOUT; until then the worker
 * must wake at its deadline. */
static int heldExpired(const RAI_Dag *dag, long long now, long long *wait_ms) {
    if (dag->timeout_ms <= 0) return 0;
    long long left = dag->timeout_ms - (now - dag->enqueued_ms);
    if (left <= 0) return 1;
    if (*wait_ms < 0 || left < *wait_ms) *wait_ms = left;
    return 0;
}

/* See batch.h. Under the queue's lock; *wait_ms is -1 when only a push can
 * make something runnable. */
size_t Batch_Take(RAI_RunQueue *q, RAI_Dag ***batch, size_t *cap, long long *wait_ms) {
    long long now = Clock_NowMs();
    *wait_ms = -1;
    const RAI_Model *held[16];
    size_t nheld = 0;
    RAI_QueueItem *prev = NULL;
    for (RAI_QueueItem *it = RunQueue_First(q); it; prev = it, it = RunQueue_Next(it)) {
        RAI_Dag *dag = RunQueue_ItemDag(it);
        /* Its backend's host is not ready for it: the requests behind it go
         * first; its TIMEOUT still answers it. */
        if (Dag_Parked(dag, now, wait_ms)) {
            if (heldExpired(dag, now, wait_ms)) return takeAlone(q, prev, it, *batch);
            continue;
        }
        RAI_DagOp *op = batchableOp(dag);
        /* A helper leaves a batched model's requests to gather for a worker
         * (engine/run_queue.c). */
        if (op && RunQueue_IsHelper()) continue;
        long long d0 = op ? batchDim(dag) : -1;
        if (op == NULL || d0 < 0 || d0 >= op->model->batchsize) {
            return takeAlone(q, prev, it, *batch);
        }
        /* Requests for a batched model gather while the run before them is
         * waited for: with runs of this worker in flight, the batch is made
         * once they are answered, from what queued meanwhile. */
        const AsyncRun_Ops *async = AsyncRun_Get();
        if (async && AsyncRun_Allowed() && async->pending() > 0) {
            *wait_ms = RUNQUEUE_WAIT_ANSWERS;
            return 0;
        }
        const RAI_Model *m = op->model;
        int is_held = 0;
        for (size_t i = 0; i < nheld; i++) is_held |= held[i] == m;
        if (is_held) {
            if (heldExpired(dag, now, wait_ms)) return takeAlone(q, prev, it, *batch);
            continue;
        }

        size_t n = 1;
        long long total = d0;
        (*batch)[0] = dag;
        for (RAI_QueueItem *j = RunQueue_Next(it); j && total < m->batchsize;
             j = RunQueue_Next(j)) {
            RAI_Dag *other = RunQueue_ItemDag(j);
            long long d;
            if (!batchCompatible(dag, other) || (d = batchDim(other)) < 0) continue;
            if (n == *cap) {
                *cap *= 2;
                *batch = RedisModule_Realloc(*batch, sizeof(RAI_Dag *) * *cap);
            }
            (*batch)[n++] = other;
            total += d;
        }
        if (m->minbatchsize > 0 && total < m->minbatchsize) {
            long long waited = now - dag->enqueued_ms;
            if (m->minbatchtimeout <= 0 || waited < m->minbatchtimeout) {
                if (m->minbatchtimeout > 0) {
                    long long left = m->minbatchtimeout - waited;
                    if (*wait_ms < 0 || left < *wait_ms) *wait_ms = left;
                }
                if (nheld < sizeof(held) / sizeof(held[0])) held[nheld++] = m;
                if (heldExpired(dag, now, wait_ms)) return takeAlone(q, prev, it, *batch);
                continue;
            }
        }
        /* Unlink every member: the first is `it`, the others follow it. */
        size_t k = 0;
        RAI_QueueItem *p = prev;
        for (RAI_QueueItem *j = it; j && k < n;) {
            RAI_QueueItem *next = RunQueue_Next(j);
            if (RunQueue_ItemDag(j) == (*batch)[k]) {
                RunQueue_Unlink(q, p, j);
                k++;
            } else {
                p = j;
            }
            j = next;
        }
        return n;
    }
    return 0;
}
