/*
 * unit_shim.h - the few Redis module API functions the leaf units call,
 * over libc, for unit tests of pure logic only (no Redis runs here): the
 * allocator (RedisModule_Alloc/Calloc/Realloc/Free/Strdup), counted so a
 * test can see that a unit frees what it allocates, with Alloc's blocks
 * filled with 0xa5; and module strings (StringPtrLen, RetainString,
 * FreeString) over a small struct with a reference count.
 */
#ifndef REDISAI_UNIT_SHIM_H
#define REDISAI_UNIT_SHIM_H

#include <stddef.h>

#include "redismodule.h"

struct RedisModuleString {
    long refs;
    size_t len;
    char *ptr; /* len bytes and a NUL */
};

/* Points the RedisModule_* functions above at the shim. */
void UnitShim_Init(void);
/* Blocks from the shim's allocator not yet freed. */
long UnitShim_Live(void);
/* A string with one reference, as RedisModule_CreateString would make. */
RedisModuleString *UnitShim_String(const char *s, size_t len);

#endif
