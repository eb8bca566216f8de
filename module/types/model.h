/*
 * model.h - a stored model: the user's blob and settings, and the handle the
 * backend built from them. Reference-counted: runs in flight keep the model
 * alive after the key is deleted or overwritten.
 */
#ifndef REDISAI_MODEL_H
#define REDISAI_MODEL_H

#include <stddef.h>

#include "core/error.h"
#include "redisai/backend_abi.h"
#include "redismodule.h"

struct RAI_RunQueue;
struct RAI_RunStats;

typedef struct RAI_Model {
    long refcount; /* atomic */
    RAI_BackendKind backend;
    const RAI_BackendDescriptor *be;
    void *handle;
    char *device_str;
    RAI_DeviceKind device;
    int64_t device_id;
    char *tag;
    size_t tag_len;
    long long batchsize;
    long long minbatchsize;
    long long minbatchtimeout;
    size_t ninputs;
    char **inputs;
    size_t noutputs;
    char **outputs;
    char *blob;
    size_t blob_len;
    struct RAI_RunQueue *queue;
    struct RAI_RunStats *stats; /* set once stored at a key */
    /* MODELSTORE's `BACKEND <name>`, kept as given (saved, replicated,
     * shown by META); NULL when none was given. */
    char *backend_name;
    /* The named backend was missing here and the kind's default runs the
     * model instead (replica, AOF or RDB load: Model_FallbackCount). */
    int on_fallback;
    /* The latest single (unbatched) run: its time and its inputs' bytes,
     * -1 before the first. Written by whichever thread ran it, read by the
     * main thread to decide an inline run (inline_run.h); atomics, relaxed:
     * a stale pair only sends one run to the queue. */
    long long last_run_us;
    long long last_run_in_bytes;
    /* Recent runs' time in one thread's terms (wall time times the
     * intra-op threads each was given), a moving average, -1 before the
     * first run, -2 after it (its warm-up is no figure): the thread policy's
     * "long enough to gain" (engine/run_threads.c).
     * In one thread's terms so that a model made faster by all cores stays
     * heavy. Written by whichever thread ran it; relaxed atomics. */
    long long recent_work_us;
    /* Inline runs over INLINE_RUN_MAX_US in a row, and when the latest of
     * them ended (ms): a run can take longer on Redis's main thread than on
     * a worker, whose CPU keeps the framework's data in its caches
     * (inline_run.c). Main thread only. */
    int inline_over;
    long long inline_over_ms;
} RAI_Model;

/* Everything MODELSTORE/MODELSET and RDB load gather before building. */
typedef struct RAI_ModelParams {
    RAI_BackendKind backend;
    const char *device_str;
    RAI_DeviceKind device;
    int64_t device_id;
    const char *tag;
    size_t tag_len;
    long long batchsize;
    long long minbatchsize;
    long long minbatchtimeout;
    size_t ninputs;
    const char *const *inputs;
    size_t noutputs;
    const char *const *outputs;
    /* The key the model is being stored at (RAI_ModelSpec.key); NULL when
     * unknown (the LLAPI): "" to the backend. */
    const char *key;
    size_t key_len;
    /* Build on the backend of this name (Backend_ResolveName); NULL: the
     * kind's default. */
    const char *backend_name;
    /* When that backend cannot be had, build on the kind's default instead
     * (keeping the name) rather than fail: set for what Redis must accept,
     * a replicated or AOF command and an RDB load. */
    int name_fallback;
} RAI_ModelParams;

/* Builds a model through its backend (the named one, else the kind's
 * default, loading it if needed). Takes ownership of blob (RedisModule_Alloc'd)
 * whatever the outcome: the model keeps it, and Model_Release gives the
 * backend's handle back (model_free) before freeing it, so a backend may
 * keep pointing into the blob for the handle's life. */
RAI_Model *Model_Create(RedisModuleCtx *ctx, const RAI_ModelParams *p, char *blob,
                        size_t blob_len, RAI_Error *err);
RAI_Model *Model_Retain(RAI_Model *m);
/* Models alive on their kind's default instead of their named backend. */
long Model_FallbackCount(void);
/* Main thread only once the model has stats (it is, or was, at a key). */
void Model_Release(RAI_Model *m);
/* Gives the model fresh statistics under keyname. */
void Model_RegisterStats(RAI_Model *m, RedisModuleString *keyname);

/* Blob chunking of AI.MODELGET (also RDB and AOF; docs/commands.md): k = L/C + 1 chunks, the last
 * L mod C bytes long, so an exact multiple ends with an empty chunk. */
size_t Model_ChunkCount(size_t blob_len, size_t chunk);

#endif
