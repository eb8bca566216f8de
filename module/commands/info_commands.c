/*
 * info_commands.c - AI.INFO, AI._MODELSCAN and AI._SCRIPTSCAN: the
 * statistics entries of types/run_stats.h as replies.
 */
#include "commands/info_commands.h"

#include <stdio.h>
#include <strings.h>

#include "core/backend_kind.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/server.h"
#include "engine/caller.h"
#include "types/run_stats.h"

/* The table is locked: the entry cannot go while it is read. */
static int replyInfo(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RAI_RunStats *s = RunStats_Find(argv[1]);
    if (s == NULL) return RedisModule_ReplyWithError(ctx, "ERR cannot find run info for key");
    if (argc == 3 && !strcasecmp(RedisModule_StringPtrLen(argv[2], NULL), "RESETSTAT")) {
        RunStats_Reset(s);
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    RedisModule_ReplyWithArray(ctx, 18);
    RedisModule_ReplyWithCString(ctx, "key");
    RedisModule_ReplyWithString(ctx, s->key);
    RedisModule_ReplyWithCString(ctx, "type");
    RedisModule_ReplyWithCString(ctx, s->is_script ? "SCRIPT" : "MODEL");
    RedisModule_ReplyWithCString(ctx, "backend");
    RedisModule_ReplyWithCString(ctx, Backend_KindName(s->backend));
    RedisModule_ReplyWithCString(ctx, "device");
    RedisModule_ReplyWithCString(ctx, s->device);
    RedisModule_ReplyWithCString(ctx, "tag");
    RedisModule_ReplyWithStringBuffer(ctx, s->tag, s->tag_len);
    RedisModule_ReplyWithCString(ctx, "duration");
    RedisModule_ReplyWithLongLong(ctx, __atomic_load_n(&s->duration_us, __ATOMIC_RELAXED));
    RedisModule_ReplyWithCString(ctx, "samples");
    RedisModule_ReplyWithLongLong(ctx,
                                  s->is_script ? -1 : __atomic_load_n(&s->samples, __ATOMIC_RELAXED));
    RedisModule_ReplyWithCString(ctx, "calls");
    RedisModule_ReplyWithLongLong(ctx, __atomic_load_n(&s->calls, __ATOMIC_RELAXED));
    RedisModule_ReplyWithCString(ctx, "errors");
    RedisModule_ReplyWithLongLong(ctx, __atomic_load_n(&s->errors, __ATOMIC_RELAXED));
    return REDISMODULE_OK;
}

/* AI.INFO key [RESETSTAT] */
int Info_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2 || argc > 3) return RedisModule_WrongArity(ctx);
    RunStats_Lock();
    int rc = replyInfo(ctx, argv, argc);
    RunStats_Unlock();
    return rc;
}

typedef struct ScanState {
    RedisModuleCtx *ctx;
    RedisModuleUser *user; /* NULL: unrestricted */
    int scripts;
    long n;
} ScanState;

static void scanEntry(RAI_RunStats *s, void *arg) {
    ScanState *st = arg;
    if (s->is_script != st->scripts) return;
    if (st->user != NULL &&
        RedisModule_ACLCheckKeyPermissions(st->user, s->key, REDISMODULE_CMD_KEY_ACCESS) !=
            REDISMODULE_OK) {
        return;
    }
    RedisModule_ReplyWithArray(st->ctx, 2);
    RedisModule_ReplyWithString(st->ctx, s->key);
    RedisModule_ReplyWithStringBuffer(st->ctx, s->tag, s->tag_len);
    st->n++;
}

/* Lists only the keys the caller may read (its ACL key patterns), as
 * Redis's own SCAN would not but KEYS-like listings must: names and tags are
 * data. Where the caller's user cannot be known the listing is refused. */
static int scan(RedisModuleCtx *ctx, int argc, int scripts, const char *what) {
    if (argc != 1) return RedisModule_WrongArity(ctx);
    RAI_Caller caller;
    if (Caller_Capture(ctx, &caller) != CALLER_FOUND) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "ERR AI._%s cannot run inside a Lua script or another module's call: the "
                 "caller's ACL user is not known there",
                 what);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    int gone = 0;
    RedisModuleUser *user = NULL;
    if (Server_HasAclApi()) {
        user = Caller_User(&caller, &gone);
    } else {
        /* No key can be checked alone: all of them, or none (caller.h). */
        RAI_Error err;
        Error_Init(&err);
        int all = Caller_MayAccessAllKeys(ctx, &caller, &err);
        if (all != REDISMODULE_OK) {
            Caller_Clear(&caller);
            RedisModule_ReplyWithError(ctx, Error_Message(&err));
            Error_Clear(&err);
            return REDISMODULE_OK;
        }
    }
    Caller_Clear(&caller);
    if (gone) return RedisModule_ReplyWithError(ctx, CALLER_NOPERM_GONE);
    RedisModule_Log(ctx, "warning", "%s is experimental and might be removed in future versions",
                    what);
    ScanState st = {.ctx = ctx, .user = user, .scripts = scripts};
    RunStats_Lock();
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_ARRAY_LEN);
    RunStats_ForEach(scanEntry, &st);
    RunStats_Unlock();
    RedisModule_ReplySetArrayLength(ctx, st.n);
    if (user != NULL) RedisModule_FreeModuleUser(user);
    return REDISMODULE_OK;
}

int ModelScan_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    return scan(ctx, argc, 0, "MODELSCAN");
}

int ScriptScan_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    REDISMODULE_NOT_USED(argv);
    return scan(ctx, argc, 1, "SCRIPTSCAN");
}
