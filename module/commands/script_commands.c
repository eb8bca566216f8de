/*
 * script_commands.c - AI.SCRIPTSTORE, AI.SCRIPTSET (deprecated), AI.SCRIPTGET
 * and AI.SCRIPTDEL (docs/commands.md, "Scripts"). Both store commands end in storeScript().
 */
#include "commands/script_commands.h"

#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "core/messages.h"
#include "redisai/reply_texts.h"
#include "types/script.h"
#include "types/script_type.h"
#include "types/stored.h"

/* Compiles, type-checks the key (after compiling, as 1.2), stores,
 * replicates verbatim and replies. */
static int storeScript(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_ScriptParams *p) {
    RAI_Error err;
    Error_Init(&err);
    p->key = RedisModule_StringPtrLen(keyname, &p->key_len);
    RAI_Script *s = Script_Create(ctx, p, &err);
    if (s == NULL) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) != RAI_ScriptType) {
        RedisModule_CloseKey(key);
        Script_Release(s);
        return RedisModule_ReplyWithError(ctx, RAI_WRONGTYPE_MSG);
    }
    Script_RegisterStats(s, keyname);
    RedisModule_ModuleTypeSetValue(key, RAI_ScriptType, s);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* AI.SCRIPTSTORE key device [TAG tag] ENTRY_POINTS n ep... SOURCE src */
int ScriptStore_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 8) return RedisModule_WrongArity(ctx);
    RAI_ScriptParams p = {.tag = "", .tag_len = 0};
    p.device_str = RedisModule_StringPtrLen(argv[2], NULL);
    int pos = 3;
    if (Args_TokenIs(argv[pos], "TAG")) {
        p.tag = RedisModule_StringPtrLen(argv[pos + 1], &p.tag_len);
        pos += 2;
    }
    if (pos >= argc || !Args_TokenIs(argv[pos], "ENTRY_POINTS")) {
        return RedisModule_ReplyWithError(ctx, RAI_ERR_MISSING_ENTRY_POINTS);
    }
    long long n;
    if (pos + 1 >= argc || RedisModule_StringToLongLong(argv[pos + 1], &n) != REDISMODULE_OK) {
        return RedisModule_ReplyWithError(
            ctx, "ERR Non numeric entry points number provided to AI.SCRIPTSTORE command");
    }
    if (n < 0) n = 0;
    if (n > argc - pos - 2) {
        return RedisModule_ReplyWithError(ctx, RAI_ERR_MISSING_ENTRY_POINTS);
    }
    RedisModuleString **eps_argv = argv + pos + 2;
    pos += 2 + (int)n;
    if (pos + 1 >= argc || !Args_TokenIs(argv[pos], "SOURCE")) {
        return RedisModule_ReplyWithError(ctx, RAI_ERR_MISSING_SOURCE);
    }
    p.source = RedisModule_StringPtrLen(argv[pos + 1], &p.source_len);
    const char **eps = RedisModule_Alloc(sizeof(char *) * (n ? n : 1));
    for (long long i = 0; i < n; i++) eps[i] = RedisModule_StringPtrLen(eps_argv[i], NULL);
    p.nentry_points = (size_t)n;
    p.entry_points = eps;
    int rc = storeScript(ctx, argv[1], &p);
    RedisModule_Free(eps);
    return rc;
}

/* AI.SCRIPTSET key device [TAG tag] SOURCE src */
int ScriptSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5 && argc != 7) return RedisModule_WrongArity(ctx);
    RAI_ScriptParams p = {.tag = "", .tag_len = 0};
    p.device_str = RedisModule_StringPtrLen(argv[2], NULL);
    int pos = 3;
    if (argc == 7 && Args_TokenIs(argv[pos], "TAG")) {
        p.tag = RedisModule_StringPtrLen(argv[pos + 1], &p.tag_len);
        pos += 2;
    }
    if (pos + 1 >= argc || !Args_TokenIs(argv[pos], "SOURCE")) {
        return RedisModule_ReplyWithError(ctx, RAI_ERR_MISSING_SOURCE);
    }
    p.source = RedisModule_StringPtrLen(argv[pos + 1], &p.source_len);
    return storeScript(ctx, argv[1], &p);
}

/* AI.SCRIPTGET key [META] [SOURCE] */
int ScriptGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2 || argc > 4) return RedisModule_WrongArity(ctx);
    RAI_Error err;
    Error_Init(&err);
    RAI_Script *s = Script_FromKey(ctx, argv[1], &err);
    if (s == NULL) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    int meta = 0, source = 0;
    for (int i = 2; i < argc; i++) {
        if (Args_TokenIs(argv[i], "META")) meta = 1;
        if (Args_TokenIs(argv[i], "SOURCE")) source = 1;
    }
    if (source && !meta) {
        RedisModule_ReplyWithStringBuffer(ctx, s->source, s->source_len);
        Script_Release(s);
        return REDISMODULE_OK;
    }
    int with_source = !(meta && !source);
    RedisModule_ReplyWithArray(ctx, with_source ? 8 : 6);
    RedisModule_ReplyWithCString(ctx, "device");
    RedisModule_ReplyWithCString(ctx, s->device_str);
    RedisModule_ReplyWithCString(ctx, "tag");
    RedisModule_ReplyWithStringBuffer(ctx, s->tag, s->tag_len);
    RedisModule_ReplyWithCString(ctx, "Entry Points");
    RedisModule_ReplyWithArray(ctx, (long)s->nentry_points);
    for (size_t i = 0; i < s->nentry_points; i++) {
        RedisModule_ReplyWithCString(ctx, s->entry_points[i]);
    }
    if (with_source) {
        RedisModule_ReplyWithCString(ctx, "source");
        RedisModule_ReplyWithStringBuffer(ctx, s->source, s->source_len);
    }
    Script_Release(s);
    return REDISMODULE_OK;
}

/* AI.SCRIPTDEL key */
int ScriptDel_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    const char *why = Stored_DeleteKey(ctx, argv[1], RAI_ScriptType, RAI_ERR_SCRIPT_KEY_EMPTY);
    if (why) return RedisModule_ReplyWithError(ctx, why);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}
