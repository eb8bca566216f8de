/*
 * ort_env.h - process-wide state of the ONNX Runtime backend, shared by
 * its translation units, and the status helpers every one of them uses.
 * Everything here is set once by RAI_BackendEntry, before the core can call
 * any other function of the backend, and is only read afterwards, so
 * worker threads use it without locks.
 */
#ifndef REDISAI_ORT_ENV_H
#define REDISAI_ORT_ENV_H

#include <onnxruntime_c_api.h>

#include "redisai/backend_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The C API version the fetched headers describe. A newer runtime serves it
 * too: its function table only grows. */
#define RAI_ORT_API_VERSION 21

/* The text of an allocation refused by BACKEND_MEMORY_LIMIT (the counting
 * allocator, ort_allocator.cpp, throws it), as RedisAI 1.2 words it. */
#define ORT_MEMORY_LIMIT_TEXT "Onnxruntime memory limit exceeded, memory allocation failed."
/* What precedes it when the allocation belongs to a MODELSTORE. */
#define ORT_INIT_EXCEPTION_PREFIX "Exception during initialization: "

typedef struct OrtBackend {
    const RAI_HostApi *host;
    const OrtApi *api;
    OrtEnv *env; /* one per process: ORT's logger and global state */
    /* Describes the core's tensor buffers that inputs wrap. Read-only once
     * created, so every worker shares it. */
    OrtMemoryInfo *cpu_memory;
} OrtBackend;

extern OrtBackend ort;

/* 1 when status is an error: its message is recorded verbatim on err (the
 * user sees ORT's own text) and the status released. 0 for success (NULL). */
int ort_failed(OrtStatus *status, RAI_Error *err);

/* As ort_failed, except that a refusal of the counting allocator
 * (BACKEND_MEMORY_LIMIT) is recorded as RedisAI 1.2 words it: prefix, then
 * ORT_MEMORY_LIMIT_TEXT, without the node ORT names around it. */
int ort_failed_limit(OrtStatus *status, RAI_Error *err, const char *prefix);

/* Releases the status of a cleanup call, whose failure leaves nothing to do. */
void ort_discard(OrtStatus *status);

#ifdef __cplusplus
}
#endif

#endif
