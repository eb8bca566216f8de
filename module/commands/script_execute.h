/*
 * script_execute.h - AI.SCRIPTEXECUTE and AI.SCRIPTRUN (deprecated): parse on
 * the main thread into a one-operation DAG, then hand it to the engine.
 */
#ifndef REDISAI_SCRIPT_EXECUTE_H
#define REDISAI_SCRIPT_EXECUTE_H

#include "core/error.h"
#include "redismodule.h"
#include "types/script.h"

typedef struct ArgList {
    RedisModuleString **argv;
    long long n;
} ArgList;

typedef struct ScriptArgs {
    RAI_Script *script; /* a reference */
    RedisModuleString *function;
    ArgList keys, inputs, args, outputs;
    long long timeout;
    int owns_lists; /* inputs/outputs argv allocated by the parser */
} ScriptArgs;

/* argv[0] is the command name. Looks the script up and fills a; in a DAG
 * the first-scope rule does not apply and TIMEOUT is refused. On error,
 * err is set and a holds nothing. Release a with ScriptArgs_Clear. */
int ScriptExecute_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                        ScriptArgs *a, RAI_Error *err);
int ScriptRun_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                    ScriptArgs *a, RAI_Error *err);
void ScriptArgs_Clear(ScriptArgs *a);

int ScriptExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int ScriptRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
