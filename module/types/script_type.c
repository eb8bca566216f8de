/*
 * script_type.c - type methods of AI_SCRIPT. RDB layout, encoding version 4
 * (docs/persistence.md): Buf* device, Str tag, Buf* source, U entry-point count,
 * Buf* entry point x count. v3 and v5 (earlier builds of this module wrote
 * 5 for every type) are the same; v1 and v2 have no entry
 * points, and v0 also saved the tag as a Buf*. A script without entry
 * points loads as a SCRIPTSET script would (SCRIPTRUN runs any function
 * of it). Loading recompiles through the TORCH backend.
 *
 * AOF rewrite always writes ENTRY_POINTS (0 for a SCRIPTSET script), where
 * 1.2 left it out and wrote a command that fails on replay.
 */
#include "types/script_type.h"

#include <stdint.h>
#include <string.h>

#include "core/messages.h"
#include "loader/backend_loader.h"
#include "types/aof_args.h"
#include "types/digest_io.h"
#include "types/rdb_io.h"
#include "types/script.h"
#include "types/stored.h"
#include "types/tensor_type.h"

RedisModuleType *RAI_ScriptType = NULL;

typedef struct ScriptFields {
    char *device;
    char *tag;
    size_t tag_len;
    char *source;
    size_t source_len;
    size_t neps;
    char **eps;
} ScriptFields;

static void freeFields(ScriptFields *f) {
    if (f->device) RedisModule_Free(f->device);
    if (f->tag) RedisModule_Free(f->tag);
    if (f->source) RedisModule_Free(f->source);
    Stored_FreeNames(f->neps, f->eps);
}

static int loadFields(RedisModuleIO *io, int encver, ScriptFields *f) {
    f->device = RdbIO_LoadCString(io, NULL);
    f->tag = encver >= 1 ? RdbIO_LoadBytes(io, &f->tag_len) : RdbIO_LoadCString(io, &f->tag_len);
    f->source = RdbIO_LoadCString(io, &f->source_len);
    if (f->device == NULL || f->tag == NULL || f->source == NULL) return 0;
    if (encver < 3) return 1;
    f->eps = RdbIO_LoadNames(io, &f->neps);
    return f->eps != NULL;
}

static void *ScriptRdbLoad(RedisModuleIO *io, int encver) {
    if (RdbIO_RefuseNewer(io, "AI_SCRIPT", encver)) return NULL;
    RAI_Script *s = NULL;
    ScriptFields f = {0};
    RAI_Error err;
    Error_Init(&err);
    if (!loadFields(io, encver, &f)) goto ioerr;
    if (Backend_Require(NULL, RAI_BACKEND_TORCH, &err) == NULL) {
        RedisModule_LogIOError(io, "warning", "Failed loading AI_SCRIPT %s: the TORCH backend: %s",
                               RdbIO_KeyName(io), Error_Message(&err));
        goto ioerr;
    }
    RAI_ScriptParams p = {
        .device_str = f.device,
        .tag = f.tag,
        .tag_len = f.tag_len,
        .source = f.source,
        .source_len = f.source_len,
        .nentry_points = f.neps,
        .entry_points = (const char *const *)f.eps,
    };
    const RedisModuleString *loading = RedisModule_GetKeyNameFromIO(io);
    if (loading) p.key = RedisModule_StringPtrLen(loading, &p.key_len);
    s = Script_Create(NULL, &p, &err);
    if (s == NULL) {
        RedisModule_LogIOError(io, "warning",
                               "Failed loading AI_SCRIPT %s: the TORCH backend could not rebuild "
                               "it: %s",
                               RdbIO_KeyName(io), Error_Message(&err));
        goto ioerr;
    }
    const RedisModuleString *keyname = RedisModule_GetKeyNameFromIO(io);
    if (keyname) Script_RegisterStats(s, (RedisModuleString *)keyname);
    goto done;
ioerr:
    RdbIO_LogShortRead(io, "a script", encver);
done:
    Error_Clear(&err);
    freeFields(&f);
    return s;
}

static void ScriptRdbSave(RedisModuleIO *io, void *value) {
    RAI_Script *s = value;
    RdbIO_SaveCString(io, s->device_str);
    RedisModule_SaveStringBuffer(io, s->tag, s->tag_len);
    /* Buf*: the source with its NUL (source_len excludes it). */
    RedisModule_SaveStringBuffer(io, s->source, s->source_len + 1);
    RedisModule_SaveUnsigned(io, s->nentry_points);
    for (size_t i = 0; i < s->nentry_points; i++) RdbIO_SaveCString(io, s->entry_points[i]);
}

/* The fields ScriptRdbSave writes, in its order. */
static void ScriptDigest(RedisModuleDigest *md, void *value) {
    RAI_Script *s = value;
    DigestIO_AddCString(md, s->device_str);
    RedisModule_DigestAddStringBuffer(md, s->tag, s->tag_len);
    RedisModule_DigestAddStringBuffer(md, s->source, s->source_len);
    DigestIO_AddNames(md, s->nentry_points, s->entry_points);
    RedisModule_DigestEndSequence(md);
}

static void ScriptAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RAI_Script *s = value;
    AofArgs a;
    AofArgs_Init(&a, aof);
    AofArgs_Key(&a, key);
    AofArgs_Str(&a, s->device_str);
    AofArgs_Str(&a, "TAG");
    AofArgs_Bytes(&a, s->tag, s->tag_len);
    AofArgs_Str(&a, "ENTRY_POINTS");
    AofArgs_Names(&a, s->nentry_points, s->entry_points, 1);
    AofArgs_Str(&a, "SOURCE");
    AofArgs_Bytes(&a, s->source, s->source_len);
    AofArgs_Emit(&a, aof, "AI.SCRIPTSTORE");
}

RAI_Script *Script_FromKey(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_Error *err) {
    RAI_Script *s = Stored_ValueAt(ctx, keyname, RAI_ScriptType, RAI_ERR_SCRIPT_KEY_EMPTY, err);
    return s ? Script_Retain(s) : NULL;
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
        .digest = ScriptDigest,
        .mem_usage = ScriptMemUsage,
        .free = ScriptFree,
    };
    RAI_ScriptType = RedisModule_CreateDataType(ctx, "AI_SCRIPT", RAI_ENC_VER, &methods);
    return RAI_ScriptType ? REDISMODULE_OK : REDISMODULE_ERR;
}
