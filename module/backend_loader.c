/*
 * backend_loader.c - dlopen()s backends and checks them before use.
 *
 * Order of checks, each with its own message naming the file: the type is
 * not loaded yet; the real path (symlinks resolved) exists and, with
 * BACKENDS_CONFINED, lies inside BACKENDSPATH; the file itself, read as
 * data (backend_file.c: ELF for this machine, not truncated, exports the
 * entry, ABI note of our major and the kind asked for); its folder's
 * manifest, when there is one (backend_manifest.c). Only then dlopen
 * (RTLD_NOW so that a missing library or symbol fails here, RTLD_LOCAL so
 * that frameworks never bind to each other's symbols); the entry symbol
 * exists; the entry accepts our host table; the descriptor's ABI major,
 * size and kind agree.
 */
#define _GNU_SOURCE /* pread, O_CLOEXEC, realpath under a strict -std */
#include "backend_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_dir.h"
#include "backend_file.h"
#include "backend_manifest.h"
#include "config.h"
#include "host_api.h"
#include "iso_proxy.h"

static RAI_LoadedBackend loaded[RAI_BACKEND_KINDS];

/* spec 12.1: the files lazy loading looks for under BACKENDSPATH. */
static const char *default_files[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "redisai_tensorflow/redisai_tensorflow.so",
    [RAI_BACKEND_TFLITE] = "redisai_tflite/redisai_tflite.so",
    [RAI_BACKEND_TORCH] = "redisai_torch/redisai_torch.so",
    [RAI_BACKEND_ONNX] = "redisai_onnxruntime/redisai_onnxruntime.so",
};

const char *Backend_FileName(RAI_BackendKind kind) {
    if ((unsigned)kind >= RAI_BACKEND_KINDS) return "unknown";
    return strrchr(default_files[kind], '/') + 1;
}

void Backend_CountUse(RAI_BackendKind kind, int is_script, int delta) {
    if ((unsigned)kind >= RAI_BACKEND_KINDS) return;
    __atomic_add_fetch(is_script ? &loaded[kind].scripts : &loaded[kind].models, delta,
                       __ATOMIC_RELAXED);
}

const RAI_LoadedBackend *Backend_Loaded(RAI_BackendKind kind) {
    return loaded[kind].desc ? &loaded[kind] : NULL;
}

static double nowSeconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Frameworks read these while their libraries initialise: they must be in
 * the environment before the first dlopen. A user's own setting wins. */
static void quietFrameworks(void) {
    setenv("TF_CPP_MIN_LOG_LEVEL", "3", 0);
    setenv("TF_ENABLE_ONEDNN_OPTS", "0", 0);
}

/* BACKENDS_CONFINED: real must lie inside realpath(BACKENDSPATH). */
static int checkConfined(const char *real, const char *shown, RAI_Error *err) {
    char root[PATH_MAX];
    if (realpath(rai_config.backends_path, root) == NULL) {
        Error_SetFmt(err, "%s: BACKENDS_CONFINED is yes but BACKENDSPATH %s cannot be resolved: %s",
                     shown, rai_config.backends_path, strerror(errno));
        return 0;
    }
    size_t n = strlen(root);
    int inside = !strcmp(root, "/") || (!strncmp(real, root, n) && real[n] == '/');
    if (!inside) {
        Error_SetFmt(err, "%s: its real path %s lies outside BACKENDSPATH %s (real path %s) "
                     "and BACKENDS_CONFINED is yes", shown, real, rai_config.backends_path, root);
        return 0;
    }
    return 1;
}

static int loadBackend(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path,
                       RAI_Error *err) {
    if (loaded[kind].desc) {
        Error_SetFmt(err, "%s backend already loaded from %s", Backend_KindName(kind),
                     loaded[kind].path);
        return REDISMODULE_ERR;
    }
    char *full;
    if (BackendDir_IsName(path)) {
        full = BackendDir_Resolve(kind, path, err);
        if (full == NULL) return REDISMODULE_ERR;
    } else {
        full = Config_ResolvePath(path);
    }
    double start = nowSeconds();
    void *handle = NULL;
    int entry_ran = 0;

    /* Everything up to dlopen reads the file as data: nothing of it runs
     * until it has passed every check. The real path is what is checked
     * and then opened, so a symlink cannot lead the two apart. */
    char real[PATH_MAX];
    if (realpath(full, real) == NULL) {
        Error_SetFmt(err, "%s: cannot open: %s", full, strerror(errno));
        goto fail;
    }
    if (rai_config.backends_confined && !checkConfined(real, full, err)) goto fail;
    BackendFileNote note;
    if (!BackendFile_Inspect(real, full, kind, &note, err)) goto fail;
    int manifest = 0;
    if (!BackendManifest_Verify(real, full, &manifest, err)) goto fail;
    double checks_seconds = nowSeconds() - start;

    if (rai_config.isolate_kinds & (1u << kind)) {
        const char *slash = strrchr(real, '/');
        char name[256];
        snprintf(name, sizeof(name), "%s", slash ? slash + 1 : real);
        const RAI_BackendDescriptor *pd = Iso_Load(ctx, kind, name, real, full, err);
        if (pd == NULL || !Backend_CheckDescriptor(pd, kind, full, err)) goto fail;
        loaded[kind] = (RAI_LoadedBackend){
            .desc = pd,
            .path = full,
            .real = RedisModule_Strdup(real),
            .load_seconds = nowSeconds() - start,
            .loaded_at = (long long)time(NULL),
            .abi_major = note.abi_major,
            .abi_minor = note.abi_minor,
        };
        return REDISMODULE_OK;
    }

    quietFrameworks();
    handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        if (why == NULL) why = "unknown error";
        /* dlerror names the file itself unless a library it NEEDs is the
         * one missing; then name ours too. */
        if (strstr(why, full)) {
            Error_SetFmt(err, "dlopen failed: %s", why);
        } else {
            Error_SetFmt(err, "%s: dlopen failed: %s", full, why);
        }
        goto fail;
    }
    RAI_BackendEntryFn entry = (RAI_BackendEntryFn)dlsym(handle, RAI_BACKEND_ENTRY_SYMBOL);
    if (entry == NULL) {
        Error_SetFmt(err, "%s: does not export the entry symbol %s", full,
                     RAI_BACKEND_ENTRY_SYMBOL);
        goto fail;
    }
    char why[512] = "";
    entry_ran = 1;
    const RAI_BackendDescriptor *d = entry(HostApi_Get(), why, sizeof(why));
    if (d == NULL) {
        Error_SetFmt(err, "%s: backend refused the host: %s", full, why[0] ? why : "no reason given");
        goto fail;
    }
    /* A second line behind the note: what the code says must agree. */
    if (!Backend_CheckDescriptor(d, kind, full, err)) goto fail;

    loaded[kind] = (RAI_LoadedBackend){
        .desc = d,
        .path = full,
        .real = RedisModule_Strdup(real),
        .load_seconds = nowSeconds() - start,
        .loaded_at = (long long)time(NULL),
        .abi_major = note.abi_major,
        .abi_minor = note.abi_minor,
    };
    RedisModule_Log(ctx, "notice",
                    "Loaded %s backend from %s: %s %s (%s), ABI %u.%u, %s, file checks %.3f ms, "
                    "%.3f s", Backend_KindName(kind), full, d->framework, d->framework_version,
                    d->variant, note.abi_major, note.abi_minor,
                    manifest ? "manifest verified" : "no manifest", checks_seconds * 1e3,
                    loaded[kind].load_seconds);
    return REDISMODULE_OK;

fail:
    /* Once the entry has run, the backend may have started threads or
     * registered state that outlives a dlclose (a framework's thread pool
     * running unmapped code is how a refused backend used to crash a
     * later load): its handle stays open, a leak of one refused load. A
     * handle whose entry never ran holds nothing of ours and is closed. */
    if (handle && !entry_ran) dlclose(handle);
    RedisModule_Free(full);
    return REDISMODULE_ERR;
}

int Backend_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path, RAI_Error *err) {
    if (kind != RAI_BACKEND_TFLITE) return loadBackend(ctx, kind, path, err);
    /* Whatever went wrong, say why a TFLITE load cannot work in this build. */
    RAI_Error inner;
    Error_Init(&inner);
    int rc = loadBackend(ctx, kind, path, &inner);
    if (rc != REDISMODULE_OK) {
        Error_SetFmt(err, "%s%s", Error_Message(&inner), RAI_TFLITE_UNAVAILABLE);
    }
    Error_Clear(&inner);
    return rc;
}

const RAI_BackendDescriptor *Backend_Require(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             RAI_Error *err) {
    if (loaded[kind].desc) return loaded[kind].desc;
    if (Backend_Load(ctx, kind, default_files[kind], err) != REDISMODULE_OK) return NULL;
    return loaded[kind].desc;
}

const RAI_BackendDescriptor *Backend_Get(RedisModuleCtx *ctx, RAI_BackendKind kind) {
    RAI_Error err;
    Error_Init(&err);
    const RAI_BackendDescriptor *d = Backend_Require(ctx, kind, &err);
    if (d == NULL) {
        RedisModule_Log(ctx, "warning", "Could not load %s backend lazily: %s",
                        Backend_KindName(kind), Error_Message(&err));
    }
    Error_Clear(&err);
    return d;
}
