/*
 * dag.h - the execution engine's unit of work. Every execution command is a
 * DAG: a list of operations over numbered tensor slots, built and validated
 * on the main thread (commands/), started by dag_start.c, run by run-queue
 * workers (dag_run.c, batch.c), and answered from the main thread
 * (dag_reply.c), which also stores and replicates results. MODELEXECUTE is
 * a one-operation DAG.
 *
 * Slots: each name a DAG reads or writes maps to slot numbers at parse time;
 * a write creates a new slot, so later readers see the latest version.
 */
#ifndef REDISAI_DAG_H
#define REDISAI_DAG_H

#include <stddef.h>

#include "core/error.h"
#include "core/tensor.h"
#include "engine/blocked_time.h"
#include "engine/caller.h"
#include "engine/run_queue.h"
#include "redismodule.h"
#include "types/model.h"
#include "types/script.h"

typedef enum RAI_DagOpKind {
    DAG_OP_TENSORSET, /* slot prefilled at parse time; nothing to run */
    DAG_OP_TENSORGET,
    DAG_OP_MODEL,
    DAG_OP_SCRIPT,
} RAI_DagOpKind;

/* Strings a script op passes to its function (KEYS, ARGS), copied. */
typedef struct RAI_StringList {
    size_t n;
    char **items;
    size_t *lens;
} RAI_StringList;

typedef enum RAI_DagOpState {
    DAG_OP_PENDING,
    DAG_OP_DONE,
    DAG_OP_FAILED,
} RAI_DagOpState;

typedef struct RAI_DagOp {
    RAI_DagOpKind kind;
    RAI_DagOpState state;
    RAI_Model *model;   /* DAG_OP_MODEL: a reference */
    RAI_Script *script; /* DAG_OP_SCRIPT: a reference */
    char *key;          /* MODEL/SCRIPT: the key it was read from (RAI_RunInfo.key) */
    size_t key_len;
    char *function;     /* DAG_OP_SCRIPT */
    int entry_point;    /* DAG_OP_SCRIPT: function is one of the entry points */
    RAI_StringList keys;
    RAI_StringList args;
    RAI_RunQueue *queue;
    size_t ninputs;
    size_t *inputs; /* slot numbers */
    size_t noutputs;
    size_t *outputs;
    int fmt; /* DAG_OP_TENSORGET */
    long long duration_us;
    RAI_Error err;
} RAI_DagOp;

typedef struct RAI_DagPersist {
    RedisModuleString *key;
    size_t slot;
} RAI_DagPersist;

typedef struct RAI_Dag {
    RAI_Tensor **slots;
    size_t nslots;
    RAI_DagOp *ops;
    size_t nops;
    size_t next_op; /* first op not yet run; touched by one worker at a time */
    RAI_DagPersist *persist;
    size_t npersist;
    RedisModuleBlockedClient *bc;
    RAI_BlockedTime blocked_time; /* bc's runs as Redis is told them */
    long long timeout_ms; /* 0: none */
    long long enqueued_ms;
    /* When its next op was first found waiting for its backend (0: not
     * parked), engine/dag_park.h. Touched by one worker at a time. */
    long long park_since_ms;
    int timed_out;
    int single_op; /* reply like MODELEXECUTE: no array */
    RAI_Caller caller; /* who started it: scripts' redis.execute acts for it */
    /* Started by the LLAPI (Dag_Enqueue), with no blocked client: called on
     * the worker thread that finishes the DAG, instead of unblocking one. */
    void (*on_finish)(struct RAI_Dag *dag);
    void *on_finish_data;
    /* Room for a small DAG's arrays (AI.MODELEXECUTE's one op, its input
     * and output slots, its output key): ops, slots and persist start here
     * and move to the heap only when they outgrow it, so a request does not
     * pay an allocation and a free for each (docs/performance.md). */
    RAI_DagOp op_room[1];
    RAI_Tensor *slot_room[4];
    RAI_DagPersist persist_room[2];
} RAI_Dag;

RAI_Dag *Dag_New(void);
void Dag_Free(RAI_Dag *dag);
/* A new slot holding t (a reference the DAG takes over; may be NULL). */
size_t Dag_AddSlot(RAI_Dag *dag, RAI_Tensor *t);
RAI_DagOp *Dag_AddOp(RAI_Dag *dag, RAI_DagOpKind kind);
/* Records the key op's model or script was read from (copied): backends
 * get it in RAI_RunInfo.key to name it in their errors. */
void Dag_SetOpKey(RAI_DagOp *op, RedisModuleString *key);
/* Copies argv[0..n-1] into list. */
void Dag_CopyStrings(RAI_StringList *list, RedisModuleString **argv, size_t n);
/* For standalone commands: binds op's inputs to the keyspace tensors at
 * `inputs` (read now) and its outputs to new slots persisted to `outputs`,
 * refusing output keys that hold another type before anything runs.
 * REDISMODULE_ERR after err. */
int Dag_BindKeys(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_DagOp *op, RedisModuleString **inputs,
                 size_t nin, RedisModuleString **outputs, size_t nout, RAI_Error *err);
/* Records that `key` receives slot's final tensor when the DAG succeeds. */
void Dag_AddPersist(RAI_Dag *dag, RedisModuleString *key, size_t slot);

/* Records the client's user and DB in dag->caller (once; engine/caller.h).
 * REDISMODULE_ERR after err (`ERR <CMD> refused: the ACL user it would act
 * for cannot be known here`) when the caller cannot be named: a run never
 * goes unchecked for want of a user. Main thread. */
int Dag_CaptureCaller(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err);

/* Total bytes of the op's input tensors present in their slots. */
size_t Dag_OpInputBytes(const RAI_Dag *dag, const RAI_DagOp *op);

/* `ERR Cannot run RedisAI command within a transaction or a LUA script`
 * in MULTI or Lua; `ERR <CMD> would block: it cannot run inside a script's
 * redis.execute or a module's call` where the client may not block (any
 * RedisModule_Call, which Redis would abort on); 1 if it replied. */
int Dag_RefuseIfCannotBlock(RedisModuleCtx *ctx);

#endif
