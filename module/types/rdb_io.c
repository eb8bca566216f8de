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

void RdbIO_SaveDevice(RedisModuleIO *io, const char *device, const char *backend_name) {
    if (backend_name == NULL) {
        RdbIO_SaveCString(io, device); /* byte for byte RedisAI 1.2's field */
        return;
    }
    size_t dlen = strlen(device) + 1, rlen = strlen(RDBIO_NAME_RECORD);
    size_t nlen = strlen(backend_name) + 1;
    char *buf = RedisModule_Alloc(dlen + rlen + nlen);
    memcpy(buf, device, dlen);
    memcpy(buf + dlen, RDBIO_NAME_RECORD, rlen);
    memcpy(buf + dlen + rlen, backend_name, nlen);
    RedisModule_SaveStringBuffer(io, buf, dlen + rlen + nlen);
    RedisModule_Free(buf);
}

static char *copyOf(const char *s, size_t n) {
    char *out = RedisModule_Alloc(n + 1);
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

int RdbIO_LoadDevice(RedisModuleIO *io, const char *type_name, char **device, char **name) {
    size_t n = 0;
    *device = *name = NULL;
    char *buf = RedisModule_LoadStringBuffer(io, &n);
    if (buf == NULL || RedisModule_IsIOError(io)) {
        if (buf) RedisModule_Free(buf);
        return 0;
    }
    if (n > 0 && buf[n - 1] == '\0') n--; /* the C string's own NUL */
    const char *nul = memchr(buf, '\0', n);
    size_t dlen = nul ? (size_t)(nul - buf) : n;
    if (nul) {
        /* Only the name may follow the device: anything else is a newer
         * RedisAI's, or damage, and either way not a model we could save back. */
        const char *rec = nul + 1;
        size_t rlen = n - dlen - 1, plen = strlen(RDBIO_NAME_RECORD);
        if (rlen <= plen || memcmp(rec, RDBIO_NAME_RECORD, plen) != 0 ||
            memchr(rec, '\0', rlen) != NULL) {
            RedisModule_LogIOError(io, "warning",
                                   "Failed loading %s %s: its device field holds more than a "
                                   "device and " RDBIO_NAME_RECORD "<name>",
                                   type_name, RdbIO_KeyName(io));
            RedisModule_Free(buf);
            return 0;
        }
        *name = copyOf(rec + plen, rlen - plen);
    }
    *device = copyOf(buf, dlen);
    RedisModule_Free(buf);
    return 1;
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
    if (encver <= RAI_ENC_VER_READ) return 0;
    /* RedisAI 1.2's words, which operators grep for. */
    RedisModule_LogIOError(io, "warning",
                           "Failed loading %s %s: encoding version %d was written by a newer "
                           "RedisAI; this one reads versions up to %d and is not forward "
                           "compatible",
                           type_name, RdbIO_KeyName(io), encver, RAI_ENC_VER_READ);
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
