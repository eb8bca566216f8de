/*
 * backend_loader.c - dlopen()s backends and checks them before use.
 *
 * Order of checks, each with its own message naming the file: the type is
 * not loaded yet; dlopen succeeds (RTLD_NOW so that a missing library or
 * symbol fails here, RTLD_LOCAL so that frameworks never bind to each
 * other's symbols); the entry symbol exists; the entry accepts our host
 * table; the descriptor's ABI major and size; its kind is the one asked for.
 */
#include "backend_loader.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config.h"
#include "host_api.h"

static RAI_LoadedBackend loaded[RAI_BACKEND_KINDS];

static const char *kind_names[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "TF",
    [RAI_BACKEND_TFLITE] = "TFLITE",
    [RAI_BACKEND_TORCH] = "TORCH",
    [RAI_BACKEND_ONNX] = "ONNX",
};

/* spec 12.1: the files lazy loading looks for under BACKENDSPATH. */
static const char *default_files[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "redisai_tensorflow/redisai_tensorflow.so",
    [RAI_BACKEND_TFLITE] = "redisai_tflite/redisai_tflite.so",
    [RAI_BACKEND_TORCH] = "redisai_torch/redisai_torch.so",
    [RAI_BACKEND_ONNX] = "redisai_onnxruntime/redisai_onnxruntime.so",
};

int Backend_ParseKind(const char *s, RAI_BackendKind *kind) {
    for (int i = 0; i < RAI_BACKEND_KINDS; i++) {
        if (!strcasecmp(s, kind_names[i])) {
            *kind = (RAI_BackendKind)i;
            return 1;
        }
    }
    return 0;
}

const char *Backend_KindName(RAI_BackendKind kind) {
    return (unsigned)kind < RAI_BACKEND_KINDS ? kind_names[kind] : "unknown";
}

int Backend_HasScripts(const RAI_BackendDescriptor *d) {
    return d->size >= RAI_DESCRIPTOR_SIZE_1_1 && d->script_create && d->script_free &&
           d->script_run;
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

static int checkDescriptor(const RAI_BackendDescriptor *d, RAI_BackendKind kind,
                           const char *path, RAI_Error *err) {
    if (d->abi_major != RAI_ABI_MAJOR) {
        Error_SetFmt(err, "%s: backend ABI major %u does not match the core's ABI major %u", path,
                     d->abi_major, RAI_ABI_MAJOR);
        return 0;
    }
    if (d->size < RAI_DESCRIPTOR_SIZE_1_0) {
        Error_SetFmt(err, "%s: backend descriptor size %u is smaller than the %zu bytes of ABI 1.0",
                     path, d->size, (size_t)RAI_DESCRIPTOR_SIZE_1_0);
        return 0;
    }
    if ((unsigned)d->kind >= RAI_BACKEND_KINDS || d->kind != kind) {
        Error_SetFmt(err, "%s: file is a %s backend (%s), not %s", path,
                     Backend_KindName(d->kind), d->framework ? d->framework : "?",
                     Backend_KindName(kind));
        return 0;
    }
    if (!d->model_create || !d->model_free || !d->model_run || !d->framework ||
        !d->framework_version || !d->variant) {
        Error_SetFmt(err, "%s: backend descriptor lacks a required member", path);
        return 0;
    }
    return 1;
}

int Backend_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path, RAI_Error *err) {
    if (loaded[kind].desc) {
        Error_SetFmt(err, "%s backend already loaded from %s", Backend_KindName(kind),
                     loaded[kind].path);
        return REDISMODULE_ERR;
    }
    char *full = Config_ResolvePath(path);
    double start = nowSeconds();
    quietFrameworks();

    void *handle = dlopen(full, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        if (why == NULL) why = "unknown error";
        /* dlerror names the file itself unless a library it NEEDs is the
         * one missing; then name ours too. */
        const char *note = kind == RAI_BACKEND_TFLITE ? RAI_TFLITE_UNAVAILABLE : "";
        if (strstr(why, full)) {
            Error_SetFmt(err, "dlopen failed: %s%s", why, note);
        } else {
            Error_SetFmt(err, "%s: dlopen failed: %s%s", full, why, note);
        }
        RedisModule_Free(full);
        return REDISMODULE_ERR;
    }
    RAI_BackendEntryFn entry = (RAI_BackendEntryFn)dlsym(handle, RAI_BACKEND_ENTRY_SYMBOL);
    if (entry == NULL) {
        Error_SetFmt(err, "%s: does not export the entry symbol %s", full,
                     RAI_BACKEND_ENTRY_SYMBOL);
        goto fail;
    }
    char why[512] = "";
    const RAI_BackendDescriptor *d = entry(HostApi_Get(), why, sizeof(why));
    if (d == NULL) {
        Error_SetFmt(err, "%s: backend refused the host: %s", full, why[0] ? why : "no reason given");
        goto fail;
    }
    if (!checkDescriptor(d, kind, full, err)) goto fail;

    loaded[kind] = (RAI_LoadedBackend){
        .desc = d,
        .path = full,
        .load_seconds = nowSeconds() - start,
    };
    RedisModule_Log(ctx, "notice", "Loaded %s backend from %s: %s %s (%s), %.3f s",
                    Backend_KindName(kind), full, d->framework, d->framework_version, d->variant,
                    loaded[kind].load_seconds);
    return REDISMODULE_OK;

fail:
    /* dlclose unloads none of the real frameworks, but it does unload a
     * small foreign .so loaded by mistake. */
    dlclose(handle);
    RedisModule_Free(full);
    return REDISMODULE_ERR;
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
