/*
 * model_execute.h - AI.MODELEXECUTE and AI.MODELRUN (deprecated). Their
 * parsers are shared with the DAG commands, where the same tokens form one
 * operation.
 */
#ifndef REDISAI_MODEL_EXECUTE_H
#define REDISAI_MODEL_EXECUTE_H

#include "core/error.h"
#include "redismodule.h"
#include "types/model.h"

typedef struct ExecuteArgs {
    RAI_Model *model; /* a reference */
    RedisModuleString **inputs;
    long long ninputs;
    RedisModuleString **outputs;
    long long noutputs;
    long long timeout;
} ExecuteArgs;

/* argv[0] is the command name. Looks the model up and fills a; in a DAG,
 * TIMEOUT is refused. REDISMODULE_ERR after err (a->model then NULL). */
int ModelExecute_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                       ExecuteArgs *a, RAI_Error *err);
int ModelRun_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                   ExecuteArgs *a, RAI_Error *err);

int ModelExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ModelRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
