/*
 * backend_loader.h - finds, opens and checks backend .so files, and keeps
 * the one loaded backend of each kind. Everything a load can get wrong is
 * reported with the file and the reason.
 */
#ifndef REDISAI_BACKEND_LOADER_H
#define REDISAI_BACKEND_LOADER_H

#include "backend_abi.h"
#include "error.h"
#include "redismodule.h"

#define RAI_BACKEND_KINDS 4

/* Why TFLITE fails to load here, appended to its load errors: TFLITE is
 * parsed everywhere, but this project builds no TFLITE backend. */
#define RAI_TFLITE_UNAVAILABLE                                                              \
    " (this build has no TFLITE backend: no package registry reachable here ships a "      \
    "TensorFlow Lite C library with headers)"

typedef struct RAI_LoadedBackend {
    const RAI_BackendDescriptor *desc; /* NULL while not loaded */
    char *path;
    char *real;              /* path with symlinks resolved: what was opened */
    double load_seconds;     /* how long the load took */
    long long loaded_at;     /* when, in Unix seconds */
    uint32_t abi_major;      /* the file's ABI note */
    uint32_t abi_minor;
    long models;             /* models and scripts alive on it (atomic): */
    long scripts;            /* Backend_CountUse */
} RAI_LoadedBackend;

/* "TF", "TFLITE", "TORCH", "ONNX", case-insensitive. */
int Backend_ParseKind(const char *s, RAI_BackendKind *kind);
const char *Backend_KindName(RAI_BackendKind kind);
/* The .so file name of a kind's backend, e.g. "redisai_torch.so". */
const char *Backend_FileName(RAI_BackendKind kind);

/* Loads the backend at path (relative paths resolve against BACKENDSPATH;
 * a folder name such as "torch-2.13.0-cpu" picks that folder under it,
 * backend_dir.h).
 * Returns REDISMODULE_ERR with a reason in err that names the file. */
int Backend_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path, RAI_Error *err);
/* The loaded backend of this kind, loading its default file from
 * BACKENDSPATH first if needed; NULL, with the reason in err, if that
 * fails. */
const RAI_BackendDescriptor *Backend_Require(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             RAI_Error *err);
/* Backend_Require that logs the reason instead. */
const RAI_BackendDescriptor *Backend_Get(RedisModuleCtx *ctx, RAI_BackendKind kind);
/* Whether a descriptor carries the 1.1 script members. */
int Backend_HasScripts(const RAI_BackendDescriptor *d);
/* What the descriptor a backend's entry returned must say: our ABI major,
 * at least 1.0's size, the kind asked for, the required members. Returns 1,
 * or 0 with a reason naming path in err. The kind functions and this one
 * live in backend_check.c, which the backend host compiles in too. */
int Backend_CheckDescriptor(const RAI_BackendDescriptor *d, RAI_BackendKind kind,
                            const char *path, RAI_Error *err);
/* The loaded backend, or NULL; never loads. */
const RAI_LoadedBackend *Backend_Loaded(RAI_BackendKind kind);
/* A model or script built on the kind's backend (+1), or freed (-1): the
 * counts AI.CONFIG LIST shows. Any thread. */
void Backend_CountUse(RAI_BackendKind kind, int is_script, int delta);

#endif
