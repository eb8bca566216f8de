/*
 * rdb_io.h - what the three type methods share when they read and write
 * RDB values: C strings saved with their NUL (`Buf*` in docs/persistence.md), a
 * model's device field with its backend name, the key a value belongs to, and
 * the refusal of encodings from a newer RedisAI.
 */
#ifndef REDISAI_RDB_IO_H
#define REDISAI_RDB_IO_H

#include <stddef.h>

#include "redismodule.h"

/* The encoding version every type registers and writes: RedisAI 1.2's, so
 * that RDB files and DUMP payloads load in 1.2 (docs/persistence.md). Redis
 * writes a type's one registered version for every value, so nothing 1.2
 * cannot read may need a version of its own. */
#define RAI_ENC_VER 4
/* The newest version read: earlier builds of this module wrote 5 for every
 * type (the model's backend name as a field of its own). */
#define RAI_ENC_VER_READ 5

void RdbIO_SaveCString(RedisModuleIO *io, const char *s);

/* A model's device (`Buf*` in 1.2's layout) and its backend name (NULL: none).
 * A named model's field is the device, its NUL, `backend=<name>` and a NUL:
 * RedisAI 1.2 reads the field as a C string and sees the device alone. A
 * device never holds a NUL (commands take it as a C string), so a NUL before
 * the end of the field always starts the name. */
#define RDBIO_NAME_RECORD "backend="
void RdbIO_SaveDevice(RedisModuleIO *io, const char *device, const char *backend_name);

/* The field RdbIO_SaveDevice writes, as allocated C strings; *name NULL when
 * the field holds a device alone. 0 on a read error, or (logged, naming
 * type_name and the key) when what follows the device's NUL is not one
 * `backend=<name>` with a name. */
int RdbIO_LoadDevice(RedisModuleIO *io, const char *type_name, char **device, char **name);

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

/* Logs and returns 1 when encver was written by a newer RedisAI (above
 * RAI_ENC_VER_READ). */
int RdbIO_RefuseNewer(RedisModuleIO *io, const char *type_name, int encver);

#endif
