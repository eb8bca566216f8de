/*
 * host_models.c - the host's models and scripts by handle id (the core
 * chooses ids from one 64-bit counter for both, never reused). A small
 * array under a mutex: a host holds the objects of one backend, and a
 * lookup is a few compares next to a run.
 */
#include <pthread.h>
#include <stdlib.h>

#include "isolation/host/host.h"

typedef struct Entry {
    uint64_t id;
    HostHandleKind kind;
    void *obj;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *entries;
static size_t count, cap;

int HostHandles_Add(uint64_t id, HostHandleKind kind, void *obj) {
    pthread_mutex_lock(&lock);
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        if (entries[i].id == id) rc = -1; /* the core never reuses an id */
    }
    if (rc == 0 && count == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        Entry *e = realloc(entries, ncap * sizeof(*e));
        if (e == NULL) {
            rc = -1;
        } else {
            entries = e;
            cap = ncap;
        }
    }
    if (rc == 0) entries[count++] = (Entry){.id = id, .kind = kind, .obj = obj};
    pthread_mutex_unlock(&lock);
    return rc;
}

void *HostHandles_Get(uint64_t id, HostHandleKind kind, int *other) {
    void *obj = NULL;
    int found_other = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (entries[i].id != id) continue;
        if (entries[i].kind == kind) {
            obj = entries[i].obj;
        } else {
            found_other = 1;
        }
        break;
    }
    pthread_mutex_unlock(&lock);
    if (other) *other = found_other;
    return obj;
}

int HostHandles_Exists(uint64_t id) {
    int other;
    return HostHandles_Get(id, HOST_HANDLE_MODEL, &other) != NULL || other;
}

void *HostHandles_Remove(uint64_t id, HostHandleKind kind) {
    void *obj = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (entries[i].id == id && entries[i].kind == kind) {
            obj = entries[i].obj;
            entries[i] = entries[--count];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return obj;
}

void HostHandles_FreeAll(void) {
    for (;;) {
        Entry e = {0};
        pthread_mutex_lock(&lock);
        if (count) e = entries[--count];
        pthread_mutex_unlock(&lock);
        if (e.obj == NULL) break;
        if (e.kind == HOST_HANDLE_MODEL) {
            host.desc->model_free(e.obj);
        } else {
            host.desc->script_free(e.obj);
        }
    }
}
