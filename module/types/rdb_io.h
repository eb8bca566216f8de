/*
 * rdb_io.h - what the three type methods share when they read and write
 * RDB values: C strings saved with their NUL (`Buf*` in docs/persistence.md), the key
 * a value belongs to, and the refusal of encodings from a newer RedisAI.
 */
#ifndef REDISAI_RDB_IO_H
#define REDISAI_RDB_IO_H

#include <stddef.h>

#include "redismodule.h"

/* The encoding version every type writes (docs/persistence.md). 5 added the model's
 * backend name (docs/isolation.md); tensors and scripts keep v4's layout. */
#define RAI_ENC_VER 5

void RdbIO_SaveCString(RedisModuleIO *io, const char *s);

/* A string buffer as an allocated C string, without the trailing NUL a
 * `Buf*` field carries; *len (may be NULL) gets its length. NULL on a
 * read error. */
char *RdbIO_LoadCString(RedisModuleIO *io, size_t *len);

/* A `Str` field, bytes kept as they are, NUL-terminated for convenience. */
char *RdbIO_LoadBytes(RedisModuleIO *io, size_t *len);

/* The key being loaded, or "(unknown key)": logs name it. */
const char *RdbIO_KeyName(RedisModuleIO *io);

/* U count, then count Buf* names, as allocated C strings in an array of at
 * least one slot (free with Stored_FreeNames); *n gets the count. NULL on
 * a read error or a count over RDBIO_MAX_NAMES. The count comes from the
 * payload: the array grows with the names actually read, so a count of
 * 2^62 in a short payload ends in a read error, not a huge allocation. */
#define RDBIO_MAX_NAMES (1 << 20)
char **RdbIO_LoadNames(RedisModuleIO *io, size_t *n);

/* The log line of a value that could not be read (`what`: "a model"). */
void RdbIO_LogShortRead(RedisModuleIO *io, const char *what, int encver);

/* Logs and returns 1 when encver was written by a newer RedisAI. */
int RdbIO_RefuseNewer(RedisModuleIO *io, const char *type_name, int encver);

#endif
