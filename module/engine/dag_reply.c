/*
 * dag_reply.c - the main thread's part after a DAG ran, see dag_reply.h:
 * its outputs stored and replicated, its client answered, its runs counted.
 * With tensor_reply.c and commands/, one of the places RESP is written
 * (docs/architecture.md).
 */
#include "engine/dag_reply.h"

#include "core/memory.h"
#include "core/messages.h"
#include "engine/blocked_time.h"
#include "engine/inline_run.h"
#include "engine/main_spin.h"
#include "engine/tensor_reply.h"
#include "engine/write_gate.h"
#include "types/model.h"
#include "types/run_stats.h"
#include "types/script.h"
#include "types/tensor_type.h"

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

/* Copies the backend's output into Redis's allocator once, and lets the
 * backend's memory go now. */
static RAI_Tensor *forKeyspace(RAI_Dag *dag, size_t slot) {
    RAI_Tensor *t = dag->slots[slot];
    dag->slots[slot] = Tensor_ForKeyspace(t);
    Tensor_Release(t);
    return dag->slots[slot];
}

/* persistAll for one key (AI.MODELEXECUTE with one output, the common
 * case): the same checks in the same order, the key opened once instead of
 * once to check and once to store. */
static int persistOne(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    size_t slot = dag->persist[0].slot;
    RAI_Tensor *t = dag->slots[slot];
    RedisModuleKey *key = NULL;
    if (t != NULL) {
        key = Tensor_OpenForStore(ctx, dag->persist[0].key, err);
        if (key == NULL) return REDISMODULE_ERR;
    }
    if (Memory_WouldExceed(t ? Tensor_ForeignBytes(t) : 0)) {
        if (key) RedisModule_CloseKey(key);
        Error_Set(err, RAI_OOM_MSG);
        return REDISMODULE_ERR;
    }
    if (t == NULL) return REDISMODULE_OK;
    Tensor_StoreOpened(ctx, key, dag->persist[0].key, forKeyspace(dag, slot));
    return REDISMODULE_OK;
}

/* Stores every PERSIST target, or none: every key is checked first, and so
 * is the room maxmemory leaves for the outputs' copies into Redis's
 * allocator. Redis refused the command before it ran if memory was over
 * the limit then; this refuses what would pass it now (noeviction), so
 * clients running in parallel cannot push far past the limit. */
static int persistAll(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    if (dag->npersist == 1) return persistOne(ctx, dag, err);
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
        if (dag->slots[slot] == NULL) continue;
        /* Copy once per slot (several keys may take the same output). */
        if (Tensor_StoreAndReplicate(ctx, dag->persist[i].key, forKeyspace(dag, slot), err) !=
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

/* AI.INFO (docs/commands.md): on success calls, run time and (models) dim 0 of output 0; on
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
int Dag_Reply(RedisModuleCtx *ctx, RAI_Dag *dag) {
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

/* The keys a finished DAG would write now: its PERSIST targets that got a
 * tensor, unless an op failed or it timed out (then nothing is stored).
 * Returns how many, in keys (room for dag->npersist). */
static size_t keysToWrite(const RAI_Dag *dag, RedisModuleString **keys) {
    if (dag->timed_out || firstFailure(dag) != NULL) return 0;
    size_t n = 0;
    for (size_t i = 0; i < dag->npersist; i++) {
        if (dag->slots[dag->persist[i].slot] != NULL) keys[n++] = dag->persist[i].key;
    }
    return n;
}

/* A queued run may end after Redis's routing of its command stopped
 * holding (write_gate.h): then it is answered as Redis would answer the
 * command sent now, and writes nothing. */
static int refusedWrite(RedisModuleCtx *ctx, const RAI_Dag *dag) {
    if (dag->npersist == 0) return 0;
    RedisModuleString *room[8];
    RedisModuleString **keys =
        dag->npersist <= 8 ? room : RedisModule_Alloc(dag->npersist * sizeof(*keys));
    size_t n = keysToWrite(dag, keys);
    char msg[WRITE_GATE_MSG_LEN];
    const char *refusal = n > 0 ? WriteGate_Refusal(ctx, keys, n, msg) : NULL;
    if (keys != room) RedisModule_Free(keys);
    if (refusal == NULL) return 0;
    RedisModule_ReplyWithError(ctx, refusal);
    return 1;
}

int Dag_ReplyCallback(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    REDISMODULE_NOT_USED(argc);
    MainSpin_Note();
    RAI_Dag *dag = RedisModule_GetBlockedClientPrivateData(ctx);
    if (refusedWrite(ctx, dag)) return REDISMODULE_OK;
    return Dag_Reply(ctx, dag);
}

/* Runs after the reply callback, or alone when the client went away: the
 * runs happened either way, so they are counted here. */
void Dag_FreeCallback(RedisModuleCtx *ctx, void *privdata) {
    REDISMODULE_NOT_USED(ctx);
    RAI_Dag *dag = privdata;
    if (!dag->timed_out) Dag_UpdateStats(dag);
    BlockedTime_Forget(&dag->blocked_time);
    Dag_Free(dag);
    InlineRun_QueuedEnd();
}
