/*
 * unit_shim.c - see unit_shim.h. Single-threaded, like the tests.
 */
#define _GNU_SOURCE /* strdup under a strict -std */
#include "unit_shim.h"

#include <stdlib.h>
#include <string.h>

static long live;

/* Fresh blocks are filled with 0xa5, not left as malloc gives them (often
 * zeros): a unit that promises zeroed memory must ask for it. */
static void *shimAlloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) abort(); /* as RedisModule_Alloc: it never returns NULL */
    memset(p, 0xa5, n ? n : 1);
    live++;
    return p;
}

static void *shimCalloc(size_t count, size_t n) {
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (p == NULL) abort();
    live++;
    return p;
}

static void *shimRealloc(void *old, size_t n) {
    void *p = realloc(old, n ? n : 1);
    if (p == NULL) abort();
    if (old == NULL) live++;
    return p;
}

static void shimFree(void *p) {
    if (p == NULL) return;
    live--;
    free(p);
}

static char *shimStrdup(const char *s) {
    char *p = strdup(s);
    if (p == NULL) abort();
    live++;
    return p;
}

static const char *shimStringPtrLen(const RedisModuleString *s, size_t *len) {
    if (len) *len = s->len;
    return s->ptr;
}

static void shimRetainString(RedisModuleCtx *ctx, RedisModuleString *s) {
    (void)ctx;
    s->refs++;
}

static void shimFreeString(RedisModuleCtx *ctx, RedisModuleString *s) {
    (void)ctx;
    if (--s->refs > 0) return;
    free(s->ptr);
    free(s);
}

void UnitShim_Init(void) {
    RedisModule_Alloc = shimAlloc;
    RedisModule_Calloc = shimCalloc;
    RedisModule_Realloc = shimRealloc;
    RedisModule_Free = shimFree;
    RedisModule_Strdup = shimStrdup;
    RedisModule_StringPtrLen = shimStringPtrLen;
    RedisModule_RetainString = shimRetainString;
    RedisModule_FreeString = shimFreeString;
}

long UnitShim_Live(void) {
    return live;
}

RedisModuleString *UnitShim_String(const char *s, size_t len) {
    RedisModuleString *str = malloc(sizeof(*str));
    char *ptr = malloc(len + 1);
    if (str == NULL || ptr == NULL) abort();
    memcpy(ptr, s, len);
    ptr[len] = '\0';
    *str = (RedisModuleString){.refs = 1, .len = len, .ptr = ptr};
    return str;
}
