/*
 * backend_dir.c - see backend_dir.h.
 */
#define _GNU_SOURCE /* realpath, readlink under a strict -std */
#include "loader/backend_dir.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "redismodule.h"

#define FOLDER_PREFIX "redisai_"

static char *joinPath(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = RedisModule_Alloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int isRegularFile(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The manifest's facts, then the kind: the manifest's when it names one,
 * else the one kind whose .so file the folder holds. */
static void describeFolder(RAI_BackendFolder *f) {
    RAI_Error err;
    Error_Init(&err);
    f->manifest = BackendManifest_ReadFacts(f->dir, &f->facts, &err);
    if (f->manifest < 0) f->manifest_error = RedisModule_Strdup(Error_Message(&err));
    Error_Clear(&err);
    if (f->manifest > 0 && Backend_ParseKind(f->facts.kind, &f->kind)) {
        f->has_kind = 1;
    } else {
        for (int k = 0; k < RAI_BACKEND_KINDS && !f->has_kind; k++) {
            char *so = joinPath(f->dir, Backend_FileName((RAI_BackendKind)k));
            if (isRegularFile(so)) {
                f->has_kind = 1;
                f->kind = (RAI_BackendKind)k;
            }
            RedisModule_Free(so);
        }
    }
    if (!f->has_kind) return;
    f->so = joinPath(f->dir, Backend_FileName(f->kind));
    char real[PATH_MAX];
    if (realpath(f->so, real)) f->real = RedisModule_Strdup(real);
}

static int byName(const void *a, const void *b) {
    return strcmp(((const RAI_BackendFolder *)a)->name, ((const RAI_BackendFolder *)b)->name);
}

RAI_BackendFolder *BackendDir_Scan(const char *root, size_t *count) {
    *count = 0;
    DIR *d = opendir(root);
    if (d == NULL) return NULL;
    size_t cap = 8, n = 0;
    RAI_BackendFolder *out = RedisModule_Alloc(cap * sizeof(*out));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, FOLDER_PREFIX, strlen(FOLDER_PREFIX)) || !name[strlen(FOLDER_PREFIX)]) {
            continue;
        }
        char *dir = joinPath(root, name);
        struct stat st, lst;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || lstat(dir, &lst) != 0) {
            RedisModule_Free(dir);
            continue;
        }
        if (n == cap) {
            cap *= 2;
            out = RedisModule_Realloc(out, cap * sizeof(*out));
        }
        RAI_BackendFolder *f = &out[n++];
        *f = (RAI_BackendFolder){
            .name = RedisModule_Strdup(name + strlen(FOLDER_PREFIX)),
            .dir = dir,
        };
        if (S_ISLNK(lst.st_mode)) {
            char target[PATH_MAX];
            ssize_t len = readlink(dir, target, sizeof(target) - 1);
            if (len >= 0) {
                target[len] = '\0';
                f->link = RedisModule_Strdup(target);
            }
        }
        describeFolder(f);
    }
    closedir(d);
    qsort(out, n, sizeof(*out), byName);
    *count = n;
    return out;
}

void BackendDir_Free(RAI_BackendFolder *folders, size_t count) {
    for (size_t i = 0; i < count; i++) {
        RAI_BackendFolder *f = &folders[i];
        RedisModule_Free(f->name);
        RedisModule_Free(f->dir);
        RedisModule_Free(f->link);
        RedisModule_Free(f->so);
        RedisModule_Free(f->real);
        RedisModule_Free(f->manifest_error);
    }
    RedisModule_Free(folders);
}

int BackendDir_IsName(const char *arg) {
    size_t n = strlen(arg);
    if (n == 0 || strchr(arg, '/') || !strcmp(arg, ".") || !strcmp(arg, "..")) return 0;
    return !(n >= 3 && !strcmp(arg + n - 3, ".so"));
}

char *BackendDir_Resolve(RAI_BackendKind kind, const char *name, RAI_Error *err) {
    const char *root = rai_config.backends_path;
    size_t n;
    RAI_BackendFolder *folders = BackendDir_Scan(root, &n);
    char *found = NULL;
    for (size_t i = 0; i < n && !found; i++) {
        if (folders[i].has_kind && folders[i].kind == kind && !strcmp(folders[i].name, name)) {
            found = RedisModule_Strdup(folders[i].so);
        }
    }
    if (found == NULL) {
        /* 1.2 took any argument as a path: a file of that name still loads. */
        char *path = Config_ResolvePath(name);
        if (access(path, F_OK) == 0) {
            found = path;
        } else {
            RedisModule_Free(path);
        }
    }
    if (found == NULL) {
        /* The names of this kind, "a, b, c", for the error. */
        size_t len = 1;
        for (size_t i = 0; i < n; i++) len += strlen(folders[i].name) + 2;
        char *names = RedisModule_Alloc(len);
        names[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            if (!folders[i].has_kind || folders[i].kind != kind) continue;
            if (names[0]) strcat(names, ", ");
            strcat(names, folders[i].name);
        }
        if (names[0]) {
            Error_SetFmt(err, "%s/" FOLDER_PREFIX "%s/%s: no %s backend named %s under "
                         "BACKENDSPATH %s; %s backends there: %s", root, name,
                         Backend_FileName(kind), Backend_KindName(kind), name, root,
                         Backend_KindName(kind), names);
        } else {
            Error_SetFmt(err, "%s/" FOLDER_PREFIX "%s/%s: no %s backend named %s under "
                         "BACKENDSPATH %s, which holds no %s backend folder", root, name,
                         Backend_FileName(kind), Backend_KindName(kind), name, root,
                         Backend_KindName(kind));
        }
        RedisModule_Free(names);
    }
    BackendDir_Free(folders, n);
    return found;
}
