/*
 * backend_loader.h - finds, opens and checks backend .so files, and keeps
 * the loaded backends (several per kind, by name). Everything a load can get wrong is
 * reported with the file and the reason.
 */
#ifndef REDISAI_BACKEND_LOADER_H
#define REDISAI_BACKEND_LOADER_H

#include "core/backend_kind.h"
#include "core/error.h"
#include "redisai/backend_abi.h"
#include "redismodule.h"

/* Loaded backends: at most one in-process backend per kind, any number of
 * isolated ones (each in its own backend host, docs/isolation.md) up to
 * the proxy's slots; two never share a name. */
#define RAI_MAX_LOADED_BACKENDS (RAI_BACKEND_KINDS + 16)

typedef struct RAI_LoadedBackend {
    const RAI_BackendDescriptor *desc; /* in-process, or the proxy's for an isolated one */
    RAI_BackendKind kind;
    char *name;              /* its folder's name without "redisai_" (backendName) */
    int isolated;            /* runs in a backend host process */
    char *path;
    char *real;              /* path with symlinks resolved: what was opened */
    double load_seconds;     /* how long the load took */
    long long loaded_at;     /* when, in Unix seconds */
    uint32_t abi_major;      /* the file's ABI note */
    uint32_t abi_minor;
    long models;             /* models and scripts alive on it (atomic): */
    long scripts;            /* Backend_CountUse */
} RAI_LoadedBackend;

/* The host table every backend gets from its entry; before any load (OnLoad). */
void Backend_Init(const RAI_HostApi *host);
/* Loads the backend at path (relative paths resolve against BACKENDSPATH;
 * a folder name such as "torch-2.13.0-cpu" picks that folder under it,
 * backend_dir.h). It runs in a backend host when `isolated` is set or its
 * kind is in ISOLATE; else in-process, refused when the kind already has
 * an in-process backend. The first backend of a kind becomes its default.
 * *out (may be NULL) gets the loaded backend. Returns REDISMODULE_ERR with
 * a reason in err that names the file. Main thread. */
int Backend_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path, int isolated,
                 const RAI_LoadedBackend **out, RAI_Error *err);
/* The backend AI.MODELSTORE's `BACKEND <name>` names for kind: a loaded
 * backend of that name, else the folder redisai_<name> under BACKENDSPATH,
 * loaded now (in-process when it is the file lazy loading would load as
 * the kind's default and no default is loaded yet, else isolated). NULL
 * with `ERR no <KIND> backend named <name>: <names>`, `ERR backend <name>
 * is a <KIND> backend, not <KIND>` or the load's reason in err. */
const RAI_LoadedBackend *Backend_ResolveName(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             const char *name, RAI_Error *err);
/* The loaded backend of this kind, loading its default file from
 * BACKENDSPATH first if needed; NULL, with the reason in err, if that
 * fails. */
const RAI_BackendDescriptor *Backend_Require(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             RAI_Error *err);
/* Backend_Require that logs the reason instead. */
const RAI_BackendDescriptor *Backend_Get(RedisModuleCtx *ctx, RAI_BackendKind kind);
/* Whether d is a loaded backend's that runs in a backend host. Any thread. */
int Backend_IsIsolated(const RAI_BackendDescriptor *d);
/* Frees a model's handle and its blob (RedisModule_Alloc'd), which the
 * handle may borrow: an isolated backend's proxy takes the blob and frees
 * it when its handle goes, which may be after a re-create in a restarted
 * host that reads it (isolation/core/iso_proxy.h); never waits. */
void Backend_ModelFree(const RAI_BackendDescriptor *d, void *handle, char *blob);
/* The kind's default backend (the first loaded), or NULL; never loads. */
const RAI_LoadedBackend *Backend_Loaded(RAI_BackendKind kind);
/* The loaded backend of that name, or NULL. */
const RAI_LoadedBackend *Backend_FindByName(const char *name);
/* The i-th loaded backend in load order, i < Backend_LoadedCount(). */
size_t Backend_LoadedCount(void);
const RAI_LoadedBackend *Backend_LoadedAt(size_t i);
/* A model or script built on the backend of descriptor d (+1), or freed
 * (-1): the counts AI.CONFIG LIST shows. Any thread. */
void Backend_CountUse(const RAI_BackendDescriptor *d, int is_script, int delta);

#endif
