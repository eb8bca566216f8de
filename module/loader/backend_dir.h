/*
 * backend_dir.h - the backend folders under BACKENDSPATH, read as a
 * directory listing and manifests, never opened as code.
 *
 * The install tree holds one folder per built backend,
 * `redisai_<framework>-<version>-<variant>/`, each with its .so and its
 * manifest, and one default link per framework, `redisai_<framework>`, that
 * names the folder lazy loading uses. The part after `redisai_` is the
 * folder's name: `AI.CONFIG LOADBACKEND TORCH torch-2.13.0-cpu` (or the
 * module argument `TORCH torch-2.13.0-cpu`) loads that folder's backend,
 * and AI.CONFIG LIST shows every folder.
 */
#ifndef REDISAI_BACKEND_DIR_H
#define REDISAI_BACKEND_DIR_H

#include <stddef.h>

#include "core/error.h"
#include "loader/backend_manifest.h"
#include "redisai/backend_abi.h"

typedef struct RAI_BackendFolder {
    char *name;   /* the folder name after "redisai_" */
    char *dir;    /* BACKENDSPATH/redisai_<name> */
    char *link;   /* what the folder's symlink points to; NULL when it is no link */
    int has_kind; /* kind known: from the manifest, else from the .so file present */
    RAI_BackendKind kind;
    char *so;     /* dir/<the kind's .so name>; NULL when the kind is unknown */
    char *real;   /* realpath(so); NULL when so is NULL or does not resolve */
    int manifest; /* 1 read, 0 none, -1 unreadable (reason in manifest_error) */
    char *manifest_error;
    RAI_ManifestFacts facts;
} RAI_BackendFolder;

/* Every `redisai_*` folder (or link to one) under root, sorted by name.
 * A root that cannot be read gives no folders. Free with BackendDir_Free. */
RAI_BackendFolder *BackendDir_Scan(const char *root, size_t *count);
void BackendDir_Free(RAI_BackendFolder *folders, size_t count);

/* A LOADBACKEND argument that is a folder name rather than a path: not
 * empty, no '/', not ending in ".so", not "." or "..". */
int BackendDir_IsName(const char *arg);

/* The .so of the folder `redisai_<name>` of this kind under BACKENDSPATH
 * (caller frees). A name that matches no such folder but is an existing
 * file under BACKENDSPATH (or the working directory) stays a path, as in
 * RedisAI 1.2. Otherwise NULL, with the names that exist for the kind in
 * err. */
char *BackendDir_Resolve(RAI_BackendKind kind, const char *name, RAI_Error *err);

#endif
