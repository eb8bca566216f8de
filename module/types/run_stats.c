/*
 * run_stats.c - statistics entries, AI.INFO, AI._MODELSCAN, AI._SCRIPTSCAN.
 */
#include "types/run_stats.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/backend_kind.h"
#include "engine/caller.h"

static RedisModuleDict *table = NULL;
/* Guards the table and the life of its entries while AI.INFO reads one. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

void RunStats_Init(void) {
    if (table == NULL) table = RedisModule_CreateDict(NULL);
}

RAI_RunStats *RunStats_Register(RedisModuleString *key, int is_script, RAI_BackendKind backend,
                                const char *device, const char *tag, size_t tag_len) {
    RAI_RunStats *s = RedisModule_Calloc(1, sizeof(*s));
    s->key = RedisModule_CreateStringFromString(NULL, key);
    s->is_script = is_script;
    s->backend = backend;
    s->device = RedisModule_Strdup(device);
    s->tag = RedisModule_Alloc(tag_len + 1);
    memcpy(s->tag, tag, tag_len);
    s->tag[tag_len] = '\0';
    s->tag_len = tag_len;
    pthread_mutex_lock(&table_lock);
    RedisModule_DictReplace(table, s->key, s);
    pthread_mutex_unlock(&table_lock);
    return s;
}

void RunStats_Free(RAI_RunStats *s) {
    if (s == NULL) return;
    pthread_mutex_lock(&table_lock);
    if (RedisModule_DictGet(table, s->key, NULL) == s) RedisModule_DictDel(table, s->key, NULL);
    pthread_mutex_unlock(&table_lock);
    RedisModule_FreeString(NULL, s->key);
    RedisModule_Free(s->device);
    RedisModule_Free(s->tag);
    RedisModule_Free(s);
}

const char *RunStats_Key(const RAI_RunStats *s, size_t *len) {
    if (s == NULL || s->key == NULL) {
        *len = 0;
        return "";
    }
    return RedisModule_StringPtrLen(s->key, len);
}

void RunStats_AddRun(RAI_RunStats *s, int ok, long long duration_us, long long samples) {
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_RELAXED);
    if (!ok) {
        __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&s->duration_us, duration_us, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->samples, samples, __ATOMIC_RELAXED);
}

static void reset(RAI_RunStats *s) {
    __atomic_store_n(&s->duration_us, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->samples, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->errors, 0, __ATOMIC_RELAXED);
}

static int reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RAI_RunStats *s = RedisModule_DictGet(table, argv[1], NULL);
    if (s == NULL) return RedisModule_ReplyWithError(ctx, "ERR cannot find run info for key");
    if (argc == 3 && !strcasecmp(RedisModule_StringPtrLen(argv[2], NULL), "RESETSTAT")) {
        reset(s);
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
    pthread_mutex_lock(&table_lock);
    int rc = reply(ctx, argv, argc);
    pthread_mutex_unlock(&table_lock);
    return rc;
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
    int gone;
    RedisModuleUser *user = Caller_User(&caller, &gone);
    Caller_Clear(&caller);
    if (gone) return RedisModule_ReplyWithError(ctx, CALLER_NOPERM_GONE);
    RedisModule_Log(ctx, "warning", "%s is experimental and might be removed in future versions",
                    what);
    pthread_mutex_lock(&table_lock);
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(table, "^", NULL, 0);
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_ARRAY_LEN);
    long n = 0;
    RAI_RunStats *s;
    while (RedisModule_DictNextC(it, NULL, (void **)&s)) {
        if (s->is_script != scripts) continue;
        if (user != NULL &&
            RedisModule_ACLCheckKeyPermissions(user, s->key, REDISMODULE_CMD_KEY_ACCESS) !=
                REDISMODULE_OK) {
            continue;
        }
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithString(ctx, s->key);
        RedisModule_ReplyWithStringBuffer(ctx, s->tag, s->tag_len);
        n++;
    }
    RedisModule_DictIteratorStop(it);
    pthread_mutex_unlock(&table_lock);
    RedisModule_ReplySetArrayLength(ctx, n);
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
