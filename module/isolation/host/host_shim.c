/*
 * host_shim.c - what the core files compiled into the host need from Redis:
 * backend_file.c, backend_manifest.c, sha256.c and error.c allocate through
 * RedisModule_Alloc/Free/Strdup. In the host those are libc's; nothing
 * else of Redis's API exists here.
 */
#define _GNU_SOURCE /* strdup under a strict -std */
#include <stdlib.h>
#include <string.h>

#include "isolation/host/host.h"
#include "redismodule.h" /* the RedisModule_* pointers (common symbols) */

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
