/*
 * rdb_io.c - see rdb_io.h.
 */
#include "types/rdb_io.h"

#include <string.h>

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
