/*
 * dag.c - a DAG's construction and release, see dag.h. Running it is
 * dag_run.c (workers) and batch.c; starting it dag_start.c; storing its
 * outputs and answering its client dag_reply.c.
 */
#include "engine/dag.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/messages.h"
#include "types/model.h"
#include "types/script.h"
#include "types/tensor_type.h"

RAI_Dag *Dag_New(void) {
    RAI_Dag *dag = RedisModule_Calloc(1, sizeof(RAI_Dag));
    dag->ops = dag->op_room;
    dag->slots = dag->slot_room;
    dag->persist = dag->persist_room;
    return dag;
}

/* Room for n + 1 elements of an array that holds n and starts in the DAG's
 * own room (room_n elements): the room while it fits, then the heap. */
static void *grow(void *arr, void *room, size_t room_n, size_t n, size_t elem) {
    if (n + 1 <= room_n) return arr;
    if (arr != room) return RedisModule_Realloc(arr, elem * (n + 1));
    void *heap = RedisModule_Alloc(elem * (n + 1));
    memcpy(heap, room, elem * n);
    return heap;
}

#define ROOM_N(a) (sizeof(a) / sizeof((a)[0]))

static void freeArray(void *arr, void *room) {
    if (arr != room) RedisModule_Free(arr);
}

size_t Dag_AddSlot(RAI_Dag *dag, RAI_Tensor *t) {
    dag->slots = grow(dag->slots, dag->slot_room, ROOM_N(dag->slot_room), dag->nslots,
                      sizeof(RAI_Tensor *));
    dag->slots[dag->nslots] = t;
    return dag->nslots++;
}

RAI_DagOp *Dag_AddOp(RAI_Dag *dag, RAI_DagOpKind kind) {
    dag->ops = grow(dag->ops, dag->op_room, ROOM_N(dag->op_room), dag->nops, sizeof(RAI_DagOp));
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
    dag->persist = grow(dag->persist, dag->persist_room, ROOM_N(dag->persist_room),
                        dag->npersist, sizeof(RAI_DagPersist));
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
    freeArray(dag->slots, dag->slot_room);
    freeArray(dag->ops, dag->op_room);
    freeArray(dag->persist, dag->persist_room);
    RedisModule_Free(dag);
}

size_t Dag_OpInputBytes(const RAI_Dag *dag, const RAI_DagOp *op) {
    size_t n = 0;
    for (size_t i = 0; i < op->ninputs; i++) {
        const RAI_Tensor *t = dag->slots[op->inputs[i]];
        if (t) n += t->nbytes;
    }
    return n;
}

/* The command's name, upper-cased into buf ("this command" where the
 * server cannot name it). */
static const char *commandName(RedisModuleCtx *ctx, char *buf, size_t size) {
    const char *name =
        RedisModule_GetCurrentCommandName ? RedisModule_GetCurrentCommandName(ctx) : NULL;
    size_t i = 0;
    for (; name && name[i] && i < size - 1; i++) buf[i] = (char)toupper((unsigned char)name[i]);
    buf[i] = '\0';
    return i ? buf : "this command";
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
        char name[64];
        char msg[192];
        snprintf(msg, sizeof(msg), DAG_WOULD_BLOCK_FMT, commandName(ctx, name, sizeof(name)));
        RedisModule_ReplyWithError(ctx, msg);
        return 1;
    }
    return 0;
}

int Dag_CaptureCaller(RedisModuleCtx *ctx, RAI_Dag *dag, RAI_Error *err) {
    if (dag->caller.known) return REDISMODULE_OK;
    /* Lua is refused before (Dag_RefuseIfCannotBlock); what is left unknown
     * is a module's call the server could not tell us about. Run unchecked,
     * it would do inside the run what Redis refuses its user outside. */
    if (Caller_Capture(ctx, &dag->caller) == CALLER_FOUND) return REDISMODULE_OK;
    char name[64];
    Error_SetFmt(err, DAG_CALLER_UNKNOWN_FMT, commandName(ctx, name, sizeof(name)));
    return REDISMODULE_ERR;
}
