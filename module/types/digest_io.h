/*
 * digest_io.h - what the three types' digest methods share: the fields an
 * RDB value holds, mixed into the digest Redis computes for DEBUG
 * DIGEST-VALUE, DEBUG DIGEST and `redis-cli --cluster fix`
 * (docs/persistence.md, "Digests"). Each value is one sequence: its fields in
 * their RDB order, then DigestEndSequence. Only the fields are mixed, never
 * how the RDB cuts them (a model's chunk size is the saving server's own), so
 * two values that save the same fields digest the same on every server.
 */
#ifndef REDISAI_DIGEST_IO_H
#define REDISAI_DIGEST_IO_H

#include <stddef.h>

#include "redismodule.h"

/* A C string's bytes, without its NUL. */
void DigestIO_AddCString(RedisModuleDigest *md, const char *s);

/* A C string that may be absent (NULL): a presence flag, then the string
 * when there is one, so that no string and an empty one differ. */
void DigestIO_AddOptCString(RedisModuleDigest *md, const char *s);

/* A name list as the RDB holds it: the count, then each name. */
void DigestIO_AddNames(RedisModuleDigest *md, size_t n, char *const *names);

#endif
