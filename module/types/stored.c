/*
 * stored.c - see stored.h.
 */
#include "types/stored.h"

#include <string.h>

#include "core/messages.h"
#include "redismodule.h"

static Stored_QueueFactory queue_factory;

void Stored_SetQueueFactory(Stored_QueueFactory factory) {
    queue_factory = factory;
}

struct RAI_RunQueue *Stored_QueueFor(const char *device_str, RAI_Error *err) {
    return queue_factory(device_str, err);
}

char *Stored_CopyBytes(const char *p, size_t len) {
    char *s = RedisModule_Alloc(len + 1);
    memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

char **Stored_CopyNames(size_t n, const char *const *names) {
    char **out = RedisModule_Alloc(sizeof(char *) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) out[i] = RedisModule_Strdup(names[i]);
    return out;
}

void Stored_FreeNames(size_t n, char **names) {
    if (names == NULL) return;
    for (size_t i = 0; i < n; i++) RedisModule_Free(names[i]);
    RedisModule_Free(names);
}

void *Stored_ValueAt(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleType *type,
                     const char *empty, RAI_Error *err) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    void *value = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        Error_Set(err, empty);
    } else if (RedisModule_ModuleTypeGetType(key) != type) {
        Error_Set(err, RAI_WRONGTYPE_MSG);
    } else {
        value = RedisModule_ModuleTypeGetValue(key);
    }
    RedisModule_CloseKey(key);
    return value;
}

const char *Stored_DeleteKey(RedisModuleCtx *ctx, RedisModuleString *keyname,
                             RedisModuleType *type, const char *empty) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE);
    const char *why = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        why = empty;
    } else if (RedisModule_ModuleTypeGetType(key) != type) {
        why = RAI_WRONGTYPE_MSG;
    } else {
        RedisModule_DeleteKey(key);
    }
    RedisModule_CloseKey(key);
    return why;
}
