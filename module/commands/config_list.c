/*
 * config_list.c - see config_list.h.
 */
#include "commands/config_list.h"

#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "loader/backend_dir.h"
#include "loader/backend_loader.h"

#define LIST_FIELDS 15
#define UNKNOWN "unknown"

/* RESP3 map, or the flat array Redis < 7 clients and RESP2 get. */
static void replyMap(RedisModuleCtx *ctx, long pairs) {
    if (RedisModule_ReplyWithMap) {
        RedisModule_ReplyWithMap(ctx, pairs);
    } else {
        RedisModule_ReplyWithArray(ctx, pairs * 2);
    }
}

static void replyBool(RedisModuleCtx *ctx, int b) {
    if (RedisModule_ReplyWithBool) {
        RedisModule_ReplyWithBool(ctx, b);
    } else {
        RedisModule_ReplyWithLongLong(ctx, b);
    }
}

static void field(RedisModuleCtx *ctx, const char *name) {
    RedisModule_ReplyWithCString(ctx, name);
}

static void stringOrNull(RedisModuleCtx *ctx, const char *s) {
    if (s) {
        RedisModule_ReplyWithCString(ctx, s);
    } else {
        RedisModule_ReplyWithNull(ctx);
    }
}

static const char *orUnknown(const char *s) {
    return s && s[0] ? s : UNKNOWN;
}

/* The manifest's fact; one it lacks from the loaded backend itself. */
static const char *fact(const char *from_manifest, const char *from_backend) {
    return orUnknown(from_manifest && from_manifest[0] ? from_manifest : from_backend);
}

/* One entry: a folder f, loaded (lb) or not. */
static void replyEntry(RedisModuleCtx *ctx, const RAI_BackendFolder *f,
                       const RAI_LoadedBackend *lb) {
    const RAI_ManifestFacts *mf = f->manifest > 0 ? &f->facts : NULL;
    const RAI_BackendDescriptor *d = lb ? lb->desc : NULL;
    char abi[32] = "";
    if (lb) snprintf(abi, sizeof(abi), "%u.%u", lb->abi_major, lb->abi_minor);
    const char *kind = f->has_kind ? Backend_KindName(f->kind) : UNKNOWN;

    replyMap(ctx, LIST_FIELDS);
    field(ctx, "name");
    stringOrNull(ctx, f->name);
    field(ctx, "kind");
    RedisModule_ReplyWithCString(ctx, kind);
    field(ctx, "framework");
    RedisModule_ReplyWithCString(ctx, fact(mf ? mf->framework : NULL, d ? d->framework : NULL));
    field(ctx, "version");
    RedisModule_ReplyWithCString(ctx,
                                 fact(mf ? mf->version : NULL, d ? d->framework_version : NULL));
    field(ctx, "variant");
    RedisModule_ReplyWithCString(ctx, fact(mf ? mf->variant : NULL, d ? d->variant : NULL));
    field(ctx, "abi");
    RedisModule_ReplyWithCString(ctx, fact(mf ? mf->abi : NULL, abi));
    field(ctx, "path");
    RedisModule_ReplyWithCString(ctx, f->so ? f->so : f->dir);
    field(ctx, "link");
    stringOrNull(ctx, f->link);
    field(ctx, "manifest");
    if (f->manifest > 0) {
        RedisModule_ReplyWithCString(ctx, "present");
    } else if (f->manifest == 0) {
        RedisModule_ReplyWithCString(ctx, "missing");
    } else {
        RedisModule_ReplyWithCString(ctx, f->manifest_error);
    }
    field(ctx, "loaded");
    replyBool(ctx, lb != NULL);
    field(ctx, "loaded_at");
    if (lb) {
        RedisModule_ReplyWithLongLong(ctx, lb->loaded_at);
    } else {
        RedisModule_ReplyWithNull(ctx);
    }
    field(ctx, "load_seconds");
    if (lb) {
        RedisModule_ReplyWithDouble(ctx, lb->load_seconds);
    } else {
        RedisModule_ReplyWithNull(ctx);
    }
    field(ctx, "models");
    RedisModule_ReplyWithLongLong(ctx, lb ? __atomic_load_n(&lb->models, __ATOMIC_RELAXED) : 0);
    field(ctx, "scripts");
    RedisModule_ReplyWithLongLong(ctx, lb ? __atomic_load_n(&lb->scripts, __ATOMIC_RELAXED) : 0);
    /* Beyond issue 12: whether it runs in a backend host (null: not loaded). */
    field(ctx, "isolated");
    stringOrNull(ctx, lb ? (lb->isolated ? "yes" : "no") : NULL);
}

/* A backend loaded from outside BACKENDSPATH's folders: its backend name,
 * and the manifest of the folder its real file lies in, if any. */
static void describeElsewhere(RAI_BackendFolder *f, const RAI_LoadedBackend *lb) {
    const char *slash = strrchr(lb->real, '/');
    size_t dirlen = slash ? (size_t)(slash - lb->real) : 0;
    char *dir = RedisModule_Alloc(dirlen + 2);
    snprintf(dir, dirlen + 2, "%.*s", (int)(dirlen ? dirlen : 1), dirlen ? lb->real : "/");
    *f = (RAI_BackendFolder){.name = lb->name, .dir = dir, .has_kind = 1, .kind = lb->kind};
    RAI_Error err;
    Error_Init(&err);
    f->manifest = BackendManifest_ReadFacts(dir, &f->facts, &err);
    if (f->manifest < 0) f->manifest_error = RedisModule_Strdup(Error_Message(&err));
    Error_Clear(&err);
    f->so = RedisModule_Strdup(lb->path);
}

static void freeElsewhere(RAI_BackendFolder *f) {
    RedisModule_Free(f->dir);
    RedisModule_Free(f->so);
    RedisModule_Free(f->manifest_error);
}

/* The loaded backend of this folder: the one of its name, or for a link
 * (the default link of a kind), the one its .so resolves to. */
static const RAI_LoadedBackend *loadedFolder(const RAI_BackendFolder *f) {
    if (!f->has_kind || f->real == NULL) return NULL;
    for (size_t i = 0; i < Backend_LoadedCount(); i++) {
        const RAI_LoadedBackend *lb = Backend_LoadedAt(i);
        if (lb->kind != f->kind) continue;
        if (!strcmp(lb->name, f->name)) return lb;
        if (f->link && lb->real && !strcmp(lb->real, f->real)) return lb;
    }
    return NULL;
}

/* Whether a loaded backend is the file of none of the folders. */
static int isElsewhere(const RAI_LoadedBackend *lb, const RAI_BackendFolder *folders, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (loadedFolder(&folders[i]) == lb) return 0;
    }
    return 1;
}

int BackendList_Reply(RedisModuleCtx *ctx) {
    size_t n;
    RAI_BackendFolder *folders = BackendDir_Scan(rai_config.backends_path, &n);
    size_t nloaded = Backend_LoadedCount();
    long total = (long)n;
    for (size_t i = 0; i < nloaded; i++) total += isElsewhere(Backend_LoadedAt(i), folders, n);
    RedisModule_ReplyWithArray(ctx, total);
    for (size_t i = 0; i < n; i++) replyEntry(ctx, &folders[i], loadedFolder(&folders[i]));
    /* After the folders, by kind, then in load order. */
    for (int k = 0; k < RAI_BACKEND_KINDS; k++) {
        for (size_t i = 0; i < nloaded; i++) {
            const RAI_LoadedBackend *lb = Backend_LoadedAt(i);
            if (lb->kind != (RAI_BackendKind)k || !isElsewhere(lb, folders, n)) continue;
            RAI_BackendFolder f;
            describeElsewhere(&f, lb);
            replyEntry(ctx, &f, lb);
            freeElsewhere(&f);
        }
    }
    BackendDir_Free(folders, n);
    return REDISMODULE_OK;
}
