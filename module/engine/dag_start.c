/*
 * dag_start.c - a DAG leaves its parser, see dag_start.h: run inline and
 * answered at once, or its client blocked and the DAG queued.
 */
#include "engine/dag_start.h"

#include "core/clock.h"
#include "engine/blocked_time.h"
#include "engine/dag_reply.h"
#include "engine/dag_run.h"
#include "engine/inline_run.h"
#include "engine/main_spin.h"

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
    Dag_RunOp(dag, &dag->ops[0], worker_index);
    InlineRun_Ran(dag->ops[0].model, dag->ops[0].duration_us);
    Dag_Reply(ctx, dag);
    Dag_UpdateStats(dag);
    Dag_Free(dag);
}

static int refuse(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    RedisModule_ReplyWithError(ctx, Error_Message(err));
    Error_Clear(err);
    Dag_Free(dag);
    return REDISMODULE_OK;
}

int Dag_Start(RedisModuleCtx *ctx, RAI_Dag *dag) {
    RAI_Error err;
    Error_Init(&err);
    RAI_RunQueue *first = firstQueue(dag, &err);
    if (first == NULL) return refuse(ctx, dag, &err);
    RunQueue_ClientStarts(RedisModule_GetClientId(ctx));
    /* Plain values: the decision knows models and queues, not DAGs. */
    const RAI_DagOp *op = dag->nops == 1 ? &dag->ops[0] : NULL;
    int single_model = op != NULL && op->kind == DAG_OP_MODEL;
    RAI_RunWhere where = InlineRun_Decide(ctx, single_model ? op->model : NULL,
                                          single_model ? Dag_OpInputBytes(dag, op) : 0, first);
    if (where == RUN_INLINE) {
        runInline(ctx, dag, RunQueue_Threads(first));
        MainSpin_Note();
        return REDISMODULE_OK;
    }
    /* Inline, a lone model op checks nothing on the caller's behalf. */
    if (Dag_CaptureCaller(ctx, dag, &err) != REDISMODULE_OK) return refuse(ctx, dag, &err);
    dag->bc = RedisModule_BlockClient(ctx, Dag_ReplyCallback, NULL, Dag_FreeCallback, 0);
    BlockedTime_Hold(ctx, &dag->blocked_time, dag->bc);
    InlineRun_QueuedStart();
    dag->enqueued_ms = Clock_NowMs();
    RunQueue_Push(first, dag);
    MainSpin_Note();
    return REDISMODULE_OK;
}

int Dag_Enqueue(RAI_Dag *dag, RAI_Error *err) {
    /* The CPU queue exists from load on, so this never creates one. */
    RAI_RunQueue *first = firstQueue(dag, err);
    if (first == NULL) return REDISMODULE_ERR;
    dag->enqueued_ms = Clock_NowMs();
    RunQueue_Push(first, dag);
    return REDISMODULE_OK;
}
