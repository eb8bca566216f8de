/*
 * backend_loader.c - dlopen()s backends and checks them before use.
 *
 * Order of checks, each with its own message naming the file: the kind has
 * no in-process backend yet (for an in-process load); no loaded backend has
 * the same name; the real path (symlinks resolved) exists and, with
 * BACKENDS_CONFINED, lies inside BACKENDSPATH; the file itself, read as
 * data (backend_file.c: ELF for this machine, not truncated, exports the
 * entry, ABI note of our major and the kind asked for); its folder's
 * manifest, when there is one (backend_manifest.c). Only then, for an
 * isolated backend, Iso_Load (the proxy starts a backend host for the
 * file); else dlopen (RTLD_NOW so that a missing library or symbol fails
 * here, RTLD_LOCAL so that frameworks never bind to each other's symbols),
 * the entry symbol exists, the entry accepts our host table. Either way,
 * the descriptor's ABI major, size and kind agree.
 */
#define _GNU_SOURCE /* pread, O_CLOEXEC, realpath under a strict -std */
#include "loader/backend_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "isolation/core/iso_proxy.h"
#include "loader/backend_dir.h"
#include "loader/backend_file.h"
#include "loader/backend_manifest.h"

/* Entries [0, nloaded) are complete: a load fills its entry, then publishes
 * it by incrementing nloaded (release), so workers scanning the table
 * (Backend_CountUse) never see a half-written one. Entries are never
 * removed: a backend stays loaded for the server's life. */
static RAI_LoadedBackend loaded[RAI_MAX_LOADED_BACKENDS];
static size_t nloaded;
static RAI_LoadedBackend *defaults[RAI_BACKEND_KINDS];
static const RAI_HostApi *host_api;

void Backend_Init(const RAI_HostApi *host) {
    host_api = host;
}

size_t Backend_LoadedCount(void) {
    return __atomic_load_n(&nloaded, __ATOMIC_ACQUIRE);
}

const RAI_LoadedBackend *Backend_LoadedAt(size_t i) {
    return i < Backend_LoadedCount() ? &loaded[i] : NULL;
}

void Backend_CountUse(const RAI_BackendDescriptor *d, int is_script, int delta) {
    size_t n = Backend_LoadedCount();
    for (size_t i = 0; i < n; i++) {
        if (loaded[i].desc != d) continue;
        __atomic_add_fetch(is_script ? &loaded[i].scripts : &loaded[i].models, delta,
                           __ATOMIC_RELAXED);
        return;
    }
}

void Backend_ModelFree(const RAI_BackendDescriptor *d, void *handle, char *blob) {
    if (Backend_IsIsolated(d)) {
        Iso_ModelFree(handle, blob);
        return;
    }
    d->model_free(handle);
    RedisModule_Free(blob);
}

int Backend_IsIsolated(const RAI_BackendDescriptor *d) {
    size_t n = Backend_LoadedCount();
    for (size_t i = 0; i < n; i++) {
        if (loaded[i].desc == d) return loaded[i].isolated;
    }
    return 0;
}

const RAI_LoadedBackend *Backend_Loaded(RAI_BackendKind kind) {
    if ((unsigned)kind >= RAI_BACKEND_KINDS) return NULL;
    return defaults[kind];
}

const RAI_LoadedBackend *Backend_FindByName(const char *name) {
    size_t n = Backend_LoadedCount();
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(loaded[i].name, name)) return &loaded[i];
    }
    return NULL;
}

static const RAI_LoadedBackend *inProcessOf(RAI_BackendKind kind) {
    size_t n = Backend_LoadedCount();
    for (size_t i = 0; i < n; i++) {
        if (loaded[i].kind == kind && !loaded[i].isolated) return &loaded[i];
    }
    return NULL;
}

#define FOLDER_PREFIX "redisai_"

static const char *baseName(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A folder path's last part after "redisai_", or NULL when it is no
 * `redisai_*` folder. */
static char *folderName(const char *dir) {
    const char *base = baseName(dir);
    size_t n = strlen(FOLDER_PREFIX);
    if (strncmp(base, FOLDER_PREFIX, n) || !base[n]) return NULL;
    return RedisModule_Strdup(base + n);
}

/* A backend's name: the `redisai_<name>` folder its real file lies in (the
 * default link redisai_onnxruntime, or a link to a folder's file, gives
 * that folder: one name however the file was reached), else the folder of
 * the path as given (a folder holding a link to a file elsewhere), else
 * the file's stem. */
static char *backendName(const char *full, const char *real) {
    char *name = NULL;
    const char *paths[2] = {real, full};
    for (int i = 0; i < 2 && name == NULL; i++) {
        char *dir = RedisModule_Strdup(paths[i]);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            name = folderName(dir);
        }
        RedisModule_Free(dir);
    }
    if (name) return name;
    const char *base = baseName(full);
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    name = RedisModule_Alloc(len + 1);
    memcpy(name, base, len);
    name[len] = '\0';
    return name;
}

static double nowSeconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Frameworks read these while their libraries initialise: they must be in
 * the environment before the first dlopen. A user's own setting wins.
 * OMP_WAIT_POLICY: libtorch's OpenMP runtime (libgomp) otherwise keeps an
 * intra-op pool's threads spinning for 300,000 rounds after each parallel
 * region, past the end of the run, on the cores Redis's main thread and
 * the clients need between runs; on a loaded machine a run then waits for
 * a descheduled thread at each region (the CNN on 2 cores,
 * INTRA_OP_PARALLELISM 2, one client: 141-1,008 req/s spinning, 2,413-7,463
 * passive; docs/performance.md#intra-op-pools). Passive threads sleep at
 * once, and a one-thread team (the default on 2 cores) never waits. */
static void quietFrameworks(void) {
    setenv("TF_CPP_MIN_LOG_LEVEL", "3", 0);
    setenv("TF_ENABLE_ONEDNN_OPTS", "0", 0);
    if (getenv("GOMP_SPINCOUNT") == NULL) setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
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

/* Everything up to dlopen (or the host's start) reads the file as data:
 * nothing of it runs until it has passed every check. The real path is
 * what is checked and then opened, so a symlink cannot lead the two apart.
 * Returns 1, or 0 after err. */
static int checkFile(RAI_BackendKind kind, const char *name, const char *full, const char *real,
                     BackendFileNote *note, int *manifest, RAI_Error *err) {
    const RAI_LoadedBackend *named = Backend_FindByName(name);
    if (named) {
        Error_SetFmt(err, "a backend named %s is already loaded (from %s); %s would take the "
                     "same name", name, named->path, full);
        return 0;
    }
    if (Backend_LoadedCount() == RAI_MAX_LOADED_BACKENDS) {
        Error_SetFmt(err, "%s: cannot load: %d backends are loaded already, the most this "
                     "server holds", full, RAI_MAX_LOADED_BACKENDS);
        return 0;
    }
    if (rai_config.backends_confined && !checkConfined(real, full, err)) return 0;
    if (!BackendFile_Inspect(real, full, kind, note, err)) return 0;
    return BackendManifest_Verify(real, full, manifest, err);
}

/* dlopen (RTLD_NOW: a missing library or symbol fails here; RTLD_LOCAL:
 * frameworks never bind to each other's symbols), the entry, our host
 * table. NULL after err; *handle is what dlopen gave, *entry_ran whether
 * the backend's code ran (loadBackend's failure path needs both). */
static const RAI_BackendDescriptor *openInProcess(const char *full, const char *real,
                                                  void **handle, int *entry_ran,
                                                  RAI_Error *err) {
    quietFrameworks();
    *handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (*handle == NULL) {
        const char *why = dlerror();
        if (why == NULL) why = "unknown error";
        /* dlerror names the file itself unless a library it NEEDs is the
         * one missing; then name ours too. */
        if (strstr(why, full)) {
            Error_SetFmt(err, "dlopen failed: %s", why);
        } else {
            Error_SetFmt(err, "%s: dlopen failed: %s", full, why);
        }
        return NULL;
    }
    RAI_BackendEntryFn entry = (RAI_BackendEntryFn)dlsym(*handle, RAI_BACKEND_ENTRY_SYMBOL);
    if (entry == NULL) {
        Error_SetFmt(err, "%s: does not export the entry symbol %s", full,
                     RAI_BACKEND_ENTRY_SYMBOL);
        return NULL;
    }
    char why[512] = "";
    *entry_ran = 1;
    const RAI_BackendDescriptor *d = entry(host_api, why, sizeof(why));
    if (d == NULL) {
        Error_SetFmt(err, "%s: backend refused the host: %s", full,
                     why[0] ? why : "no reason given");
    }
    return d;
}

/* Enters a checked backend in the table and logs its load. */
static const RAI_LoadedBackend *publish(RedisModuleCtx *ctx, const RAI_LoadedBackend *entry,
                                        int manifest, double checks_seconds) {
    size_t at = Backend_LoadedCount();
    RAI_LoadedBackend *lb = &loaded[at];
    *lb = *entry;
    __atomic_store_n(&nloaded, at + 1, __ATOMIC_RELEASE);
    if (defaults[lb->kind] == NULL) defaults[lb->kind] = lb;
    const RAI_BackendDescriptor *d = lb->desc;
    RedisModule_Log(ctx, "notice",
                    "Loaded %s backend %s from %s%s: %s %s (%s), ABI %u.%u, %s, file checks "
                    "%.3f ms, %.3f s", Backend_KindName(lb->kind), lb->name, lb->path,
                    lb->isolated ? " into a backend host" : "", d->framework,
                    d->framework_version, d->variant, lb->abi_major, lb->abi_minor,
                    manifest ? "manifest verified" : "no manifest", checks_seconds * 1e3,
                    lb->load_seconds);
    return lb;
}

static int loadBackend(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path,
                       int isolated, const RAI_LoadedBackend **out, RAI_Error *err) {
    isolated = isolated || (rai_config.isolate_kinds & (1u << kind));
    const RAI_LoadedBackend *same = inProcessOf(kind);
    if (!isolated && same) {
        Error_SetFmt(err, "%s backend already loaded from %s", Backend_KindName(kind), same->path);
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
    char *name = NULL;
    char real[PATH_MAX];
    if (realpath(full, real) == NULL) {
        Error_SetFmt(err, "%s: cannot open: %s", full, strerror(errno));
        goto fail;
    }
    name = backendName(full, real);
    BackendFileNote note;
    int manifest = 0;
    if (!checkFile(kind, name, full, real, &note, &manifest, err)) goto fail;
    double checks_seconds = nowSeconds() - start;

    /* An isolated backend's file runs in its host; the proxy's descriptor
     * stands for it. */
    const RAI_BackendDescriptor *d =
        isolated ? Iso_Load(ctx, kind, name, real, full, err)
                 : openInProcess(full, real, &handle, &entry_ran, err);
    if (d == NULL) goto fail;
    /* A second line behind the note: what the code (or the host, for the
     * proxy's descriptor) says must agree. */
    if (!Backend_CheckDescriptor(d, kind, full, err)) goto fail;
    const RAI_LoadedBackend *lb = publish(ctx, &(RAI_LoadedBackend){
        .desc = d,
        .kind = kind,
        .name = name,
        .isolated = isolated,
        .path = full,
        .real = RedisModule_Strdup(real),
        .load_seconds = nowSeconds() - start,
        .loaded_at = (long long)time(NULL),
        .abi_major = note.abi_major,
        .abi_minor = note.abi_minor,
    }, manifest, checks_seconds);
    if (out) *out = lb;
    return REDISMODULE_OK;

fail:
    /* Once the entry has run, the backend may have started threads or
     * registered state that outlives a dlclose (a framework's thread pool
     * running unmapped code is how a refused backend used to crash a
     * later load): its handle stays open, a leak of one refused load. A
     * handle whose entry never ran holds nothing of ours and is closed. */
    if (handle && !entry_ran) dlclose(handle);
    RedisModule_Free(name);
    RedisModule_Free(full);
    return REDISMODULE_ERR;
}

int Backend_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *path, int isolated,
                 const RAI_LoadedBackend **out, RAI_Error *err) {
    return loadBackend(ctx, kind, path, isolated, out, err);
}

const RAI_BackendDescriptor *Backend_Require(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             RAI_Error *err) {
    if (defaults[kind]) return defaults[kind]->desc;
    if (Backend_Load(ctx, kind, Backend_DefaultFile(kind), 0, NULL, err) != REDISMODULE_OK) {
        return NULL;
    }
    return defaults[kind]->desc;
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

/* "a, b, c": the loaded backends of kind, then the folders of kind under
 * BACKENDSPATH not loaded under that name; "none" when there are none. */
static char *namesOfKind(RAI_BackendKind kind, const RAI_BackendFolder *folders, size_t nf) {
    size_t len = 8, n = Backend_LoadedCount();
    for (size_t i = 0; i < n; i++) len += strlen(loaded[i].name) + 2;
    for (size_t i = 0; i < nf; i++) len += strlen(folders[i].name) + 2;
    char *names = RedisModule_Alloc(len);
    names[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (loaded[i].kind != kind) continue;
        if (names[0]) strcat(names, ", ");
        strcat(names, loaded[i].name);
    }
    for (size_t i = 0; i < nf; i++) {
        const RAI_BackendFolder *f = &folders[i];
        if (!f->has_kind || f->kind != kind || Backend_FindByName(f->name)) continue;
        if (names[0]) strcat(names, ", ");
        strcat(names, f->name);
    }
    if (!names[0]) strcpy(names, "none");
    return names;
}

static const RAI_LoadedBackend *loadedByReal(const char *real) {
    size_t n = Backend_LoadedCount();
    for (size_t i = 0; real && i < n; i++) {
        if (!strcmp(loaded[i].real, real)) return &loaded[i];
    }
    return NULL;
}

/* Whether real is the file lazy loading would load as the kind's default. */
static int isDefaultFile(RAI_BackendKind kind, const char *real) {
    char *full = Config_ResolvePath(Backend_DefaultFile(kind));
    char def[PATH_MAX];
    int same = real && realpath(full, def) && !strcmp(def, real);
    RedisModule_Free(full);
    return same;
}

const RAI_LoadedBackend *Backend_ResolveName(RedisModuleCtx *ctx, RAI_BackendKind kind,
                                             const char *name, RAI_Error *err) {
    const RAI_LoadedBackend *lb = Backend_FindByName(name);
    if (lb && lb->kind != kind) {
        Error_SetFmt(err, "ERR backend %s is a %s backend, not %s", name,
                     Backend_KindName(lb->kind), Backend_KindName(kind));
        return NULL;
    }
    if (lb) return lb;
    size_t nf;
    RAI_BackendFolder *folders = BackendDir_Scan(rai_config.backends_path, &nf);
    const RAI_BackendFolder *f = NULL;
    for (size_t i = 0; i < nf && f == NULL && BackendDir_IsName(name); i++) {
        if (!strcmp(folders[i].name, name)) f = &folders[i];
    }
    if (f && f->has_kind && f->kind != kind) {
        Error_SetFmt(err, "ERR backend %s is a %s backend, not %s", name,
                     Backend_KindName(f->kind), Backend_KindName(kind));
    } else if (f && f->has_kind) {
        /* A folder that is a link to a loaded backend's folder (the
         * default link `onnxruntime`): that backend. */
        lb = f->link ? loadedByReal(f->real) : NULL;
        if (lb == NULL) {
            /* Naming the file lazy loading would pick, before anything of
             * the kind is loaded, loads it as lazy loading would; any other
             * folder is a second version: isolated. */
            int isolated = !(defaults[kind] == NULL && isDefaultFile(kind, f->real));
            RAI_Error why;
            Error_Init(&why);
            if (Backend_Load(ctx, kind, name, isolated, &lb, &why) != REDISMODULE_OK) {
                Error_SetFmt(err, "ERR could not load %s backend %s: %s", Backend_KindName(kind),
                             name, Error_Message(&why));
                lb = NULL;
            }
            Error_Clear(&why);
        }
    } else {
        char *names = namesOfKind(kind, folders, nf);
        Error_SetFmt(err, "ERR no %s backend named %s: %s", Backend_KindName(kind), name, names);
        RedisModule_Free(names);
    }
    BackendDir_Free(folders, nf);
    return lb;
}
