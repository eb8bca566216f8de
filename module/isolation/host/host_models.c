/*
 * host_models.c - the host's models by handle id (the core chooses ids, a
 * 64-bit counter never reused). A small array under a mutex: a host holds
 * the models of one backend, and a lookup is a few compares next to a run.
 */
#include <pthread.h>
#include <stdlib.h>

#include "host.h"

typedef struct Entry {
    uint64_t id;
    void *model;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *entries;
static size_t count, cap;

int HostModels_Add(uint64_t id, void *model) {
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
    if (rc == 0) entries[count++] = (Entry){.id = id, .model = model};
    pthread_mutex_unlock(&lock);
    return rc;
}

void *HostModels_Get(uint64_t id) {
    void *m = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count && !m; i++) {
        if (entries[i].id == id) m = entries[i].model;
    }
    pthread_mutex_unlock(&lock);
    return m;
}

void *HostModels_Remove(uint64_t id) {
    void *m = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (entries[i].id == id) {
            m = entries[i].model;
            entries[i] = entries[--count];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return m;
}

void HostModels_FreeAll(void) {
    for (;;) {
        void *m = NULL;
        pthread_mutex_lock(&lock);
        if (count) m = entries[--count].model;
        pthread_mutex_unlock(&lock);
        if (m == NULL) break;
        host.desc->model_free(m);
    }
}
