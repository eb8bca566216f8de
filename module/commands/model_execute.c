/*
 * model_execute.c - AI.MODELEXECUTE and AI.MODELRUN (docs/commands.md).
 *
 * Both parse into the same shape (model, input keys, output keys, timeout),
 * snapshot the model and the input tensors, and start a one-op DAG whose
 * outputs are persisted to the output keys by the engine's reply callback.
 * Both also answer Redis's key-position requests (getkeys-api), so that
 * ACLs and cluster routing see every key.
 */
#include "commands/model_execute.h"

#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "core/messages.h"
#include "engine/dag.h"
#include "engine/dag_start.h"
#include "redisai/reply_texts.h"
#include "types/model_type.h"

/* A model that declares no outputs (TorchScript returning List[Tensor])
 * takes any count; the backend checks what it produced. */
static int outputCountMatches(const RAI_Model *m, long long n) {
    return m->noutputs == 0 || (size_t)n == m->noutputs;
}

static int fail(ExecuteArgs *a, RAI_Error *err, const char *msg) {
    Error_Set(err, msg);
    Model_Release(a->model);
    a->model = NULL;
    return REDISMODULE_ERR;
}

/* -------------------------------- parsing --------------------------------- */

int ModelExecute_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                       ExecuteArgs *a, RAI_Error *err) {
    memset(a, 0, sizeof(*a));
    if (argc < 8) {
        Error_Set(err, "ERR wrong number of arguments for 'AI.MODELEXECUTE' command");
        return REDISMODULE_ERR;
    }
    a->model = Model_FromKey(ctx, argv[1], err);
    if (a->model == NULL) return REDISMODULE_ERR;
    if (!Args_TokenIs(argv[2], "INPUTS")) return fail(a, err, RAI_ERR_INPUTS_NOT_SPECIFIED);
    if (RedisModule_StringToLongLong(argv[3], &a->ninputs) != REDISMODULE_OK) {
        return fail(a, err, RAI_ERR_INPUT_COUNT_ARG);
    }
    if (a->ninputs <= 0) return fail(a, err, "ERR Input count must be a positive integer");
    if ((size_t)a->ninputs != a->model->ninputs) {
        return fail(a, err, RAI_ERR_INPUT_KEYS);
    }
    if (4 + a->ninputs > argc) {
        return fail(a, err,
                    "ERR number of input keys to AI.MODELEXECUTE command does not match the "
                    "number of given arguments");
    }
    a->inputs = argv + 4;
    int pos = 4 + (int)a->ninputs;
    if (pos >= argc || !Args_TokenIs(argv[pos], "OUTPUTS")) {
        return fail(a, err, RAI_ERR_OUTPUTS_NOT_SPECIFIED);
    }
    if (pos + 1 >= argc ||
        RedisModule_StringToLongLong(argv[pos + 1], &a->noutputs) != REDISMODULE_OK) {
        return fail(a, err, RAI_ERR_OUTPUT_COUNT_ARG);
    }
    if (a->noutputs <= 0) return fail(a, err, "ERR Output count must be a positive integer");
    if (!outputCountMatches(a->model, a->noutputs)) {
        return fail(a, err, RAI_ERR_OUTPUT_KEYS);
    }
    if (pos + 2 + a->noutputs > argc) {
        return fail(a, err,
                    "ERR number of output keys to AI.MODELEXECUTE command does not match the "
                    "number of given arguments");
    }
    a->outputs = argv + pos + 2;
    pos += 2 + (int)a->noutputs;
    if (pos >= argc) return REDISMODULE_OK;
    if (!Args_TokenIs(argv[pos], "TIMEOUT")) {
        Error_SetFmt(err, "Invalid argument: %s", RedisModule_StringPtrLen(argv[pos], NULL));
        return fail(a, err, NULL);
    }
    if (pos + 1 >= argc) return fail(a, err, RAI_ERR_TIMEOUT_MISSING);
    if (RedisModule_StringToLongLong(argv[pos + 1], &a->timeout) != REDISMODULE_OK ||
        a->timeout <= 0) {
        return fail(a, err, RAI_ERR_TIMEOUT_VALUE);
    }
    if (pos + 2 < argc) {
        Error_SetFmt(err, "Invalid argument: %s", RedisModule_StringPtrLen(argv[pos + 2], NULL));
        return fail(a, err, NULL);
    }
    if (in_dag) return fail(a, err, RAI_ERR_TIMEOUT_IN_DAG);
    return REDISMODULE_OK;
}

int ModelRun_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                   ExecuteArgs *a, RAI_Error *err) {
    memset(a, 0, sizeof(*a));
    if (argc < 6) {
        Error_Set(err, "ERR wrong number of arguments for 'AI.MODELRUN' command");
        return REDISMODULE_ERR;
    }
    a->model = Model_FromKey(ctx, argv[1], err);
    if (a->model == NULL) return REDISMODULE_ERR;
    int pos = 2;
    if (Args_TokenIs(argv[pos], "TIMEOUT")) {
        if (RedisModule_StringToLongLong(argv[pos + 1], &a->timeout) != REDISMODULE_OK ||
            a->timeout <= 0) {
            return fail(a, err, RAI_ERR_TIMEOUT_VALUE);
        }
        if (in_dag) return fail(a, err, RAI_ERR_TIMEOUT_IN_DAG);
        pos += 2;
    }
    if (!Args_TokenIs(argv[pos], "INPUTS")) return fail(a, err, RAI_ERR_INPUTS_NOT_SPECIFIED);
    int outputs_at = argc;
    for (int i = pos + 1; i < argc; i++) {
        if (Args_TokenIs(argv[i], "OUTPUTS")) {
            outputs_at = i;
            break;
        }
    }
    a->inputs = argv + pos + 1;
    a->ninputs = outputs_at - pos - 1;
    a->outputs = argv + outputs_at + 1;
    a->noutputs = outputs_at < argc ? argc - outputs_at - 1 : 0;
    if ((size_t)a->ninputs != a->model->ninputs) {
        return fail(a, err, RAI_ERR_INPUT_KEYS);
    }
    if (!outputCountMatches(a->model, a->noutputs)) {
        return fail(a, err, RAI_ERR_OUTPUT_KEYS);
    }
    return REDISMODULE_OK;
}

/* ------------------------------- execution -------------------------------- */

/* Snapshots the input tensors, builds the one-op DAG and starts it.
 * Consumes the model reference in a. */
static int startExecution(RedisModuleCtx *ctx, RedisModuleString *key, ExecuteArgs *a) {
    RAI_Error err;
    Error_Init(&err);
    RAI_Dag *dag = Dag_New();
    dag->single_op = 1;
    dag->timeout_ms = a->timeout;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_MODEL);
    op->model = a->model;
    op->queue = a->model->queue;
    Dag_SetOpKey(op, key);
    if (Dag_BindKeys(ctx, dag, op, a->inputs, (size_t)a->ninputs, a->outputs,
                     (size_t)a->noutputs, &err) != REDISMODULE_OK) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        Dag_Free(dag);
        return REDISMODULE_OK;
    }
    return Dag_Start(ctx, dag);
}

typedef int (*ParseFn)(RedisModuleCtx *, RedisModuleString **, int, int, ExecuteArgs *,
                       RAI_Error *);

static int execute(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, ParseFn parse) {
    if (Dag_RefuseIfCannotBlock(ctx)) return REDISMODULE_OK;
    RAI_Error err;
    Error_Init(&err);
    ExecuteArgs a;
    if (parse(ctx, argv, argc, 0, &a, &err) != REDISMODULE_OK) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    return startExecution(ctx, argv[1], &a);
}

/* --------------------------------- keys ----------------------------------- */

/* Redis does not bound-check the positions a handler reports (ACL checks and
 * cluster routing read argv at them), so every position must lie inside
 * argv, and counts are clamped to argc before any arithmetic. */
static void modelExecuteKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return;
    RedisModule_KeyAtPos(ctx, 1);
    long long n, m;
    if (argc < 4 || RedisModule_StringToLongLong(argv[3], &n) != REDISMODULE_OK || n < 0) return;
    if (n > argc) n = argc;
    for (long long i = 0; i < n && 4 + i < argc; i++) RedisModule_KeyAtPos(ctx, (int)(4 + i));
    long long pos = 4 + n;
    if (pos + 1 >= argc || RedisModule_StringToLongLong(argv[pos + 1], &m) != REDISMODULE_OK) {
        return;
    }
    for (long long i = 0; i < m && pos + 2 + i < argc; i++) {
        RedisModule_KeyAtPos(ctx, (int)(pos + 2 + i));
    }
}

static void modelRunKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return;
    RedisModule_KeyAtPos(ctx, 1);
    int pos = 2;
    if (pos + 1 < argc && Args_TokenIs(argv[pos], "TIMEOUT")) pos += 2;
    if (pos >= argc || !Args_TokenIs(argv[pos], "INPUTS")) return;
    for (int i = pos + 1; i < argc; i++) {
        if (!Args_TokenIs(argv[i], "OUTPUTS")) RedisModule_KeyAtPos(ctx, i);
    }
}

/* -------------------------------- commands -------------------------------- */

/* AI.MODELEXECUTE key INPUTS n in... OUTPUTS m out... [TIMEOUT ms] */
int ModelExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        modelExecuteKeys(ctx, argv, argc);
        return REDISMODULE_OK;
    }
    return execute(ctx, argv, argc, ModelExecute_Parse);
}

/* AI.MODELRUN key [TIMEOUT ms] INPUTS in... OUTPUTS out... */
int ModelRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        modelRunKeys(ctx, argv, argc);
        return REDISMODULE_OK;
    }
    return execute(ctx, argv, argc, ModelRun_Parse);
}
