/*
 * rdb_io.c - see rdb_io.h.
 */
#include "types/rdb_io.h"

#include <string.h>

#include "types/stored.h"

void RdbIO_SaveCString(RedisModuleIO *io, const char *s) {
    RedisModule_SaveStringBuffer(io, s, strlen(s) + 1);
}

static char *loadString(RedisModuleIO *io, size_t *len, int strip_nul) {
    size_t n = 0;
    char *buf = RedisModule_LoadStringBuffer(io, &n);
    if (buf == NULL || RedisModule_IsIOError(io)) {
        if (buf) RedisModule_Free(buf);
        return NULL;
    }
    if (strip_nul && n > 0 && buf[n - 1] == '\0') n--;
    char *s = RedisModule_Alloc(n + 1);
    memcpy(s, buf, n);
    s[n] = '\0';
    RedisModule_Free(buf);
    if (len) *len = n;
    return s;
}

char *RdbIO_LoadCString(RedisModuleIO *io, size_t *len) {
    return loadString(io, len, 1);
}

char *RdbIO_LoadBytes(RedisModuleIO *io, size_t *len) {
    return loadString(io, len, 0);
}

const char *RdbIO_KeyName(RedisModuleIO *io) {
    const RedisModuleString *key = RedisModule_GetKeyNameFromIO(io);
    return key ? RedisModule_StringPtrLen(key, NULL) : "(unknown key)";
}

int RdbIO_RefuseNewer(RedisModuleIO *io, const char *type_name, int encver) {
    if (encver <= RAI_ENC_VER) return 0;
    /* RedisAI 1.2's words, which operators grep for. */
    RedisModule_LogIOError(io, "warning",
                           "Failed loading %s %s: encoding version %d was written by a newer "
                           "RedisAI; this one writes version %d and is not forward compatible",
                           type_name, RdbIO_KeyName(io), encver, RAI_ENC_VER);
    return 1;
}

char **RdbIO_LoadNames(RedisModuleIO *io, size_t *n) {
    uint64_t want = RedisModule_LoadUnsigned(io);
    *n = 0;
    if (RedisModule_IsIOError(io) || want > RDBIO_MAX_NAMES) return NULL;
    size_t cap = 4;
    char **v = RedisModule_Calloc(cap, sizeof(char *));
    for (uint64_t i = 0; i < want; i++) {
        char *name = RdbIO_LoadCString(io, NULL);
        if (name == NULL) {
            Stored_FreeNames(*n, v);
            *n = 0;
            return NULL;
        }
        if (*n == cap) {
            cap *= 2;
            v = RedisModule_Realloc(v, cap * sizeof(char *));
        }
        v[(*n)++] = name;
    }
    return v;
}

void RdbIO_LogShortRead(RedisModuleIO *io, const char *what, int encver) {
    RedisModule_LogIOError(io, "warning",
                           "Experienced a short read while reading %s from RDB (%s, encoding "
                           "version %d)", what, RdbIO_KeyName(io), encver);
}
