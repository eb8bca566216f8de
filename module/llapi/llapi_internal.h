/*
 * llapi_internal.h - RedisAI's low-level API for other modules
 * (include/redisai/llapi.h, docs/llapi.md), as RedisAI 1.2 exports it: the
 * shared internals of the llapi*.c files, one per group of functions.
 *
 * The opaque types of the interface are the core's own where the names
 * agree: RAI_Tensor, RAI_Model, RAI_Script and RAI_Error are the objects the
 * commands and the keyspace use (a model read from a key IS the RAI_Model *
 * a client gets). Run contexts, DAG builders, DAG ops and finish contexts
 * exist only for the LLAPI and are defined here.
 */
#ifndef REDISAI_LLAPI_INTERNAL_H
#define REDISAI_LLAPI_INTERNAL_H

#define REDISAI_LLAPI_PROVIDER
#include "commands/dag_commands.h"
#include "core/error.h"
#include "core/tensor.h"
#include "engine/dag.h"
#include "engine/dag_reply.h"
#include "engine/dag_start.h"
#include "redisai/llapi.h"
#include "types/model.h"
#include "types/script.h"

/* A prototype for every function of the interface, from its one list: a
 * definition that disagrees with the header does not compile. */
#define LLAPI_PROTOTYPE(ret, name, params) ret name params;
REDISAI_LLAPI_FUNCTIONS(LLAPI_PROTOTYPE)
#undef LLAPI_PROTOTYPE

/* Exports every function of the list (RedisModule_ExportSharedAPI). OnLoad. */
int LLAPI_Register(RedisModuleCtx *ctx);

/* Sets err's message and its LLAPI error code (the first error wins). */
void LLAPI_Fail(RAI_Error *err, int code, const char *msg);

/* A growable array of tensor references with optional names. */
typedef struct LLAPI_Params {
    size_t n, cap;
    char **names;         /* model contexts: owned copies, may be NULL */
    RAI_Tensor **tensors; /* references (NULL: an output not produced yet) */
} LLAPI_Params;

void LLAPIParams_Add(LLAPI_Params *p, const char *name, RAI_Tensor *t);
void LLAPIParams_Free(LLAPI_Params *p);

struct RAI_ModelRunCtx {
    RAI_Model *model; /* a reference */
    LLAPI_Params inputs;
    LLAPI_Params outputs; /* names asked for; tensors filled by a run */
};

struct RAI_ScriptRunCtx {
    RAI_Script *script; /* a reference */
    char *function;
    LLAPI_Params inputs;
    size_t noutputs;
    RAI_Tensor **outputs; /* filled by a run */
};

/* What a DAG's finish callback reads. For ModelRunAsync/ScriptRunAsync it
 * is made for the run and freed after the callback returns; for DAGRun it
 * is the RAI_DAGRunCtx itself (its first member), freed by RedisAI_DAGFree. */
typedef enum LLAPI_RunKind {
    LLAPI_RUN_DAG,
    LLAPI_RUN_MODEL,
    LLAPI_RUN_SCRIPT,
} LLAPI_RunKind;

struct RAI_OnFinishCtx {
    LLAPI_RunKind kind;
    RAI_Dag *dag; /* the engine's DAG */
    RAI_Error err; /* the first failure, with its code; clear on success */
    RAI_OnFinishCB cb;
    void *private_data;
    RAI_ModelRunCtx *mctx;  /* LLAPI_RUN_MODEL: the client's */
    size_t *out_index;      /* LLAPI_RUN_MODEL: see LLAPI_ModelOrder */
    int unfit;              /* LLAPI_RUN_MODEL: mctx does not fit its model (no op) */
    RAI_ScriptRunCtx *sctx; /* LLAPI_RUN_SCRIPT: the client's */
};

/* Queues the one-op DAG of ModelRunAsync / ScriptRunAsync (llapi_dag.c)
 * for f->mctx or f->sctx, and takes ownership of f. */
int LLAPI_StartRun(RAI_OnFinishCtx *f);

/* Model contexts' inputs and outputs in the model's order (TF: by name). */
int LLAPI_ModelOrder(RAI_ModelRunCtx *mctx, RAI_Tensor **ins, size_t *out_index,
                     RAI_Error *err);

#endif
