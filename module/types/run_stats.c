/*
 * run_stats.c - the statistics entries and their table, see run_stats.h.
 * AI.INFO, AI._MODELSCAN and AI._SCRIPTSCAN read them
 * (commands/info_commands.c).
 */
#include "types/run_stats.h"

#include <pthread.h>
#include <string.h>

static RedisModuleDict *table = NULL;
/* Guards the table and the life of its entries while AI.INFO reads one. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

void RunStats_Init(void) {
    if (table == NULL) table = RedisModule_CreateDict(NULL);
}

RAI_RunStats *RunStats_Register(RedisModuleString *key, int is_script, RAI_BackendKind backend,
                                const char *device, const char *tag, size_t tag_len) {
    RAI_RunStats *s = RedisModule_Calloc(1, sizeof(*s));
    s->key = RedisModule_CreateStringFromString(NULL, key);
    s->is_script = is_script;
    s->backend = backend;
    s->device = RedisModule_Strdup(device);
    s->tag = RedisModule_Alloc(tag_len + 1);
    memcpy(s->tag, tag, tag_len);
    s->tag[tag_len] = '\0';
    s->tag_len = tag_len;
    pthread_mutex_lock(&table_lock);
    RedisModule_DictReplace(table, s->key, s);
    pthread_mutex_unlock(&table_lock);
    return s;
}

void RunStats_Free(RAI_RunStats *s) {
    if (s == NULL) return;
    pthread_mutex_lock(&table_lock);
    if (RedisModule_DictGet(table, s->key, NULL) == s) RedisModule_DictDel(table, s->key, NULL);
    pthread_mutex_unlock(&table_lock);
    RedisModule_FreeString(NULL, s->key);
    RedisModule_Free(s->device);
    RedisModule_Free(s->tag);
    RedisModule_Free(s);
}

const char *RunStats_Key(const RAI_RunStats *s, size_t *len) {
    if (s == NULL || s->key == NULL) {
        *len = 0;
        return "";
    }
    return RedisModule_StringPtrLen(s->key, len);
}

void RunStats_AddRun(RAI_RunStats *s, int ok, long long duration_us, long long samples) {
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_RELAXED);
    if (!ok) {
        __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&s->duration_us, duration_us, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->samples, samples, __ATOMIC_RELAXED);
}

void RunStats_Reset(RAI_RunStats *s) {
    __atomic_store_n(&s->duration_us, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->samples, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->errors, 0, __ATOMIC_RELAXED);
}

void RunStats_Lock(void) {
    pthread_mutex_lock(&table_lock);
}

void RunStats_Unlock(void) {
    pthread_mutex_unlock(&table_lock);
}

RAI_RunStats *RunStats_Find(RedisModuleString *key) {
    return RedisModule_DictGet(table, key, NULL);
}

void RunStats_ForEach(void (*fn)(RAI_RunStats *s, void *arg), void *arg) {
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(table, "^", NULL, 0);
    RAI_RunStats *s;
    while (RedisModule_DictNextC(it, NULL, (void **)&s)) fn(s, arg);
    RedisModule_DictIteratorStop(it);
}
