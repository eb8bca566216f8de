/*
 * dag_commands.c - the DAG commands (docs/commands.md, "DAGs").
 *
 * The whole command is parsed and validated on the main thread: header
 * (LOAD, PERSIST, ROUTING, TIMEOUT), then each `|>` operation with the
 * parser of the standalone command. Tensor names are local: a name maps to
 * the slot of its latest producer, so later writers shadow earlier ones.
 * Any error here is one error reply and nothing runs.
 */
#include "commands/dag_commands.h"

#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "commands/model_execute.h"
#include "commands/script_execute.h"
#include "commands/tensor_commands.h"
#include "core/messages.h"
#include "core/server.h"
#include "engine/dag.h"
#include "engine/dag_start.h"
#include "types/tensor_type.h"

typedef enum DagFlavor {
    DAG_EXECUTE,
    DAG_EXECUTE_RO,
    DAG_RUN,
    DAG_RUN_RO,
    DAG_LLAPI, /* RedisAI_DAGAddOpsFromString: every op of 1.2's ParseDAGOps */
} DagFlavor;

static const char *flavor_names[] = {"AI.DAGEXECUTE", "AI.DAGEXECUTE_RO", "AI.DAGRUN",
                                     "AI.DAGRUN_RO", "RedisAI_DAGAddOpsFromString"};

static int isSeparator(RedisModuleString *s) {
    return !strcmp(RedisModule_StringPtrLen(s, NULL), "|>");
}

static int readOnly(DagFlavor f) {
    return f == DAG_EXECUTE_RO || f == DAG_RUN_RO;
}

/* ------------------------------ local names ------------------------------- */

typedef DagNames Names;

void DagNames_Set(DagNames *n, const char *name, size_t len, size_t slot) {
    RedisModule_DictReplaceC(n->slots, (void *)name, len, (void *)(uintptr_t)(slot + 1));
}

static void nameSet(Names *n, RedisModuleString *name, size_t slot) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(name, &len);
    DagNames_Set(n, p, len, slot);
}

static int dictSlot(RedisModuleDict *d, const char *name, size_t len, size_t *slot) {
    void *v = d ? RedisModule_DictGetC(d, (void *)name, len, NULL) : NULL;
    if (v == NULL) return 0;
    *slot = (size_t)(uintptr_t)v - 1;
    return 1;
}

int DagNames_Resolve(RAI_Dag *dag, DagNames *n, const char *name, size_t len, size_t *slot) {
    if (dictSlot(n->slots, name, len, slot)) return 1;
    if (n->unresolved == NULL) return 0;
    if (!dictSlot(n->unresolved, name, len, slot)) {
        *slot = Dag_AddSlot(dag, NULL);
        RedisModule_DictSetC(n->unresolved, (void *)name, len, (void *)(uintptr_t)(*slot + 1));
    }
    return 1;
}

static int nameGet(RAI_Dag *dag, Names *n, RedisModuleString *name, size_t *slot) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(name, &len);
    return DagNames_Resolve(dag, n, p, len, slot);
}

/* Resolves op inputs to slots, then gives each output a new slot. */
static int bindOp(RAI_Dag *dag, RAI_DagOp *op, Names *names, RedisModuleString **inputs,
                  size_t nin, RedisModuleString **outputs, size_t nout, RAI_Error *err) {
    op->ninputs = nin;
    op->inputs = RedisModule_Alloc(sizeof(size_t) * (nin ? nin : 1));
    op->noutputs = nout;
    op->outputs = RedisModule_Alloc(sizeof(size_t) * (nout ? nout : 1));
    for (size_t i = 0; i < nin; i++) {
        if (!nameGet(dag, names, inputs[i], &op->inputs[i])) {
            Error_Set(err, RAI_ERR_DAG_INPUT_NOT_FOUND);
            return REDISMODULE_ERR;
        }
    }
    for (size_t i = 0; i < nout; i++) {
        op->outputs[i] = Dag_AddSlot(dag, NULL);
        nameSet(names, outputs[i], op->outputs[i]);
    }
    return REDISMODULE_OK;
}

/* ---------------------------------- ACL ----------------------------------- */

/* Keys a DAG touches that Redis does not see (the deprecated ops' model and
 * script keys are not reported by getkeys) are checked here against the
 * caller's ACL user, before anything runs; those Redis sees (`seen`: LOAD,
 * PERSIST, the AI.MODELEXECUTE / AI.SCRIPTEXECUTE ops' keys) are checked
 * again, which costs little and keeps one rule for all, except on a server
 * without the module ACL API, where the module can only ask whether the
 * user may access every key (caller.h) and Redis's own check of the keys it
 * saw must do. Read: models, scripts, LOAD; write: PERSIST. */
static int checkKey(RedisModuleCtx *ctx, RAI_Dag *dag, RedisModuleString *key, int write,
                    int seen, RAI_Error *err) {
    if (seen && !Server_HasAclApi()) return REDISMODULE_OK;
    int flags = write ? REDISMODULE_CMD_KEY_UPDATE : REDISMODULE_CMD_KEY_ACCESS;
    return Caller_CheckKey(ctx, &dag->caller, key, flags, err);
}

/* ------------------------------- operations ------------------------------- */

static int parseTensorSet(RAI_Dag *dag, Names *names, RedisModuleString **argv, int argc,
                          RAI_Error *err) {
    if (argc < 4) {
        Error_Set(err, "wrong number of arguments for 'AI.TENSORSET' command");
        return REDISMODULE_ERR;
    }
    RAI_Tensor *t = TensorSet_Parse(argv + 2, argc - 2, 0, err);
    if (t == NULL) return REDISMODULE_ERR;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_TENSORSET);
    op->noutputs = 1;
    op->outputs = RedisModule_Alloc(sizeof(size_t));
    op->outputs[0] = Dag_AddSlot(dag, t);
    nameSet(names, argv[1], op->outputs[0]);
    return REDISMODULE_OK;
}

static int parseTensorGet(RAI_Dag *dag, Names *names, RedisModuleString **argv, int argc,
                          RAI_Error *err) {
    if (argc < 2 || argc > 4) {
        Error_Set(err, "wrong number of arguments for 'AI.TENSORGET' command");
        return REDISMODULE_ERR;
    }
    int fmt = TensorGet_ParseFormat(argv + 2, argc - 2, err);
    if (fmt < 0) return REDISMODULE_ERR;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_TENSORGET);
    op->fmt = fmt;
    return bindOp(dag, op, names, argv + 1, 1, NULL, 0, err);
}

/* An execution op's spelling must match the DAG command's: the deprecated
 * AI.MODELRUN / AI.SCRIPTRUN only in AI.DAGRUN(_RO), the current ones only
 * in AI.DAGEXECUTE(_RO); the LLAPI takes both, as 1.2's did. `what` is
 * "MODEL" or "SCRIPT". */
static int checkSpelling(DagFlavor flavor, int is_run, const char *what, RAI_Error *err) {
    int deprecated = flavor == DAG_RUN || flavor == DAG_RUN_RO;
    if (flavor == DAG_LLAPI) return REDISMODULE_OK;
    if (is_run && !deprecated) {
        Error_SetFmt(err, "Deprecated AI.%sRUN cannot be used in AI.DAGEXECUTE command", what);
        return REDISMODULE_ERR;
    }
    if (!is_run && deprecated) {
        Error_SetFmt(err, "AI.%sEXECUTE cannot be used in a deprecated AI.DAGRUN command", what);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

static int parseModelOp(RedisModuleCtx *ctx, DagFlavor flavor, RAI_Dag *dag, Names *names,
                        RedisModuleString **argv, int argc, RAI_Error *err) {
    int is_run = Args_TokenIs(argv[0], "AI.MODELRUN");
    if (checkSpelling(flavor, is_run, "MODEL", err) != REDISMODULE_OK) return REDISMODULE_ERR;
    if (argc >= 2 && checkKey(ctx, dag, argv[1], 0, !is_run, err) != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    ExecuteArgs a;
    int rc = is_run ? ModelRun_Parse(ctx, argv, argc, 1, &a, err)
                    : ModelExecute_Parse(ctx, argv, argc, 1, &a, err);
    if (rc != REDISMODULE_OK) return REDISMODULE_ERR;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_MODEL);
    op->model = a.model;
    op->queue = a.model->queue;
    Dag_SetOpKey(op, argv[1]);
    return bindOp(dag, op, names, a.inputs, (size_t)a.ninputs, a.outputs, (size_t)a.noutputs,
                  err);
}

static int parseScriptOp(RedisModuleCtx *ctx, DagFlavor flavor, RAI_Dag *dag, Names *names,
                         RedisModuleString **argv, int argc, RAI_Error *err) {
    int is_run = Args_TokenIs(argv[0], "AI.SCRIPTRUN");
    if (checkSpelling(flavor, is_run, "SCRIPT", err) != REDISMODULE_OK) return REDISMODULE_ERR;
    if (!is_run && flavor == DAG_EXECUTE_RO) {
        Error_Set(err, "ERR AI.SCRIPTEXECUTE command cannot be specified in a read-only DAG");
        return REDISMODULE_ERR;
    }
    if (argc >= 2 && checkKey(ctx, dag, argv[1], 0, !is_run, err) != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    ScriptArgs a;
    int rc = is_run ? ScriptRun_Parse(ctx, argv, argc, 1, &a, err)
                    : ScriptExecute_Parse(ctx, argv, argc, 1, &a, err);
    if (rc != REDISMODULE_OK) return REDISMODULE_ERR;
    RAI_DagOp *op = Dag_AddOp(dag, DAG_OP_SCRIPT);
    op->script = a.script;
    a.script = NULL;
    op->queue = op->script->queue;
    Dag_SetOpKey(op, argv[1]);
    op->function = RedisModule_Strdup(RedisModule_StringPtrLen(a.function, NULL));
    op->entry_point = Script_IsEntryPoint(op->script, op->function);
    Dag_CopyStrings(&op->keys, a.keys.argv, (size_t)a.keys.n);
    Dag_CopyStrings(&op->args, a.args.argv, (size_t)a.args.n);
    rc = bindOp(dag, op, names, a.inputs.argv, (size_t)a.inputs.n, a.outputs.argv,
                (size_t)a.outputs.n, err);
    ScriptArgs_Clear(&a);
    return rc;
}

static int parseOp(RedisModuleCtx *ctx, DagFlavor flavor, RAI_Dag *dag, Names *names,
                   RedisModuleString **argv, int argc, RAI_Error *err) {
    RedisModuleString *name = argv[0];
    if (Args_TokenIs(name, "AI.TENSORSET")) return parseTensorSet(dag, names, argv, argc, err);
    if (Args_TokenIs(name, "AI.TENSORGET")) return parseTensorGet(dag, names, argv, argc, err);
    if (Args_TokenIs(name, "AI.MODELEXECUTE") || Args_TokenIs(name, "AI.MODELRUN")) {
        return parseModelOp(ctx, flavor, dag, names, argv, argc, err);
    }
    if (Args_TokenIs(name, "AI.SCRIPTEXECUTE") || Args_TokenIs(name, "AI.SCRIPTRUN")) {
        return parseScriptOp(ctx, flavor, dag, names, argv, argc, err);
    }
    Error_Set(err, "Unsupported command within DAG");
    return REDISMODULE_ERR;
}

static int unexpected(RAI_Error *err, RedisModuleString *tok) {
    Error_SetFmt(err, "ERR Invalid DAG command. Unexpected argument:  %s",
                 RedisModule_StringPtrLen(tok, NULL));
    return -1;
}

/* Parses `|> op ... |> op ...`: argv[0] is a separator. */
static int parseOps(RedisModuleCtx *ctx, DagFlavor flavor, RAI_Dag *dag, Names *names,
                    RedisModuleString **argv, int argc, RAI_Error *err) {
    int pos = 0;
    while (pos < argc) {
        /* argv[pos] is a separator; the op runs to the next one. */
        int start = pos + 1, end = start;
        while (end < argc && !isSeparator(argv[end])) end++;
        if (end == start) {
            unexpected(err, argv[pos]);
            return REDISMODULE_ERR;
        }
        if (parseOp(ctx, flavor, dag, names, argv + start, end - start, err) != REDISMODULE_OK) {
            return REDISMODULE_ERR;
        }
        pos = end;
    }
    return REDISMODULE_OK;
}

int Dag_ParseLLAPIOps(RedisModuleCtx *ctx, RAI_Dag *dag, DagNames *names,
                      RedisModuleString **argv, int argc, RAI_Error *err) {
    if (argc == 0 || !isSeparator(argv[0])) {
        Error_Set(err, "DAG op should start with: '|>' ");
        return REDISMODULE_ERR;
    }
    return parseOps(ctx, DAG_LLAPI, dag, names, argv, argc, err);
}

/* --------------------------------- header --------------------------------- */

typedef struct Header {
    RedisModuleString **persist;
    long long npersist;
    int has_load, has_persist, has_routing, has_timeout;
    long long timeout;
} Header;

/* LOAD n k...: tensors referenced from the keyspace now, named locally. */
static int parseLoad(RedisModuleCtx *ctx, RAI_Dag *dag, Names *names, RedisModuleString **argv,
                     int argc, int pos, RAI_Error *err) {
    if (argc - pos - 1 < 2) {
        Error_Set(err, "ERR missing arguments after LOAD keyword in DAG command");
        return -1;
    }
    long long n;
    if (RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK || n <= 0) {
        Error_Set(err, "ERR invalid or negative value found in number of keys to LOAD");
        return -1;
    }
    for (long long i = 0; i < n; i++) {
        if (pos + 2 + i >= argc) {
            Error_Set(err, "ERR number of keys to LOAD into DAG does not match the number of "
                           "given arguments");
            return -1;
        }
        RedisModuleString *key = argv[pos + 2 + i];
        if (checkKey(ctx, dag, key, 0, 1, err) != REDISMODULE_OK) return -1;
        RAI_Tensor *t = Tensor_FromKey(ctx, key, err);
        if (t == NULL) return -1;
        nameSet(names, key, Dag_AddSlot(dag, t));
    }
    return pos + 2 + (int)n;
}

static int parsePersist(RedisModuleCtx *ctx, RAI_Dag *dag, RedisModuleString **argv, int argc,
                        int pos, Header *h, RAI_Error *err) {
    if (argc - pos - 1 < 2) {
        Error_Set(err, "ERR missing arguments after PERSIST keyword in DAG command");
        return -1;
    }
    long long n;
    if (RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK || n <= 0) {
        Error_Set(err, "ERR invalid or negative value found in number of keys to PERSIST");
        return -1;
    }
    if (n > argc - pos - 2) {
        Error_Set(err, "ERR number of keys to PERSIST after DAG execution does not match the "
                       "number of given arguments");
        return -1;
    }
    for (long long i = 0; i < n; i++) {
        size_t li;
        const char *ki = RedisModule_StringPtrLen(argv[pos + 2 + i], &li);
        for (long long j = 0; j < i; j++) {
            size_t lj;
            const char *kj = RedisModule_StringPtrLen(argv[pos + 2 + j], &lj);
            if (li == lj && !memcmp(ki, kj, li)) {
                Error_Set(err, "ERR PERSIST keys must be unique");
                return -1;
            }
        }
    }
    for (long long i = 0; i < n; i++) {
        if (checkKey(ctx, dag, argv[pos + 2 + i], 1, 1, err) != REDISMODULE_OK) return -1;
    }
    h->persist = argv + pos + 2;
    h->npersist = n;
    return pos + 2 + (int)n;
}

/* Returns the position of the first `|>`, or -1 after err. */
static int parseHeader(RedisModuleCtx *ctx, DagFlavor flavor, RAI_Dag *dag, Names *names,
                       RedisModuleString **argv, int argc, Header *h, RAI_Error *err) {
    int pos = 1;
    while (pos < argc && !isSeparator(argv[pos])) {
        RedisModuleString *tok = argv[pos];
        if (Args_TokenIs(tok, "LOAD")) {
            if (h->has_load) return unexpected(err, tok);
            h->has_load = 1;
            pos = parseLoad(ctx, dag, names, argv, argc, pos, err);
        } else if (Args_TokenIs(tok, "PERSIST")) {
            if (readOnly(flavor)) {
                Error_Set(err, "ERR PERSIST cannot be specified in a read-only DAG");
                return -1;
            }
            if (h->has_persist) return unexpected(err, tok);
            h->has_persist = 1;
            pos = parsePersist(ctx, dag, argv, argc, pos, h, err);
        } else if (Args_TokenIs(tok, "ROUTING")) {
            if (h->has_routing) return unexpected(err, tok);
            h->has_routing = 1;
            if (pos + 1 >= argc) {
                Error_Set(err, "ERR Missing ROUTING value");
                return -1;
            }
            pos += 2;
        } else if (Args_TokenIs(tok, "TIMEOUT")) {
            if (h->has_timeout) return unexpected(err, tok);
            h->has_timeout = 1;
            if (pos + 1 >= argc) {
                Error_Set(err, RAI_ERR_TIMEOUT_MISSING);
                return -1;
            }
            /* QUIRK (docs/commands.md, AI.DAGEXECUTE): 0 and negatives are
             * accepted, meaning none. */
            if (RedisModule_StringToLongLong(argv[pos + 1], &h->timeout) != REDISMODULE_OK) {
                Error_Set(err, RAI_ERR_TIMEOUT_VALUE);
                return -1;
            }
            pos += 2;
        } else {
            return unexpected(err, tok);
        }
        if (pos < 0) return -1;
    }
    return pos;
}

/* --------------------------------- command -------------------------------- */

static int dagCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, DagFlavor flavor) {
    if (Dag_RefuseIfCannotBlock(ctx)) return REDISMODULE_OK;
    int is_execute = flavor == DAG_EXECUTE || flavor == DAG_EXECUTE_RO;
    if (is_execute && argc < 6) {
        char msg[96];
        snprintf(msg, sizeof(msg), "ERR missing arguments for '%s' command", flavor_names[flavor]);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    if (!is_execute && argc < 4) {
        char msg[96];
        snprintf(msg, sizeof(msg), RAI_ERR_WRONG_ARITY_FMT,
                 flavor_names[flavor]);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    RAI_Error err;
    Error_Init(&err);
    RAI_Dag *dag = Dag_New();
    Names names = {.slots = RedisModule_CreateDict(NULL), .unresolved = NULL};
    Header h = {0};

    /* for the key checks while parsing */
    if (Dag_CaptureCaller(ctx, dag, &err) != REDISMODULE_OK) goto fail;
    int pos = parseHeader(ctx, flavor, dag, &names, argv, argc, &h, &err);
    if (pos < 0) goto fail;
    if (is_execute && !h.has_load && !h.has_persist && !h.has_routing) {
        Error_Set(&err, "ERR AI.DAGEXECUTE and AI.DAGEXECUTE_RO commands must contain at least "
                        "one out of ROUTING, LOAD, PERSIST keywords");
        goto fail;
    }
    if (pos >= argc) {
        Error_Set(&err, RAI_ERR_DAG_EMPTY);
        goto fail;
    }
    if (parseOps(ctx, flavor, dag, &names, argv + pos, argc - pos, &err) != REDISMODULE_OK) {
        goto fail;
    }
    for (long long i = 0; i < h.npersist; i++) {
        size_t slot;
        if (!nameGet(dag, &names, h.persist[i], &slot)) {
            Error_Set(&err, "ERR PERSIST key cannot be found in DAG");
            goto fail;
        }
        Dag_AddPersist(dag, h.persist[i], slot);
    }
    dag->timeout_ms = h.timeout > 0 ? h.timeout : 0;
    RedisModule_FreeDict(NULL, names.slots);
    return Dag_Start(ctx, dag);

fail:
    RedisModule_ReplyWithError(ctx, Error_Message(&err));
    Error_Clear(&err);
    RedisModule_FreeDict(NULL, names.slots);
    Dag_Free(dag);
    return REDISMODULE_OK;
}

/* docs/persistence.md, "Cluster": LOAD keys, PERSIST keys, the ROUTING value, and the key after
 * each AI.MODELEXECUTE / AI.SCRIPTEXECUTE anywhere in argv. */
static void dagKeys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    int pos = 1;
    while (pos < argc && !isSeparator(argv[pos])) {
        long long n;
        if ((Args_TokenIs(argv[pos], "LOAD") || Args_TokenIs(argv[pos], "PERSIST")) && pos + 1 < argc &&
            RedisModule_StringToLongLong(argv[pos + 1], &n) == REDISMODULE_OK && n > 0) {
            /* clamped so that pos only moves forward, and stays an int */
            if (n > argc) n = argc;
            for (long long i = 0; i < n && pos + 2 + i < argc; i++) {
                RedisModule_KeyAtPos(ctx, (int)(pos + 2 + i));
            }
            pos += 2 + (int)n;
        } else if (Args_TokenIs(argv[pos], "ROUTING") && pos + 1 < argc) {
            RedisModule_KeyAtPos(ctx, pos + 1);
            pos += 2;
        } else {
            pos++;
        }
    }
    for (int i = pos; i + 1 < argc; i++) {
        if (Args_TokenIs(argv[i], "AI.MODELEXECUTE") || Args_TokenIs(argv[i], "AI.SCRIPTEXECUTE")) {
            RedisModule_KeyAtPos(ctx, i + 1);
        }
    }
}

#define DAG_COMMAND(fn, flavor)                                                        \
    int fn(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {                  \
        if (RedisModule_IsKeysPositionRequest(ctx)) {                                  \
            dagKeys(ctx, argv, argc);                                                  \
            return REDISMODULE_OK;                                                     \
        }                                                                              \
        return dagCommand(ctx, argv, argc, flavor);                                    \
    }

DAG_COMMAND(DagExecute_RedisCommand, DAG_EXECUTE)
DAG_COMMAND(DagExecuteRO_RedisCommand, DAG_EXECUTE_RO)
DAG_COMMAND(DagRun_RedisCommand, DAG_RUN)
DAG_COMMAND(DagRunRO_RedisCommand, DAG_RUN_RO)
