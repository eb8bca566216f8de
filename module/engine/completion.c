/*
 * completion.c - see completion.h. Two arrays: workers append to `queue`
 * under `lock`; the main thread swaps it with its own empty one under the
 * lock and unblocks the clients with the lock released.
 */
#include "engine/completion.h"

#include <pthread.h>

typedef struct Finished {
    RedisModuleBlockedClient *bc;
    void *privdata;
} Finished;

typedef struct FinishedList {
    Finished *items;
    size_t n;
    size_t cap;
} FinishedList;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FinishedList queue;    /* under lock */
static int polling = 0;       /* under lock: the main thread drains every pass */
static FinishedList draining; /* main thread */

static long long count = 0;   /* atomic */
static long long wakeups = 0; /* atomic */
static long long drains = 0;  /* main thread */

void Completion_Push(RedisModuleBlockedClient *bc, void *privdata) {
    __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    if (!polling) {
        pthread_mutex_unlock(&lock);
        __atomic_add_fetch(&wakeups, 1, __ATOMIC_RELAXED);
        RedisModule_UnblockClient(bc, privdata);
        return;
    }
    if (queue.n == queue.cap) {
        queue.cap = queue.cap ? queue.cap * 2 : 64;
        queue.items = RedisModule_Realloc(queue.items, queue.cap * sizeof(Finished));
    }
    queue.items[queue.n++] = (Finished){.bc = bc, .privdata = privdata};
    pthread_mutex_unlock(&lock);
}

void Completion_SetPolling(int on) {
    pthread_mutex_lock(&lock);
    polling = on;
    pthread_mutex_unlock(&lock);
}

void Completion_Drain(void) {
    pthread_mutex_lock(&lock);
    FinishedList taken = queue;
    queue = draining;
    queue.n = 0;
    pthread_mutex_unlock(&lock);
    if (taken.n > 0) drains++;
    /* From the main thread: uncontended, and the pipe write wakes no one. */
    for (size_t i = 0; i < taken.n; i++) {
        RedisModule_UnblockClient(taken.items[i].bc, taken.items[i].privdata);
    }
    taken.n = 0;
    draining = taken;
}

long long Completion_Count(void) {
    return __atomic_load_n(&count, __ATOMIC_RELAXED);
}

long long Completion_Wakeups(void) {
    return __atomic_load_n(&wakeups, __ATOMIC_RELAXED);
}

long long Completion_Drains(void) {
    return drains;
}
