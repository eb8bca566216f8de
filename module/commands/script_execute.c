/*
 * script_execute.c - AI.SCRIPTEXECUTE and AI.SCRIPTRUN (docs/commands.md, "Scripts").
 *
 * Both parse into ScriptArgs (script, function, KEYS, INPUTS, ARGS,
 * OUTPUTS, timeout), then startScript() snapshots the input tensors and
 * starts a one-op DAG, as model_execute.c does for models.
 */
#include "commands/script_execute.h"

#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "core/messages.h"
#include "engine/dag.h"
#include "engine/dag_start.h"
#include "types/script_type.h"

/* Consumes the script reference in a. */
static int startScript(RedisModuleCtx *ctx, RedisModuleString *key, ScriptArgs *a) {
    RAI_Error err;
    Error_Init(&err);
    RAI_Dag *dag = Dag_New();
    dag->single_op = 1;
    dag->timeout_ms = a->timeout;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_SCRIPT);
    op->script = a->script;
    op->queue = a->script->queue;
    Dag_SetOpKey(op, key);
    op->function = RedisModule_Strdup(RedisModule_StringPtrLen(a->function, NULL));
    op->entry_point = Script_IsEntryPoint(a->script, op->function);
    Dag_CopyStrings(&op->keys, a->keys.argv, (size_t)a->keys.n);
    Dag_CopyStrings(&op->args, a->args.argv, (size_t)a->args.n);
    if (Dag_BindKeys(ctx, dag, op, a->inputs.argv, (size_t)a->inputs.n, a->outputs.argv,
                     (size_t)a->outputs.n, &err) != REDISMODULE_OK) {
        goto fail;
    }
    return Dag_Start(ctx, dag);

fail:
    RedisModule_ReplyWithError(ctx, Error_Message(&err));
    Error_Clear(&err);
    Dag_Free(dag);
    return REDISMODULE_OK;
}

void ScriptArgs_Clear(ScriptArgs *a) {
    Script_Release(a->script);
    if (a->owns_lists) {
        RedisModule_Free(a->inputs.argv);
        RedisModule_Free(a->outputs.argv);
    }
    memset(a, 0, sizeof(*a));
}

typedef const char *(*SyntaxFn)(RedisModuleString **, int, int, ScriptArgs *, RAI_Error *);

static int parseWith(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                     ScriptArgs *a, RAI_Error *err, const char *name, SyntaxFn syntax) {
    memset(a, 0, sizeof(*a));
    if (argc < 3) {
        Error_SetFmt(err, RAI_ERR_WRONG_ARITY_FMT, name);
        return REDISMODULE_ERR;
    }
    a->function = argv[2];
    a->script = Script_FromKey(ctx, argv[1], err);
    if (a->script == NULL) return REDISMODULE_ERR;
    const char *msg = syntax(argv, argc, in_dag, a, err);
    if (msg) {
        Error_Set(err, msg);
        ScriptArgs_Clear(a);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

typedef int (*ParseFn)(RedisModuleCtx *, RedisModuleString **, int, int, ScriptArgs *,
                       RAI_Error *);

static int execute(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, ParseFn parse) {
    if (Dag_RefuseIfCannotBlock(ctx)) return REDISMODULE_OK;
    RAI_Error err;
    Error_Init(&err);
    ScriptArgs a;
    if (parse(ctx, argv, argc, 0, &a, &err) != REDISMODULE_OK) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    int rc = startScript(ctx, argv[1], &a);
    a.script = NULL; /* startScript took the reference */
    ScriptArgs_Clear(&a);
    return rc;
}

/* ----------------------------- SCRIPTEXECUTE ------------------------------ */

typedef struct Scope {
    const char *name;
    const char *count_error; /* count not an integer */
    const char *short_error; /* fewer items than the count */
} Scope;

static const Scope scopes[] = {
    {"INPUTS", "ERR Invalid argument for inputs count in AI.SCRIPTEXECUTE",
     "ERR number of inputs to AI.SCRIPTEXECUTE command does not match the number of given "
     "arguments"},
    {"ARGS", "ERR Invalid argument for keys count in AI.SCRIPTEXECUTE",
     "ERR number of args to AI.SCRIPTEXECUTE command does not match the number of given "
     "arguments"},
    {"OUTPUTS", "ERR Invalid argument for outputs count in AI.SCRIPTEXECUTE",
     "ERR number of outputs to AI.SCRIPTEXECUTE command does not match the number of given "
     "arguments"},
};

/* Parses argv[3..] into a. Returns NULL, or the error text (in err when it
 * had to be formatted). */
static const char *parseScriptExecute(RedisModuleString **argv, int argc, int in_dag,
                                      ScriptArgs *a, RAI_Error *err) {
    if (!in_dag && (argc < 4 || !(Args_TokenIs(argv[3], "KEYS") || Args_TokenIs(argv[3], "INPUTS")))) {
        return "ERR KEYS or INPUTS scope must be provided first for AI.SCRIPTEXECUTE command";
    }
    int seen_keys = 0, seen[3] = {0, 0, 0};
    ArgList *lists[3] = {&a->inputs, &a->args, &a->outputs};
    int pos = 3;
    while (pos < argc) {
        RedisModuleString *tok = argv[pos];
        if (Args_TokenIs(tok, "KEYS")) {
            if (seen_keys) return "ERR Already Encountered KEYS scope in AI.SCRIPTEXECUTE command";
            seen_keys = 1;
            if (argc - pos - 1 < 2) return "ERR Missing arguments after KEYS keyword";
            long long n;
            if (RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK || n <= 0) {
                return "ERR Invalid or negative value found in number of KEYS";
            }
            if (n > argc - pos - 2) {
                return "ERR Number of pre declared KEYS to be used in the command does not match "
                       "the number of given arguments";
            }
            a->keys = (ArgList){.argv = argv + pos + 2, .n = n};
            pos += 2 + (int)n;
            continue;
        }
        int s = -1;
        for (int i = 0; i < 3; i++) {
            if (Args_TokenIs(tok, scopes[i].name)) s = i;
        }
        if (s >= 0) {
            if (seen[s]) {
                Error_SetFmt(err, "ERR Already Encountered %s scope in AI.SCRIPTEXECUTE command",
                             scopes[s].name);
                return Error_Message(err);
            }
            seen[s] = 1;
            if (pos + 1 >= argc) return "ERR Invalid arguments provided to AI.SCRIPTEXECUTE";
            long long n;
            if (RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK) {
                return scopes[s].count_error;
            }
            if (n < 0) n = 0;
            if (n > argc - pos - 2) return scopes[s].short_error;
            *lists[s] = (ArgList){.argv = argv + pos + 2, .n = n};
            pos += 2 + (int)n;
            continue;
        }
        if (Args_TokenIs(tok, "TIMEOUT")) {
            if (pos + 1 >= argc) return "ERR No value provided for TIMEOUT in AI.SCRIPTEXECUTE";
            if (RedisModule_StringToLongLong(argv[pos + 1], &a->timeout) != REDISMODULE_OK ||
                a->timeout <= 0) {
                return RAI_ERR_TIMEOUT_VALUE;
            }
            if (pos + 2 < argc) return "ERR Encountered problem parsing AI.SCRIPTEXECUTE";
            if (in_dag) return RAI_ERR_TIMEOUT_IN_DAG;
            break;
        }
        Error_SetFmt(err, "ERR Invalid AI.SCRIPTEXECUTE command. Unexpected argument: %s",
                     RedisModule_StringPtrLen(tok, NULL));
        return Error_Message(err);
    }
    return NULL;
}

static const char *parseScriptRun(RedisModuleString **argv, int argc, int in_dag,
                                  ScriptArgs *a);

static const char *syntaxScriptRun(RedisModuleString **argv, int argc, int in_dag,
                                   ScriptArgs *a, RAI_Error *err) {
    REDISMODULE_NOT_USED(err);
    return parseScriptRun(argv, argc, in_dag, a);
}

int ScriptExecute_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                        ScriptArgs *a, RAI_Error *err) {
    return parseWith(ctx, argv, argc, in_dag, a, err, "AI.SCRIPTEXECUTE", parseScriptExecute);
}

int ScriptRun_Parse(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int in_dag,
                    ScriptArgs *a, RAI_Error *err) {
    return parseWith(ctx, argv, argc, in_dag, a, err, "AI.SCRIPTRUN", syntaxScriptRun);
}

/* Positions reported must lie inside argv (Redis reads argv at them without a
 * bound check); counts are clamped to argc so that pos only moves forward. */
static void scriptExecuteKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return;
    RedisModule_KeyAtPos(ctx, 1);
    int pos = 3;
    while (pos + 1 < argc) {
        int is_keys = Args_TokenIs(argv[pos], "KEYS"), is_in = Args_TokenIs(argv[pos], "INPUTS");
        int is_out = Args_TokenIs(argv[pos], "OUTPUTS"), is_args = Args_TokenIs(argv[pos], "ARGS");
        long long n;
        if (!(is_keys || is_in || is_out || is_args) ||
            RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK) {
            return;
        }
        if (n < 0) n = 0;
        if (n > argc) n = argc;
        for (long long i = 0; i < n && pos + 2 + i < argc; i++) {
            if (!is_args) RedisModule_KeyAtPos(ctx, (int)(pos + 2 + i));
        }
        pos += 2 + (int)n;
    }
}

/* AI.SCRIPTEXECUTE key function [KEYS n k...] [INPUTS n t...] [ARGS n a...]
 *   [OUTPUTS n o...] [TIMEOUT ms] */
int ScriptExecute_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        scriptExecuteKeys(ctx, argv, argc);
        return REDISMODULE_OK;
    }
    return execute(ctx, argv, argc, ScriptExecute_Parse);
}

/* ------------------------------- SCRIPTRUN -------------------------------- */

static const char *parseScriptRun(RedisModuleString **argv, int argc, int in_dag,
                                  ScriptArgs *a) {
    enum { NONE, IN_INPUTS, IN_OUTPUTS } section = NONE;
    int seen_inputs = 0, seen_outputs = 0, seen_timeout = 0, seen_var = 0;
    /* Inputs and outputs are collected as index lists into argv, since `$`
     * and TIMEOUT may sit between them. */
    a->inputs.argv = RedisModule_Alloc(sizeof(RedisModuleString *) * argc);
    a->outputs.argv = RedisModule_Alloc(sizeof(RedisModuleString *) * argc);
    a->owns_lists = 1;
    for (int pos = 3; pos < argc; pos++) {
        RedisModuleString *tok = argv[pos];
        if (Args_TokenIs(tok, "TIMEOUT")) {
            if (seen_timeout) return "ERR Already encountered an TIMEOUT section in SCRIPTRUN";
            seen_timeout = 1;
            if (pos + 1 >= argc ||
                RedisModule_StringToLongLong(argv[pos + 1], &a->timeout) != REDISMODULE_OK ||
                a->timeout <= 0) {
                return RAI_ERR_TIMEOUT_VALUE;
            }
            if (in_dag) return RAI_ERR_TIMEOUT_IN_DAG;
            pos++;
        } else if (Args_TokenIs(tok, "INPUTS")) {
            if (seen_outputs) return "ERR Already encountered an INPUTS section in SCRIPTRUN";
            if (seen_inputs) return "ERR Already encountered an INPUTS keyword in SCRIPTRUN";
            seen_inputs = 1;
            section = IN_INPUTS;
        } else if (Args_TokenIs(tok, "OUTPUTS")) {
            if (seen_outputs) return "ERR Already encountered an OUTPUTS keyword in SCRIPTRUN";
            seen_outputs = 1;
            section = IN_OUTPUTS;
        } else if (!strcmp(RedisModule_StringPtrLen(tok, NULL), "$")) {
            if (section != IN_INPUTS) {
                return "ERR Encountered a variable size list of tensors outside of input section";
            }
            if (seen_var) return "ERR Already encountered a variable size list of tensors";
            seen_var = 1;
        } else if (section == IN_INPUTS) {
            a->inputs.argv[a->inputs.n++] = tok;
        } else if (section == IN_OUTPUTS) {
            a->outputs.argv[a->outputs.n++] = tok;
        } else {
            return "ERR Unrecongnized parameter to SCRIPTRUN";
        }
    }
    return NULL;
}

/* INPUTS is optional, so the list of tensor keys starts at INPUTS or at
 * OUTPUTS, whichever comes first; TIMEOUT and its value may sit anywhere. */
static void scriptRunKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return;
    RedisModule_KeyAtPos(ctx, 1);
    int in_lists = 0;
    for (int pos = 3; pos < argc; pos++) {
        if (Args_TokenIs(argv[pos], "TIMEOUT")) {
            pos++;
        } else if (Args_TokenIs(argv[pos], "INPUTS") || Args_TokenIs(argv[pos], "OUTPUTS")) {
            in_lists = 1;
        } else if (in_lists && strcmp(RedisModule_StringPtrLen(argv[pos], NULL), "$")) {
            RedisModule_KeyAtPos(ctx, pos);
        }
    }
}

/* AI.SCRIPTRUN key function [TIMEOUT ms] [INPUTS in... [$ in...]] [OUTPUTS out...] */
int ScriptRun_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        scriptRunKeys(ctx, argv, argc);
        return REDISMODULE_OK;
    }
    return execute(ctx, argv, argc, ScriptRun_Parse);
}
