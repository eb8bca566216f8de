/*
 * digest_io.c - see digest_io.h.
 */
#include "types/digest_io.h"

#include <string.h>

void DigestIO_AddCString(RedisModuleDigest *md, const char *s) {
    RedisModule_DigestAddStringBuffer(md, s, strlen(s));
}

void DigestIO_AddOptCString(RedisModuleDigest *md, const char *s) {
    RedisModule_DigestAddLongLong(md, s != NULL);
    if (s != NULL) DigestIO_AddCString(md, s);
}

void DigestIO_AddNames(RedisModuleDigest *md, size_t n, char *const *names) {
    RedisModule_DigestAddLongLong(md, (long long)n);
    for (size_t i = 0; i < n; i++) DigestIO_AddCString(md, names[i]);
}
