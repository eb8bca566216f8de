/*
 * host_shim.c - what the core files compiled into the host need from Redis:
 * backend_file.c, backend_manifest.c, sha256.c and error.c allocate through
 * RedisModule_Alloc/Free/Strdup (and backend_file.c names kinds). In the
 * host those are libc's; nothing else of Redis's API exists here.
 */
#define _GNU_SOURCE /* strdup, strcasecmp under a strict -std */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_loader.h" /* Backend_KindName; redismodule.h's pointers */
#include "host.h"

static void *shimAlloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) abort(); /* as RedisModule_Alloc: it never returns NULL */
    return p;
}

static char *shimStrdup(const char *s) {
    char *p = strdup(s);
    if (p == NULL) abort();
    return p;
}

void HostShim_Init(void) {
    RedisModule_Alloc = shimAlloc;
    RedisModule_Free = free;
    RedisModule_Strdup = shimStrdup;
}

/* The core's table is in backend_loader.c, which the host does not link
 * (it is the core's loader, with its config and Redis calls). */
const char *Backend_KindName(RAI_BackendKind kind) {
    static const char *names[] = {[RAI_BACKEND_TF] = "TF",
                                  [RAI_BACKEND_TFLITE] = "TFLITE",
                                  [RAI_BACKEND_TORCH] = "TORCH",
                                  [RAI_BACKEND_ONNX] = "ONNX"};
    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}

int Backend_ParseKind(const char *s, RAI_BackendKind *kind) {
    for (int i = 0; i < RAI_BACKEND_KINDS; i++) {
        if (!strcasecmp(s, Backend_KindName((RAI_BackendKind)i))) {
            *kind = (RAI_BackendKind)i;
            return 1;
        }
    }
    return 0;
}
