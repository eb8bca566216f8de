/*
 * config_commands.c - the module arguments and AI.CONFIG: what sets the
 * settings of core/config.h and loads backends (loader/backend_loader.c).
 */
#include "commands/config_commands.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "commands/backend_info_cache.h"
#include "commands/config_list.h"
#include "core/config.h"
#include "core/messages.h"
#include "core/server.h"
#include "engine/caller.h"
#include "engine/noperm.h"
#include "loader/backend_loader.h"

/* ---------------------------- load-time arguments ------------------------- */

static int applyLoadArg(RedisModuleCtx *ctx, RedisModuleString *k, RedisModuleString *v) {
    const char *key = RedisModule_StringPtrLen(k, NULL);
    const char *val = RedisModule_StringPtrLen(v, NULL);
    RAI_BackendKind kind;
    if (Backend_ParseKind(key, &kind)) {
        RAI_Error err;
        Error_Init(&err);
        int ok = Backend_Load(ctx, kind, val, 0, NULL, &err) == REDISMODULE_OK;
        if (!ok) {
            RedisModule_Log(ctx, "warning", "%s", Error_Message(&err));
        }
        Error_Clear(&err);
        return ok;
    }
    if (!strcasecmp(key, "THREADS_PER_QUEUE")) {
        if (!Config_ParsePositive(v, 1, &rai_config.threads_per_queue)) return 0;
        rai_config.threads_per_queue_set = 1;
        return 1;
    }
    if (!strcasecmp(key, "INTRA_OP_PARALLELISM")) {
        return Config_ParsePositive(v, 1, &rai_config.intra_op_parallelism);
    }
    if (!strcasecmp(key, "INTER_OP_PARALLELISM")) {
        return Config_ParsePositive(v, 1, &rai_config.inter_op_parallelism);
    }
    if (!strcasecmp(key, "MODEL_CHUNK_SIZE")) {
        return Config_ParsePositive(v, 1, &rai_config.model_chunk_size);
    }
    if (!strcasecmp(key, "MODEL_EXECUTION_TIMEOUT")) {
        return Config_ParsePositive(v, 1000, &rai_config.model_execution_timeout);
    }
    if (!strcasecmp(key, "BACKEND_MEMORY_LIMIT")) {
        return Config_ParsePositive(v, 1, &rai_config.backend_memory_limit);
    }
    if (!strcasecmp(key, "INLINE_RUN_MAX_US")) return Config_SetInlineMax(v);
    if (!strcasecmp(key, "WORKER_SPIN_US")) return Config_SetWorkerSpin(v);
    return 0;
}

/* The arguments read before any backend loads, whatever their order:
 * where relative backend paths resolve, whether they are confined there,
 * and which kinds run isolated and how long a host may take to start.
 * Returns 0 after logging the reason for a bad value. */
static int applyEarlyArg(RedisModuleCtx *ctx, const char *key, const char *val,
                         RedisModuleString *v) {
    if (!strcasecmp(key, "BACKENDSPATH")) {
        Config_SetBackendsPath(val);
    } else if (!strcasecmp(key, "BACKENDS_CONFINED")) {
        if (strcasecmp(val, "yes") && strcasecmp(val, "no")) {
            RedisModule_Log(ctx, "warning",
                            "ERR error processing argument: %s %s (expected yes or no)", key, val);
            return 0;
        }
        rai_config.backends_confined = !strcasecmp(val, "yes");
    } else if (!strcasecmp(key, "UNSAFE_NO_ACL_CHECKS")) {
        if (strcasecmp(val, "yes") && strcasecmp(val, "no")) {
            RedisModule_Log(ctx, "warning",
                            "ERR error processing argument: %s %s (expected yes or no)", key, val);
            return 0;
        }
        rai_config.unsafe_no_acl_checks = !strcasecmp(val, "yes");
        if (rai_config.unsafe_no_acl_checks && !Server_HasAclApi()) {
            RedisModule_Log(ctx, "warning",
                            "UNSAFE_NO_ACL_CHECKS yes: scripts' redis.execute and keys Redis does "
                            "not see run unchecked against the caller's ACL user");
        }
    } else if (!strcasecmp(key, "ISOLATE")) {
        RAI_BackendKind kind;
        if (!Backend_ParseKind(val, &kind)) {
            RedisModule_Log(ctx, "warning",
                            "ERR error processing argument: %s %s (expected a backend kind: TF, "
                            "TFLITE, TORCH or ONNX)", key, val);
            return 0;
        }
        rai_config.isolate_kinds |= 1u << kind;
    } else if (!strcasecmp(key, "BACKEND_START_TIMEOUT")) {
        if (!Config_ParsePositive(v, RAI_MIN_BACKEND_START_TIMEOUT, &rai_config.backend_start_timeout)) {
            RedisModule_Log(ctx, "warning",
                            "ERR error processing argument: %s %s (expected milliseconds, an "
                            "integer of at least %d)", key, val, RAI_MIN_BACKEND_START_TIMEOUT);
            return 0;
        }
    }
    return 1;
}

static int isEarlyArg(const char *key) {
    return !strcasecmp(key, "BACKENDSPATH") || !strcasecmp(key, "BACKENDS_CONFINED") ||
           !strcasecmp(key, "UNSAFE_NO_ACL_CHECKS") || !strcasecmp(key, "ISOLATE") || !strcasecmp(key, "BACKEND_START_TIMEOUT");
}

int Config_ApplyLoadArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc % 2 != 0) {
        RedisModule_Log(ctx, "warning",
                        "ERR module arguments must be key value pairs, got %d arguments", argc);
        return REDISMODULE_ERR;
    }
    /* BACKENDSPATH, BACKENDS_CONFINED, ISOLATE and BACKEND_START_TIMEOUT
     * first, so that every backend argument is resolved, confined and
     * isolated by them whatever the order of the arguments. */
    for (int i = 0; i < argc; i += 2) {
        const char *key = RedisModule_StringPtrLen(argv[i], NULL);
        const char *val = RedisModule_StringPtrLen(argv[i + 1], NULL);
        if (!applyEarlyArg(ctx, key, val, argv[i + 1])) return REDISMODULE_ERR;
    }
    /* Then the settings, then the backends: an isolated backend's host gets
     * the settings once, in its hello, so MODEL_EXECUTION_TIMEOUT after
     * `ONNX <path>` must already be in force when the host starts. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < argc; i += 2) {
            const char *key = RedisModule_StringPtrLen(argv[i], NULL);
            RAI_BackendKind kind;
            if (isEarlyArg(key) || Backend_ParseKind(key, &kind) != (pass == 1)) continue;
            if (!applyLoadArg(ctx, argv[i], argv[i + 1])) {
                RedisModule_Log(ctx, "warning", "ERR error processing argument: %s %s", key,
                                RedisModule_StringPtrLen(argv[i + 1], NULL));
                return REDISMODULE_ERR;
            }
        }
    }
    return REDISMODULE_OK;
}

/* ------------------------------- AI.CONFIG -------------------------------- */

/* Whether the caller's user may run the Redis command `as0 as1 as2` (as2
 * NULL: ""), asked of Redis's own ACL: the subcommands that are an
 * operator's (mayLoadCode, maySetOperatorSetting) are allowed to whoever
 * may run the Redis command they amount to. Returns 1 when allowed; else
 * replies NOPERM for ai.config|<sub> in the server's words (noperm.h), with
 * an ACL LOG entry when there is a user to name, and returns 0.
 *
 * Commands from the master link or AOF have no user and are allowed. A
 * call with no connected client behind it (a Lua script, another module's
 * RedisModule_Call, a TorchScript's redis.execute) is refused: Redis gives
 * a module no safe way to learn the user there (RM_GetCurrentUserName
 * dereferences a NULL user on module-call clients); the refusal names the
 * run's caller for our own redis.execute, nobody otherwise. A server
 * without the module ACL API (Redis 6.2) cannot check anyone: refused for
 * every user. */
static int mayRunAs(RedisModuleCtx *ctx, const char *sub, const char *as0, const char *as1,
                    RedisModuleString *as2) {
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) return 1;
    if (!Server_HasAclApi()) {
        char upper[32], msg[512];
        size_t i = 0;
        for (; sub[i] && i + 1 < sizeof(upper); i++) upper[i] = (char)toupper((unsigned char)sub[i]);
        upper[i] = '\0';
        snprintf(msg, sizeof(msg), SERVER_NO_ACL_CONFIG_FMT, upper, Server_VersionText());
        RedisModule_ReplyWithError(ctx, msg);
        return 0;
    }
    char cmd[64];
    int cmd_len = snprintf(cmd, sizeof(cmd), "ai.config|%s", sub);
    RedisModuleString *name = RedisModule_GetClientUserNameById(ctx, RedisModule_GetClientId(ctx));
    if (name == NULL) {
        if (errno == ENOTSUP && !(flags & REDISMODULE_CTX_FLAGS_LUA)) return 1; /* master */
        RedisModule_Log(ctx, "warning",
                        "AI.CONFIG %s refused: called from a script or a module call, where the "
                        "caller's ACL user cannot be checked", sub);
        /* Our own redis.execute: the run's caller, whom the module can name. */
        const RAI_Caller *run = Caller_Current();
        char *denied = NoPerm_CommandText(run ? run->user : NULL, cmd, (size_t)cmd_len);
        RedisModule_ReplyWithError(ctx, denied);
        RedisModule_Free(denied);
        return 0;
    }
    RedisModuleUser *user = RedisModule_GetModuleUserFromUserName(name);
    RedisModuleString *args[3] = {
        RedisModule_CreateString(ctx, as0, strlen(as0)),
        RedisModule_CreateString(ctx, as1, strlen(as1)),
        as2 ? as2 : RedisModule_CreateString(ctx, "", 0),
    };
    int ok = 0;
    if (user) {
        ok = RedisModule_ACLCheckCommandPermissions(user, args, 3) == REDISMODULE_OK;
        if (!ok) {
            RedisModuleString *obj = RedisModule_CreateString(ctx, cmd, (size_t)cmd_len);
            RedisModule_ACLAddLogEntry(ctx, user, obj, REDISMODULE_ACL_LOG_CMD);
            RedisModule_FreeString(ctx, obj);
        }
        RedisModule_FreeModuleUser(user);
    }
    if (!ok) {
        char *denied = NoPerm_CommandText(name, cmd, (size_t)cmd_len);
        RedisModule_ReplyWithError(ctx, denied);
        RedisModule_Free(denied);
    }
    for (int i = 0; i < 2; i++) RedisModule_FreeString(ctx, args[i]);
    if (!as2) RedisModule_FreeString(ctx, args[2]);
    RedisModule_FreeString(ctx, name);
    return ok;
}

static int configGet(RedisModuleCtx *ctx, RedisModuleString *name) {
    const char *n = RedisModule_StringPtrLen(name, NULL);
    if (!strcasecmp(n, "BACKENDSPATH")) {
        return RedisModule_ReplyWithCString(ctx, rai_config.backends_path);
    }
    if (!strcasecmp(n, "MODEL_CHUNK_SIZE")) {
        return RedisModule_ReplyWithLongLong(ctx, rai_config.model_chunk_size);
    }
    if (!strcasecmp(n, "INLINE_RUN_MAX_US")) {
        return RedisModule_ReplyWithLongLong(ctx, rai_config.inline_run_max_us);
    }
    if (!strcasecmp(n, "WORKER_SPIN_US")) {
        return RedisModule_ReplyWithLongLong(ctx, rai_config.worker_spin_us);
    }
    return RedisModule_ReplyWithNull(ctx);
}

/* LOADBACKEND and BACKENDSPATH decide which code runs inside the server:
 * allowed as MODULE LOAD is. LIST too: it shows the server's file system
 * layout and what it runs, an operator's view like MODULE LIST. */
static int mayLoadCode(RedisModuleCtx *ctx, const char *sub, RedisModuleString *path) {
    return mayRunAs(ctx, sub, "MODULE", "LOAD", path);
}

/* INLINE_RUN_MAX_US decides how long a run may hold Redis's main thread:
 * an operator's setting, allowed to whoever may run CONFIG SET. */
static int maySetOperatorSetting(RedisModuleCtx *ctx, const char *sub, RedisModuleString *v) {
    return mayRunAs(ctx, sub, "CONFIG", "SET", v);
}

/* AI.CONFIG LOADBACKEND <type> <path|name> [ISOLATED] | BACKENDSPATH <path> |
 *           MODEL_CHUNK_SIZE <bytes> | INLINE_RUN_MAX_US <us> | GET <name> | LIST */
int Config_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    const char *sub = RedisModule_StringPtrLen(argv[1], NULL);

    if (!strcasecmp(sub, "LOADBACKEND")) {
        if (argc < 4 || argc > 5) return RedisModule_WrongArity(ctx);
        if (!mayLoadCode(ctx, "loadbackend", argv[3])) return REDISMODULE_OK;
        RAI_BackendKind kind;
        if (!Backend_ParseKind(RedisModule_StringPtrLen(argv[2], NULL), &kind)) {
            return RedisModule_ReplyWithError(ctx, RAI_ERR_UNSUPPORTED_BACKEND);
        }
        int isolated = argc == 5;
        if (isolated && strcasecmp(RedisModule_StringPtrLen(argv[4], NULL), "ISOLATED")) {
            return RedisModule_ReplyWithError(
                ctx, "ERR LOADBACKEND: unexpected argument after the path (expected ISOLATED)");
        }
        RAI_Error err;
        Error_Init(&err);
        if (Backend_Load(ctx, kind, RedisModule_StringPtrLen(argv[3], NULL), isolated, NULL,
                         &err) !=
            REDISMODULE_OK) {
            RedisModule_Log(ctx, "warning", "%s", Error_Message(&err));
            char *reply = NULL;
            size_t n = strlen(Error_Message(&err)) + 64;
            reply = RedisModule_Alloc(n);
            snprintf(reply, n, "ERR error loading backend: %s", Error_Message(&err));
            RedisModule_ReplyWithError(ctx, reply);
            RedisModule_Free(reply);
            Error_Clear(&err);
            return REDISMODULE_OK;
        }
        BackendInfoCache_CollectInProcess();
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    if (!strcasecmp(sub, "BACKENDSPATH")) {
        if (argc < 3) return RedisModule_ReplyWithError(ctx, "ERR BACKENDSPATH: missing path argument");
        if (!mayLoadCode(ctx, "backendspath", argv[2])) return REDISMODULE_OK;
        Config_SetBackendsPath(RedisModule_StringPtrLen(argv[2], NULL));
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    if (!strcasecmp(sub, "MODEL_CHUNK_SIZE")) {
        if (argc < 3) return RedisModule_ReplyWithError(ctx, "ERR MODEL_CHUNK_SIZE: missing chunk size");
        if (!Config_ParsePositive(argv[2], 1, &rai_config.model_chunk_size)) {
            return RedisModule_ReplyWithError(ctx, "ERR MODEL_CHUNK_SIZE: invalid chunk size");
        }
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    if (!strcasecmp(sub, "INLINE_RUN_MAX_US")) {
        if (argc != 3) return RedisModule_WrongArity(ctx);
        if (!maySetOperatorSetting(ctx, "inline_run_max_us", argv[2])) return REDISMODULE_OK;
        if (!Config_SetInlineMax(argv[2])) {
            return RedisModule_ReplyWithError(
                ctx, "ERR INLINE_RUN_MAX_US: expected microseconds, an integer from 0 to 100000");
        }
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    if (!strcasecmp(sub, "GET")) {
        if (argc < 3) return RedisModule_WrongArity(ctx);
        return configGet(ctx, argv[2]);
    }
    if (!strcasecmp(sub, "LIST")) {
        if (!mayLoadCode(ctx, "list", NULL)) return REDISMODULE_OK;
        return BackendList_Reply(ctx);
    }
    return RedisModule_ReplyWithError(ctx, "ERR unsupported subcommand");
}
