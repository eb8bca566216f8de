/*
 * dag_commands.h - AI.DAGEXECUTE, AI.DAGEXECUTE_RO, AI.DAGRUN, AI.DAGRUN_RO:
 * parse a chain of operations into one DAG for the engine (engine/dag.h).
 */
#ifndef REDISAI_DAG_COMMANDS_H
#define REDISAI_DAG_COMMANDS_H

#include "core/error.h"
#include "engine/dag.h"
#include "redismodule.h"

/* The local tensor names of a DAG being built: name -> slot + 1. With
 * `unresolved` (the LLAPI), a name read before anything wrote it gets an
 * empty slot, recorded there (name -> slot + 1) for a tensor the client
 * loads later (RedisAI_DAGLoadTensor); without, reading it is an error. */
typedef struct DagNames {
    RedisModuleDict *slots;
    RedisModuleDict *unresolved;
} DagNames;

void DagNames_Set(DagNames *n, const char *name, size_t len, size_t slot);
/* The slot a reader of name gets; 0 when it is unknown (never with
 * `unresolved`). */
int DagNames_Resolve(RAI_Dag *dag, DagNames *n, const char *name, size_t len, size_t *slot);

/* RedisAI_DAGAddOpsFromString: `|> op |> op ...` with every op AI.DAGRUN
 * and AI.DAGEXECUTE accept (AI.TENSORSET, AI.TENSORGET, AI.MODELEXECUTE,
 * AI.MODELRUN, AI.SCRIPTEXECUTE, AI.SCRIPTRUN), models and scripts read
 * from ctx's DB, added to dag. REDISMODULE_ERR after err (dag is then
 * partly built: parse into a scratch DAG first to keep one unchanged). */
int Dag_ParseLLAPIOps(RedisModuleCtx *ctx, RAI_Dag *dag, DagNames *names,
                      RedisModuleString **argv, int argc, RAI_Error *err);

int DagExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagExecuteRO_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int DagRunRO_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
