/*
 * script_type.c - type methods of AI_SCRIPT. RDB layout, encoding version 4
 * (spec 17): Buf* device, Str tag, Buf* source, U entry-point count,
 * Buf* entry point x count. Loading recompiles through the TORCH backend.
 *
 * AOF rewrite always writes ENTRY_POINTS (0 for a SCRIPTSET script), where
 * 1.2 left it out and wrote a command that fails on replay.
 */
#include "script_type.h"

#include <string.h>

#include "script.h"
#include "tensor_type.h"

RedisModuleType *RAI_ScriptType = NULL;

static char *loadCString(RedisModuleIO *io, size_t *len) {
    size_t n = 0;
    char *buf = RedisModule_LoadStringBuffer(io, &n);
    if (buf == NULL) return NULL;
    if (n > 0 && buf[n - 1] == '\0') n--;
    char *s = RedisModule_Alloc(n + 1);
    memcpy(s, buf, n);
    s[n] = '\0';
    RedisModule_Free(buf);
    if (len) *len = n;
    return s;
}

static void *ScriptRdbLoad(RedisModuleIO *io, int encver) {
    if (encver != RAI_ENC_VER) {
        RedisModule_LogIOError(io, "warning",
                               "AI_SCRIPT encoding version %d is not supported (only %d)", encver,
                               RAI_ENC_VER);
        return NULL;
    }
    RAI_Script *s = NULL;
    char **eps = NULL;
    size_t neps = 0, source_len = 0, tag_len = 0;
    RAI_Error err;
    Error_Init(&err);
    char *device = loadCString(io, NULL);
    RedisModuleString *tag = RedisModule_LoadString(io);
    char *source = loadCString(io, &source_len);
    neps = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || !device || !tag || !source || neps > 1 << 20) {
        neps = 0;
        goto ioerr;
    }
    eps = RedisModule_Calloc(neps ? neps : 1, sizeof(char *));
    for (size_t i = 0; i < neps; i++) eps[i] = loadCString(io, NULL);
    if (RedisModule_IsIOError(io)) goto ioerr;
    RAI_ScriptParams p = {
        .device_str = device,
        .source = source,
        .source_len = source_len,
        .nentry_points = neps,
        .entry_points = (const char *const *)eps,
    };
    p.tag = RedisModule_StringPtrLen(tag, &tag_len);
    p.tag_len = tag_len;
    s = Script_Create(NULL, &p, &err);
    if (s == NULL) {
        RedisModule_LogIOError(io, "warning", "could not rebuild a script from RDB: %s",
                               Error_Message(&err));
        goto ioerr;
    }
    const RedisModuleString *keyname = RedisModule_GetKeyNameFromIO(io);
    if (keyname) Script_RegisterStats(s, (RedisModuleString *)keyname);
    goto done;
ioerr:
    RedisModule_LogIOError(io, "warning", "Experienced a short read while reading a script from RDB");
done:
    Error_Clear(&err);
    if (device) RedisModule_Free(device);
    if (tag) RedisModule_FreeString(NULL, tag);
    if (source) RedisModule_Free(source);
    if (eps) {
        for (size_t i = 0; i < neps; i++) {
            if (eps[i]) RedisModule_Free(eps[i]);
        }
        RedisModule_Free(eps);
    }
    return s;
}

static void ScriptRdbSave(RedisModuleIO *io, void *value) {
    RAI_Script *s = value;
    RedisModule_SaveStringBuffer(io, s->device_str, strlen(s->device_str) + 1);
    RedisModule_SaveStringBuffer(io, s->tag, s->tag_len);
    RedisModule_SaveStringBuffer(io, s->source, s->source_len + 1);
    RedisModule_SaveUnsigned(io, s->nentry_points);
    for (size_t i = 0; i < s->nentry_points; i++) {
        RedisModule_SaveStringBuffer(io, s->entry_points[i], strlen(s->entry_points[i]) + 1);
    }
}

static void ScriptAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Script *s = value;
    RedisModuleCtx *ctx = RedisModule_GetContextFromIO(aof);
    size_t max = 8 + s->nentry_points;
    RedisModuleString **args = RedisModule_Alloc(sizeof(*args) * max);
    size_t n = 0;
    args[n++] = RedisModule_CreateStringFromString(ctx, key);
    args[n++] = RedisModule_CreateString(ctx, s->device_str, strlen(s->device_str));
    args[n++] = RedisModule_CreateString(ctx, "TAG", 3);
    args[n++] = RedisModule_CreateString(ctx, s->tag, s->tag_len);
    args[n++] = RedisModule_CreateString(ctx, "ENTRY_POINTS", 12);
    args[n++] = RedisModule_CreateStringFromLongLong(ctx, (long long)s->nentry_points);
    for (size_t i = 0; i < s->nentry_points; i++) {
        args[n++] = RedisModule_CreateString(ctx, s->entry_points[i], strlen(s->entry_points[i]));
    }
    args[n++] = RedisModule_CreateString(ctx, "SOURCE", 6);
    args[n++] = RedisModule_CreateString(ctx, s->source, s->source_len);
    RedisModule_EmitAOF(aof, "AI.SCRIPTSTORE", "v", args, n);
    for (size_t i = 0; i < n; i++) RedisModule_FreeString(ctx, args[i]);
    RedisModule_Free(args);
}

static void ScriptFree(void *value) {
    Script_Release(value);
}

static size_t ScriptMemUsage(const void *value) {
    const RAI_Script *s = value;
    return sizeof(*s) + s->source_len + s->tag_len;
}

int ScriptType_Register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = ScriptRdbLoad,
        .rdb_save = ScriptRdbSave,
        .aof_rewrite = ScriptAofRewrite,
        .mem_usage = ScriptMemUsage,
        .free = ScriptFree,
    };
    RAI_ScriptType = RedisModule_CreateDataType(ctx, "AI_SCRIPT", RAI_ENC_VER, &methods);
    return RAI_ScriptType ? REDISMODULE_OK : REDISMODULE_ERR;
}
